"""Protocol discovery-verdict-gpt2's later readers (``data.excluded.later_readers``): a reader of
the chapters or of the main job that consumes a CONFIRM document on GPT-2 is a defect of that
reader. The readers are replayed as they are called now (patched document iterators, as
scripts/gpt2_inventory.py did at registration), and no key they consume may be a CONFIRM key:
a document of a registered folder, outside the frozen excluded list, on the CONFIRM side of the
split. A second test keeps the replayed calls equal to the chapters' and the main job's."""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Callable

import pytest

from context_neurons import config as settings
from context_neurons.caching import IdentityCache
from context_neurons.verdict.gpt2_data import CONFIRM, side_of
from context_neurons.verdict.gpt2_protocol import GPT2DataRules, excluded_keys, load_protocol_gpt2

REPO = Path(__file__).resolve().parents[2]
N_CTX = 1024
#: Chapter 9's domains (book/ch09_open_questions.py's DOMAINS).
CH09_DOMAINS = ("general", "bible", "medical", "legal", "astronomy", "code")

#: Each file that calls a text reader on GPT-2, and the calls as written there (replayed by
#: :func:`reader_calls`; a call added or changed there fails
#: :func:`test_replayed_calls_are_the_current_ones`).
CALLS = {
    "book/ch01_decomposition.py": [
        "held_out_general_windows(model.tokenizer, 1, n_ctx=model.cfg.n_ctx)"],
    "book/ch03_stability.py": [
        "corpus_windows(\n    model.tokenizer, None, n=1000, min_tokens=half, n_ctx=n_ctx\n)",
        'domain_windows(model.tokenizer, "bible", n=200, min_tokens=half, n_ctx=n_ctx)'],
    "book/ch04_circuit.py": [
        "held_out_general_windows(model.tokenizer, 4, n_ctx=model.cfg.n_ctx)"],
    "book/ch05_gallery.py": ["domain_texts(model.tokenizer, n=4)"],
    "book/ch05_neurons.py": [
        "domain_texts(model.tokenizer, n=4)", 'domain_documents("american")',
        "respelled_texts(\n    model.tokenizer, american_documents, aligned, n=8, "
        "pairs_source=pairs_source\n)"],
    "book/ch06_evaluation.py": [
        "evaluate_general(circuit, model, carried, N_TEXTS,",
        "held_out_domain_texts(model.tokenizer, DOMAINS, n=4)"],
    "book/ch07_lookups.py": ["lookup_windows(model.tokenizer, per_domain=PER_DOMAIN)"],
    "book/ch09_open_questions.py": [
        "held_out_general_windows(model.tokenizer, N_TEXTS)",
        "held_out_domain_sets(model.tokenizer, DOMAINS, n=PER_DOMAIN)"],
    "src/context_neurons/evaluation/headline.py": [
        "held_out_general_windows(model.tokenizer, n_texts)"],
    "src/context_neurons/reproduce/pipeline.py": [
        "held_out_general_windows(hooked.tokenizer, n_texts,"],
    "src/context_neurons/lookups/report.py": ["lookup_windows(model.tokenizer)"],
}
#: The sizes the replay reads, as the files set them.
SIZES = {
    "book/ch06_evaluation.py": ["N_TEXTS = 24 if reduced_scale() else 200"],
    "book/ch07_lookups.py": ["PER_DOMAIN = 12 if config.reduced_scale() else 48"],
    "book/ch09_open_questions.py": [
        "N_TEXTS = 4 ", "PER_DOMAIN = 4 ",
        'DOMAINS = ("general", "bible", "medical", "legal", "astronomy", "code")'],
    "src/context_neurons/__main__.py": ["default: 1000 with --source openwebtext, else 100"],
}
#: A call of a text reader (the names :data:`CALLS` holds).
READER = re.compile(r"\b(evaluation_windows|corpus_windows|domain_windows|domain_texts|"
                    r"held_out_general_windows|held_out_domain_sets|held_out_domain_texts|"
                    r"held_out_domain_windows|lookup_windows|respelled_texts|domain_documents|"
                    r"corpora_documents|evaluate_general)\(")


