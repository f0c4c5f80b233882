"""How often one main-job run computes the method's values (issue 33), and how long it takes.

Counts every call of ``classify_heads``, ``build_circuit``, ``score_neurons``, the read of a
model's weights (``models.weights._read``) and ``predict_path_shifts``, through every reference the
package holds, during one run of the main job's command line, and prints them with the run's
seconds on stderr (the table goes to stdout, as the main job's does). The planted main job is
pinned to one taxonomy, circuit, score and read by ``tests/unit/test_reproduce.py``; this script
counts a run on any model (the trained one evaluates three protocols, so several head sets)::

    python scripts/count_computations.py --model trained --texts 20 --out results.json
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import Counter

from context_neurons import circuit, discovery, domain_shift, method, taxonomy
from context_neurons.__main__ import main as command_line
from context_neurons.circuit import build as circuit_build
from context_neurons.discovery import scores as discovery_scores
from context_neurons.models import weights
from context_neurons.verdict import v3, baselines

#: The module ``verdict.evaluate`` (the package's attribute of that name is the function).
EVALUATE = sys.modules["context_neurons.verdict.evaluate"]
#: Each counted computation and the modules that hold a reference to it (the first defines it).
COUNTED = {
    "classify_heads": (taxonomy, method),
    "build_circuit": (circuit_build, circuit, method),
    "score_neurons": (discovery_scores, discovery, method),
    "predict_path_shifts": (domain_shift, EVALUATE, v3, baselines),
}


def count_calls(counts: Counter) -> None:
    """Wrap every counted computation so that each call adds one to ``counts[name]``."""

    def counted(name, function):
        def wrapper(*args, **kwargs):
            counts[name] += 1
            return function(*args, **kwargs)
        return wrapper

    for name, holders in COUNTED.items():
        original = getattr(holders[0], name)
        for holder in holders:
            setattr(holder, name, counted(name, original))
    weights._read = counted("read_weights", weights._read)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="trained", help="the model (default: trained)")
    parser.add_argument("--texts", default="20", help="evaluation texts (default: 20)")
    parser.add_argument("--out", default=None, help="the main job's JSON (default: none)")
    args = parser.parse_args(argv)
    counts: Counter = Counter()
    count_calls(counts)
    start = time.perf_counter()
    rc = command_line(["reproduce", "--model", args.model, "--texts", args.texts]
                      + (["--out", args.out] if args.out else []))
    print(f"exit {rc}; {time.perf_counter() - start:.0f} s; computations: "
          + ", ".join(f"{name} {counts[name]}" for name in [*COUNTED, "read_weights"]),
          file=sys.stderr)
    return rc


if __name__ == "__main__":
    sys.exit(main())
