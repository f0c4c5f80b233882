"""Inventory of the trained model's held-out documents for protocol v3 (issue 32): which ones
earlier evaluations read, and which are left for a CONFIRM set. Reads and counts; runs no model.

Protocol v3 (``assets/protocol/discovery-verdict-v3.json``) is confirmatory: its truth is measured
on CONFIRM documents that no earlier evaluation of the trained model has read. This script
replays, without a forward pass, every reader of the held-out split that earlier runs used, and
records the documents each one handed to the model:

* ``v1v2_cal``: protocols v1 and v2, CAL half (every CAL document: ``p_D`` and ablation means);
* ``v1v2_eval``: protocols v1 and v2, the EVAL units that gave a window (4 per unit, 200 per
  domain, in hash order), the only EVAL units the model ran on;
* ``labelled_windows``: :func:`context_neurons.training.heldout.labelled_windows` (64 windows per
  domain: the old activation truth of chapter 8, the main job and the developmental view);
* ``training_eval``: the training run's held-out loss windows (64 and 8 per corpus) and
  :func:`context_neurons.training.analysis.heldout_windows` (the same 64 per corpus);
* ``chapters``: the text readers of chapters 1-7 and 9 and of the main job, which CI runs on the
  trained model (general and domain windows, the lookups' document openings, the respelled
  texts, the named calibration texts). A document a reader consumed counts as read even when the
  reader dropped it (conservative).

A document read by none of them is *unread*, a CONFIRM document of protocol v3. Per corpus the
unread documents are grouped in key order into units of at least n_ctx tokens; per domain the
units are taken in CONFIRM-hash order (4 windows each at n_ctx 256, 1 at 1024, 51,200 tokens
per domain), with the trained tokenizer at n_ctx 256 and GPT-2's (``../gpt2-tokenizer``) at
1024. The code domain, whose own unread documents give fewer than 20 units, adds the standard
library's test files, which training did not read (``FALLBACK_CORPORA``). The counts are recorded
in the protocol as data facts (they read no activation); ``--manifest`` writes the CONFIRM keys.

    python scripts/confirm_inventory.py [--out inventory.json] [--manifest confirm.json]
                                        [--no-chapters]

Tokenization only, no forward pass (``RAYON_NUM_THREADS=1`` keeps it on one core): about two
minutes on one core.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import sys
from collections import defaultdict
from pathlib import Path

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("RAYON_NUM_THREADS", "1")

import numpy as np  # noqa: E402

from context_neurons import config as settings  # noqa: E402
from context_neurons.models.loading import TRAINED_DIR  # noqa: E402
from context_neurons.training.config import DOMAINS, EOT, SHORT_DOCUMENT_CORPORA  # noqa: E402
from context_neurons.training.corpus import is_heldout, iter_documents  # noqa: E402
from context_neurons.training.heldout import PER_DOMAIN, domain_of_corpus  # noqa: E402
from context_neurons.training.summary import read_record  # noqa: E402
from context_neurons.training.stream import eval_windows, tokenize_documents  # noqa: E402
from context_neurons.training.tokenizer import load_tokenizer  # noqa: E402
from context_neurons.verdict.data import cal_fraction_value, is_cal  # noqa: E402
from context_neurons.verdict.protocol import load_protocol  # noqa: E402

#: The v3 CONFIRM order: a hash with its own prefix (independent of the training split's and of
#: the CAL/EVAL split's).
CONFIRM_PREFIX = "confirm-v3:"
#: A domain with fewer CONFIRM units than this is reported but not pooled (issue 32).
MIN_POOLED_UNITS = 20
#: Tokens per domain that the v3 evaluation reads (200 windows of 256 tokens).
TOKENS_PER_DOMAIN = 51_200


def confirm_value(key: str) -> float:
    digest = hashlib.sha256(f"{CONFIRM_PREFIX}{key}".encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


# ----------------------------------------------------------------------------------------------
# Windows that remember their documents
# ----------------------------------------------------------------------------------------------


def packed_spans(lengths: list[int], n_ctx: int) -> list[tuple[int, int]]:
    """The stream spans ``[start, stop)`` of :func:`~context_neurons.training.stream.pack_windows`
    over documents of ``lengths`` tokens each starting with ``<|endoftext|>`` (every document
    of ``tokenize_documents`` does), partial last window dropped."""
    starts = set(np.cumsum([0, *lengths[:-1]]).tolist()) if lengths else set()
    n, p, spans = sum(lengths), 0, []
    while p < n:
        take = n_ctx if p in starts else n_ctx - 1
        if p + take > n:
            break
        spans.append((p, p + take))
        p += take
    return spans


def documents_of_spans(lengths: list[int], spans: list[tuple[int, int]]) -> set[int]:
    """Indices of the documents that overlap any span."""
    bounds = np.cumsum([0, *lengths])
    out: set[int] = set()
    for start, stop in spans:
        first = int(np.searchsorted(bounds, start, side="right") - 1)
        last = int(np.searchsorted(bounds, stop - 1, side="right") - 1)
        out.update(range(first, last + 1))
    return out


def group_units(keys: list[str], lengths: list[int], n_ctx: int) -> list[list[int]]:
    """Documents (indices, in the order given) grouped into units of at least ``n_ctx`` tokens;
    the last, shorter group is dropped (it gives no full window), as in ``verdict.data._units``."""
    units, current, total = [], [], 0
    for i in range(len(keys)):
        current.append(i)
        total += lengths[i]
        if total >= n_ctx:
            units.append(current)
            current, total = [], 0
    return units


# ----------------------------------------------------------------------------------------------
# Readers
# ----------------------------------------------------------------------------------------------


def v1v2_reads(held: dict[str, list], encoded: dict[str, list[np.ndarray]], n_ctx: int,
               spec: dict, by_domain: dict[str, list[str]]) -> tuple[set[str], set[str], dict]:
    """Keys of the documents in v1/v2's CAL units and in the EVAL units that gave a window."""
    cal, eval_read, per_domain = set(), set(), {}
    for domain, corpora in sorted(by_domain.items()):
        eval_units, n_cal_units = [], 0
        for corpus in sorted(corpora):
            docs = sorted(zip(held[corpus], encoded[corpus]), key=lambda x: x[0].key)
            keys = [d.key for d, _ in docs]
            lengths = [len(e) for _, e in docs]
            if corpus in SHORT_DOCUMENT_CORPORA:
                units = group_units(keys, lengths, n_ctx)
            else:
                units = [[i] for i in range(len(keys))]
            for unit in units:
                key = keys[unit[0]]
                members = {keys[i] for i in unit}
                member_lengths = [lengths[i] for i in unit]
                if is_cal(key):
                    cal |= members
                    n_cal_units += 1
                else:
                    eval_units.append((cal_fraction_value(key), key, members, member_lengths))
        windows, units_read, docs_read = 0, 0, 0
        for _, _, members, member_lengths in sorted(eval_units, key=lambda u: (u[0], u[1])):
            n_windows = min(len(packed_spans(member_lengths, n_ctx)),
                            spec.eval_windows_per_document)
            take = min(n_windows, spec.eval_windows_per_domain - windows)
            if take > 0:
                windows += take
                units_read += 1
                docs_read += len(members)
                eval_read |= members
        per_domain[domain] = {"cal_units": n_cal_units, "eval_units": len(eval_units),
                              "eval_units_read": units_read, "eval_documents_read": docs_read,
                              "eval_windows": windows}
    return cal, eval_read, per_domain


