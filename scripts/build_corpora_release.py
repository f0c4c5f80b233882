"""Build the offline corpora's release: one deterministic archive per folder, and the manifest.

Writes ``FOLDER.tar.gz`` for every folder of ``--corpora`` and a copy of its ``README.md`` into
``--out`` (outside the repository: it never holds the corpora), and refreshes the package's
manifest (``src/context_neurons/assets/corpora.json``): the dataset's version, where the release
is published, and the SHA-256 and size of every archive and file. Upload every file of ``--out``
to the release (``base_url``). Building again from the same files gives the same bytes.

With ``--check`` nothing is written: the manifest is verified against the archives in ``--out``
and the directory (the archives are built again in a temporary folder and compared); the exit
status is 1 when anything disagrees.

    python scripts/build_corpora_release.py --corpora ../shared/corpora --out /tmp/corpora-release \
        --code /path/to/python3.11.7/lib/python3.11
    python scripts/build_corpora_release.py --corpora ../shared/corpora --out /tmp/corpora-release \
        --code /path/to/python3.11.7/lib/python3.11 --check

With ``--upload`` the files of ``--out`` are then uploaded to the repository's release
``corpora-v<version>`` with GitHub's command line (``gh``, logged in with ``gh auth login``): the
release is created when it does not exist, and an existing archive of the same name is replaced
(``gh release upload --clobber``). This is the one command a maintainer runs to publish the dataset
(the book's page "Publishing", ``book/publishing.md``):

    python scripts/build_corpora_release.py --corpora ../shared/corpora --out /tmp/corpora-release \
        --code /path/to/python3.11.7/lib/python3.11 --upload

``--code`` adds the standard library the models were trained on (CPython 3.11.7's ``*.py``
files) as the folder ``python_stdlib``, so that a reader with another Python reads the same code
corpus (and protocol v3 the same fallback).
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
from pathlib import Path

from context_neurons.book.colab import REPOSITORY
from context_neurons.checks import ContextNeuronsError
from context_neurons.text.dataset import CODE_FOLDER, CODE_PYTHON, MANIFEST_PATH
from context_neurons.text.dataset import check_release, load_manifest
from context_neurons.text.dataset import publish_corpora


def release_url(version: str) -> str:
    """The GitHub release of a dataset version: tag ``corpora-v<version>`` of the repository."""
    return f"{REPOSITORY}/releases/download/corpora-v{version}/"


def release_tag(version: str) -> str:
    """The release's tag for a dataset version."""
    return f"corpora-v{version}"


def upload_commands(out: Path, version: str, repository: str = REPOSITORY,
                    exists: bool = False) -> list[list[str]]:
    """The ``gh`` command lines that publish every file of ``out`` to the release of ``version``
    in ``repository`` (``https://github.com/OWNER/NAME``): create the release when it does not
    exist, else upload into it, replacing files of the same name."""
    files = sorted(str(path) for path in out.iterdir() if path.is_file())
    if not files:
        raise ContextNeuronsError(f"Nothing to upload: {out} holds no file (build it first).")
    repo = repository.removeprefix("https://github.com/")
    tag = release_tag(version)
    if exists:
        return [["gh", "release", "upload", tag, *files, "--clobber", "--repo", repo]]
    return [["gh", "release", "create", tag, *files, "--repo", repo,
             "--title", f"Offline corpora, version {version}",
             "--notes", "The book's offline corpora: one archive per folder, described by "
                        "src/context_neurons/assets/corpora.json (python -m context_neurons "
                        "fetch-corpora downloads and checks them)."]]


def upload(out: Path, version: str, repository: str = REPOSITORY) -> None:
    """Publish ``out`` to the release with ``gh`` (a clear error when ``gh`` is missing)."""
    if shutil.which("gh") is None:
        raise ContextNeuronsError("--upload needs GitHub's command line `gh` "
                                  "(https://cli.github.com), logged in with `gh auth login`.")
    repo = repository.removeprefix("https://github.com/")
    exists = subprocess.run(["gh", "release", "view", release_tag(version), "--repo", repo],
                            capture_output=True).returncode == 0
    for command in upload_commands(out, version, repository, exists):
        print("$", " ".join(command[:4]), "...", flush=True)
        if subprocess.run(command).returncode != 0:
            raise ContextNeuronsError(f"`{' '.join(command[:3])}` failed (see above).")
    print(f"uploaded {out}/* to {repository}/releases/tag/{release_tag(version)}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpora", type=Path, required=True, help="the corpora directory")
    parser.add_argument("--out", type=Path, required=True,
                        help="folder for the archives (outside the repository)")
    parser.add_argument("--version", default=None,
                        help="the dataset's version (default: the manifest's, else 1)")
    parser.add_argument("--base-url", default=None,
                        help="where the archives are published (default: the repository's "
                             "release corpora-v<version>)")
    parser.add_argument("--manifest", type=Path, default=MANIFEST_PATH, help="the manifest")
    parser.add_argument("--code", type=Path, default=None,
                        help="the standard library the models were trained on (CPython "
                             f"{CODE_PYTHON}'s, e.g. $(python3.11 -c 'import sysconfig; "
                             "print(sysconfig.get_paths()[\"stdlib\"])')): its *.py files "
                             f"become the folder {CODE_FOLDER}")
    parser.add_argument("--check", action="store_true",
                        help="verify the manifest against --out and --corpora; write nothing")
    parser.add_argument("--upload", action="store_true",
                        help="then upload --out to the repository's release corpora-v<version> "
                             "with `gh` (created when missing); refused with --check")
    args = parser.parse_args(argv)
    if args.check and args.upload:
        parser.error("--upload publishes what it builds; run --check on its own")
    try:
        if args.check:
            problems = check_release(args.corpora, args.out, args.manifest, args.code)
            for problem in problems:
                print(problem)
            print(f"{len(problems)} problem(s)" if problems else
                  f"the manifest {args.manifest} matches {args.out} and {args.corpora}")
            return 1 if problems else 0
        version = args.version or (load_manifest(args.manifest)["version"]
                                   if args.manifest.is_file() else "1")
        manifest = publish_corpora(args.corpora, args.out, version,
                                   args.base_url or release_url(version), args.manifest,
                                   args.code)
        print(f"wrote {len(manifest['folders'])} archives and {args.out / 'README.md'} into "
              f"{args.out}, and the manifest {args.manifest} (version {manifest['version']})")
        if args.upload:
            upload(args.out, manifest["version"])
        else:
            print(f"upload {args.out}/* to {manifest['base_url']} (or run again with --upload)")
    except ContextNeuronsError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
