"""The offline corpora as a dataset (:mod:`context_neurons.text.dataset`): the release's archives
are deterministic, and ``fetch_corpora`` downloads, verifies, resumes and repairs, offline: a
small fake corpora directory is published into ``tmp_path`` and served from 127.0.0.1 (a server
that honours range requests, or one that does not) and through ``file://``."""

from __future__ import annotations

import copy
import functools
import hashlib
import http.server
import importlib.util
import json
import platform
import sysconfig
import threading
import tomllib
from pathlib import Path

import pytest

from context_neurons import config
from context_neurons.book.colab import REPOSITORY
from context_neurons.checks import DataError, InputError
from context_neurons.text import dataset
from context_neurons.text.corpora import iter_documents
from context_neurons.text.dataset import (
    build_release, fetch_corpora, load_manifest, markdown_table, publish_corpora,
    verify_corpora,
)

ROOT = Path(__file__).resolve().parents[2]
FOLDERS = ["alpha_news", "beta_bible", "gamma_words"]
README = """# Offline text corpora

| folder | documents | what | licence | good for |
|---|---|---|---|---|
| `alpha_news` | 4 | short news items | CC0 | tests |
| `beta_bible`, `gamma_words` | 40 / - | a Spanish chapter; word lists | public domain | tests |
"""


def jsonl(records: list[dict]) -> str:
    return "".join(json.dumps(record, ensure_ascii=False) + "\n" for record in records)


def make_corpora(root: Path) -> Path:
    """A corpora directory in the real one's format: JSONL folders, a word-list folder, README."""
    (root / "alpha_news").mkdir(parents=True)
    (root / "alpha_news" / "a.jsonl").write_text(jsonl([
        {"id": "a1", "text": "Rain fell on the plains.", "category": "news"},
        {"id": "a2", "text": ""},  # an empty text: the reader skips it
        {"id": "a3", "text": "The council met on Monday."},
    ]), encoding="utf-8")
    (root / "alpha_news" / "b.jsonl").write_text(jsonl([{"id": "b1", "text": "Stocks rose."},
                                                        {"id": "b2", "text": "A ship docked."}]))
    (root / "beta_bible").mkdir()
    verses = [{"id": f"Génesis {i}", "text": f"En el principio, capítulo {i}. " + "y " * (40 + i)}
              for i in range(40)]
    (root / "beta_bible" / "chapters.jsonl").write_text(jsonl(verses), encoding="utf-8")
    (root / "gamma_words" / "lists").mkdir(parents=True)
    (root / "gamma_words" / "gb_us_pairs.tsv").write_text("colour\tcolor\nfavour\tfavor\n")
    (root / "gamma_words" / "lists" / "british.txt").write_text("colour\nfavour\n")
    (root / "README.md").write_text(README, encoding="utf-8")
    return root


@pytest.fixture
def corpora(tmp_path) -> Path:
    return make_corpora(tmp_path / "corpora")


@pytest.fixture
def release(tmp_path, corpora) -> tuple[Path, Path]:
    """``(folder of the published files, manifest path)``."""
    out, manifest = tmp_path / "release", tmp_path / "corpora.json"
    publish_corpora(corpora, out, "7", "https://example.invalid/corpora-v7/", manifest)
    return out, manifest


class RangeHandler(http.server.SimpleHTTPRequestHandler):
    """Serves files, logs each request's path and Range header on the server, and answers a
    range with 206 when the server's ``ranges`` is on (else the whole file, as many servers)."""

    def do_GET(self) -> None:
        asked = self.headers.get("Range")
        self.server.log.append((self.path.lstrip("/"), asked))
        path = Path(self.translate_path(self.path))
        if not path.is_file():
            self.send_error(404)
            return
        data, start = path.read_bytes(), 0
        if asked and self.server.ranges:
            start = int(asked.removeprefix("bytes=").split("-")[0])
            if start >= len(data):
                self.send_error(416)
                return
            self.send_response(206)
            self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
        else:
            self.send_response(200)
        self.send_header("Content-Length", str(len(data) - start))
        self.end_headers()
        self.wfile.write(data[start:])

    def log_message(self, *args) -> None:
        pass


