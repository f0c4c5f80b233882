"""Measuring for benchmarks/run.py's cases (benchmarks/cases.py, benchmarks/lookups.py): wall
time and peak memory of a block (:class:`Meter`), the best of several runs, tolerance checks
against a reference, the result lines a case hands to the parent process (benchmarks/harness.py
reads them) and the cells of the summary's tables (benchmarks/report.py). It imports none of
them."""

from __future__ import annotations

import json
import os
import re
import threading
import time
from pathlib import Path
from typing import Self

MARK = "@@RESULT "  # prefix of the result lines a case prints for the parent


def _status_kib(field: str, pid: int | str = "self") -> int | None:
    """A ``kB`` field of ``/proc/<pid>/status`` (``VmRSS``, ``VmHWM``), or None if unreadable."""
    try:
        text = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    match = re.search(rf"^{field}:\s+(\d+) kB", text, re.MULTILINE)
    return int(match.group(1)) if match else None


def _statm_mib() -> float:
    with open("/proc/self/statm") as handle:
        return int(handle.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def _release_free_memory() -> None:
    """Collect garbage and return freed heap pages to the system, so that a measurement's peak
    is not hidden by memory an earlier one freed but the allocator kept (glibc ``malloc_trim``)."""
    import ctypes
    import gc

    gc.collect()
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass


def _reset_high_water_mark() -> bool:
    """Reset this process's ``VmHWM`` to its current resident size (Linux >= 4.0)."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        return False
    return _status_kib("VmHWM") is not None


class Meter:
    """Wall time and peak memory (host, and device on CUDA) of the block it wraps.

    Host: ``VmHWM`` reset at entry (module docstring) and read at exit, minus ``VmRSS`` at entry;
    where the reset is refused, ``/proc/self/statm`` sampled every 2 ms by a thread.
    Device: ``torch.cuda.max_memory_allocated`` minus ``memory_allocated`` at entry.
    """

    def __init__(self, device: str):
        self.device = device

    def __enter__(self) -> Self:
        import torch

        _release_free_memory()
        _sync(self.device)
        if self.device == "cuda":
            torch.cuda.reset_peak_memory_stats()
            self._device_base = torch.cuda.memory_allocated()
        self._hwm = _reset_high_water_mark()
        self._base = _status_kib("VmRSS") / 1024 if self._hwm else _statm_mib()
        self._peak = self._base
        if not self._hwm:
            self._stop = threading.Event()
            self._thread = threading.Thread(target=self._sample, daemon=True)
            self._thread.start()
        self._start = time.perf_counter()
        return self

    def _sample(self) -> None:
        while not self._stop.is_set():
            self._peak = max(self._peak, _statm_mib())
            time.sleep(0.002)

    def __exit__(self, *exc) -> None:
        import torch

        _sync(self.device)
        self.seconds = time.perf_counter() - self._start
        if self._hwm:
            self._peak = _status_kib("VmHWM") / 1024
        else:
            self._stop.set()
            self._thread.join()
            self._peak = max(self._peak, _statm_mib())
        self.host_peak_mib = self._peak - self._base
        self.device_peak_mib = None
        if self.device == "cuda":
            self.device_peak_mib = (torch.cuda.max_memory_allocated() - self._device_base) / 2**20

    def record(self, **extra) -> dict:
        """The measurement as a JSON-ready dict."""
        return {
            "seconds": self.seconds,
            "host_peak_mib": self.host_peak_mib,
            "device_peak_mib": self.device_peak_mib,
            "memory_method": "VmHWM" if self._hwm else "statm sampled",
            **extra,
        }


def _sync(device: str) -> None:
    import torch

    if device == "cuda":
        torch.cuda.synchronize()


def best_of(fn, repeat: int, device: str) -> tuple[dict, object]:
    """Run ``fn`` ``repeat`` times under one :class:`Meter`; the record holds the fastest run."""
    times, result = [], None
    with Meter(device) as meter:
        for _ in range(repeat):
            start = time.perf_counter()
            result = fn()
            _sync(device)
            times.append(time.perf_counter() - start)
    return meter.record(seconds=min(times), all_seconds=times), result


def close(
    name: str, got, want, rtol: float = 1e-4, atol_scale: float = 1e-4, unit=None, unit_name: str = ""
) -> dict:
    """``|got - want| <= atol + rtol |want|`` everywhere (NaNs equal), ``atol = atol_scale * unit``.

    ``unit`` is the scale the values are read on: by default ``max |want|``; it may be given per
    element (a neuron's median is read in units of that neuron's spread, for instance, since
    its z-scores divide by the spread).
    """
    import torch

    got, want = torch.as_tensor(got).double().cpu(), torch.as_tensor(want).double().cpu()
    if got.shape != want.shape:
        return {"name": name, "passed": False, "detail": f"shapes {got.shape} != {want.shape}"}
    finite = torch.isfinite(want)
    if unit is None:
        unit = float(want[finite].abs().max()) if finite.any() else 1.0
        unit_name = unit_name or f"max|ref| {unit:.3g}"
    unit = torch.as_tensor(unit).double().cpu()
    atol = atol_scale * unit
    diff = (got - want).abs()
    both_nan = got.isnan() & want.isnan()
    max_diff = float(diff[~both_nan].max()) if (~both_nan).any() else 0.0
    passed = bool(((diff <= atol + rtol * want.abs()) | both_nan).all())
    atol_text = f"{float(atol):.3g}" if atol.numel() == 1 else f"{float(atol.min()):.3g}.."
    return {
        "name": name,
        "passed": passed,
        "max_abs_diff": max_diff,
        "tolerance": f"rtol {rtol:g}, atol {atol_text} ({atol_scale:g} x {unit_name})",
    }


def emit(path: list, value) -> None:
    """Hand one result to the parent process (it stores ``value`` at ``path`` in the JSON)."""
    print(MARK + json.dumps({"path": [str(p) for p in path], "value": value}), flush=True)


def mib(record: dict) -> str:
    text = f"{record['host_peak_mib']:.0f}"
    if record.get("device_peak_mib") is not None:
        text += f" / {record['device_peak_mib']:.0f}"
    return text


def checks_md(checks: list) -> list[str]:
    lines = ["| check | max abs diff | tolerance | result |", "|---|---|---|---|"]
    for c in checks:
        diff = f"{c['max_abs_diff']:.3g}" if "max_abs_diff" in c else c.get("detail", "")
        lines.append(
            f"| {c['name']} | {diff} | {c.get('tolerance', '')} | "
            f"{'pass' if c['passed'] else '**FAIL**'} |"
        )
    return lines
