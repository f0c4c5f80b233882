"""Progress through a long run: each phase named on stderr when it starts, its seconds kept.

One class for the main job's steps and a protocol's phases (issue 51: ``Timer`` and ``Steps``
were two copies of it)::

    phases = Phases("main job", announce=True, say_seconds=True)
    with phases("the taxonomy"):
        ...
    phases.seconds  # {"the taxonomy": 3.2}
"""

from __future__ import annotations

import contextlib
import sys
import time
from collections.abc import Iterator


class Phases:
    """Seconds per phase (``with phases("name"): ...``, added up when a name repeats).

    Args:
        who: what runs, the prefix of every message (``"main job"``, ``"protocol v3"``).
        announce: print ``who: name ...`` on stderr when a phase starts (False: silent).
        say_seconds: also print ``who: name: N s`` when it ends (with ``announce``).
    """

    def __init__(self, who: str, announce: bool = False, say_seconds: bool = False) -> None:
        self.who, self.announce, self.say_seconds = who, announce, say_seconds
        self.seconds: dict[str, float] = {}

    @contextlib.contextmanager
    def __call__(self, phase: str) -> Iterator[None]:
        start = time.perf_counter()
        if self.announce:
            print(f"{self.who}: {phase} ...", file=sys.stderr, flush=True)
        try:
            yield
        finally:
            took = time.perf_counter() - start
            self.seconds[phase] = self.seconds.get(phase, 0.0) + took
        if self.announce and self.say_seconds:
            print(f"{self.who}: {phase}: {took:.0f} s", file=sys.stderr, flush=True)


__all__ = ["Phases"]
