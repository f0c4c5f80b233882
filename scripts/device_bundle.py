"""The data and packages the device jobs need on a GPU machine that has neither: pack them here,
unpack them there (``scripts/device_jobs.sh`` calls both).

    python scripts/device_bundle.py prepare [--bundle artifacts/device-bundle]   # here, once
    python scripts/device_bundle.py unpack --into DIR [--bundle artifacts/device-bundle]
    python scripts/device_bundle.py size [--bundle artifacts/device-bundle]

The device machine receives the repository's working tree and the ignored paths a call names in
``carry``, 64 MiB in all; ``../shared`` stays behind, it has no network, and its Python (3.12, with
PyTorch, transformers, tokenizers, NumPy, pandas, matplotlib, pytest) lacks TransformerLens and
the notebook tools. ``prepare`` (run where ``../shared`` and the network are, with the project's
environment) writes into ``artifacts/device-bundle/`` (ignored by git through ``/artifacts/``):

- ``shared.tar.xz``: ``corpora/`` and ``gpt2-tokenizer/`` of ``../shared`` (58 MB of JSONL and the
  GPT-2 ``vocab.json``/``merges.txt``; about 13 MB packed);
- ``code.tar.xz``: the ``*.py`` files of this Python's standard library, 3.11.7 here as in CI
  and for the shipped model (the device's Python is 3.12, whose library differs): the corpora
  dataset's ``python_stdlib`` folder (:func:`context_neurons.text.dataset.code_files`, empty
  modules included, so that ``train`` verifies the code root), which holds the code corpus
  (:func:`context_neurons.training.corpus.iter_code_documents`) and the test files protocol v3
  reads as its fallback (:func:`context_neurons.verdict.v3_data.stdlib_test_documents`, 1025);
- ``wheels/``: :data:`WHEELS`, pinned to the versions this environment runs, for CPython 3.12 on
  x86-64 Linux (``pip download --no-deps``); the device installs them with ``pip --no-index
  --no-deps --target``;
- ``manifest.json``: what each file holds, its size and SHA-256.

``unpack`` (on the device, standard library only) checks the hashes and extracts
``DIR/corpora``, ``DIR/gpt2-tokenizer`` and ``DIR/code`` (the device jobs use ``/tmp/data``, where
the shipped model's run read its corpora). ``size`` prints what
would travel (tracked and untracked-not-ignored files plus the bundle) against the 64 MiB limit.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import platform
import shutil
import subprocess
import sys
import tarfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BUNDLE = REPO / "artifacts" / "device-bundle"
#: The device call's limit on everything that travels, and the share this script allows.
TRAVEL_LIMIT_MIB = 64
TRAVEL_TARGET_MIB = 62

#: Packages the device's Python lacks, with what they need that it lacks too: TransformerLens
#: (which imports ``datasets`` at start-up) for the method, and jupytext, nbclient and ipykernel
#: for executing chapters. Versions: those of this project's environment when the list was made.
#: ``debugpy`` (an optional import of ipykernel) is left out to save 5 MB, and ``jedi`` with
#: ``parso`` (IPython's completion only, imported when a completion is asked for) another 5 MB:
#: with the code corpus's tests (protocol v3's fallback) the bundle no longer fits beside the
#: working tree otherwise. A chapter runs without them (tested with both hidden).
WHEELS = (
    "transformer-lens==4.3.0", "datasets==5.2.0", "dill==0.4.1", "multiprocess==0.70.19",
    "jupytext==1.19.6", "mdit-py-plugins==0.7.0", "nbformat==5.11.1", "fastjsonschema==2.22.3",
    "jsonschema==4.26.0", "jsonschema-specifications==2025.9.1", "referencing==0.37.0",
    "rpds-py==2026.9.1", "nbclient==0.11.0", "jupyter-client==8.10.0", "jupyter-core==5.9.1",
    "platformdirs==4.14.8", "traitlets==5.16.1", "pyzmq==27.3.0", "tornado==6.6.1",
    "ipykernel==7.4.0", "comm==0.2.3", "ipython==9.18.1", "ipython-pygments-lexers==1.1.1",
    "pexpect==4.9.0", "ptyprocess==0.7.0",
    "prompt-toolkit==3.0.53", "wcwidth==0.9.4", "stack-data==0.6.3", "asttokens==3.0.2",
    "executing==2.3.0", "pure-eval==0.2.4", "matplotlib-inline==0.2.2", "nest-asyncio2==1.7.4",
)
#: The device's interpreter and platform, for ``pip download``.
PIP_TARGET = ["--python-version", "3.12", "--implementation", "cp", "--only-binary=:all:",
              *[arg for tag in ("manylinux_2_28_x86_64", "manylinux_2_27_x86_64",
                                "manylinux_2_17_x86_64", "manylinux2014_x86_64",
                                "manylinux1_x86_64") for arg in ("--platform", tag)]]


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def mib(n_bytes: int) -> str:
    return f"{n_bytes / 2**20:.1f} MiB"


def _pack_xz(target: Path, members: list[tuple[Path, str]]) -> None:
    """An xz tarball of ``(file or folder, name in the archive)``, written atomically."""
    tmp = target.with_suffix(".tmp")
    with tarfile.open(tmp, "w:xz", preset=6) as archive:
        for path, name in members:
            archive.add(path, arcname=name)
    tmp.replace(target)


def prepare(bundle: Path, refresh: bool = False, wheels: bool = True) -> dict:
    """Write the bundle (the parts already there are kept unless ``refresh``)."""
    # the package is needed here only: unpack runs on the device before anything is installed
    sys.path.insert(0, str(REPO / "src"))
    from context_neurons import config
    from context_neurons.text.dataset import code_files
    from context_neurons.training.corpus import iter_code_documents, stdlib_dir
    from context_neurons.verdict.v3_data import stdlib_test_documents

    bundle.mkdir(parents=True, exist_ok=True)
    manifest_path = bundle / "manifest.json"
    manifest = json.loads(manifest_path.read_text()) if manifest_path.is_file() else {}
    manifest = {} if refresh else manifest
    files = manifest.setdefault("files", {})

    corpora, tokenizer = config.corpora_root(), config.tokenizer_root()
    if corpora is None or tokenizer is None:
        raise SystemExit("error: the offline corpora and the GPT-2 tokenizer are needed here "
                         f"({config.CORPORA.name}, {config.TOKENIZER.name}, or ../shared)")
    shared = bundle / "shared.tar.xz"
    if refresh or not shared.is_file():
        start = time.perf_counter()
        _pack_xz(shared, [(corpora, "corpora"), (tokenizer / "vocab.json",
                                                 "gpt2-tokenizer/vocab.json"),
                          (tokenizer / "merges.txt", "gpt2-tokenizer/merges.txt")])
        print(f"shared.tar.xz: {mib(shared.stat().st_size)} in "
              f"{time.perf_counter() - start:.0f} s", flush=True)
    files["shared.tar.xz"] = {"holds": f"corpora/ from {corpora}, gpt2-tokenizer/ from "
                                       f"{tokenizer}", "bytes": shared.stat().st_size,
                              "sha256": sha256(shared)}

    code = bundle / "code.tar.xz"
    root = stdlib_dir()
    if refresh or not code.is_file():
        # every file of the dataset's code folder (empty modules too: train verifies the code
        # root against the manifest, text.dataset.verify_code_root), so the code corpus and
        # protocol v3's fallback corpus of its tests
        names = code_files(root)
        reads = len(list(iter_code_documents(root))), len(stdlib_test_documents(root))
        _pack_xz(code, [(root / name, name) for name in names])
        print(f"code.tar.xz: {len(names)} files, {mib(code.stat().st_size)}", flush=True)
        files["code.tar.xz"] = {"holds": f"the *.py files of {root} ({len(names)}): the code "
                                         f"corpus ({reads[0]} files) and protocol v3's fallback "
                                         f"corpus of its tests ({reads[1]} files)",
                                "python": platform.python_version(),
                                "bytes": code.stat().st_size, "sha256": sha256(code)}

    if wheels:
        folder = bundle / "wheels"
        folder.mkdir(exist_ok=True)
        have = {p.name for p in folder.glob("*.whl")}
        subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps",
                        *PIP_TARGET, "-d", str(folder), *WHEELS], check=True)
        found = sorted(p.name for p in folder.glob("*.whl"))
        if len(found) != len(WHEELS):
            raise SystemExit(f"error: {len(found)} wheels in {folder}, {len(WHEELS)} wanted: "
                             "remove the folder and prepare again")
        print(f"wheels: {len(found)} ({len(set(found) - have)} downloaded), "
              f"{mib(sum(p.stat().st_size for p in folder.glob('*.whl')))}", flush=True)
        manifest["wheels"] = {name: sha256(folder / name) for name in found}
    manifest["made"] = time.strftime("%Y-%m-%d %H:%M:%S")
    manifest_path.write_text(json.dumps(manifest, indent=1) + "\n")
    return manifest


def unpack(bundle: Path, into: Path) -> None:
    """Check the bundle's hashes and extract it under ``into`` (standard library only)."""
    manifest = json.loads((bundle / "manifest.json").read_text())
    for name, entry in manifest["files"].items():
        if sha256(bundle / name) != entry["sha256"]:
            raise SystemExit(f"error: {bundle / name} is not the file the manifest names")
    for name, digest in manifest.get("wheels", {}).items():
        if sha256(bundle / "wheels" / name) != digest:
            raise SystemExit(f"error: {bundle / 'wheels' / name} is not the manifest's")
    for folder in ("corpora", "gpt2-tokenizer", "code"):
        shutil.rmtree(into / folder, ignore_errors=True)
    (into / "code").mkdir(parents=True)
    for name, folder in (("shared.tar.xz", into), ("code.tar.xz", into / "code")):
        with tarfile.open(bundle / name, "r:xz") as archive:
            archive.extractall(folder, filter="data")
    print(f"unpacked {bundle} into {into}: corpora, gpt2-tokenizer, code (Python "
          f"{manifest['files']['code.tar.xz'].get('python', '?')}'s standard library)")


