"""Dataset. This module makes the offline corpora a versioned, checksummed dataset that one command
fetches (``python -m context_neurons fetch-corpora``), and checks a directory against it.

The corpora (:mod:`context_neurons.text.corpora` reads them) never enter the repository. They are
published as one ``tar.gz`` archive per folder, plus their ``README.md``, under a release URL; the
manifest ``assets/corpora.json`` shipped with the package names the dataset's version, the URL
(``base_url``), and for every folder its archive (name, SHA-256, size), its source and licence
(from the corpora's README) and every file inside it (relative path, SHA-256, size, and for JSONL
files the number of documents the package's reader yields).

Publishing (:func:`publish_corpora`, ``scripts/build_corpora_release.py``): the archives are built
deterministically (members sorted, mtime 0, uid and gid 0, no user names, gzip mtime 0 and no file
name), so that building them again from the same files gives the same bytes and checksums
(:func:`check_release` verifies a manifest against the archives and the directory).

Fetching (:func:`fetch_corpora`): each archive that a folder needs is downloaded to ``NAME.part``
in a hidden staging folder (``.fetch``) of the corpora directory, resumed with an HTTP range
request when a ``.part`` is left from an interrupted run (restarted when the server does not
resume, or when the resumed file does not match), verified, renamed, and extracted file by file,
each checked against the manifest, into a temporary folder that is renamed into place: a folder
is whole or absent, never half written. A folder that already matches is not downloaded again.
:func:`verify_corpora` lists what in a directory does not match the manifest (``train`` refuses
such a directory).
"""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import json
import os
import shlex
import shutil
import sys
import tarfile
import tempfile
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any, Iterable, Mapping

from tqdm import tqdm

from context_neurons import config
from context_neurons.checks import DataError, InputError
from context_neurons.files import write_text_whole, write_whole
from context_neurons.text.corpora import read_jsonl

#: The manifest shipped with the package (package data, beside the other assets).
MANIFEST_PATH = Path(__file__).resolve().parents[1] / "assets" / "corpora.json"
#: Version of the manifest's layout (not of the dataset: that is the manifest's ``version``).
MANIFEST_FORMAT = 1
README_NAME = "README.md"
ARCHIVE_SUFFIX = ".tar.gz"
PART_SUFFIX = ".part"
#: Hidden folder of the corpora directory holding downloads and extractions under way.
STAGING = ".fetch"
URL_SCHEMES = ("http://", "https://", "file://")
CHUNK = 1 << 20
TIMEOUT_S = 60
#: The README table's columns the manifest copies: folder names, source, licence.
README_COLUMNS = {"folder": "folder", "source": "what", "licence": "licence"}
#: The dataset's folder of the code corpus: the ``*.py`` files of the Python standard library
#: the shipped models were trained on. It is built from that library (``--code``), not from the
#: corpora directory, and read from ``$CONTEXT_NEURONS_CODE``, else from this folder of the
#: corpora directory when it is there, else from the running Python's library
#: (:func:`context_neurons.training.corpus.stdlib_dir`).
CODE_FOLDER = "python_stdlib"
CODE_PYTHON = "3.11.7"
CODE_DESCRIPTION = {
    "source": f"CPython {CODE_PYTHON} standard library, its *.py files (site-packages and "
              "__pycache__ left out): the code corpus; its test files are protocol v3's fallback",
    "licence": "PSF-2.0",
}
#: Parts of a standard library's paths that are not its code (every reader of the code leaves
#: them out: :func:`code_files`, the training corpus, protocol v3's fallback).
NOT_CODE = ("site-packages", "dist-packages", "__pycache__")

Manifest = dict[str, Any]


# ----------------------------------------------------------------------------------------------
# The manifest
# ----------------------------------------------------------------------------------------------


