"""Command line: ``python -m context_neurons reproduce|regenerate-notebooks|planted-truth``."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def positive_int(text: str) -> int:
    """An argparse type: a whole number of at least 1."""
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m context_neurons", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)

    rep = sub.add_parser("reproduce", help="reproduce the paper's numbers and print the table")
    rep.add_argument("--model", choices=["gpt2", "planted"], default="gpt2")
    rep.add_argument("--texts", type=positive_int, default=None,
                     help="evaluation texts (default: 1000 for gpt2 online, 100 for planted)")
    rep.add_argument("--source", choices=["corpora", "openwebtext"], default=None,
                     help="evaluation texts: offline corpora or OpenWebText (default: openwebtext "
                          "for gpt2, corpora for planted)")
    rep.add_argument("--device", choices=["cpu", "cuda", "auto"], default="cpu")
    rep.add_argument("--out", type=Path, default=None, help="write the results as JSON here")
    rep.add_argument("--no-progress", action="store_true")

    regen = sub.add_parser("regenerate-notebooks",
                           help="execute every chapter on the planted model and store its outputs")
    regen.add_argument("chapters", nargs="*", help="chapter files (default: all in book/)")

    truth = sub.add_parser("planted-truth", help="print what the planted model plants, as JSON")
    truth.add_argument("--seed", type=int, default=0)

    args = parser.parse_args(argv)
    if args.command == "reproduce":
        from context_neurons.reproduce import format_table, reproduce, to_json

        source = args.source or ("openwebtext" if args.model == "gpt2" else "corpora")
        n_texts = args.texts or (1000 if source == "openwebtext" else 100)
        results = reproduce(args.model, n_texts, device=args.device,
                            progress=not args.no_progress, source=source)
        print(format_table(results))
        if args.out:
            args.out.write_text(to_json(results))
            print(f"wrote {args.out}")
        return 0
    if args.command == "regenerate-notebooks":
        from context_neurons.notebooks import regenerate

        return regenerate([Path(c) for c in args.chapters] or None)
    if args.command == "planted-truth":
        from context_neurons.models import load_tokenizer
        from context_neurons.planted import build_planted_state

        _, truth = build_planted_state(load_tokenizer(), seed=args.seed)
        json.dump(truth.to_dict(), sys.stdout, indent=1, default=str)
        return 0
    return 1


if __name__ == "__main__":
    sys.exit(main())
