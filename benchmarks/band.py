"""The certified band's cost (issue 56) against computing the true activations, on the planted
model: ``python benchmarks/band.py [--texts 8] [--length 256] [--neurons 8] [--device cpu]``.

Times, each the best of ``--repeat`` runs (``measure.best_of``), on the same texts and neurons:

* ``true``: the model's own pre-activations (``evaluation.true_pre_activations``);
* ``band``: ``certified_band`` with its residual already measured (steps 1, 3 and 4, and the
  approximation beside it);
* ``residual``: ``measure_residual`` once (step 2: ``N_RESIDUAL_TEXTS`` texts drawn under the
  model, run through the hooks), paid once per circuit, neurons, delta and length.

It checks that the band holds the true values it was timed against at a rate of at least
``1 - delta`` minus three binomial standard errors over texts, and prints one JSON object.
Not part of ``benchmarks/run.py``'s parts (yet): run it on its own, on a quiet machine.
"""

from __future__ import annotations

import argparse
import json
import math

from measure import best_of  # benchmarks/measure.py, beside this module


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--texts", type=int, default=8)
    parser.add_argument("--length", type=int, default=256)
    parser.add_argument("--neurons", type=int, default=8)
    parser.add_argument("--delta", type=float, default=0.1)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args()

    import torch

    from context_neurons.circuit import get_circuit
    from context_neurons.discovery import get_scores
    from context_neurons.evaluation import held_out_general_windows, true_pre_activations
    from context_neurons.evaluation.band import N_RESIDUAL_TEXTS, certified_band, measure_residual
    from context_neurons.models import load_model

    torch.set_grad_enabled(False)
    model = load_model("planted", device=args.device).model
    circuit = get_circuit(model)
    neurons = get_scores(circuit, model).ranking()[: args.neurons]
    windows, _, _, _ = held_out_general_windows(model.tokenizer, args.texts)
    tokens = torch.stack([w[: args.length] for w in windows])

    residual_record, residual = best_of(
        lambda: measure_residual(circuit, model, neurons, args.delta, length=args.length), 1,
        args.device)
    true_record, true = best_of(lambda: true_pre_activations(model, tokens, neurons),
                                args.repeat, args.device)
    band_record, band = best_of(
        lambda: certified_band(circuit, model, tokens, neurons, args.delta, residual=residual),
        args.repeat, args.device)
    rate = float(band.contains(true.double().cpu()).double().mean())
    floor = 1 - args.delta - 3 * math.sqrt(args.delta * (1 - args.delta) / len(tokens))
    print(json.dumps({
        "texts": len(tokens), "length": args.length, "neurons": len(neurons),
        "residual_texts": N_RESIDUAL_TEXTS, "true": true_record, "band": band_record,
        "residual (once)": residual_record,
        "band / true": band_record["seconds"] / true_record["seconds"],
        "coverage": rate, "coverage floor": floor,
    }, indent=1))
    return 0 if rate >= floor else 1


if __name__ == "__main__":
    raise SystemExit(main())