def load_manifest(manifest: str | Path | Mapping | None = None) -> Manifest:
    """The manifest: the package's (``None``), a file, or a dict already read. A missing or
    damaged one is a :class:`DataError` naming it."""
    if isinstance(manifest, Mapping):
        data, where = dict(manifest), "the manifest"
    else:
        path = Path(manifest) if manifest is not None else MANIFEST_PATH
        where = str(path)
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as err:
            raise DataError(f"The corpora manifest {where} cannot be read ({err}).") from None
    keys = ("format", "version", "base_url", "readme", "folders")
    if not isinstance(data, dict) or any(key not in data for key in keys):
        raise DataError(f"The corpora manifest {where} lacks one of {list(keys)}.")
    if data["format"] != MANIFEST_FORMAT:
        raise DataError(f"The corpora manifest {where} has format {data['format']!r}; this "
                        f"package reads format {MANIFEST_FORMAT}: update the package.")
    return data


def check_only(only: Iterable[str] | None, manifest: Manifest) -> list[str]:
    """The folders to fetch or verify: ``only`` (every folder when None), each a known folder,
    else an :class:`InputError` listing the known ones."""
    known = list(manifest["folders"])
    if only is None:
        return known
    names = list(dict.fromkeys([only] if isinstance(only, str) else only))
    unknown = [name for name in names if name not in manifest["folders"]]
    if unknown:
        raise InputError(f"Unknown corpus folder(s) {', '.join(map(repr, unknown))}: the "
                         f"dataset (version {manifest['version']}) has {', '.join(known)}.")
    if not names:
        raise InputError(f"Name at least one corpus folder: {', '.join(known)}.")
    return names


def digest(path: Path) -> tuple[str, int]:
    """``(SHA-256 in hex, size in bytes)`` of a file."""
    sha, size = hashlib.sha256(), 0
    with path.open("rb") as handle:
        for chunk in iter(lambda: handle.read(CHUNK), b""):
            sha.update(chunk)
            size += len(chunk)
    return sha.hexdigest(), size


def _matches(path: Path, entry: Mapping) -> bool:
    """Whether a file has the size and SHA-256 an entry of the manifest gives."""
    return (path.is_file() and path.stat().st_size == entry["size"]
            and digest(path) == (entry["sha256"], entry["size"]))


def _files_in(folder: Path) -> list[str]:
    """Relative paths (``/``-separated, sorted) of the files under a folder."""
    return sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*")
                  if p.is_file() or p.is_symlink())


def code_files(root: Path) -> list[str]:
    """The code corpus's files under a standard library's root: relative paths of its ``*.py``
    files, site-packages, dist-packages and ``__pycache__`` left out (sorted)."""
    return sorted(p.relative_to(root).as_posix() for p in root.rglob("*.py")
                  if p.is_file() and not any(part in NOT_CODE
                                             for part in p.relative_to(root).parts))


def verify_code_root(root: str | Path, manifest: str | Path | Mapping | None = None
                     ) -> list[str]:
    """What in a code corpus root (a standard library) differs from the dataset's
    :data:`CODE_FOLDER`, one line each (empty: it is the library the models were trained on):
    its ``*.py`` files missing, changed or not in the manifest."""
    entry = load_manifest(manifest)["folders"].get(CODE_FOLDER)
    if entry is None:
        return []
    root = Path(root).expanduser()
    return _listing_problems(root, f"{CODE_FOLDER}/", entry, code_files(root))


def verify_corpora(directory: str | Path, only: Iterable[str] | None = None,
                   manifest: str | Path | Mapping | None = None) -> list[str]:
    """What in a corpora directory does not match the manifest, one line each (empty: it
    matches): missing folders and files, files whose size or SHA-256 differ, and files in a
    folder that the manifest does not list (the readers would read them); a directory that does
    not exist is that one line. The README is checked when every folder is (``only`` None). An
    unknown folder in ``only`` is an :class:`InputError`.
    """
    manifest = load_manifest(manifest)
    names = check_only(only, manifest)
    directory = Path(directory).expanduser()
    if not directory.is_dir():  # one line, not every file of the manifest as missing
        return [f"{directory}: no such directory"]
    problems = [] if only is not None else _file_problems(directory, [manifest["readme"]], "")
    for name in names:
        problems += _folder_problems(directory, name, manifest["folders"][name])
    return problems


def _folder_problems(directory: Path, name: str, entry: Mapping) -> list[str]:
    folder = directory / name
    if not folder.is_dir():
        return [f"{name}/: missing"]
    return _listing_problems(folder, f"{name}/", entry, _files_in(folder))


