"""Command line: ``python -m context_neurons`` with a command (``--help`` lists them)."""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import sys
from pathlib import Path
from typing import Any

from context_neurons import config
from context_neurons.checks import InputError, ModelLoadError
from context_neurons.checks import check_device, check_output_file, report_errors
from context_neurons.checks import writable_directory
from context_neurons.files import write_text_whole
from context_neurons.models.loading import MODEL_NAMES, checkpoint_context, load_tokenizer
from context_neurons.models.loading import resolve_model_name
from context_neurons.models.planted import VARIANTS, build_planted_state
from context_neurons.text.dataset import DEFAULT_DIRECTORY_WORDS
from context_neurons.training.cli import DefaultsHelpFormatter, positive_int, seed_int
from context_neurons.training.config import MAX_SEED
from context_neurons.commands.development import COMMAND as DEVELOPMENT
from context_neurons.commands.development import DESCRIPTION as DEVELOPMENT_DESCRIPTION
from context_neurons.commands.development import add_arguments as add_development_arguments
from context_neurons.commands.v3 import COMMAND as V3, DESCRIPTION as V3_DESCRIPTION
from context_neurons.commands.v3 import add_arguments as add_v3_arguments
from context_neurons.commands.gpt2_verdicts import COMMAND as GPT2_VERDICTS
from context_neurons.commands.gpt2_verdicts import DESCRIPTION as GPT2_VERDICTS_DESCRIPTION
from context_neurons.commands.gpt2_verdicts import add_arguments as add_gpt2_verdicts_arguments
from context_neurons.training.cli import main as train

DESCRIPTION = (
    "Reproduce Gibson's 'Decomposing Attention To Find Context-Sensitive Neurons' on GPT-2 Small, "
    "the planted ground-truth model or the trained model, and build the book's notebooks. "
    "Each command has its own --help."
)


def model_choice(text: str) -> str:
    """An argparse type: a model name or a checkpoint directory."""
    try:
        return resolve_model_name(text)
    except ModelLoadError as err:
        raise argparse.ArgumentTypeError(f"invalid choice: {err}") from None


# ----------------------------------------------------------------------------------------------
# Results as JSON (the output path is checked before the work: checks.check_output_file)
# ----------------------------------------------------------------------------------------------