def labelled_reads(held: dict[str, list], encoded: dict[str, list[np.ndarray]], n_ctx: int,
                   by_domain: dict[str, list[str]]) -> set[str]:
    """Keys of the documents in :func:`labelled_windows`' 64 windows per domain."""
    read = set()
    for domain, corpora in sorted(by_domain.items()):
        docs = [d for c in corpora for d in held[c]]
        lengths = [len(e) for c in corpora for e in encoded[c]]
        spans = packed_spans(lengths, n_ctx)
        chosen = _chosen(spans, PER_DOMAIN)
        read |= {docs[i].key for i in documents_of_spans(lengths, chosen)}
    return read


def _chosen(spans: list[tuple[int, int]], k: int, seed: int = 0) -> list[tuple[int, int]]:
    """The spans :func:`eval_windows` picks (the same seeded choice on window indices)."""
    index = np.arange(len(spans))[:, None]
    return [spans[int(i)] for i in eval_windows(index, k, seed)[:, 0]]


def training_reads(held: dict[str, list], encoded: dict[str, list[np.ndarray]], n_ctx: int,
                   record: dict) -> set[str]:
    """Keys of the documents in the training run's held-out loss windows (final and
    checkpoint choices) and in ``analysis.heldout_windows`` (the final choice again)."""
    cfg = record["config"]
    read = set()
    for corpus in held:
        lengths = [len(e) for e in encoded[corpus]]  # file order, as split_corpora keeps it
        spans = packed_spans(lengths, n_ctx)
        for k in (cfg["eval_windows"], cfg["eval_windows_checkpoint"]):
            read |= {held[corpus][i].key for i in documents_of_spans(lengths, _chosen(spans, k))}
    return read


