"""Files written whole or not at all: the one place for it (results, notebooks rewritten by
``set-repository``, the training run's state and record, the developmental view).

The content goes to a temporary file beside the target, which is then renamed over it: a reader
sees the old file or the new one, never half of one; a failed write leaves no temporary file.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Callable


def write_whole(path: Path, write: Callable[[Path], None]) -> None:
    """``write(temporary path)``, then rename it over ``path``; an existing file's permissions
    are kept (a temporary file is created private)."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    try:
        write(tmp)
        if path.exists():
            os.chmod(tmp, path.stat().st_mode & 0o777)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def write_text_whole(path: Path, text: str, newline: str | None = None) -> None:
    """Write ``text`` (UTF-8; ``newline=""`` keeps its line endings as they are) whole, synced
    to disk before the rename."""
    def write(tmp: Path) -> None:
        with open(tmp, "w", encoding="utf-8", newline=newline) as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())

    write_whole(path, write)


__all__ = ["write_text_whole", "write_whole"]