def _listing_problems(folder: Path, prefix: str, entry: Mapping, present: list[str]) -> list[str]:
    """The manifest entry's files that are missing or differ under ``folder``, then the files
    ``present`` there that it does not list (the readers would read them)."""
    listed = {file["path"] for file in entry["files"]}
    extra = [f"{prefix}{path}: not in the manifest" for path in present if path not in listed]
    return _file_problems(folder, entry["files"], prefix) + extra


def _file_problems(folder: Path, files: Iterable[Mapping], prefix: str) -> list[str]:
    problems = []
    for file in files:
        path = folder / file["path"]
        if not path.is_file():
            problems.append(f"{prefix}{file['path']}: missing")
        elif path.stat().st_size != file["size"]:
            problems.append(f"{prefix}{file['path']}: {path.stat().st_size} bytes, the manifest "
                            f"says {file['size']}")
        elif digest(path)[0] != file["sha256"]:
            problems.append(f"{prefix}{file['path']}: its SHA-256 differs from the manifest's")
    return problems


# ----------------------------------------------------------------------------------------------
# Fetching
# ----------------------------------------------------------------------------------------------


#: Where ``fetch-corpora`` writes without ``--dir``, in words (its help and the book's data page say it).
DEFAULT_DIRECTORY_WORDS = (f"${config.CORPORA.name}, else ../shared/corpora beside the "
                           f"repository checkout, else corpora in the cache directory "
                           f"(${config.CACHE.name}) when the package is installed without one")


def default_directory() -> Path:
    """Where ``fetch-corpora`` writes without ``--dir`` (:data:`DEFAULT_DIRECTORY_WORDS`):
    ``$CONTEXT_NEURONS_CORPORA`` when it names a directory, else ``shared/corpora`` beside a
    repository checkout (where the package looks by default), else ``corpora`` in the cache
    directory."""
    value = config.get(config.CORPORA)
    if value and value.lower() != config.NO_DIRECTORY:
        return Path(value).expanduser()
    if (config.REPOSITORY_ROOT / "pyproject.toml").is_file():
        return config.REPOSITORY_ROOT.parent / "shared" / "corpora"
    return config.cache_dir() / "corpora"


def check_base_url(base_url: str) -> str:
    """``base_url`` ending in ``/`` if it is an http(s):// or file:// URL, else an
    :class:`InputError`."""
    base_url = base_url.strip()
    if not base_url.startswith(URL_SCHEMES):
        raise InputError(f"The corpora's base URL must start with {', '.join(URL_SCHEMES)}; "
                         f"got {base_url!r}.")
    return base_url if base_url.endswith("/") else base_url + "/"