def confirm_keys_among(keys, rules: GPT2DataRules, excluded: frozenset[str]) -> list[str]:
    """The CONFIRM keys among ``keys``: a registered folder's, not excluded, on CONFIRM's side."""
    return sorted(k for k in keys if k.split(":", 1)[0] in rules.folders
                  and k not in excluded and side_of(k, rules) == CONFIRM)


class EncodeOnce:
    """GPT-2's tokenizer with ``encode`` remembered per text: the readers share documents (the
    general stream most of all), each encoded once. Everything else is the tokenizer's own."""

    def __init__(self, tokenizer) -> None:
        self._tokenizer, self._encoded = tokenizer, {}

    def encode(self, text: str, add_special_tokens: bool = True) -> list[int]:
        key = (text, add_special_tokens)
        if key not in self._encoded:
            self._encoded[key] = self._tokenizer.encode(text,
                                                        add_special_tokens=add_special_tokens)
        return list(self._encoded[key])

    def __call__(self, *args, **kwargs):
        return self._tokenizer(*args, **kwargs)

    def __getattr__(self, name: str):
        return getattr(self._tokenizer, name)


def reader_calls(tokenizer) -> dict[str, Callable[[], object]]:
    """The calls of :data:`CALLS` with GPT-2's sizes (n_ctx 1024), by reader."""
    from context_neurons.evaluation import texts as ev
    from context_neurons.text import corpora as data
    from context_neurons.text import windows as tw

    t = tokenizer
    return {
        "ch01 held_out_general_windows(1)": lambda: ev.held_out_general_windows(
            t, 1, n_ctx=N_CTX),
        "ch03 corpus_windows(1000, min_tokens=512)": lambda: tw.corpus_windows(
            t, None, n=1000, min_tokens=N_CTX // 2, n_ctx=N_CTX),
        "ch03 domain_windows(bible, 200, min_tokens=512)": lambda: tw.domain_windows(
            t, "bible", n=200, min_tokens=N_CTX // 2, n_ctx=N_CTX),
        "ch04 held_out_general_windows(4)": lambda: ev.held_out_general_windows(
            t, 4, n_ctx=N_CTX),
        "ch05 domain_texts(4)": lambda: tw.domain_texts(t, n=4),
        "ch06 held_out_general_windows(200) (evaluate_general)": lambda: (
            ev.held_out_general_windows(t, 200)),
        "ch06 held_out_domain_texts(4)": lambda: ev.held_out_domain_texts(t, data.DOMAINS, n=4),
        "ch07/main job lookup_windows(48)": lambda: tw.lookup_windows(t, per_domain=48),
        "ch09 held_out_general_windows(4)": lambda: ev.held_out_general_windows(t, 4),
        "ch09 held_out_domain_sets(4)": lambda: ev.held_out_domain_sets(t, CH09_DOMAINS, n=4),
        "main job held_out_general_windows(100)": lambda: ev.held_out_general_windows(t, 100),
        "main job held_out_general_windows(1000) (--texts 1000)": lambda: (
            ev.held_out_general_windows(t, 1000)),
    }


def recorded(monkeypatch, call: Callable[[], object]) -> tuple[set[str], object]:
    """The document keys ``call`` consumes (every document its iterators hand over, dropped or
    not: conservative, as the registration counted them; scripts/confirm_inventory.py's
    ``recording``, which the registration used) and what it returned."""
    from context_neurons.text import windows as tw

    sys.path.insert(0, str(REPO / "scripts"))
    try:
        from confirm_inventory import recording
    finally:
        sys.path.remove(str(REPO / "scripts"))
    sink: set[str] = set()
    with recording(sink), monkeypatch.context() as patch:
        patch.setattr(tw, "_LOOKUP_WINDOWS", IdentityCache(size=4))  # nothing cached
        result = call()
    return sink, result


def respelled_keys(tokenizer) -> set[str]:
    """Chapter 5's respelled texts: the 8 American documents it shows (as registered: it scans
    every American document's opening characters to choose them, and the model reads those 8)."""
    from context_neurons import respelling as rs
    from context_neurons.text import corpora as data

    pairs, source = rs.spelling_pairs()
    aligned = rs.length_preserving_pairs(pairs, tokenizer)
    texts = rs.respelled_texts(tokenizer, data.domain_documents("american"), aligned, n=8,
                               pairs_source=source)
    return {label.split("#")[0] for label in texts.labels}


def test_a_confirm_key_is_found():
    rules, excluded = load_protocol_gpt2().data, excluded_keys()
    keys = [f"pokemon_showdown:not-a-move-{i}" for i in range(50)]
    confirm = [k for k in keys if side_of(k, rules) == CONFIRM and k not in excluded]
    unigram = [k for k in keys if side_of(k, rules) != CONFIRM]
    assert confirm and unigram
    read = [confirm[0], unigram[0], sorted(excluded)[0], "nltk_genesis:english-kjv.txt"]
    assert confirm_keys_among(read, rules, excluded) == [confirm[0]]


def code_of(file: str) -> str:
    """A file's lines that are not comments or definitions."""
    lines = (REPO / file).read_text(encoding="utf-8").splitlines()
    return "\n".join(line for line in lines if not line.lstrip().startswith(("#", "def ")))


def test_replayed_calls_are_the_current_ones():
    """Every text reader the chapters (1-7, 9) and the main job call on GPT-2 is one
    :data:`CALLS` lists (a reader added there fails here until the replay has it), with the
    sizes of :data:`SIZES`."""
    for file, calls in CALLS.items():
        assert len(READER.findall(code_of(file))) == len(calls), file
        assert all(call in code_of(file) for call in calls), file
    for file, sizes in SIZES.items():
        assert all(size in code_of(file) for size in sizes), file
    chapters = {f"book/{p.name}" for p in (REPO / "book").glob("ch0[1-79]_*.py")
                if READER.search(code_of(f"book/{p.name}"))}
    assert chapters <= set(CALLS)


def test_calibration_texts_and_code_modules_are_no_confirm_keys():
    from context_neurons.text import corpora as data

    keys = {f"{c.corpus}:{c.doc_id}" for c in data.CALIBRATION_TEXTS.values()}
    keys |= {f"{data.CODE_CORPUS}:{module}" for module in data.CODE_MODULES}
    assert confirm_keys_among(keys, load_protocol_gpt2().data, excluded_keys()) == []


@pytest.mark.slow
def test_readers_consume_no_confirm_key(monkeypatch):
    """Replays every reader of :func:`reader_calls` at its full current size, on GPT-2's
    tokenizer at n_ctx 1024, and chapter 5's respelled texts (:func:`respelled_keys`); nothing
    is left out or cut for speed. The tokenizer's ``encode`` is remembered per text
    (:class:`EncodeOnce`), so the general stream, which chapter 3 and the held-out general
    windows all read, is encoded once (about 15 s); the respelling scan takes about 11 s under
    the suite's runtime type checks (3 s without). Measured: 29 s to 42 s for this test on a
    shared 2-core machine (load about 3), the modules' first imports included.

    The main job's ``--texts`` is replayed at 100 (its default) and 1000: the general stream
    gives fewer than 1000 windows (asserted), so 1000 reads every document of it and any other
    count reads those or a prefix of them. Not replayed: the reduced-scale sizes (CI's simulated
    online run, OpenWebText; offline they read a prefix of the same documents), and the
    calibration texts and code modules, excluded by name whatever reads them
    (:func:`test_calibration_texts_and_code_modules_are_no_confirm_keys`)."""
    root = settings.corpora_root()
    if root is None or not root.is_dir():
        pytest.skip("the offline corpora are not here")
    from context_neurons.models.loading import load_tokenizer

    tokenizer = EncodeOnce(load_tokenizer())
    assert tokenizer.model_max_length == N_CTX
    rules, excluded = load_protocol_gpt2().data, excluded_keys()
    found = {}
    for name, call in reader_calls(tokenizer).items():
        keys, result = recorded(monkeypatch, call)
        assert keys, name
        found[name] = confirm_keys_among(keys, rules, excluded)
        if name.startswith("main job held_out_general_windows(1000)"):
            assert len(result[0]) < 1000  # the stream ran out: every document of it was read
    found["ch05 respelled_texts(8)"] = confirm_keys_among(respelled_keys(tokenizer), rules,
                                                          excluded)
    assert {name: keys for name, keys in found.items() if keys} == {}
