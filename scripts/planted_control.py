"""The protocol's planted control (chapter 8): both discovery scores against the planted truth.

The frequency-aware score must recover what ``top[j]`` recovers on the planted model, whose
context neurons we wrote; its shuffled-kernels variant has no contextual head, and the method
stops. ``p_D`` comes from the CAL halves of the trained model's held-out documents, tokenized
with GPT-2's tokenizer (the planted model's). Prints JSON; about a minute or two on 2 CPU cores.

    python scripts/planted_control.py [--seed 0] [--out planted-control.json]
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np
import torch

from context_neurons import circuit as cc
from context_neurons import discovery as disc
from context_neurons.checks import NoContextualHeadsError
from context_neurons.domain_shift import path_pieces, predict_path_shifts
from context_neurons.models import load_model
from context_neurons.models.loading import TRAINED_DIR
from context_neurons.training.heldout import read_record
from context_neurons.verdict import protocol_data
from context_neurons.verdict import statistics as st
from context_neurons.verdict.data import unigram_distributions


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default="")
    args = parser.parse_args()
    torch.set_num_threads(2)
    t0 = time.perf_counter()
    planted = load_model("planted", seed=args.seed, device="cpu")
    model = planted.model
    circuit = cc.get_circuit(model)
    truth = np.zeros(model.cfg.d_mlp, dtype=bool)
    truth[sorted(planted.truth.context_neurons)] = True
    data = protocol_data(model.tokenizer, read_record(TRAINED_DIR))
    distributions = unigram_distributions(data, model.cfg.d_vocab)
    pieces = path_pieces(model, circuit.calibration.tokens[1:])
    prediction = predict_path_shifts(pieces, disc.read_vectors(circuit, model),
                                     distributions).split(circuit.heads)
    frequency = prediction.score().double().numpy()
    top = disc.get_scores(circuit, model).top.double().cpu().numpy()
    result = {
        "seed": args.seed,
        "contextual_heads": circuit.heads,
        "planted_context_neurons": int(truth.sum()),
        "auc_frequency_aware": float(st.auc(frequency, truth)),
        "auc_top": float(st.auc(top, truth)),
        "precision_at_truth_size_frequency_aware": st.precision_at_truth_size(frequency, truth),
        "precision_at_truth_size_top": st.precision_at_truth_size(top, truth),
    }
    print(json.dumps(result, indent=1), flush=True)
    shuffled = load_model("planted", seed=args.seed, variant="shuffled-kernels", device="cpu")
    try:
        heads = cc.contextual_heads(shuffled.model)
        result["shuffled_kernels"] = f"contextual heads {heads} found: the control fails"
    except NoContextualHeadsError:
        result["shuffled_kernels"] = "the taxonomy finds no contextual head: the method stops"
    result["seconds"] = round(time.perf_counter() - t0, 1)
    text = json.dumps(result, indent=1)
    print(text)
    if args.out:
        with open(args.out, "w") as handle:
            handle.write(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