def fetch_corpora(only: Iterable[str] | None, directory: str | Path,
                  base_url: str | None = None, progress: bool = True,
                  manifest: str | Path | Mapping | None = None) -> Path:
    """Download and verify the corpora folders ``only`` names (all when None) into ``directory``.

    A folder whose files already match the manifest is left alone (a second run downloads
    nothing and says so); a folder that does not match is replaced as a whole. Every archive is
    checked before it is extracted, every file after; a ``.part`` left by an interrupted run is
    resumed or restarted, never taken for complete. Progress bars and messages go to stderr when
    ``progress``; the last line (stdout) says where ``$CONTEXT_NEURONS_CORPORA`` should point.

    Args:
        only: folder names (None: every folder). The README is always fetched.
        directory: the corpora directory, created if missing.
        base_url: where the archives are (http(s):// or file://); default the manifest's.
        progress: show progress bars and messages.
        manifest: another manifest than the package's (a path or a dict; tests).

    Returns:
        The directory.

    Raises:
        InputError: an unknown folder name, a bad URL, a directory that cannot be written.
        DataError: a download that fails, or an archive or file whose SHA-256 differs from the
            manifest's (one line naming it).
    """
    manifest = load_manifest(manifest)
    names = check_only(only, manifest)
    base_url = check_base_url(base_url or manifest["base_url"])
    directory = Path(directory).expanduser()
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise InputError(f"The corpora directory {directory} cannot be created ({err}).") from None
    if not os.access(directory, os.W_OK | os.X_OK):
        raise InputError(f"The corpora directory {directory} is not writable: choose another "
                         "with --dir.")

    def say(message: str) -> None:
        if progress:
            print(message, file=sys.stderr)

    todo = [name for name in names
            if _folder_problems(directory, name, manifest["folders"][name])]
    readme_ok = _matches(directory / README_NAME, manifest["readme"])
    if not todo and readme_ok:
        say(f"nothing to download: {len(names)} folder(s) in {directory} already match the "
            f"corpora manifest (version {manifest['version']})")
    else:
        megabytes = sum(manifest["folders"][n]["size"] for n in todo) / 1e6
        say(f"fetching {len(todo)} of {len(names)} folder(s) ({megabytes:.1f} MB) from "
            f"{base_url} into {directory}")
        staging = directory / STAGING
        staging.mkdir(exist_ok=True)
        for stale in staging.iterdir():  # extractions a killed run left (downloads are kept)
            if stale.is_dir():
                shutil.rmtree(stale, ignore_errors=True)
        try:
            for name in todo:
                entry = manifest["folders"][name]
                archive = staging / entry["archive"]
                _download(base_url + entry["archive"], archive, entry, manifest, progress)
                _install(archive, directory, name, entry, staging)
                archive.unlink()
            if not readme_ok:
                readme = staging / README_NAME
                _download(base_url + README_NAME, readme, manifest["readme"], manifest, progress)
                os.replace(readme, directory / README_NAME)
        finally:  # removed when empty, after a failure too; kept with a .part to resume
            with contextlib.suppress(OSError):
                staging.rmdir()
        say(f"fetched and verified {len(todo)} folder(s) into {directory}")
    print(where_to_point(directory))
    return directory


def where_to_point(directory: Path) -> str:
    """One line: where ``$CONTEXT_NEURONS_CORPORA`` should point for the package to read
    ``directory`` (or that it already does)."""
    directory = directory.resolve()
    configured = config.get(config.CORPORA)
    if configured and Path(configured).expanduser().resolve() == directory:
        return f"corpora ready in {directory} ({config.CORPORA.name} points there)"
    line = f"corpora ready: export {config.CORPORA.name}={shlex.quote(str(directory))}"
    if not configured and directory == (config.REPOSITORY_ROOT.parent / "shared" / "corpora"):
        line += " (or leave it unset: the package looks there by default)"
    return line


def _download(url: str, path: Path, entry: Mapping, manifest: Manifest, progress: bool) -> None:
    """``url`` to ``path``, verified against ``entry`` (size, SHA-256) before it is renamed from
    ``path.part``. A verified file already at ``path`` is kept. A leftover ``.part`` is resumed
    (range request); when the server restarts instead, or the resumed file does not match, it is
    discarded and the download starts again from the beginning."""
    if path.exists():
        if _matches(path, entry):
            return
        path.unlink()
    part = path.with_name(path.name + PART_SUFFIX)
    while True:
        offset = part.stat().st_size if part.exists() else 0
        if offset > entry["size"] or (offset == entry["size"] and not _matches(part, entry)):
            part.unlink()  # longer than the file, or whole but wrong: never taken for complete
            offset = 0
        if offset < entry["size"]:
            offset = _transfer(url, part, offset, entry["size"], progress)
        if _matches(part, entry):
            os.replace(part, path)
            return
        sha, size = digest(part)
        part.unlink()
        if offset == 0:
            raise DataError(
                f"{path.name} downloaded from {url} does not match the corpora manifest "
                f"(version {manifest['version']}): {size} bytes with SHA-256 {sha[:16]}..., "
                f"expected {entry['size']} bytes with {entry['sha256'][:16]}...; the download "
                "is damaged or the release differs: run again, or check the base URL."
            )
        # a resumed file that does not match: its first part was wrong; start again


class _Restart(Exception):
    """The server answered a range request with other bytes than asked: download it whole."""