def finite_or_none(value: Any) -> Any:
    """``value`` with every NaN or infinity replaced by None (JSON's null), recursively."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: finite_or_none(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite_or_none(v) for v in value]
    return value


def strict_json(text: str) -> str:
    """JSON text (which may hold Python's bare ``NaN``) as valid JSON: ``null`` for non-finite."""
    return json.dumps(finite_or_none(json.loads(text)), indent=2, allow_nan=False) + "\n"


# ----------------------------------------------------------------------------------------------
# Checks of the environment a command reads
# ----------------------------------------------------------------------------------------------


def check_checkpoint_context(model: str) -> None:
    """A checkpoint directory whose context is shorter than the main job needs, refused from its
    ``config.json`` before anything loads (it used to fail at the last step, chapter 7's)."""
    from context_neurons.method import check_run_context

    n_ctx = None if model in MODEL_NAMES else checkpoint_context(model)
    if n_ctx is not None:
        check_run_context(n_ctx, f"local directory {model}")


def check_planted_seed() -> int:
    """``$CONTEXT_NEURONS_SEED`` as a seed, or an :class:`InputError` naming the variable."""
    try:
        return config.planted_seed()
    except InputError as err:
        raise InputError(f"{err} Unset it to use seed 0.") from None


# ----------------------------------------------------------------------------------------------
# The parser and the commands
# ----------------------------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m context_neurons", description=DESCRIPTION,
                                     formatter_class=DefaultsHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("train", add_help=False,
                   help="train the GPT-2-architecture model shipped as 'trained' "
                        "(options: python -m context_neurons train --help)")

    def command(name: str, help: str) -> argparse.ArgumentParser:
        return sub.add_parser(name, help=help, description=help, formatter_class=DefaultsHelpFormatter)

    rep = command("reproduce", "reproduce the paper's numbers and print the table")
    rep.add_argument("--model", type=model_choice, default="gpt2",
                     help=f"one of {', '.join(MODEL_NAMES)}, or a checkpoint directory "
                          f"(${config.MODEL.name} is not read here: it picks the chapters' model)")
    rep.add_argument("--texts", type=positive_int, default=None,
                     help="evaluation texts (default: 1000 with --source openwebtext, else 100)")
    rep.add_argument("--source", choices=["auto", "corpora", "openwebtext"], default="auto",
                     help="evaluation texts: offline corpora or OpenWebText (auto: the corpora "
                          "when found, else OpenWebText)")
    rep.add_argument("--device", choices=["cpu", "cuda", "auto"], default="auto",
                     help="auto: CUDA when available, else CPU")
    rep.add_argument("--seed", type=seed_int, default=None,
                     help=f"seed of the planted model, 0..{MAX_SEED} (default "
                          f"${config.PLANTED_SEED.name}, else 0)")
    rep.add_argument("--variant", choices=VARIANTS, default="standard",
                     help="the planted model's variant: shuffled-kernels is the negative control "
                          "(no contextual head, so nothing to discover)")
    rep.add_argument("--out", type=Path, default=None,
                     help="write the results as JSON to this file (its folder must exist)")
    rep.add_argument("--no-progress", action="store_true", help="no progress bars or messages")
    rep.add_argument("--explain", action="store_true",
                     help="print a legend under the table: its columns, and what each row is")

    regen = command("regenerate-notebooks",
                    "execute chapters on the planted model and store their outputs in "
                    "tests/notebooks/")
    regen.add_argument("chapters", nargs="*",
                       help="chapter names (ch03_stability) or files inside book/ "
                            "(default: all chapters)")

    run = command("run-chapters", "execute chapters on a model (not compared), e.g. --model "
                                  "trained")
    run.add_argument("chapters", nargs="*",
                     help="chapter names or files inside book/ (default: all chapters)")
    run.add_argument("--model", type=model_choice, required=True,
                     help=f"one of {', '.join(MODEL_NAMES)}, or a checkpoint directory")
    run.add_argument("--out", type=Path, default=Path("artifacts/chapters"),
                     help="directory for the executed notebooks and timings.json")
    run.add_argument("--students", choices=["shipped", "solved"], default=None,
                     help="run the chapters' student notebooks instead, as shipped (every "
                          "exercise must be 'not yet solved') or with the solutions pasted in "
                          "(every check must say 'solved'), read from the teacher's table")

    students = command("student-notebooks",
                       "write the student notebooks (no solutions) Colab opens")
    students.add_argument("chapters", nargs="*",
                          help="chapter names or files inside book/ (default: all chapters)")

    publish = command("set-repository",
                      "move the book to another GitHub repository (Colab, website)")
    publish.add_argument("url", help="https://github.com/OWNER/NAME")

    fetch = command("fetch-corpora",
                    "download the offline corpora (checksummed, resumable) and say where "
                    f"${config.CORPORA.name} should point")
    which = fetch.add_mutually_exclusive_group()
    which.add_argument("--only", nargs="+", metavar="FOLDER", default=None,
                       help="only these corpus folders (default: all of them)")
    which.add_argument("--verdicts", action="store_true",
                       help="only the folders chapter 8's verdict protocols read (the trained "
                            "model's training corpora: about 24 MB to download)")
    fetch.add_argument("--dir", type=Path, default=None,
                       help=f"the corpora directory (default: {DEFAULT_DIRECTORY_WORDS})")
    fetch.add_argument("--base-url", default=None,
                       help="where the release's archives are, http(s):// or file:// (default: "
                            "the manifest's GitHub release)")
    fetch.add_argument("--no-progress", action="store_true", help="no progress bars or messages")

    add_v3_arguments(command(V3, V3_DESCRIPTION))
    add_gpt2_verdicts_arguments(command(GPT2_VERDICTS, GPT2_VERDICTS_DESCRIPTION))
    add_development_arguments(command(DEVELOPMENT, DEVELOPMENT_DESCRIPTION))

    command("refresh-docs", "write again the README's and the book's generated blocks (what "
                            "the book found, every command's help, the configuration, the corpora)")

    band = command("band-coverage",
                   "measure how often the certified band holds on held-out real text and write "
                   "the stored table (band-coverage.json among the package's assets)")
    band.add_argument("--models", nargs="+", default=None,
                      help="models to measure (default: planted, trained, trained-seed1)")
    band.add_argument("--out", type=Path, default=None,
                      help="write the table here instead of the stored asset")

    truth = command("planted-truth", "print what the planted model plants, as JSON")
    truth.add_argument("--seed", type=seed_int, default=None,
                       help=f"seed of the planted model, 0..{MAX_SEED} (default "
                            f"${config.PLANTED_SEED.name}, else 0, as reproduce)")
    truth.add_argument("--variant", choices=VARIANTS, default="standard",
                       help="the planted model's variant")
    return parser


def command_parsers() -> dict[str, argparse.ArgumentParser]:
    """The main parser (under ``""``) and each command's, ``train``'s own included: what the
    book's reference page prints (:mod:`context_neurons.book.reference`)."""
    from context_neurons.training.cli import build_parser as train_parser

    parser = build_parser()
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return {"": parser, **{name: (train_parser() if name == "train" else sub)
                           for name, sub in action.choices.items()}}


def _reproduce(args: argparse.Namespace) -> int:
    from context_neurons.reproduce import explain_table, format_table, reproduce

    check_device(args.device)
    if args.seed is None:
        check_planted_seed()
    if args.variant != "standard" and args.model != "planted":
        raise InputError(f"--variant {args.variant} exists only for the planted model, not "
                         f"{args.model!r}.")
    check_checkpoint_context(args.model)
    if args.source != "openwebtext":
        config.corpora_root()  # a corpora directory that is named must exist (DataError)
    out = check_output_file(args.out) if args.out else None
    n_texts = args.texts or (1000 if args.source == "openwebtext" else 100)
    with contextlib.redirect_stdout(sys.stderr):  # progress messages: stdout holds the table
        results = reproduce(args.model, n_texts, device=args.device,
                            progress=not args.no_progress, source=args.source, seed=args.seed,
                            variant=args.variant)
    print(format_table(results))
    if args.explain:
        print(explain_table(results))
    if out:
        write_text_whole(out, strict_json(results.to_json()))
        print(f"wrote {out}", file=sys.stderr)
    return 0


def _chapters(names: list[str]) -> list[Path] | None:
    from context_neurons.book.notebooks import resolve_chapters

    return resolve_chapters(names) if names else None


def _run_chapters(args: argparse.Namespace) -> int:
    from context_neurons.book.notebooks import run_chapters

    chapters = _chapters(args.chapters)
    out = writable_directory(args.out)
    environment = {config.MODEL.name: args.model}
    if args.students:
        from context_neurons.book.student_runs import ExerciseStatusError, run_student_notebooks

        try:
            timings = run_student_notebooks(chapters, args.students, environment, out)
        except ExerciseStatusError as error:
            print(f"student notebooks: {error}", file=sys.stderr)
            return 1
    else:
        timings = run_chapters(chapters, environment, out)
    write_text_whole(out / "timings.json", json.dumps(timings, indent=1) + "\n")
    return 0


def _dispatch(args: argparse.Namespace) -> int:
    if args.command == "reproduce":
        return _reproduce(args)
    if args.command == "regenerate-notebooks":
        from context_neurons.book.notebooks import regenerate

        return regenerate(_chapters(args.chapters))
    if args.command == "run-chapters":
        return _run_chapters(args)
    if args.command == "student-notebooks":
        from context_neurons.book.students import write_student_notebooks

        write_student_notebooks(_chapters(args.chapters))
        return 0
    if args.command == "set-repository":
        from context_neurons.book.publishing import main as set_repository

        return set_repository(args.url)
    if args.command == "fetch-corpora":
        from context_neurons.book.colab import protocol_folders
        from context_neurons.text.dataset import default_directory, fetch_corpora

        only = protocol_folders() if args.verdicts else args.only
        fetch_corpora(only, args.dir or default_directory(), base_url=args.base_url,
                      progress=not args.no_progress)
        return 0
    if args.command == V3:
        from context_neurons.commands.v3 import command as protocol_v3

        return protocol_v3(args)
    if args.command == GPT2_VERDICTS:
        from context_neurons.commands.gpt2_verdicts import command as gpt2_verdicts

        return gpt2_verdicts(args)
    if args.command == DEVELOPMENT:
        from context_neurons.commands.development import command as development

        return development(args)
    if args.command == "refresh-docs":
        from context_neurons.book.reference import refresh_documents

        for path in refresh_documents(command_parsers()):
            print(f"rewrote {path}", file=sys.stderr)
        return 0
    if args.command == "band-coverage":
        from context_neurons.band_coverage import ASSET, MODELS, write_coverage

        models = args.models or list(MODELS)
        unknown = [m for m in models if m not in MODELS]
        if unknown:
            raise InputError(f"Unknown models {unknown}: choose among {', '.join(MODELS)}.")
        out = check_output_file(args.out) if args.out else ASSET
        write_coverage(models, out, progress=True)
        print(f"wrote {out}", file=sys.stderr)
        return 0
    if args.command == "planted-truth":
        seed = check_planted_seed() if args.seed is None else args.seed
        _, record = build_planted_state(load_tokenizer(), seed=seed, variant=args.variant)
        json.dump(record.to_dict(), sys.stdout, indent=1, default=str)
        return 0
    return 1


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["train"]:  # its own parser: python -m context_neurons train --help
        return train(argv)
    args = build_parser().parse_args(argv)
    return report_errors(lambda: _dispatch(args))


if __name__ == "__main__":
    sys.exit(main())