@contextlib.contextmanager
def recording(sink: set[str]):
    """Patch the document iterators of the chapters' readers so that every document they
    consume is recorded as ``corpus:id``."""
    import context_neurons.evaluation.texts as ev
    import context_neurons.text.windows as tw

    def wrap(function):
        def wrapped(*args, **kwargs):
            for doc in function(*args, **kwargs):
                sink.add(f"{doc.corpus.split('~', 1)[0]}:{doc.id}")
                yield doc
        return wrapped

    saved = {(tw, "corpora_documents"): tw.corpora_documents,
             (tw, "domain_documents"): tw.domain_documents,
             (ev, "domain_documents"): ev.domain_documents}
    try:
        for (module, name), function in saved.items():
            setattr(module, name, wrap(function))
        tw._LOOKUP_WINDOWS = type(tw._LOOKUP_WINDOWS)(size=4)  # no cached windows
        yield sink
    finally:
        for (module, name), function in saved.items():
            setattr(module, name, function)


def chapter_reads(tokenizer, n_ctx: int) -> dict[str, set[str]]:
    """Documents the chapters' and the main job's text readers consume on the trained model
    (the calls of book/ch01-ch07, ch09 and ``reproduce``, with their arguments)."""
    from context_neurons import respelling as rs
    from context_neurons.evaluation import texts as ev
    from context_neurons.text import corpora as data
    from context_neurons.text import windows as tw

    half = n_ctx // 2
    out: dict[str, set[str]] = {}
    calls = {
        "ch01 evaluation_windows(1)": lambda: tw.evaluation_windows(tokenizer, 1, n_ctx=n_ctx),
        "ch03 corpus_windows(1000, min_tokens=n_ctx/2)": lambda: tw.corpus_windows(
            tokenizer, None, n=1000, min_tokens=half, n_ctx=n_ctx),
        "ch03 domain_windows(bible, 200)": lambda: tw.domain_windows(
            tokenizer, "bible", n=200, min_tokens=half, n_ctx=n_ctx),
        "ch04 evaluation_windows(4)": lambda: tw.evaluation_windows(tokenizer, 4, n_ctx=n_ctx),
        "ch05 domain_texts(4)": lambda: tw.domain_texts(tokenizer, n=4),
        "ch06/ch09 held_out_general_windows(200)": lambda: ev.held_out_general_windows(
            tokenizer, 200),
        "ch06 held_out_domain_sets(4)": lambda: ev.held_out_domain_sets(tokenizer, data.DOMAINS,
                                                                         n=4),
        "ch07/main job lookup_windows": lambda: tw.lookup_windows(tokenizer),
        "main job evaluation_windows(40)": lambda: tw.evaluation_windows(tokenizer, 40),
    }
    for name, call in calls.items():
        sink: set[str] = set()
        with recording(sink):
            call()
        out[name] = sink
    pairs, source = rs.spelling_pairs()
    aligned = rs.length_preserving_pairs(pairs, tokenizer)
    respelling = rs.respelled_texts(tokenizer, data.domain_documents("american"), aligned, n=8,
                                    pairs_source=source)
    out["ch05 respelled_texts(8)"] = {label.split("#")[0] for label in respelling.labels}
    out["calibration texts"] = {f"{c.corpus}:{c.doc_id}" for c in data.CALIBRATION_TEXTS.values()}
    return out