@pytest.fixture
def server(release):
    """An HTTP server on 127.0.0.1 serving the release: ``(base_url, server)``."""
    handler = functools.partial(RangeHandler, directory=str(release[0]))
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    httpd.log, httpd.ranges = [], True
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05},
                              daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/", httpd
    httpd.shutdown()
    httpd.server_close()
    thread.join()


def fetch(target: Path, release, base_url: str, only=None, **kwargs) -> Path:
    return fetch_corpora(only, target, base_url=base_url, progress=False,
                         manifest=release[1], **kwargs)


def same_files(a: Path, b: Path) -> bool:
    files = sorted(p.relative_to(a) for p in a.rglob("*") if p.is_file())
    return files == sorted(p.relative_to(b) for p in b.rglob("*") if p.is_file()) and all(
        (a / f).read_bytes() == (b / f).read_bytes() for f in files)


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


# ----------------------------------------------------------------------------------------------
# Publishing
# ----------------------------------------------------------------------------------------------


def test_the_manifest_describes_every_folder_and_file(release, corpora):
    manifest = load_manifest(release[1])
    assert manifest["version"] == "7" and list(manifest["folders"]) == FOLDERS
    alpha = manifest["folders"]["alpha_news"]
    assert (alpha["source"], alpha["licence"]) == ("short news items", "CC0")
    assert manifest["folders"]["gamma_words"]["licence"] == "public domain"
    assert [(f["path"], f.get("documents")) for f in alpha["files"]] == [("a.jsonl", 2),
                                                                          ("b.jsonl", 2)]
    assert alpha["documents"] == len(list(iter_documents("alpha_news", corpora)))
    gamma = manifest["folders"]["gamma_words"]
    assert [f["path"] for f in gamma["files"]] == ["gb_us_pairs.tsv", "lists/british.txt"]
    assert gamma["documents"] is None
    assert manifest["readme"]["sha256"] == sha(corpora / "README.md")
    for entry in manifest["folders"].values():
        assert sha(release[0] / entry["archive"]) == entry["sha256"]
    assert (release[0] / "README.md").read_text() == README


def test_archives_are_deterministic(tmp_path, corpora):
    first = build_release(corpora, tmp_path / "one", "1", "file:///x/")
    (corpora / "alpha_news" / "a.jsonl").touch()  # a newer mtime changes nothing
    second = build_release(corpora, tmp_path / "two", "1", "file:///x/")
    assert first == second
    for name in FOLDERS:
        archive = f"{name}.tar.gz"
        assert (tmp_path / "one" / archive).read_bytes() == (
            tmp_path / "two" / archive).read_bytes()


def make_stdlib(root: Path) -> Path:
    """A standard library's root: modules, a test package, and what the code folder leaves out."""
    (root / "json").mkdir(parents=True)
    (root / "os.py").write_text("import sys\n")
    (root / "json" / "__init__.py").write_text("def loads(s): ...\n")
    (root / "test").mkdir()
    (root / "test" / "test_os.py").write_text("def test_os(): ...\n")
    for skipped in ("site-packages", "__pycache__"):
        (root / skipped).mkdir()
        (root / skipped / "x.py").write_text("pass\n")
    (root / "README.txt").write_text("not code\n")
    return root


