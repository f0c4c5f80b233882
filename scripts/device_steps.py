"""The Python parts of ``scripts/device_jobs.sh``: what a training run needs after ``train``, and
packing a step's outputs into one file that the device call returns.

    python scripts/device_steps.py development RUN_DIR [--keep 0,128,512,2048] [--threads 4]
    python scripts/device_steps.py summary RUN_DIR --out FILE [--device cuda]
    python scripts/device_steps.py annotate RUN_DIR --note KEY=TEXT [--note KEY=TEXT ...]
    python scripts/device_steps.py pack ARCHIVE.tar.gz DIR [--only NAME,...] [--max-mib 15]
    python scripts/device_steps.py import-v3 RUN_DIR --command "python -m ... verdict.v3 ..."

``development``: ``RUN_DIR/development.json`` as the shipped trained model has it. The checkpoints
are pruned to the steps the shipped summary kept (0, 128, 512, 2048 and the last), then the
package's own :func:`~context_neurons.training.development.summarize_run` and
:func:`~context_neurons.verdict.development.add_development_view` (protocols v1 and v3) run
unchanged (on the CPU, as for the shipped model).

``summary``: the method's view of a run's final model as one JSON row of ``development.json``
(taxonomy, previous-token and contextual heads, discovery, truth from activations on the run's
held-out documents, the protocol's additive truth), with each head's layer-0 kernel on a repeated
token (:func:`~context_neurons.training.analysis.head_kernels`); on ``--device`` (a GPU for the
GPT-2-shaped model, whose weights are too large to come back from the device machine).

``annotate``: adds ``environment`` to ``RUN_DIR/training.json`` (where the corpora and the code
corpus came from), as the shipped record has it.

``pack``: a gzip tarball of ``DIR`` (or of the files ``--only`` names, plus ``DIR/logs/``), the
folder itself at its top. An archive over ``--max-mib`` is written again with the images of its
notebooks replaced by a line naming their size and hash (a device call returns files of at most
16 MiB).

``import-v3`` (here, after the device call): a run whose weights could not come back (step 2's
GPT-2-shaped model, unpacked from ``gpt2-layer0.tar.gz``) goes into the package without them:
its records (training.json, loss.csv, heldout.csv, the configurations, summary.json) and, from
the ``--out`` file of the v3 command run on the device, its v3 result as a stored result
(:func:`~context_neurons.verdict.v3_stored.store_result`) dated when that file was written, with
the device's versions, threads and GPU, and this checkout's protocol hashes (import from the
commit the device ran).
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import shutil
import sys
import tarfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))  # the checkout's package, installed or not

#: The checkpoint steps the shipped model's development.json summarises (and the last step).
SHIPPED_STEPS = (0, 128, 512, 2048)
IMAGES = ("image/png", "image/jpeg", "image/svg+xml")


def _step(path: Path) -> int:
    return int(path.name.removeprefix("step-"))


def development(run_dir: Path, keep: tuple[int, ...], threads: int) -> Path:
    import torch  # the package's stack: imported by the subcommands that need it

    from context_neurons.training.development import summarize_run
    from context_neurons.verdict.development import add_development_view

    torch.set_num_threads(threads)
    record = json.loads((run_dir / "training.json").read_text())
    kept = {*keep, record["steps_done"]}
    for path in sorted((run_dir / "checkpoints").glob("step-*"), key=_step):
        if _step(path) not in kept:
            shutil.rmtree(path)
    summarize_run(run_dir, progress=False)
    path = add_development_view(run_dir, progress=False)
    steps = [row["step"] for row in json.loads(path.read_text())["checkpoints"]]
    print(f"{path}: checkpoints {steps}")
    return path


def summary(run_dir: Path, out: Path, device: str) -> dict:
    import torch  # the package's stack: imported by the subcommands that need it

    from context_neurons.models.loading import bridge_from_hf, load_checkpoint
    from context_neurons.training.analysis import head_kernels, load_run
    from context_neurons.training.config import EOT
    from context_neurons.training.development import summarize_checkpoint
    from context_neurons.training.heldout import labelled_windows
    from context_neurons.training.summary import training_run
    from context_neurons.training.tokenizer import load_tokenizer
    from context_neurons.verdict.data import protocol_data
    from context_neurons.verdict.protocol import load_protocol
    from context_neurons.verdict.development import structure

    torch.set_grad_enabled(False)
    run = training_run(run_dir)
    tokenizer = load_tokenizer(run_dir)
    hf_model, _ = load_run(run_dir)
    token = tokenizer.encode(" the")[0]
    query = min(run.config.n_ctx - 1, 255)
    kernels = head_kernels(hf_model, tokenizer.convert_tokens_to_ids(EOT), token, query)
    windows, labels = labelled_windows(tokenizer, run)
    model = bridge_from_hf(load_checkpoint(run_dir), tokenizer, "checkpoint", device=device)
    row = {"step": run.steps_done, "tokens": run.tokens_seen, "heldout_loss": run.heldout_loss,
           **summarize_checkpoint(model, windows, labels)}
    protocol = load_protocol()
    row.update(structure(model, protocol_data(tokenizer, run, protocol), protocol))
    result = {"run": str(run_dir), "device": device, "heldout_windows": len(windows),
              "protocol": protocol.name, "final": row,
              "approximation": approximation_view(model, windows[:APPROXIMATION_TEXTS]),
              "kernels": {"query": query, "token": " the",
                          "heads": [{k: round(v, 4) if isinstance(v, float) else v
                                     for k, v in r.items()} for r in kernels]}}
    out.write_text(json.dumps(result, indent=1) + "\n")
    print(f"{out}: previous-token heads {row['previous_token_heads']}, contextual heads "
          f"{row['contextual_heads']}, held-out loss {row['heldout_loss']}")
    return result


#: Held-out windows the approximation's accuracy and the assumptions check read (the main job's
#: default count for a trained model, ``--texts 20``).
APPROXIMATION_TEXTS = 20


def approximation_view(model, windows) -> dict:
    """The approximation's accuracy (chapter 6) on ``windows`` for the neurons found at theta,
    with the circuit's denominators read in each frame (``circuit.build.FRAMES``: the reference
    frame, the fix of issue 50, and the destination frame the package used before), and the
    assumptions check (:mod:`context_neurons.assumptions`) of the reference circuit."""
    from context_neurons.assumptions import LIMITS, measure_assumptions
    from context_neurons.circuit import FRAMES, build_circuit
    from context_neurons.discovery import THETA, score_neurons
    from context_neurons.evaluation import evaluate
    from context_neurons.method import MethodValues
    from context_neurons.stability import denominator_study

    method = MethodValues(model)
    heads = method.contextual_heads()
    if not heads:
        return {"contextual_heads": [], "note": "no contextual head: nothing to approximate"}
    out = {"contextual_heads": heads, "texts": len(windows), "theta": THETA, "frames": {}}
    circuits = {frame: build_circuit(model, "prose", heads, frame=frame) for frame in FRAMES}
    found = score_neurons(circuits["reference"], model).found(THETA)  # one set for both frames
    cache: dict = {}  # the true pre-activations, computed once
    for frame, circuit in circuits.items():
        view = {"neurons_found": len(found), "log_dhat": circuit.calibration.log_dhat.tolist()}
        if found:
            for denominators in ("per_position", "median"):
                ev = evaluate(circuit, model, windows, found, truth_cache=cache,
                              denominators=denominators)
                view[denominators] = {"median_pearson_r": ev.median_pearson,
                                      "median_fvu": ev.median_fvu}
        out["frames"][frame] = view
        if frame == "reference":
            study = denominator_study(model, windows)
            check = measure_assumptions(model, circuit, method.taxonomy().groups, windows, study)
            out["assumptions"] = {
                "limits": {k: {"bound": v.bound, "at_most": v.at_most, "judged": v.judged,
                               "post_hoc": v.post_hoc} for k, v in LIMITS.items()},
                "heads": {h: check.row(h) for h in check.heads},
                "verdicts": [v.sentence() for v in check.verdicts()],
                "ln2_scale_cv": check.ln2_scale_cv,
                "findings": check.findings(),
            }
    return out


def annotate(run_dir: Path, notes: list[str]) -> None:
    path = run_dir / "training.json"
    record = json.loads(path.read_text())
    environment = record.setdefault("environment", {})
    for note in notes:
        key, _, text = note.partition("=")
        environment[key] = text
    path.write_text(json.dumps(record, indent=1) + "\n")


def _without_images(data: bytes) -> bytes:
    """A notebook's JSON with every image replaced by a line naming its size and hash."""
    notebook = json.loads(data)
    for cell in notebook.get("cells", []):
        for output in cell.get("outputs", []):
            for mime in IMAGES:
                if mime in output.get("data", {}):
                    value = output["data"][mime]
                    value = "".join(value) if isinstance(value, list) else value
                    digest = hashlib.sha256(value.encode()).hexdigest()[:16]
                    output["data"][mime] = f"[image left out: {len(value)} characters, {digest}]"
    return json.dumps(notebook, indent=1).encode()