# ----------------------------------------------------------------------------------------------
# The inventory
# ----------------------------------------------------------------------------------------------


#: Corpora of a domain that training did not read, added to the domain's CONFIRM set where its
#: own unread held-out documents give fewer than MIN_POOLED_UNITS units (protocol v3).
FALLBACK_CORPORA = {"code": "python_stdlib_tests"}
FALLBACK_RULE = ("the *.py files of the code corpus's root (the Python 3.11.7 standard library, "
                 "$CONTEXT_NEURONS_CODE) that the training corpus leaves out as tests (a path "
                 "part 'test' or 'tests' or starting with 'test_'; site-packages, dist-packages "
                 "and __pycache__ still left out), key 'python_stdlib_tests:<path>', in "
                 "CONFIRM-hash order; a file of at least n_ctx tokens (with its separator) is "
                 "one unit, a shorter one is left out")


def stdlib_test_documents():
    """The fallback corpus's documents, as protocol v3's evaluation reads them
    (:func:`context_neurons.verdict.v3_data.stdlib_test_documents`)."""
    from context_neurons.verdict.v3_data import stdlib_test_documents as documents

    return documents()


def confirm_windows(units: list[tuple[str, list[int]]], n_ctx: int) -> dict:
    """What protocol v3 reads of a domain: ``units`` (unit key, member lengths with their
    separators) taken in CONFIRM-hash order, each giving its first ``1024 // n_ctx`` (at least 1)
    windows, until ``TOKENS_PER_DOMAIN // n_ctx`` windows."""
    per_unit, cap = max(1, 1024 // n_ctx), TOKENS_PER_DOMAIN // n_ctx
    windows, used = 0, 0
    for key, lengths in sorted(units, key=lambda u: (confirm_value(u[0]), u[0])):
        take = min(per_unit, len(packed_spans(lengths, n_ctx)), cap - windows)
        if take <= 0:
            break
        windows += take
        used += 1
    return {"units": len(units), "units_read": used, "windows": windows}


def fallback_units(encode, n_ctx: int, enough: int) -> tuple[list[tuple[str, list[int]]], int, int]:
    """Units of the fallback corpus: its files in CONFIRM-hash order, each file of at least
    ``n_ctx`` tokens (with its separator) one unit, shorter files left out; tokenized lazily
    until ``enough`` units. Returns the units, the files examined and the files in all."""
    docs = sorted(stdlib_test_documents(), key=lambda d: (confirm_value(d.key), d.key))
    units, examined = [], 0
    for doc in docs:
        if len(units) >= enough:
            break
        examined += 1
        n = encode(doc.text) + 1
        if n >= n_ctx:
            units.append((doc.key, [n]))
    return units, examined, len(docs)


def gpt2_tokenizer():
    """GPT-2's tokenizer from the shared files (``../gpt2-tokenizer``), or None."""
    root = settings.corpora_root()
    folder = root.parent / "gpt2-tokenizer" if root else None
    if not folder or not (folder / "vocab.json").is_file():
        return None
    from tokenizers import ByteLevelBPETokenizer

    return ByteLevelBPETokenizer(str(folder / "vocab.json"), str(folder / "merges.txt"))


def inventory(chapters: bool = True) -> dict:
    record = read_record(TRAINED_DIR)
    cfg = record["config"]
    n_ctx, fraction = cfg["n_ctx"], cfg["heldout_fraction"]
    corpora_dir = settings.corpora_root()
    tokenizer = load_tokenizer(TRAINED_DIR)
    eot_id = tokenizer.convert_tokens_to_ids(EOT)
    spec = load_protocol("v2").data
    assert spec == load_protocol("v1").data, "v1 and v2 read the same documents"
    trained_on = [c for c, w in cfg["corpus_weights"].items() if w > 0]
    owner = domain_of_corpus(DOMAINS)
    by_domain: dict[str, list[str]] = {}
    for corpus, domain in owner.items():
        if corpus in trained_on:
            by_domain.setdefault(domain, []).append(corpus)

    all_docs, held, encoded = {}, {}, {}
    for corpus in trained_on:
        docs = list(iter_documents(corpus, corpora_dir))
        all_docs[corpus] = len(docs)
        held[corpus] = [d for d in docs if is_heldout(d.key, fraction)]
        encoded[corpus] = tokenize_documents(held[corpus], tokenizer, eot_id)

    cal, eval_read, v1v2_domain = v1v2_reads(held, encoded, n_ctx, spec, by_domain)
    readers: dict[str, set[str]] = {
        "v1v2_cal": cal,
        "v1v2_eval": eval_read,
        "labelled_windows": labelled_reads(held, encoded, n_ctx, by_domain),
        "training_eval": training_reads(held, encoded, n_ctx, record),
    }
    chapter_detail = {}
    if chapters:
        chapter_detail = chapter_reads(tokenizer, n_ctx)
        readers["chapters"] = set().union(*chapter_detail.values())
    evaluation_readers = ("v1v2_cal", "v1v2_eval", "labelled_windows", "training_eval")
    neuron_read = set().union(*(readers[r] for r in evaluation_readers))
    any_read = set().union(*readers.values())

    gpt2 = gpt2_tokenizer()
    settings_of = {"256": (n_ctx, None)}
    if gpt2 is not None:
        settings_of["1024_gpt2"] = (1024, gpt2)
    per_corpus, units_of = {}, {name: defaultdict(list) for name in settings_of}
    confirm_keys: dict[str, list[str]] = {}
    for corpus in trained_on:
        keys = [d.key for d in held[corpus]]
        lengths = {d.key: len(e) for d, e in zip(held[corpus], encoded[corpus])}  # with EOT
        texts = {d.key: d.text for d in held[corpus]}
        unread = sorted(k for k in keys if k not in any_read)
        row = {
            "domain": owner.get(corpus, "two domains: " + ", ".join(
                d for d, cs in DOMAINS.items() if corpus in cs)),
            "documents": all_docs[corpus],
            "heldout": len(keys),
            "heldout_tokens": int(sum(lengths.values()) - len(lengths)),
            **{f"read_{r}": sum(k in readers[r] for k in keys) for r in readers},
            "read_by_a_neuron_evaluation": sum(k in neuron_read for k in keys),
            "unread_by_neuron_evaluations": sum(k not in neuron_read for k in keys),
            "unread": len(unread),
            "unread_tokens": int(sum(lengths[k] - 1 for k in unread)),
        }
        if corpus in owner:
            confirm_keys.setdefault(owner[corpus], []).extend(unread)
        # CONFIRM units: the unread documents in key order, consecutive ones grouped until a
        # unit holds at least n_ctx tokens (a document that long is a unit of its own)
        for name, (ctx, tok) in settings_of.items():
            if tok is None:
                member = [lengths[k] for k in unread]
            else:
                member = [len(e.ids) + 1 for e in tok.encode_batch([texts[k] for k in unread])]
                row["unread_tokens_gpt2"] = int(sum(member) - len(member))
            groups = group_units(unread, member, ctx)
            row[f"confirm_units_{name}"] = len(groups)
            if corpus in owner:
                units_of[name][owner[corpus]] += [
                    (unread[g[0]], [member[i] for i in g]) for g in groups]
        per_corpus[corpus] = row

    per_domain, fallbacks = {}, {}
    for domain, corpora in sorted(by_domain.items()):
        rows = [per_corpus[c] for c in corpora]
        total = {k: sum(r[k] for r in rows) for k in rows[0] if isinstance(rows[0][k], int)}
        total["corpora"] = corpora
        total.update({f"v1v2_{k}": v for k, v in v1v2_domain[domain].items()})
        for name, (ctx, tok) in settings_of.items():
            units = list(units_of[name][domain])
            fallback = FALLBACK_CORPORA.get(domain)
            if len(units) < MIN_POOLED_UNITS and fallback:
                encode = ((lambda text: len(tokenizer.backend_tokenizer.encode(
                    text, add_special_tokens=False).ids)) if tok is None
                    else (lambda text, tok=tok: len(tok.encode(text).ids)))
                extra, examined, n_files = fallback_units(encode, ctx, TOKENS_PER_DOMAIN // ctx)
                fallbacks.setdefault(fallback, {"domain": domain, "documents": n_files})[
                    f"files_examined_{name}"] = examined
                fallbacks[fallback][f"units_{name}"] = len(extra)
                units += extra
                total[f"confirm_units_{name}_with_fallback"] = len(units)
            read = confirm_windows(units, ctx)
            total[f"confirm_units_read_{name}"] = read["units_read"]
            total[f"confirm_windows_{name}"] = read["windows"]
            total[f"pooled_{name}"] = read["units_read"] >= MIN_POOLED_UNITS
        per_domain[domain] = total

    present = sorted(p.name for p in corpora_dir.iterdir() if p.is_dir())
    untrained = {}
    for name in present:
        if name in trained_on:
            continue
        jsonl = any((corpora_dir / name).glob("*.jsonl"))
        ids = [d.id for d in iter_documents(name, corpora_dir)] if jsonl else []
        untrained[name] = {"documents": len(ids), "ids": ids,
                           "files": [f.name for f in sorted((corpora_dir / name).iterdir())]}
    return {
        "what": "held-out documents of the trained model (seed 0): read by earlier evaluations, "
                "and left for protocol v3's CONFIRM set (counts only; no model was run)",
        "heldout_fraction": fraction,
        "n_ctx": n_ctx,
        "readers": {r: len(v) for r, v in readers.items()},
        "chapter_readers": {r: len(v) for r, v in chapter_detail.items()},
        "per_domain": per_domain,
        "per_corpus": per_corpus,
        "corpora_training_did_not_read": untrained,
        "fallback_corpora": fallbacks,
        "min_pooled_units": MIN_POOLED_UNITS,
        "tokens_per_domain": TOKENS_PER_DOMAIN,
        "confirm_documents": {d: sorted(k) for d, k in sorted(confirm_keys.items())},
    }


def print_table(result: dict) -> None:
    columns = [("heldout", "held-out"), ("read_v1v2_cal", "v1/v2 CAL"),
               ("read_v1v2_eval", "v1/v2 EVAL read"), ("read_labelled_windows", "labelled"),
               ("read_training_eval", "train eval"), ("read_chapters", "chapters"),
               ("unread_by_neuron_evaluations", "unread (neuron evals)"), ("unread", "unread"),
               ("unread_tokens", "unread tokens"), ("confirm_units_256", "units 256"),
               ("confirm_units_read_256", "units read 256"), ("confirm_windows_256", "windows 256"),
               ("pooled_256", "pooled 256"), ("confirm_units_1024_gpt2", "units 1024"),
               ("confirm_units_read_1024_gpt2", "units read 1024"),
               ("confirm_windows_1024_gpt2", "windows 1024"), ("pooled_1024_gpt2", "pooled 1024")]
    print("domain".ljust(10) + "".join(label.rjust(max(len(label), 8) + 2) for _, label in columns))
    for domain, row in result["per_domain"].items():
        print(domain.ljust(10) + "".join(str(row.get(key, "-")).rjust(max(len(label), 8) + 2)
                                         for key, label in columns))
    for name, row in result["fallback_corpora"].items():
        print(f"fallback {name} ({row['domain']}): {row}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", help="write the inventory as JSON here")
    parser.add_argument("--manifest", help="write the CONFIRM documents (unread held-out keys "
                        "per domain, and the fallback rule) as JSON here")
    parser.add_argument("--no-chapters", action="store_true",
                        help="leave out the chapters' readers (faster, less conservative)")
    args = parser.parse_args()
    result = inventory(chapters=not args.no_chapters)
    print_table(result)
    if args.out:
        Path(args.out).write_text(json.dumps(result, indent=1) + "\n")
        print(f"written: {args.out}", file=sys.stderr)
    if args.manifest:
        manifest = {
            "what": "protocol v3's CONFIRM documents: the trained model's held-out documents "
                    "(training.json, heldout_fraction 0.15) that no earlier evaluation read, per "
                    "domain (scripts/confirm_inventory.py; keys only, no text, no activation)",
            "readers_excluded": sorted(result["readers"]),
            "documents": result["confirm_documents"],
            "fallback": {name: {"domain": row["domain"], "documents": row["documents"],
                                "rule": FALLBACK_RULE} for name, row in
                         result["fallback_corpora"].items()},
        }
        Path(args.manifest).write_text(json.dumps(manifest, indent=1) + "\n")
        print(f"written: {args.manifest}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