def _transfer(url: str, part: Path, offset: int, size: int, progress: bool) -> int:
    """Append ``url``'s bytes from ``offset`` to ``part`` (from 0, rewriting ``part``, when the
    server does not honour the range), stopping past ``size`` bytes; returns where it started."""
    headers = {"User-Agent": "context-neurons"}
    if offset:
        headers["Range"] = f"bytes={offset}-"
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers),
                                    timeout=TIMEOUT_S) as response:
            resumed = offset > 0 and getattr(response, "status", None) == 206
            if resumed and not str(response.headers.get("Content-Range", "")).startswith(
                    f"bytes {offset}-"):
                raise _Restart
            start = offset if resumed else 0
            with part.open("ab" if resumed else "wb") as handle, tqdm(
                    total=size, initial=start, unit="B", unit_scale=True,
                    desc=part.name.removesuffix(PART_SUFFIX), file=sys.stderr,
                    disable=not progress) as bar:
                written = start
                for chunk in iter(lambda: response.read(CHUNK), b""):
                    handle.write(chunk)
                    bar.update(len(chunk))
                    written += len(chunk)
                    if written > size:
                        break  # not the file the manifest names: the checksum will say so
            return start
    except _Restart:
        part.unlink()
        return _transfer(url, part, 0, size, progress)
    except urllib.error.HTTPError as err:
        if err.code == 416 and offset:  # range not satisfiable: start again
            part.unlink()
            return _transfer(url, part, 0, size, progress)
        raise DataError(f"{url}: HTTP {err.code} {err.reason}: check the base URL (is the "
                        "release published?).") from None
    except (urllib.error.URLError, OSError) as err:
        reason = getattr(err, "reason", None) or err
        raise DataError(f"{url} could not be downloaded ({reason}): check the network or the "
                        "base URL; run again to resume.") from None


def _install(archive: Path, directory: Path, name: str, entry: Mapping, staging: Path) -> None:
    """Extract a verified archive's files into a temporary folder, each checked against the
    manifest, then rename the folder to ``directory/name`` (replacing the old one)."""
    expected = {f"{name}/{file['path']}": file for file in entry["files"]}
    temporary = Path(tempfile.mkdtemp(prefix=f"{name}.", dir=staging))
    try:
        seen = set()
        with tarfile.open(archive, "r:gz") as tar:
            for member in tar:
                if member.isdir():
                    continue
                file = expected.get(member.name)
                if file is None or not member.isfile() or member.name in seen \
                        or member.size != file["size"]:
                    raise DataError(f"{archive.name}: member {member.name!r} is not a file the "
                                    "corpora manifest lists: the archive differs from the release.")
                seen.add(member.name)
                _write_checked(tar.extractfile(member), temporary / file["path"], file,
                               f"{name}/{file['path']} in {archive.name}")
        missing = sorted(set(expected) - seen)
        if missing:
            raise DataError(f"{archive.name} lacks {', '.join(missing)}: the archive differs "
                            "from the release.")
        os.chmod(temporary, 0o755)
        target = directory / name
        if target.exists() or target.is_symlink():
            old = Path(tempfile.mkdtemp(prefix=f"{name}.old.", dir=staging))
            os.replace(target, old / name)
            os.replace(temporary, target)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(temporary, target)
    finally:
        shutil.rmtree(temporary, ignore_errors=True)


def _write_checked(source, path: Path, file: Mapping, what: str) -> None:
    """Copy a stream to ``path``, then a :class:`DataError` naming ``what`` unless its bytes
    have the manifest's SHA-256."""
    path.parent.mkdir(parents=True, exist_ok=True)
    sha = hashlib.sha256()
    with path.open("wb") as handle:
        for chunk in iter(lambda: source.read(CHUNK), b""):
            sha.update(chunk)
            handle.write(chunk)
    if sha.hexdigest() != file["sha256"]:
        raise DataError(f"{what}: its SHA-256 differs from the corpora manifest's.")


# ----------------------------------------------------------------------------------------------
# Publishing: archives and manifest
# ----------------------------------------------------------------------------------------------


def release_folders(corpora: Path) -> list[str]:
    """The folders of a corpora directory (hidden ones left out)."""
    return sorted(p.name for p in corpora.iterdir() if p.is_dir() and not p.name.startswith("."))


