"""Running benchmarks/run.py's parts: each case in its own subprocess with its thread setting,
its result lines stored as they arrive, the machine and software of the run recorded, and the
processes below a case found (the book's kernels, whose peak memory is measured).

Measuring a block (wall time, peak memory, best of several runs, checks) is benchmarks/measure.py.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import platform
import re
import subprocess
import sys
import tempfile
from pathlib import Path

from measure import MARK  # benchmarks/measure.py, beside this module

REPO = Path(__file__).resolve().parents[1]
#: The script each case's subprocess runs (``run.py --case NAME``).
RUN = Path(__file__).with_name("run.py")


def set_threads(threads: int | None) -> None:
    """A case's torch threads (``--threads``; torch's own without it)."""
    import torch

    if threads:
        torch.set_num_threads(threads)


def descendants(pid: int) -> list[int]:
    """Every process below ``pid`` (from the parent ids in ``/proc/*/stat``)."""
    parents: dict[int, int] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        parents[int(stat.parent.name)] = int(fields[1])
    found, frontier = [], [pid]
    while frontier:
        children = [p for p, parent in parents.items() if parent in frontier]
        found += children
        frontier = children
    return found


def machine() -> dict:
    """Date, machine and software of this run."""
    import torch

    cpu = ""
    try:
        cpu = re.search(
            r"^model name\s*:\s*(.*)$", Path("/proc/cpuinfo").read_text(), re.MULTILINE
        ).group(1)
    except (OSError, AttributeError):
        cpu = platform.processor()
    try:
        mem = int(re.search(r"MemTotal:\s+(\d+)", Path("/proc/meminfo").read_text()).group(1))
    except (OSError, AttributeError):
        mem = None
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"],
        capture_output=True,
        text=True,
        cwd=REPO,
        check=False,
    ).stdout.strip()
    dirty = subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=no"],
        capture_output=True,
        text=True,
        cwd=REPO,
        check=False,
    ).stdout.strip()
    return {
        "date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "cpu": cpu,
        "cores": os.cpu_count(),
        "cores_usable": len(os.sched_getaffinity(0)),
        "memory_gib": round(mem / 2**20, 1) if mem else None,
        "python": platform.python_version(),
        "torch": torch.__version__,
        "torch_threads": torch.get_num_threads(),
        "gpu": torch.cuda.get_device_name() if torch.cuda.is_available() else None,
        "commit": commit + (" (with uncommitted changes)" if dirty else ""),
        "load_average_start": os.getloadavg(),
    }


def set_path(tree: dict, path: list[str], value) -> None:
    for key in path[:-1]:
        tree = tree.setdefault(key, {})
    tree[path[-1]] = value


def run_part(part: str, argv: list[str], results: dict, save) -> bool:
    """Run one part in a subprocess, storing each result line as it arrives."""
    with tempfile.TemporaryFile("w+") as stderr:
        process = subprocess.Popen(
            [sys.executable, RUN, "--case", part, *argv],
            cwd=REPO,
            stdout=subprocess.PIPE,
            stderr=stderr,
            text=True,
        )
        for line in process.stdout:
            if line.startswith(MARK):
                item = json.loads(line[len(MARK) :])
                set_path(results, item["path"], item["value"])
                print(f"   {'/'.join(item['path'])}: {brief(item['value'])}", flush=True)
                save()
        if process.wait() == 0:
            return True
        stderr.seek(0)
        tail = stderr.read()[-3000:]
    results.setdefault("errors", {})[part] = tail
    save()
    print(f"   FAILED ({part}):\n{tail}", flush=True)
    return False


def brief(value) -> str:
    """One line for a progress message."""
    if isinstance(value, list):
        failed = [c["name"] for c in value if not c["passed"]]
        return f"{len(value) - len(failed)}/{len(value)} checks passed" + (
            f"; FAILED: {failed}" if failed else ""
        )
    if isinstance(value, dict) and "kernel_peak_mib" in value:
        return f"{value['seconds']:.1f} s, kernel peak {value['kernel_peak_mib']:.0f} MiB"
    if isinstance(value, dict) and "seconds" in value:
        return f"{value['seconds']:.2f} s, host peak +{value['host_peak_mib']:.0f} MiB"
    return json.dumps(value)[:160]