def travelling_bytes(bundle: Path) -> tuple[int, int]:
    """Bytes of the working tree that travels (tracked and untracked-not-ignored files) and of
    the bundle."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                            cwd=REPO, capture_output=True, check=True).stdout.split(b"\0")
    tree = sum((REPO / name.decode()).stat().st_size for name in listed
               if name and (REPO / name.decode()).is_file())
    carried = sum(p.stat().st_size for p in bundle.rglob("*") if p.is_file())
    return tree, carried


def report_size(bundle: Path) -> bool:
    tree, carried = travelling_bytes(bundle)
    total = tree + carried
    ok = total <= TRAVEL_TARGET_MIB * 2**20
    print(f"travels: working tree {mib(tree)} + {bundle.name} {mib(carried)} = {mib(total)} "
          f"(limit {TRAVEL_LIMIT_MIB} MiB){'' if ok else ': TOO LARGE'}")
    return ok


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("action", choices=["prepare", "unpack", "size"])
    parser.add_argument("--bundle", type=Path, default=BUNDLE)
    parser.add_argument("--into", type=Path, help="unpack: the folder to extract into")
    parser.add_argument("--refresh", action="store_true", help="prepare: rebuild every part")
    parser.add_argument("--no-wheels", action="store_true", help="prepare: no pip download")
    args = parser.parse_args(argv)
    if args.action == "prepare":
        prepare(args.bundle, args.refresh, wheels=not args.no_wheels)
        return 0 if report_size(args.bundle) else 1
    if args.action == "unpack":
        if args.into is None:
            parser.error("unpack needs --into DIR")
        unpack(args.bundle, args.into)
        return 0
    return 0 if report_size(args.bundle) else 1


if __name__ == "__main__":
    sys.exit(main())