def _write(archive: Path, folder: Path, files: list[Path], strip_images: bool) -> None:
    with tarfile.open(archive, "w:gz") as tar:
        for path in files:
            name = f"{folder.name}/{path.relative_to(folder).as_posix()}"
            if strip_images and path.suffix == ".ipynb":
                data = _without_images(path.read_bytes())
                info = tarfile.TarInfo(name)
                info.size, info.mtime = len(data), int(path.stat().st_mtime)
                tar.addfile(info, io.BytesIO(data))
            else:
                tar.add(path, arcname=name)


def pack(archive: Path, folder: Path, only: list[str] | None, max_mib: float) -> Path:
    if only:
        files = [folder / name for name in only if (folder / name).is_file()]
        files += sorted(p for p in (folder / "logs").rglob("*") if p.is_file())
    else:
        files = sorted(p for p in folder.rglob("*") if p.is_file())
    tmp = archive.with_name(f".{archive.name}.tmp")  # the archive is replaced whole
    _write(tmp, folder, files, strip_images=False)
    if tmp.stat().st_size > max_mib * 2**20:
        _write(tmp, folder, files, strip_images=True)
    tmp.replace(archive)
    print(f"{archive}: {len(files)} files, {archive.stat().st_size / 2**20:.1f} MiB")
    return archive