def test_the_code_folder_is_built_from_a_standard_library_and_fetched_and_verified(
        tmp_path, corpora):
    """--code adds the standard library's *.py files (tests in, site-packages, __pycache__ and
    other files out) as python_stdlib; fetched, it is whole; verify_code_root names a changed,
    missing or extra module."""
    stdlib = make_stdlib(tmp_path / "lib")
    manifest_path = tmp_path / "corpora.json"
    manifest = publish_corpora(corpora, tmp_path / "release", "7", "file:///x/", manifest_path,
                               code=stdlib)
    entry = manifest["folders"][dataset.CODE_FOLDER]
    assert [f["path"] for f in entry["files"]] == ["json/__init__.py", "os.py", "test/test_os.py"]
    assert entry["licence"] == "PSF-2.0" and dataset.CODE_PYTHON in entry["source"]
    assert list(manifest["folders"]) == sorted(manifest["folders"])
    target = fetch_corpora([dataset.CODE_FOLDER], tmp_path / "fetched", progress=False,
                           base_url=(tmp_path / "release").as_uri(), manifest=manifest_path)
    assert sorted(p.relative_to(target / dataset.CODE_FOLDER).as_posix()
                  for p in (target / dataset.CODE_FOLDER).rglob("*.py")) == [
        "json/__init__.py", "os.py", "test/test_os.py"]
    assert dataset.verify_code_root(stdlib, manifest_path) == []
    assert dataset.verify_code_root(target / dataset.CODE_FOLDER, manifest_path) == []
    (stdlib / "os.py").write_text("import sys  # changed\n")
    (stdlib / "json" / "__init__.py").unlink()
    (stdlib / "new.py").write_text("pass\n")
    assert dataset.verify_code_root(stdlib, manifest_path) == [
        "python_stdlib/json/__init__.py: missing",
        "python_stdlib/os.py: 22 bytes, the manifest says 11",
        "python_stdlib/new.py: not in the manifest"]
    with pytest.raises(InputError, match="--code"):
        build_release(corpora, tmp_path / "again", "7", "file:///x/", code=tmp_path / "empty")


def test_the_code_corpus_is_read_from_the_fetched_folder_unless_the_variable_names_one(
        tmp_path, monkeypatch):
    from context_neurons.training.corpus import stdlib_dir

    corpora = tmp_path / "corpora"
    corpora.mkdir()
    monkeypatch.setenv(config.CORPORA.name, str(corpora))
    monkeypatch.delenv(config.CODE.name, raising=False)
    assert stdlib_dir() == Path(sysconfig.get_paths()["stdlib"])  # not fetched: this Python's
    (corpora / dataset.CODE_FOLDER).mkdir()
    assert stdlib_dir() == corpora / dataset.CODE_FOLDER
    monkeypatch.setenv(config.CODE.name, str(tmp_path))
    assert stdlib_dir() == tmp_path


def test_the_check_passes_on_a_release_and_names_what_changed(release, corpora, capsys):
    spec = importlib.util.spec_from_file_location("build_corpora_release",
                                                  ROOT / "scripts" / "build_corpora_release.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    argv = ["--corpora", str(corpora), "--out", str(release[0]), "--manifest", str(release[1]),
            "--check"]
    assert script.main(argv) == 0
    (corpora / "beta_bible" / "chapters.jsonl").write_text(jsonl([{"id": "1", "text": "otro"}]))
    (release[0] / "gamma_words.tar.gz").write_bytes(b"not an archive")
    capsys.readouterr()
    assert script.main(argv) == 1
    out = capsys.readouterr().out
    assert "beta_bible/chapters.jsonl: the manifest says" in out
    assert "gamma_words.tar.gz: differs" in out
    assert json.loads(release[1].read_text())["version"] == "7"  # --check writes nothing


