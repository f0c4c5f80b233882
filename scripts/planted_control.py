"""The protocol's planted control (chapter 8): both discovery scores against the planted truth.

The frequency-aware score must recover what ``top[j]`` recovers on the planted model, whose
context neurons we wrote (:mod:`context_neurons.verdict.planted`, which states the pass rule);
its shuffled-kernels variant has no contextual head, and the method stops. Prints JSON; about
four minutes on 2 CPU cores.

``p_D`` comes two ways, each scored:

* ``label halves`` (the control): one domain per planted topic, ``p_D`` uniform over the
  topic's *label* half (the word-list half never used to plant).
* ``corpus domains`` (for comparison): the CAL halves of the trained model's held-out documents,
  tokenized with GPT-2's tokenizer (the planted model's). These are the trained model's ten
  domains, not the planted topics, so neurons of topics with no such domain (British/American
  spelling, war, astronomy, climate, Pokemon) have no domain to shift on.

    python scripts/planted_control.py [--seed 0] [--out planted-control.json]
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import torch

from context_neurons import circuit as cc
from context_neurons.checks import NoContextualHeadsError
from context_neurons.files import write_text_whole
from context_neurons.models import load_model
from context_neurons.models.loading import TRAINED_DIR
from context_neurons.training.summary import training_run
from context_neurons.verdict import protocol_data
from context_neurons.verdict.data import unigram_distributions
from context_neurons.verdict.planted import planted_control


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default="")
    args = parser.parse_args()
    torch.set_num_threads(2)
    t0 = time.perf_counter()
    planted = load_model("planted", seed=args.seed, device="cpu")
    result = {"seed": args.seed, "label halves": planted_control(planted).to_json()}
    data = protocol_data(planted.model.tokenizer, training_run(TRAINED_DIR))
    result["corpus domains"] = planted_control(
        planted, unigram_distributions(data, planted.model.cfg.d_vocab)).to_json()
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
        write_text_whole(Path(args.out), text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
