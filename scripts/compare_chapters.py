"""Compare freshly executed chapters with the stored ones, cell by cell, as the notebook tests do.

    python scripts/compare_chapters.py FRESH_DIR [--stored tests/notebooks] [--out REPORT_DIR]
                                       [--executed-only]

``FRESH_DIR`` holds notebooks written by ``python -m context_neurons run-chapters --model planted
--out FRESH_DIR`` (on a GPU, say); each is compared with the notebook of the same name in
``--stored`` (default ``tests/notebooks``, the planted model's outputs stored on a CPU). A cell
agrees when every output nbval would compare agrees under
:func:`context_neurons.book.stored_outputs.output_difference` (the project's comparison: the text
exactly, numbers within the last-digit noise). The outputs are prepared as nbval 0.11 and
``tests/notebooks/conftest.py`` prepare them, so that a cell that differs here is one that
``pytest --nbval`` would fail on:

- streams of one name are joined (carriage returns and backspaces applied), then keyed by the
  stream's name; rich outputs are keyed by MIME type;
- nbval's skipped keys are left out (metadata, tracebacks, execution counts, widget models, PNG and
  JPEG images), and the regular expressions of ``tests/notebooks/sanitize.cfg`` are applied;
- cells marked ``# NBVAL_IGNORE_OUTPUT`` or ``# NBVAL_SKIP`` (or tagged so) are reported as
  ignored, not compared.

Images are not compared by the tests; the report counts those whose bytes differ, for information.

Writes ``REPORT_DIR/comparison.md`` (a summary per chapter and one line per differing cell) and
``REPORT_DIR/comparison.json`` (every code cell: chapter, index, status, the reason, and the
differing stored and fresh text, shortened); prints the summary. Exit status 0 when every compared
cell agrees, 1 when one differs or a chapter is missing, 2 on a usage error. Only the standard
library and ``context_neurons`` are needed (no nbval, no nbformat).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))  # the checkout's package, installed or not

from context_neurons.book.stored_outputs import output_difference  # noqa: E402

#: Output keys nbval never compares (its default ``skip_compare``, without ``--nbdime``).
SKIPPED = ("metadata", "traceback", "prompt_number", "output_type", "name", "execution_count",
           "application/vnd.jupyter.widget-view+json", "image/png", "image/jpeg")
#: nbval's cell markers (source comments, or the same words as metadata tags).
IGNORE_MARKERS = ("NBVAL_IGNORE_OUTPUT", "PYTEST_VALIDATE_IGNORE_OUTPUT", "NBVAL_SKIP")
IMAGES = ("image/png", "image/jpeg", "image/svg+xml")
SHOWN = 400  # characters of a differing output kept in the JSON report

CARRIAGE_RETURN = re.compile(r"^.*\r(?=[^\n])", re.MULTILINE)
BACKSPACE = re.compile(r"[^\n]\b")


def text(value) -> object:
    """A notebook value as nbformat reads it: lists of lines joined."""
    return "".join(value) if isinstance(value, list) else value


def sanitize_patterns(path: Path) -> list[tuple[str, str]]:
    """``(regex, replacement)`` pairs of an nbval sanitize file (as nbval reads it)."""
    if not path.is_file():
        return []
    return re.findall(r"^regex: (.*)$\n^replace: (.*)$", path.read_text(), flags=re.MULTILINE)


def sanitize(value, patterns: list[tuple[str, str]]):
    if not isinstance(value, str):
        return value
    for regex, replacement in patterns:
        value = re.sub(regex, replacement, value)
    return value


def coalesce(outputs: list[dict]) -> list[dict]:
    """nbval's ``coalesce_streams``: one stream per name, ``\\b`` and ``\\r`` applied."""
    merged, streams = [], {}
    for output in outputs:
        output = dict(output)
        if output.get("output_type") == "stream":
            output["text"] = text(output.get("text", ""))
            if output["name"] in streams:
                streams[output["name"]]["text"] += output["text"]
                continue
            streams[output["name"]] = output
        merged.append(output)
    for output in streams.values():
        old = None
        while old is None or len(output["text"]) < len(old):
            old = output["text"]
            output["text"] = BACKSPACE.sub("", output["text"])
        output["text"] = CARRIAGE_RETURN.sub("", output["text"])
    return merged


def flattened(outputs: list[dict], patterns) -> dict[str, list]:
    """Key (stream name or MIME type) -> sanitised values in order, as nbval compares them."""
    found = defaultdict(list)
    for output in coalesce(outputs):
        if output.get("output_type") == "stream":
            output = {"output_type": "stream", output["name"]: output["text"]}
        for key, value in output.items():
            if key in SKIPPED:
                continue
            items = value.items() if key == "data" else [(key, value)]
            for name, item in items:
                if name not in SKIPPED:
                    found[name].append(sanitize(text(item), patterns))
    return found


def images(outputs: list[dict]) -> list[str]:
    return [text(o["data"][m]) for o in outputs for m in IMAGES if m in o.get("data", {})]


def ignored(cell: dict) -> bool:
    """Whether nbval leaves the cell's output unchecked (a marker comment or tag)."""
    comments = {line.strip().lstrip("#").strip() for line in text(cell.get("source", "")).splitlines()
                if line.strip().startswith("#")}
    tags = set(cell.get("metadata", {}).get("tags", []))
    return any(m in comments or m.lower().replace("_", "-") in tags for m in IGNORE_MARKERS)


