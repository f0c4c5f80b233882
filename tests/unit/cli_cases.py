"""What a refused command prints, checked the same way by ``tests/unit/test_cli_errors.py`` and
``tests/unit/test_input_checks.py``."""

from __future__ import annotations


def one_line_error(captured, *fragments: str) -> str:
    """The stderr of a refused command: ``error: ...`` on one line, no traceback, holding each
    of ``fragments``."""
    err = captured.err.strip()
    assert err.startswith("error: "), err
    assert "Traceback" not in err and len(err.splitlines()) == 1, err
    for fragment in fragments:
        assert fragment in err, (fragment, err)
    return err
