"""Time what every chapter kernel and test process pays before its first cell, on the planted
model: its build against the cached read, and the predicted path shifts with every token's output
copied to float64 against the support's rows read in float32. Each pair is checked equal.

    python benchmarks/loading.py [--threads 1] [--repeats 3]

The build is ``models.planted.build_planted_state`` (what ``load_model("planted")`` ran before
the cache), as a new process runs it (the corpora's tokens not yet cached); the cached read is
``models.planted_cache.planted_state`` once the build is on disk (in a temporary
``$CONTEXT_NEURONS_CACHE``). The path shifts are the planted control's
(``verdict.planted.planted_control``: the label halves of the planted topics as domains); the
straightforward way is ``domain_shift.predict_path_shifts`` as it was before (every piece,
the ``[path, d_vocab, d_model]`` outputs included, copied to float64 first).
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time

import torch


def best_of(repeats: int, run):
    """The result of ``run()`` and its best time over ``repeats`` runs."""
    seconds = []
    for _ in range(repeats):
        start = time.perf_counter()
        result = run()
        seconds.append(time.perf_counter() - start)
    return result, min(seconds)


def path_shifts_copying_everything(pieces, read, distributions):
    """The previous way: every piece in float64, then the support's outputs back to float32."""
    from context_neurons import domain_shift as ds

    return ds.predict_path_shifts(ds.pieces_as(pieces, torch.float64), read, distributions)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    from context_neurons import config
    from context_neurons import circuit as cc
    from context_neurons import discovery as disc
    from context_neurons import domain_shift as ds
    from context_neurons.models import load_model, load_tokenizer
    from context_neurons.models import planted_cache, planted_topics
    from context_neurons.models.planted import build_planted_state

    tokenizer = load_tokenizer()

    def fresh_build():  # as a new process builds it: the corpora tokenized again
        planted_topics._CORPUS_CACHE.clear()
        return build_planted_state(tokenizer)

    before = os.environ.get(config.CACHE.name)
    try:
        with tempfile.TemporaryDirectory() as cache:
            os.environ[config.CACHE.name] = cache
            (state, truth), build_s = best_of(args.repeats, fresh_build)
            planted_cache.planted_state(tokenizer)  # written once
            (read_state, read_truth), read_s = best_of(
                args.repeats, lambda: planted_cache.planted_state(tokenizer))
    finally:
        if before is None:
            os.environ.pop(config.CACHE.name, None)
        else:
            os.environ[config.CACHE.name] = before
    equal = read_truth == truth and all(torch.equal(read_state[k], state[k]) for k in state)
    print(f"planted model: build {build_s:.2f} s, cached read {read_s:.2f} s "
          f"({build_s / read_s:.1f}x), equal: {equal}")

    planted = load_model("planted", device="cpu")
    model = planted.model
    circuit = cc.get_circuit(model)
    pieces = ds.path_pieces(model, circuit.calibration.tokens[1:])
    read = disc.read_vectors(circuit, model)
    domains = ds.uniform_distributions(planted.truth.label_token_ids, model.cfg.d_vocab)
    old, old_s = best_of(args.repeats, lambda: path_shifts_copying_everything(pieces, read,
                                                                              domains))
    new, new_s = best_of(args.repeats, lambda: ds.predict_path_shifts(pieces, read, domains))
    same = torch.equal(old.shifts, new.shifts) and torch.equal(old.variance, new.variance)
    print(f"predicted path shifts ({len(domains)} domains, d_vocab {model.cfg.d_vocab}): every "
          f"output in float64 {old_s:.2f} s, the support's in float32 {new_s:.2f} s "
          f"({old_s / new_s:.1f}x), equal: {same}")
    return 0 if equal and same else 1


if __name__ == "__main__":
    raise SystemExit(main())