RECORD_FILES = ("training.json", "loss.csv", "heldout.csv", "config.json",
                "generation_config.json", "tokenizer_config.json", "summary.json")


def import_v3(run_dir: Path, command: str, into: Path | None) -> Path:
    """The run's records and its device-computed v3 result -> the package (see ``import-v3``)."""
    import datetime

    from context_neurons.training.summary import training_run
    from context_neurons.verdict.v3_models import model_key, registered_model, v3_models
    from context_neurons.verdict.v3_stored import device_label, store_result

    run = training_run(run_dir)
    key = model_key(run)
    model = registered_model(key)
    if model.weights_kept:
        on_device = ", ".join(m.name for m in v3_models() if not m.weights_kept)
        raise SystemExit(f"{run_dir} is {key}, not a registered model whose weights stay on the "
                         f"device ({on_device})")
    out_file = run_dir / "verdict-v3.json"
    entry = json.loads(out_file.read_text())["models"][key]
    if isinstance(entry, str):
        raise SystemExit(f"{out_file} has no result for {key}: {entry}")
    into = into or model.directory
    into.mkdir(parents=True, exist_ok=True)
    for name in RECORD_FILES:
        shutil.copyfile(run_dir / name, into / name)
    computed = datetime.datetime.fromtimestamp(out_file.stat().st_mtime, datetime.timezone.utc)
    versions = {k: run.versions[k] for k in ("python", "torch")}
    return store_result(into, key, entry, command, entry["runtime"]["torch_threads"], computed,
                        versions, device=device_label(run.device, run.device_name))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="action", required=True)
    dev = sub.add_parser("development")
    dev.add_argument("run_dir", type=Path)
    dev.add_argument("--keep", default=",".join(map(str, SHIPPED_STEPS)))
    dev.add_argument("--threads", type=int, default=4)
    summ = sub.add_parser("summary")
    summ.add_argument("run_dir", type=Path)
    summ.add_argument("--out", type=Path, required=True)
    summ.add_argument("--device", default="cuda")
    note = sub.add_parser("annotate")
    note.add_argument("run_dir", type=Path)
    note.add_argument("--note", action="append", default=[], metavar="KEY=TEXT")
    packing = sub.add_parser("pack")
    packing.add_argument("archive", type=Path)
    packing.add_argument("folder", type=Path)
    packing.add_argument("--only", default="")
    packing.add_argument("--max-mib", type=float, default=15.0)
    imp = sub.add_parser("import-v3")
    imp.add_argument("run_dir", type=Path)
    imp.add_argument("--command", required=True, help="the v3 command as the device ran it")
    imp.add_argument("--into", type=Path, default=None)
    args = parser.parse_args(argv)
    if args.action == "development":
        development(args.run_dir, tuple(int(s) for s in args.keep.split(",") if s), args.threads)
    elif args.action == "summary":
        summary(args.run_dir, args.out, args.device)
    elif args.action == "annotate":
        annotate(args.run_dir, args.note)
    elif args.action == "import-v3":
        print(f"written: {import_v3(args.run_dir, args.command, args.into)}")
    else:
        pack(args.archive, args.folder, [s for s in args.only.split(",") if s], args.max_mib)
    return 0


if __name__ == "__main__":
    sys.exit(main())
