"""Simulate the online run readers and the publishing build make, offline (issue 15).

Readers run the book on GPT-2 Small in Colab, and the publishing workflow builds the website on
GPT-2 with ``allow_errors: false``: no offline corpora, texts from OpenWebText through ``datasets``,
GPT-2 from the hub. None of that can run here, so this script stands in for each part through the
code path the real run takes:

* **OpenWebText**: a local Parquet copy (``text`` column) of documents of the offline corpora,
  read through ``datasets`` exactly as the hub's copy (``$CONTEXT_NEURONS_OPENWEBTEXT`` names it);
* **no corpora**: ``$CONTEXT_NEURONS_CORPORA`` is ``none`` (no corpora), so every
  chapter takes the online path (calibration and domain texts from the OpenWebText stand-in);
* **GPT-2 Small**: a 12-layer GPT-2-Small-shaped checkpoint loaded through the loader GPT-2 uses
  (``$CONTEXT_NEURONS_MODEL=gpt2`` with ``$CONTEXT_NEURONS_GPT2``). Its layers 0 and 1 are the
  planted model's, so the taxonomy finds contextual heads and every chapter has something to
  analyse; layers 2 to 11 are random, so the look-ups run at GPT-2's depth.

Every chapter is executed (not compared: the outputs are not GPT-2's), then the main job
``reproduce --model gpt2 --texts 20``, each timed; a chapter that raises fails the run. With
``--scale reduced`` (``$CONTEXT_NEURONS_SCALE``, CI's choice) chapters use fewer texts and
neurons: the code paths are the same, only the counts differ. With ``--students solved`` (CI's
choice) each chapter runs as its student notebook with the chapter's solutions pasted in: the
same code, and every exercise's check must then say "solved" (issue 55).

Usage: ``python scripts/simulate_online.py --out artifacts/online [--chapters book/ch01*.py]``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import torch
from transformers import GPT2Config, GPT2LMHeadModel

from context_neurons import config
from context_neurons.book.notebooks import chapter_files, run_chapters
from context_neurons.book.student_runs import ExerciseStatusError, run_student_notebooks
from context_neurons.models import load_tokenizer
from context_neurons.models.planted import build_planted_state
from context_neurons.text.corpora import iter_documents

#: Corpora standing in for OpenWebText: web-like English prose, with a few documents of the
#: case-study domains (as OpenWebText has), in a fixed interleaved order.
STANDIN_CORPORA = {
    "nltk_masc": 392, "nltk_brown_us": 500, "wikitext2_pytorch_examples": 122,
    "nltk_abc_au_news": 400, "nltk_state_union_us": 65, "nltk_pil_uk_medical": 200,
    "medical_abstracts": 200, "bible_web": 60, "spdx_license_texts": 40,
    "stellarium_skycultures": 20, "gpt2_webtext_snippets": 600,
}
MAIN_JOB_LIMIT_S = 600


def write_openwebtext_standin(out: Path) -> Path:
    """A Parquet file of documents (column ``text``) read the way OpenWebText is read."""
    import pyarrow as pa  # pyarrow comes with datasets (the "online" extra)
    import pyarrow.parquet as pq

    streams = {name: iter_documents(name) for name in STANDIN_CORPORA}
    left = dict(STANDIN_CORPORA)
    texts = []
    while any(left.values()):
        for name in STANDIN_CORPORA:
            if left[name]:
                document = next(streams[name], None)
                left[name] = 0 if document is None else left[name] - 1
                if document is not None:
                    texts.append(document.text)
    out.mkdir(parents=True, exist_ok=True)
    path = out / "openwebtext-standin.parquet"
    pq.write_table(pa.table({"text": texts}), path)
    print(f"OpenWebText stand-in: {len(texts)} documents -> {path}")
    return path


def write_gpt2_standin(out: Path, n_layer: int = 12, seed: int = 0) -> Path:
    """A GPT-2-Small-shaped checkpoint: the planted model's layers 0-1, then random layers."""
    tokenizer = load_tokenizer()
    state, _ = build_planted_state(tokenizer, seed=seed)
    torch.manual_seed(seed)
    model = GPT2LMHeadModel(GPT2Config(n_layer=n_layer))
    own = model.state_dict()
    for name, value in state.items():
        if name in own:
            own[name] = value
    model.load_state_dict(own)
    path = out / "gpt2-shaped"
    model.save_pretrained(path)
    print(f"GPT-2-shaped stand-in ({n_layer} layers, planted layers 0-1) -> {path}")
    return path


def online_environment(standin: Path, checkpoint: Path, scale: str) -> dict[str, str]:
    env = dict(os.environ)
    env.update({
        config.MODEL.name: "gpt2",
        config.GPT2_WEIGHTS.name: str(checkpoint),
        config.CORPORA.name: config.NO_DIRECTORY,  # no corpora: online sources
        config.OPENWEBTEXT.name: str(standin),
        config.SCALE.name: scale,
        config.THREADS.name: env.get(config.THREADS.name, "2"),
        "HF_HUB_OFFLINE": "1",
        "HF_DATASETS_OFFLINE": "1",
    })
    return env


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("artifacts/online"))
    parser.add_argument("--chapters", nargs="*", type=Path, default=None)
    parser.add_argument("--scale", choices=["full", "reduced"], default="reduced")
    parser.add_argument("--no-main-job", action="store_true")
    parser.add_argument("--no-chapters", action="store_true")
    parser.add_argument("--students", choices=["shipped", "solved"], default=None,
                        help="run the chapters' student notebooks instead of the chapters, as "
                             "shipped or with the solutions pasted in; a table that reports an "
                             "exercise in another state fails the run")
    args = parser.parse_args(argv)
    out = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    standin = write_openwebtext_standin(out)
    checkpoint = write_gpt2_standin(out)
    env = online_environment(standin, checkpoint, args.scale)
    chapters = [] if args.no_chapters else args.chapters or chapter_files()
    failed = ""
    if chapters and args.students:
        try:
            timings = run_student_notebooks(chapters, args.students, env, out / "chapters")
        except ExerciseStatusError as error:  # the main job still runs, then the run fails
            failed, timings = str(error), {}
    else:
        timings = run_chapters(chapters, env, out / "chapters") if chapters else {}
    if not args.no_main_job:
        start = time.perf_counter()
        command = [sys.executable, "-m", "context_neurons", "reproduce", "--model", "gpt2",
                   "--texts", "20", "--no-progress", "--out", str(out / "results-online.json")]
        subprocess.run(command, env=env, check=True)
        timings["reproduce --model gpt2 --texts 20"] = round(time.perf_counter() - start, 1)
        print(f"main job online: {timings['reproduce --model gpt2 --texts 20']:.0f} s")
    (out / "timings.json").write_text(json.dumps(timings, indent=1))
    if failed:
        print(f"student notebooks: {failed}")
        return 1
    main_job = timings.get("reproduce --model gpt2 --texts 20", 0.0)
    if main_job > MAIN_JOB_LIMIT_S:
        print(f"the online main job took {main_job:.0f} s, over {MAIN_JOB_LIMIT_S} s")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
