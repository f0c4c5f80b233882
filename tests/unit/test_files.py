"""Files written whole or not at all (``context_neurons.files``)."""

from __future__ import annotations

import pytest

from context_neurons.files import write_text_whole, write_whole


def test_a_failed_write_leaves_the_old_file_and_no_temporary(tmp_path):
    path = tmp_path / "results.json"
    path.write_text("old")

    def fail(tmp):
        tmp.write_text("half")
        raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        write_whole(path, fail)
    assert path.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["results.json"]


def test_a_rewrite_keeps_the_mode_and_the_line_endings(tmp_path):
    path = tmp_path / "notebook.ipynb"
    path.write_bytes(b"a\r\nb\n")
    path.chmod(0o644)
    write_text_whole(path, "c\r\nd\n", newline="")
    assert path.read_bytes() == b"c\r\nd\n"
    assert path.stat().st_mode & 0o777 == 0o644
    write_text_whole(tmp_path / "new.txt", "x")
    assert (tmp_path / "new.txt").read_text() == "x"