def release_script():
    spec = importlib.util.spec_from_file_location("build_corpora_release",
                                                  ROOT / "scripts" / "build_corpora_release.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    return script


def test_upload_creates_the_release_or_replaces_its_files(release, monkeypatch):
    script = release_script()
    out = release[0]
    create, = script.upload_commands(out, "7", "https://github.com/me/book")
    assert create[:4] == ["gh", "release", "create", "corpora-v7"]
    assert create[create.index("--repo") + 1] == "me/book"
    archives = sorted(str(path) for path in out.glob("*.tar.gz"))
    assert archives and set(archives) <= set(create)
    assert str(out / "README.md") in create
    update, = script.upload_commands(out, "7", "https://github.com/me/book", exists=True)
    assert update[:4] == ["gh", "release", "upload", "corpora-v7"] and "--clobber" in update
    # the tag is the one fetch-corpora downloads from
    assert script.release_url("7").endswith(f"/releases/download/{script.release_tag('7')}/")
    monkeypatch.setattr(script.shutil, "which", lambda name: None)
    with pytest.raises(script.ContextNeuronsError, match="gh auth login"):
        script.upload(out, "7")


def test_upload_refuses_an_empty_folder_and_check(tmp_path, capsys):
    script = release_script()
    with pytest.raises(script.ContextNeuronsError, match="Nothing to upload"):
        script.upload_commands(tmp_path, "1")
    with pytest.raises(SystemExit):
        script.main(["--corpora", str(tmp_path), "--out", str(tmp_path), "--check", "--upload"])
    assert "run --check on its own" in capsys.readouterr().err


def test_a_folder_the_readme_does_not_describe_is_refused(tmp_path, corpora):
    (corpora / "delta_new").mkdir()
    (corpora / "delta_new" / "d.jsonl").write_text(jsonl([{"id": "d", "text": "x"}]))
    with pytest.raises(DataError, match="does not describe delta_new"):
        build_release(corpora, tmp_path / "out", "1", "file:///x/")


def test_the_archives_are_never_written_into_the_repository(corpora):
    with pytest.raises(InputError, match="inside the repository"):
        build_release(corpora, ROOT / "corpora-release", "1", "file:///x/")
    assert not (ROOT / "corpora-release").exists()


# ----------------------------------------------------------------------------------------------
# Fetching
# ----------------------------------------------------------------------------------------------


def test_a_complete_fetch_over_http(tmp_path, release, server, corpora, capsys):
    base_url, httpd = server
    target = tmp_path / "fetched"
    stale = target / dataset.STAGING / "alpha_news.k2j4"  # an extraction a killed run left
    stale.mkdir(parents=True)
    (stale / "a.jsonl").write_text("half")
    assert fetch_corpora(None, target, base_url, progress=True, manifest=release[1]) == target
    assert same_files(target, corpora)
    assert verify_corpora(target, manifest=release[1]) == []
    assert sorted(path for path, _ in httpd.log) == sorted(
        [f"{name}.tar.gz" for name in FOLDERS] + ["README.md"])
    assert not (target / dataset.STAGING).exists()
    printed = capsys.readouterr()
    assert f"export {config.CORPORA.name}={target.resolve()}" in printed.out
    assert "fetching 3 of 3 folder(s)" in printed.err and "beta_bible.tar.gz: 100%" in printed.err


def test_a_complete_fetch_from_a_file_url(tmp_path, release, corpora):
    target = fetch(tmp_path / "fetched", release, release[0].as_uri() + "/")
    assert same_files(target, corpora)


def test_a_second_run_downloads_nothing_and_says_so(tmp_path, release, server, capsys):
    base_url, httpd = server
    target = tmp_path / "fetched"
    fetch(target, release, base_url)
    httpd.log.clear()
    capsys.readouterr()
    fetch_corpora(None, target, base_url=base_url, progress=True, manifest=release[1])
    assert httpd.log == []
    assert "nothing to download: 3 folder(s)" in capsys.readouterr().err


def test_only_fetches_the_named_folders(tmp_path, release, server):
    base_url, httpd = server
    target = fetch(tmp_path / "fetched", release, base_url, only=["beta_bible"])
    assert sorted(p.name for p in target.iterdir()) == ["README.md", "beta_bible"]
    assert sorted(path for path, _ in httpd.log) == ["README.md", "beta_bible.tar.gz"]
    assert verify_corpora(target, only=["beta_bible"], manifest=release[1]) == []
    assert "alpha_news/: missing" in verify_corpora(target, manifest=release[1])


def test_an_unknown_folder_is_an_input_error_listing_the_known_ones(tmp_path, release):
    with pytest.raises(InputError) as err:
        fetch(tmp_path / "fetched", release, "file:///nowhere/", only=["beta_bible", "bibel"])
    assert "'bibel'" in str(err.value) and "alpha_news, beta_bible, gamma_words" in str(err.value)
    assert not (tmp_path / "fetched").exists()


def test_a_corrupted_archive_is_a_one_line_data_error_naming_it(tmp_path, release, server):
    base_url, _ = server
    archive = release[0] / "beta_bible.tar.gz"
    data = bytearray(archive.read_bytes())
    data[len(data) // 2] ^= 0xFF
    archive.write_bytes(bytes(data))
    target = tmp_path / "fetched"
    with pytest.raises(DataError) as err:
        fetch(target, release, base_url)
    message = str(err.value)
    assert "\n" not in message and "beta_bible.tar.gz" in message and "SHA-256" in message
    assert not (target / "beta_bible").exists()
    staging = target / dataset.STAGING
    assert not staging.exists() or list(staging.iterdir()) == []  # nothing half-written kept
    assert (target / "alpha_news").is_dir()  # fetched before it, whole


def test_a_file_that_differs_from_the_manifest_inside_a_good_archive_is_refused(
        tmp_path, release, server):
    manifest = json.loads(release[1].read_text())
    manifest["folders"]["alpha_news"]["files"][1]["sha256"] = "0" * 64
    with pytest.raises(DataError, match=r"^alpha_news/b.jsonl in alpha_news.tar.gz: its SHA-256"):
        fetch_corpora(["alpha_news"], tmp_path / "fetched", base_url=server[0], progress=False,
                      manifest=manifest)
    assert not (tmp_path / "fetched" / "alpha_news").exists()


def _part(target: Path, name: str) -> Path:
    (target / dataset.STAGING).mkdir(parents=True, exist_ok=True)
    return target / dataset.STAGING / f"{name}.tar.gz{dataset.PART_SUFFIX}"


def test_an_interrupted_download_resumes(tmp_path, release, server, corpora):
    base_url, httpd = server
    archive = release[0] / "beta_bible.tar.gz"
    target = tmp_path / "fetched"
    half = archive.stat().st_size // 2
    _part(target, "beta_bible").write_bytes(archive.read_bytes()[:half])
    fetch(target, release, base_url, only=["beta_bible"])
    assert ("beta_bible.tar.gz", f"bytes={half}-") in httpd.log
    assert [p for p, _ in httpd.log].count("beta_bible.tar.gz") == 1
    assert same_files(target / "beta_bible", corpora / "beta_bible")
    assert not (target / dataset.STAGING).exists()


@pytest.mark.parametrize("ranges", [True, False])
def test_a_leftover_part_with_wrong_bytes_is_discarded(tmp_path, release, server, corpora, ranges):
    base_url, httpd = server
    httpd.ranges = ranges  # a server that resumes, or one that sends the whole file again
    archive = release[0] / "beta_bible.tar.gz"
    target = tmp_path / "fetched"
    _part(target, "beta_bible").write_bytes(b"\x00" * (archive.stat().st_size // 3))
    _part(target, "alpha_news").write_bytes(b"x" * 10 * (release[0] / "alpha_news.tar.gz")
                                            .stat().st_size)  # longer than the archive
    fetch(target, release, base_url)
    assert verify_corpora(target, manifest=release[1]) == []
    assert same_files(target, corpora)
    beta = [asked for path, asked in httpd.log if path == "beta_bible.tar.gz"]
    assert beta == (["bytes=" f"{archive.stat().st_size // 3}-", None] if ranges else [
        f"bytes={archive.stat().st_size // 3}-"])


def test_a_leftover_part_that_is_whole_and_right_is_used(tmp_path, release, server, corpora):
    base_url, httpd = server
    target = tmp_path / "fetched"
    _part(target, "gamma_words").write_bytes((release[0] / "gamma_words.tar.gz").read_bytes())
    fetch(target, release, base_url)
    assert "gamma_words.tar.gz" not in [path for path, _ in httpd.log]
    assert same_files(target, corpora)


def test_a_missing_release_is_a_one_line_data_error(tmp_path, release, server):
    with pytest.raises(DataError, match=r"HTTP 404") as err:
        fetch(tmp_path / "fetched", release, server[0] + "corpora-v8/")
    assert "\n" not in str(err.value) and "beta_bible" not in str(err.value)
    with pytest.raises(DataError, match="could not be downloaded"):
        fetch(tmp_path / "fetched", release, (tmp_path / "nowhere").as_uri() + "/")
    with pytest.raises(InputError, match="must start with"):
        fetch(tmp_path / "fetched", release, "ftp://example.invalid/")


def test_a_failed_download_leaves_no_empty_staging_folder(tmp_path, release, server):
    """Issue 54: a download that fails left an empty ``.fetch/`` behind; a ``.part`` to resume
    still keeps it (test_an_interrupted_download_resumes)."""
    target = tmp_path / "fetched"
    with pytest.raises(DataError, match=r"HTTP 404"):
        fetch(target, release, server[0] + "corpora-v8/")
    assert not (target / dataset.STAGING).exists() and list(target.iterdir()) == []
    with pytest.raises(DataError, match="could not be downloaded"):
        fetch(target, release, (tmp_path / "nowhere").as_uri() + "/")
    assert not (target / dataset.STAGING).exists()


def test_the_default_directory_is_said_the_same_in_the_help_and_the_data_page():
    """Issue 54: ``--dir``'s help said "... else the cache", the README stopped at
    ``../shared/corpora``; both now say :data:`DEFAULT_DIRECTORY_WORDS` (the data page holds
    what the README held, issue 53)."""
    import argparse

    from context_neurons.__main__ import build_parser

    action = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    words = " ".join(dataset.DEFAULT_DIRECTORY_WORDS.split())
    assert words in " ".join(action.choices["fetch-corpora"].format_help().split())
    assert words in " ".join((ROOT / "book" / "reference" / "data.md").read_text().split())
    assert config.CORPORA.name in words and config.CACHE.name in words


# ----------------------------------------------------------------------------------------------
# Verifying
# ----------------------------------------------------------------------------------------------


def test_verify_says_a_missing_directory_is_missing(tmp_path, release):
    """Issue 54: a directory that does not exist is one line, not every file as missing."""
    absent = tmp_path / "absent"
    assert verify_corpora(absent, manifest=release[1]) == [f"{absent}: no such directory"]
    assert verify_corpora(absent, only=["alpha_news"], manifest=release[1]) == [
        f"{absent}: no such directory"]
    with pytest.raises(InputError):  # an unknown folder is still the caller's mistake
        verify_corpora(absent, only=["no_such_folder"], manifest=release[1])


def test_verify_reports_a_modified_missing_or_extra_file_and_a_fetch_repairs_it(
        tmp_path, release, server, corpora):
    base_url, httpd = server
    target = fetch(tmp_path / "fetched", release, base_url)
    (target / "alpha_news" / "b.jsonl").write_text(jsonl([{"id": "b1", "text": "Stocks fell."},
                                                         {"id": "b2", "text": "A ship docked."}]))
    (target / "gamma_words" / "lists" / "british.txt").unlink()
    (target / "beta_bible" / "more.jsonl").write_text(jsonl([{"id": "x", "text": "extra"}]))
    problems = verify_corpora(target, manifest=release[1])
    assert problems == [
        "alpha_news/b.jsonl: its SHA-256 differs from the manifest's",
        "beta_bible/more.jsonl: not in the manifest",
        "gamma_words/lists/british.txt: missing",
    ]
    httpd.log.clear()
    fetch(target, release, base_url)
    assert sorted(path for path, _ in httpd.log) == [f"{name}.tar.gz" for name in FOLDERS]
    assert same_files(target, corpora)


def test_verify_reports_a_changed_size_and_readme(tmp_path, release, corpora):
    target = fetch(tmp_path / "fetched", release, release[0].as_uri() + "/")
    with (target / "beta_bible" / "chapters.jsonl").open("a") as handle:
        handle.write("\n")
    (target / "README.md").write_text("changed")
    problems = verify_corpora(target, manifest=release[1])
    assert problems[0] == "README.md: 7 bytes, the manifest says " + str(len(README.encode()))
    assert problems[1].startswith("beta_bible/chapters.jsonl: ") and "bytes" in problems[1]
    assert verify_corpora(target, only=["alpha_news"], manifest=release[1]) == []


def test_a_damaged_manifest_is_a_data_error(tmp_path, release):
    manifest = copy.deepcopy(load_manifest(release[1]))
    del manifest["folders"]
    with pytest.raises(DataError, match="lacks one of"):
        verify_corpora(tmp_path, manifest=manifest)
    (tmp_path / "bad.json").write_text("{")
    with pytest.raises(DataError, match="cannot be read"):
        load_manifest(tmp_path / "bad.json")


# ----------------------------------------------------------------------------------------------
# The committed manifest
# ----------------------------------------------------------------------------------------------


def _shared_corpora() -> Path | None:
    try:
        return config.corpora_root()
    except DataError:
        return None


@pytest.mark.skipif(_shared_corpora() is None, reason="no corpora directory on this machine")
def test_the_committed_manifest_matches_the_corpora_directory():
    """Every folder of the corpora directory, and the code folder built from the standard
    library (not a folder of the corpora directory here)."""
    root = _shared_corpora()
    manifest = load_manifest()
    folders = [name for name in manifest["folders"] if name != dataset.CODE_FOLDER]
    assert dataset.release_folders(root) == folders
    assert dataset.CODE_FOLDER in manifest["folders"]
    assert verify_corpora(root, only=folders) == []


@pytest.mark.skipif(platform.python_version() != dataset.CODE_PYTHON,
                    reason=f"the code folder is CPython {dataset.CODE_PYTHON}'s standard library")
def test_the_committed_code_folder_is_this_pythons_standard_library():
    from context_neurons.training.corpus import stdlib_dir

    assert dataset.verify_code_root(stdlib_dir()) == []


def test_the_committed_manifest_names_this_repository_and_its_release():
    manifest = load_manifest()
    assert manifest["base_url"] == (
        f"{REPOSITORY}/releases/download/corpora-v{manifest['version']}/")
    for entry in manifest["folders"].values():
        assert entry["source"] and entry["licence"] and entry["files"]


def test_the_manifest_ships_with_the_package():
    patterns = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"][
        "package-data"]["context_neurons"]
    package = ROOT / "src" / "context_neurons"
    shipped = {path for pattern in patterns for path in package.glob(pattern)}
    assert dataset.MANIFEST_PATH in shipped, (
        f"add 'assets/*.json' to [tool.setuptools.package-data] in pyproject.toml: {patterns}")


def test_the_data_pages_table_is_the_manifests():
    assert markdown_table(load_manifest()) in (ROOT / "book/reference/data.md").read_text(), (
        "book/reference/data.md must hold context_neurons.text.dataset.markdown_table("
        "load_manifest()): python -m context_neurons refresh-docs")


def test_fetch_corpora_verdicts_fetches_the_folders_chapter_8_reads(monkeypatch, tmp_path):
    """``fetch-corpora --verdicts``: the protocols' folders only (as Colab's chapter 8 fetches);
    with --only it is a usage error."""
    from context_neurons.__main__ import main
    from context_neurons.book.colab import protocol_folders

    calls = []
    monkeypatch.setattr(dataset, "fetch_corpora",
                        lambda only, directory, **kwargs: calls.append((only, directory)))
    assert main(["fetch-corpora", "--verdicts", "--dir", str(tmp_path)]) == 0
    assert calls == [(protocol_folders(), tmp_path)]
    with pytest.raises(SystemExit):
        main(["fetch-corpora", "--verdicts", "--only", "bible_kjv"])