def readme_descriptions(readme: str) -> dict[str, dict[str, str]]:
    """``folder -> {"source", "licence"}`` from the corpora README's table (a row may name
    several folders: ```a`, `b```)."""
    rows = [[cell.strip() for cell in line.strip().strip("|").split("|")]
            for line in readme.splitlines() if line.lstrip().startswith("|")]
    header = next((row for row in rows if README_COLUMNS["folder"] in row), None)
    if header is None or any(column not in header for column in README_COLUMNS.values()):
        raise DataError(f"The corpora README has no table with the columns "
                        f"{list(README_COLUMNS.values())}.")
    index = {key: header.index(column) for key, column in README_COLUMNS.items()}
    out = {}
    for row in rows:
        if len(row) != len(header) or not row[index["folder"]].startswith("`"):
            continue
        for folder in row[index["folder"]].replace("`", "").split(","):
            out[folder.strip()] = {"source": row[index["source"]], "licence": row[index["licence"]]}
    return out


def count_documents(path: Path) -> int | None:
    """Documents in a JSONL file as :func:`context_neurons.text.corpora.iter_documents` counts
    them (records with a non-empty text); None for other files."""
    if path.suffix != ".jsonl":
        return None
    return sum(1 for record in read_jsonl(path) if len(record.get("text", "")) >= 1)


def write_archive(source: Path, folder: str, files: list[str], path: Path) -> None:
    """The ``files`` of ``source`` as a deterministic ``tar.gz`` at ``path``: members
    ``folder/<file>`` in sorted order, mode 644, mtime 0, uid and gid 0, no user or group names,
    gzip mtime 0 and no file name in the gzip header (written whole:
    :func:`~context_neurons.files.write_whole`)."""
    write_whole(path, lambda tmp: _write_tar(source, folder, sorted(files), tmp))


