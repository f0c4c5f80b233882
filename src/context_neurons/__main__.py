"""Command line: ``python -m context_neurons`` with a command (``--help`` lists them)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from context_neurons.checks import ModelLoadError
from context_neurons.models.loading import MODEL_NAMES, load_tokenizer, resolve_model_name
from context_neurons.models.planted import VARIANTS, build_planted_state


def positive_int(text: str) -> int:
    """An argparse type: a whole number of at least 1."""
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def model_choice(text: str) -> str:
    """An argparse type: a model name or a checkpoint directory."""
    try:
        return resolve_model_name(text)
    except ModelLoadError as err:
        raise argparse.ArgumentTypeError(f"invalid choice: {err}") from None


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["train"]:  # its own parser: python -m context_neurons train --help
        from context_neurons.training.cli import main as train

        return train(argv)
    parser = argparse.ArgumentParser(prog="python -m context_neurons", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("train", add_help=False,
                   help="train the GPT-2-architecture model shipped as 'trained' "
                        "(options: python -m context_neurons train --help)")

    rep = sub.add_parser("reproduce", help="reproduce the paper's numbers and print the table")
    rep.add_argument("--model", type=model_choice, default="gpt2",
                     help=f"one of {', '.join(MODEL_NAMES)}, or a checkpoint directory")
    rep.add_argument("--texts", type=positive_int, default=None,
                     help="evaluation texts (default: 1000 from OpenWebText, 100 offline)")
    rep.add_argument("--source", choices=["auto", "corpora", "openwebtext"], default="auto",
                     help="evaluation texts: offline corpora or OpenWebText (default: the corpora "
                          "when found, else OpenWebText)")
    rep.add_argument("--device", choices=["cpu", "cuda", "auto"], default="auto")
    rep.add_argument("--seed", type=int, default=None,
                     help="seed of the planted model (default $CONTEXT_NEURONS_SEED, else 0)")
    rep.add_argument("--variant", choices=VARIANTS, default="standard",
                     help="the planted model's variant: shuffled-kernels is the negative control "
                          "(no contextual head, so nothing to discover)")
    rep.add_argument("--out", type=Path, default=None, help="write the results as JSON here")
    rep.add_argument("--no-progress", action="store_true")

    regen = sub.add_parser("regenerate-notebooks",
                           help="execute every chapter on the planted model and store its outputs")
    regen.add_argument("chapters", nargs="*", help="chapter files (default: all in book/)")

    run = sub.add_parser("run-chapters",
                         help="execute chapters on a model (not compared), e.g. --model trained")
    run.add_argument("chapters", nargs="*", help="chapter files (default: all in book/)")
    run.add_argument("--model", type=model_choice, required=True)
    run.add_argument("--out", type=Path, default=Path("artifacts/chapters"))

    students = sub.add_parser("student-notebooks",
                              help="write the student notebooks (no solutions) Colab opens")
    students.add_argument("chapters", nargs="*", help="chapter files (default: all in book/)")

    publish = sub.add_parser("set-repository",
                             help="move the book to another GitHub repository (Colab, website)")
    publish.add_argument("url", help="https://github.com/OWNER/NAME")

    truth = sub.add_parser("planted-truth", help="print what the planted model plants, as JSON")
    truth.add_argument("--seed", type=int, default=0)
    truth.add_argument("--variant", choices=VARIANTS, default="standard")

    args = parser.parse_args(argv)
    if args.command == "reproduce":
        from context_neurons.reproduce import format_table, reproduce, to_json

        n_texts = args.texts or (1000 if args.source == "openwebtext" else 100)
        results = reproduce(args.model, n_texts, device=args.device,
                            progress=not args.no_progress, source=args.source, seed=args.seed,
                            variant=args.variant)
        print(format_table(results))
        if args.out:
            args.out.write_text(to_json(results))
            print(f"wrote {args.out}")
        return 0
    if args.command == "regenerate-notebooks":
        from context_neurons.book.notebooks import regenerate

        return regenerate([Path(c) for c in args.chapters] or None)
    if args.command == "run-chapters":
        from context_neurons import config
        from context_neurons.book.notebooks import run_chapters

        timings = run_chapters([Path(c) for c in args.chapters] or None,
                               {config.MODEL.name: args.model}, args.out)
        (args.out / "timings.json").write_text(json.dumps(timings, indent=1))
        return 0
    if args.command == "student-notebooks":
        from context_neurons.book.students import write_student_notebooks

        write_student_notebooks([Path(c) for c in args.chapters] or None)
        return 0
    if args.command == "set-repository":
        from context_neurons.book.publishing import main as set_repository

        return set_repository(args.url)
    if args.command == "planted-truth":
        _, record = build_planted_state(load_tokenizer(), seed=args.seed, variant=args.variant)
        json.dump(record.to_dict(), sys.stdout, indent=1, default=str)
        return 0
    return 1


if __name__ == "__main__":
    sys.exit(main())