def compare_cell(stored: dict, fresh: dict, patterns) -> tuple[str, str | None, dict]:
    """``(status, reason, detail)`` of one code cell: agrees, differs or ignored."""
    if ignored(stored):
        return "ignored", "nbval marker", {}
    was = flattened(stored.get("outputs", []), patterns)
    now = flattened(fresh.get("outputs", []), patterns)
    if was.keys() != now.keys():
        return "differs", f"output types differ: {sorted(was)} stored, {sorted(now)} now", {}
    for key, values in was.items():
        if len(values) != len(now[key]):
            return "differs", f"{len(values)} '{key}' outputs stored, {len(now[key])} now", {}
        for old, new in zip(values, now[key]):
            reason = output_difference(old, new)
            if reason is not None:
                return "differs", f"'{key}': {reason}", {
                    "stored": str(old)[:SHOWN], "fresh": str(new)[:SHOWN]}
    return "agrees", None, {}


def compare_notebook(stored_path: Path, fresh_path: Path, patterns) -> list[dict]:
    stored = json.loads(stored_path.read_text(encoding="utf-8"))
    fresh = json.loads(fresh_path.read_text(encoding="utf-8"))
    stored_cells = [c for c in stored["cells"] if c["cell_type"] == "code"]
    fresh_cells = [c for c in fresh["cells"] if c["cell_type"] == "code"]
    rows = []
    if len(stored_cells) != len(fresh_cells):
        rows.append({"cell": None, "status": "differs",
                     "reason": f"{len(stored_cells)} code cells stored, {len(fresh_cells)} now"})
    for index, (old, new) in enumerate(zip(stored_cells, fresh_cells)):
        if text(old.get("source")) != text(new.get("source")):
            rows.append({"cell": index, "status": "differs",
                         "reason": "the cell's source differs (the chapter changed since its "
                                   "outputs were stored)"})
            continue
        status, reason, detail = compare_cell(old, new, patterns)
        pictures = list(zip(images(old.get("outputs", [])), images(new.get("outputs", []))))
        rows.append({"cell": index, "id": old.get("id"), "status": status, "reason": reason,
                     "images": len(pictures),
                     "images_differing_bytes": sum(a != b for a, b in pictures), **detail})
    return rows


def compare(fresh_dir: Path, stored_dir: Path, executed_only: bool = False) -> dict:
    patterns = sanitize_patterns(stored_dir / "sanitize.cfg")
    chapters = {}
    for fresh in sorted(fresh_dir.glob("*.ipynb")):
        stored = stored_dir / fresh.name
        if not stored.is_file():
            chapters[fresh.stem] = {"missing": f"no stored notebook {stored}", "cells": []}
            continue
        chapters[fresh.stem] = {"cells": compare_notebook(stored, fresh, patterns)}
    for stored in sorted(stored_dir.glob("*.ipynb")):
        if stored.stem not in chapters and not executed_only:
            chapters[stored.stem] = {"missing": "not executed (absent from the fresh directory)",
                                     "cells": []}
    return {"fresh": str(fresh_dir), "stored": str(stored_dir), "chapters": chapters}


def counts(cells: list[dict]) -> dict[str, int]:
    found = defaultdict(int)
    for row in cells:
        found[row["status"]] += 1
    return {k: found[k] for k in ("agrees", "differs", "ignored")}


def markdown(report: dict) -> str:
    lines = [f"# Chapters in {report['fresh']} against {report['stored']}", "",
             "| chapter | cells agree | differ | ignored | images with other bytes |",
             "|---|---|---|---|---|"]
    for name, chapter in report["chapters"].items():
        if "missing" in chapter:
            lines.append(f"| {name} | {chapter['missing']} | | | |")
            continue
        n = counts(chapter["cells"])
        pictures = sum(r.get("images_differing_bytes", 0) for r in chapter["cells"])
        total = sum(r.get("images", 0) for r in chapter["cells"])
        lines.append(f"| {name} | {n['agrees']} | {n['differs']} | {n['ignored']} | "
                     f"{pictures} of {total} |")
    lines += ["", "## Cells that differ", ""]
    for name, chapter in report["chapters"].items():
        for row in chapter["cells"]:
            if row["status"] == "differs":
                where = row.get("id") or f"code cell {row['cell']}"
                lines.append(f"- {name}, {where}: {row['reason']}")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("fresh", type=Path, help="directory of freshly executed notebooks")
    parser.add_argument("--stored", type=Path, default=REPO / "tests" / "notebooks",
                        help="directory of the stored notebooks")
    parser.add_argument("--out", type=Path, default=None,
                        help="write comparison.md and comparison.json here (default: FRESH)")
    parser.add_argument("--executed-only", action="store_true",
                        help="leave out the stored chapters that FRESH does not hold")
    args = parser.parse_args(argv)
    if not args.fresh.is_dir() or not args.stored.is_dir():
        print(f"error: {args.fresh} and {args.stored} must be directories", file=sys.stderr)
        return 2
    report = compare(args.fresh, args.stored, args.executed_only)
    out = args.out or args.fresh
    out.mkdir(parents=True, exist_ok=True)
    (out / "comparison.json").write_text(json.dumps(report, indent=1) + "\n")
    summary = markdown(report)
    (out / "comparison.md").write_text(summary)
    print(summary, end="")
    chapters = report["chapters"].values()
    bad = any("missing" in c or counts(c["cells"])["differs"] for c in chapters)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