def _write_tar(root: Path, folder: str, files: list[str], tmp: Path) -> None:
    with tmp.open("wb") as raw, \
            gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0, compresslevel=9) as gz, \
            tarfile.open(fileobj=gz, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for relative in files:
            source = root / relative
            if source.is_symlink():
                raise DataError(f"{source} is a symbolic link: a release holds files only.")
            info = tarfile.TarInfo(f"{folder}/{relative}")
            info.size, info.mtime, info.mode = source.stat().st_size, 0, 0o644
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            with source.open("rb") as handle:
                tar.addfile(info, handle)


def file_entry(path: Path, relative: str) -> dict:
    sha, size = digest(path)
    entry = {"path": relative, "sha256": sha, "size": size}
    documents = count_documents(path)
    return entry if documents is None else {**entry, "documents": documents}


def build_release(corpora: str | Path, out: str | Path, version: str, base_url: str,
                  code: str | Path | None = None) -> Manifest:
    """Write one archive per folder of ``corpora`` (and, with ``code``, one of the standard
    library at that root: :data:`CODE_FOLDER`) and a copy of its README into ``out``; return
    the manifest describing them (not written: :func:`publish_corpora` writes it)."""
    corpora, out = Path(corpora).expanduser(), Path(out).expanduser()
    if not (corpora / README_NAME).is_file():
        raise InputError(f"{corpora} is not a corpora directory: it has no {README_NAME}.")
    inside = out.resolve().is_relative_to(config.REPOSITORY_ROOT)
    if inside and (config.REPOSITORY_ROOT / "pyproject.toml").is_file():
        raise InputError(f"--out {out} is inside the repository, which must never hold the "
                         "corpora: choose a folder outside it.")
    stray = [p.name for p in corpora.iterdir()
             if p.is_file() and p.name != README_NAME and not p.name.startswith(".")]
    if stray:
        raise DataError(f"{corpora} holds files outside any folder ({', '.join(sorted(stray))}): "
                        "a release holds folders and the README only.")
    described = readme_descriptions((corpora / README_NAME).read_text(encoding="utf-8"))
    undescribed = [name for name in release_folders(corpora) if name not in described]
    if undescribed:
        raise DataError(f"The corpora README's table does not describe {', '.join(undescribed)}:"
                        " add their source and licence to it before publishing.")
    sources = {name: (corpora / name, _files_in(corpora / name), described[name])
               for name in release_folders(corpora)}
    if code is not None:
        code = Path(code).expanduser()
        files = code_files(code)
        if CODE_FOLDER in sources or not files:
            raise InputError(f"--code {code}: a standard library's root with *.py files, and no "
                             f"folder {CODE_FOLDER} in the corpora directory.")
        sources[CODE_FOLDER] = (code, files, CODE_DESCRIPTION)
    out.mkdir(parents=True, exist_ok=True)
    folders = {}
    for name, (source, relatives, description) in sorted(sources.items()):
        archive = out / f"{name}{ARCHIVE_SUFFIX}"
        write_archive(source, name, relatives, archive)
        sha, size = digest(archive)
        files = [file_entry(source / relative, relative) for relative in relatives]
        counts = [file["documents"] for file in files if "documents" in file]
        folders[name] = {"archive": archive.name, "sha256": sha, "size": size,
                         "documents": sum(counts) if counts else None, **description,
                         "files": files}
    shutil.copyfile(corpora / README_NAME, out / README_NAME)
    return {"format": MANIFEST_FORMAT, "version": str(version),
            "base_url": check_base_url(base_url),
            "readme": file_entry(corpora / README_NAME, README_NAME), "folders": folders}


def manifest_text(manifest: Manifest) -> str:
    return json.dumps(manifest, indent=1, ensure_ascii=False) + "\n"


def publish_corpora(corpora: str | Path, out: str | Path, version: str, base_url: str,
                    manifest_path: str | Path = MANIFEST_PATH,
                    code: str | Path | None = None) -> Manifest:
    """Build the release (:func:`build_release`) into ``out`` and write its manifest to
    ``manifest_path`` (atomically). Upload every file of ``out`` to ``base_url``."""
    manifest = build_release(corpora, out, version, base_url, code)
    write_text_whole(Path(manifest_path), manifest_text(manifest))
    return manifest


def _rows(manifest: Manifest) -> dict[str, Any]:
    """The manifest flattened to ``what -> value``, for comparing two manifests line by line."""
    rows: dict[str, Any] = {key: manifest[key] for key in ("format", "version", "base_url")}
    rows[README_NAME] = manifest["readme"]
    for name, entry in manifest["folders"].items():
        rows.update({f"{name}: {key}": value for key, value in entry.items() if key != "files"})
        rows.update({f"{name}/{file['path']}": file for file in entry["files"]})
    return rows


def check_release(corpora: str | Path, out: str | Path,
                  manifest: str | Path | Mapping | None = None,
                  code: str | Path | None = None) -> list[str]:
    """What disagrees between a manifest, the archives in ``out`` and the directory they were
    built from (empty: the release is whole): the archives are built again (into a temporary
    folder) and compared byte for byte through their SHA-256."""
    committed = load_manifest(manifest)
    out = Path(out).expanduser()
    with tempfile.TemporaryDirectory() as scratch:
        fresh = build_release(corpora, scratch, committed["version"], committed["base_url"],
                              code)
    old, new = _rows(committed), _rows(fresh)
    problems = [f"{key}: the manifest says {old.get(key)}, the directory gives {new.get(key)}"
                for key in sorted(old.keys() | new.keys()) if old.get(key) != new.get(key)]
    published = {entry["archive"]: entry for entry in committed["folders"].values()}
    published[README_NAME] = committed["readme"]
    for name, entry in published.items():
        if not (out / name).is_file():
            problems.append(f"{out / name}: missing")
        elif digest(out / name) != (entry["sha256"], entry["size"]):
            problems.append(f"{out / name}: differs from the manifest's SHA-256 or size")
    return problems


def markdown_table(manifest: Manifest) -> str:
    """The README's table of the dataset: folder, files, documents, size, licence, source."""
    lines = ["| folder | files | documents | size | licence | source |",
             "|---|---|---|---|---|---|"]
    for name, entry in manifest["folders"].items():
        size = sum(file["size"] for file in entry["files"]) / 1e6
        documents = "-" if entry["documents"] is None else f"{entry['documents']:,}"
        lines.append(f"| `{name}` | {len(entry['files'])} | {documents} | {size:.1f} MB | "
                     f"{entry['licence']} | {entry['source']} |")
    return "\n".join(lines)
