"""Run student notebooks as shipped and with the chapters' solutions pasted in (issue 55).

    python scripts/check_student_notebooks.py [CHAPTER ...]

As shipped, every exercise must be "not yet solved" and no cell may raise; with the solutions,
every exercise's check must say "solved". Prints one line per chapter and run; exit status 1 when
one fails. The unit tests run chapters 1 and 2 this way (tests/unit/test_exercise_checks.py); this
script runs any chapter (all by default; about twice each chapter's time of the instructors'
page), in one process. CI runs every chapter's student notebook in a kernel instead, in the lanes
it had: as shipped on the trained model (``run-chapters --students shipped``) and solved on the
GPT-2-shaped stand-in (``scripts/simulate_online.py --students solved``).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import sys
import time

import matplotlib
import nbformat

from context_neurons.book.exercise_checks import SOLVED, UNSOLVED
from context_neurons.book.notebooks import chapter_files
from context_neurons.book.student_runs import run_notebook, solved_notebook
from context_neurons.book.students import student_path

matplotlib.use("Agg")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("chapters", nargs="*", help="chapter stems (default: every chapter)")
    chapters = [c for c in chapter_files() if not parser.parse_args().chapters
                or c.stem in parser.parse_args().chapters]
    failed = False
    for chapter in chapters:
        for name, expected, notebook in (
                ("as shipped", UNSOLVED, lambda: nbformat.read(student_path(chapter), 4)),
                ("solved", SOLVED, lambda: solved_notebook(chapter))):
            start = time.time()
            with contextlib.redirect_stdout(io.StringIO()):
                _, status = run_notebook(notebook())
            wrong = {label: s for label, s in status.items() if s != expected}
            failed |= bool(wrong)
            print(f"{chapter.stem} {name}: {len(status) - len(wrong)} of {len(status)} "
                  f"{expected} ({time.time() - start:.0f} s)" + (f"; {wrong}" if wrong else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
