"""Protocol v3's data (``assets/protocol/discovery-verdict-v3.json``, section ``data``).

* **CONFIRM** windows: the held-out documents that no earlier evaluation read, listed by key in
  the manifest ``discovery-verdict-v3-confirm.json`` (read, never replayed). Per corpus, its
  CONFIRM documents in key order are grouped into units of at least ``n_ctx`` tokens (documents
  that share a key stay in one unit; a last, shorter group is dropped); a domain's units are
  taken in the order of ``sha256('confirm-v3:' + unit key)``, each giving the first
  ``max(1, 1024 // n_ctx)`` windows of ``pack_windows``, until ``51200 // n_ctx`` windows.
  A domain whose own units are fewer than 20 adds its registered fallback corpus (code: the
  standard library's test files, counted first). A domain pools with at least 20 units read.
* **CAL** data as v1/v2: the held-out documents with ``sha256('cal-eval:' + key) < 0.5``
  (short-item corpora grouped as there), kept here as units for the label-free arm too.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from jaxtyping import Int
from torch import Tensor

from context_neurons import config as settings
from context_neurons.checks import DataError
from context_neurons.text.dataset import NOT_CODE
from context_neurons.training.config import DOMAINS, EOT
from context_neurons.training.corpus import Doc, heldout_documents, stdlib_dir
from context_neurons.training.stream import tokenize_documents
from context_neurons.training.summary import TrainingRun
from context_neurons.verdict.data import DomainData, cal_data, is_cal
from context_neurons.verdict.documents import NO_DATA, NOT_POOLED, POOLED, Unit
from context_neurons.verdict.documents import corpora_by_domain, corpus_units, domain_status
from context_neurons.verdict.documents import group_units, hash_value, ordered, take_windows
from context_neurons.verdict.protocol import ConfirmRules, ProtocolV3, read_protocol_file

#: The CONFIRM manifest, registered with the protocol before any v3 number (git commit 871d5be).
CONFIRM_MANIFEST_FILE = "discovery-verdict-v3-confirm.json"
#: The CONFIRM order's hash prefix (independent of the training and CAL/EVAL splits' hashes).
CONFIRM_PREFIX = "confirm-v3:"
#: The fallback corpus of the code domain (the protocol's ``data.confirm.fallback.code``).
STDLIB_TESTS = "python_stdlib_tests"


def load_confirm_manifest() -> dict:
    """The CONFIRM document keys of every domain (``discovery-verdict-v3-confirm.json``)."""
    return read_protocol_file(CONFIRM_MANIFEST_FILE)


def confirm_value(key: str) -> float:
    """``sha256('confirm-v3:' + key)``, first 8 bytes big-endian, over ``2**64``."""
    return hash_value(CONFIRM_PREFIX, key)


def confirm_order(key: str) -> tuple[float, str]:
    """The CONFIRM order: by the hash, ties by key."""
    return confirm_value(key), key


# ----------------------------------------------------------------------------------------------
# The fallback corpus
# ----------------------------------------------------------------------------------------------


def stdlib_test_documents(root: Path | None = None) -> list[Doc]:
    """The code corpus root's ``*.py`` files that training leaves out as tests (a path part
    ``test`` or ``tests`` or starting with ``test_``; site-packages, dist-packages and
    ``__pycache__`` still left out), non-empty, keyed ``python_stdlib_tests:<path>``."""
    root = root or stdlib_dir()
    out = []
    for path in sorted(root.rglob("*.py")):
        parts = path.relative_to(root).parts
        if any(p in NOT_CODE for p in parts):
            continue
        if not any(p in ("test", "tests") or p.startswith("test_") for p in parts):
            continue
        text = path.read_text(encoding="utf-8", errors="replace")
        if text.strip():
            out.append(Doc(STDLIB_TESTS, path.relative_to(root).as_posix(), text))
    return out


def fallback_units(documents: list[Doc], tokenizer, eot_id: int, n_ctx: int) -> Iterator[Unit]:
    """The fallback corpus's units in CONFIRM order: a file of at least ``n_ctx`` tokens (with
    its separator) is one unit, a shorter one is left out; tokenized only when reached."""
    for doc in sorted(documents, key=lambda d: confirm_order(d.key)):
        tokens = tokenize_documents([doc], tokenizer, eot_id)[0]
        if len(tokens) >= n_ctx:
            yield Unit(doc.key, tokens)


def checked_fallback(rules: ConfirmRules, domain: str) -> list[Doc] | None:
    """The registered fallback corpus of ``domain`` (None when it has none), after the count
    check: another number of files stops the evaluation with a :class:`DataError`."""
    spec = rules.fallback.get(domain)
    if spec is None:
        return None
    if spec.corpus != STDLIB_TESTS:
        raise DataError(f"Unknown fallback corpus {spec.corpus!r} of domain {domain!r}.")
    documents = stdlib_test_documents()
    if len(documents) != spec.documents:
        raise DataError(
            f"The fallback corpus {STDLIB_TESTS} has {len(documents)} files under "
            f"{stdlib_dir()}, not the registered {spec.documents} (Python 3.11.7's standard "
            f"library): set {settings.CODE.name} to that library; the fallback would not be the "
            "registered one.")
    return documents


# ----------------------------------------------------------------------------------------------
# The data of every domain
# ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ConfirmDomain:
    """One domain's CONFIRM windows.

    Attributes:
        name: the domain.
        own_units: units made of the domain's own CONFIRM documents.
        fallback: the fallback corpus added, or None.
        units_read: units that gave a window (fallback included): pooled at 20 or more.
        windows: the windows, ``n_ctx`` tokens each, BOS first.
        window_units: each window's unit key (its resampling cluster).
        status: ``pooled``, ``not pooled`` or ``no CONFIRM data``.
    """

    name: str
    own_units: int
    fallback: str | None
    units_read: int
    windows: tuple[Tensor, ...]
    window_units: tuple[str, ...]
    status: str


@dataclass(frozen=True)
class V3Data:
    """Protocol v3's data for one model.

    Attributes:
        confirm: every domain's CONFIRM windows (all domains of the manifest).
        cal: the CAL tokens and windows of every domain with CONFIRM data (v1/v2's CAL).
        cal_units: each such domain's CAL units (the label-free pools).
    """

    confirm: dict[str, ConfirmDomain]
    cal: dict[str, DomainData]
    cal_units: dict[str, list[Unit]]

    @property
    def pooled(self) -> list[str]:
        return [d for d, c in self.confirm.items() if c.status == POOLED]

    def by_status(self, status: str) -> list[str]:
        return [d for d, c in self.confirm.items() if c.status == status]

    @property
    def pooled_cal_windows(self) -> list[Int[Tensor, " _pos"]]:
        """The CAL windows of the pooled domains, in their order (the context set's and the
        mean ablation's windows)."""
        return [w for d in self.pooled for w in self.cal[d].cal_windows]


def _heldout_documents(corpora: list[str], run: TrainingRun,
                       corpora_dir: Path) -> dict[str, list[Doc]]:
    fraction = run.config.heldout_fraction
    return {corpus: list(heldout_documents(corpus, corpora_dir, fraction)) for corpus in corpora}


def _own_units(keys: list[str], held: dict[str, list[Doc]], tokenizer, eot_id: int,
               n_ctx: int) -> list[Unit]:
    """Units of one domain's CONFIRM documents, per corpus in key order."""
    wanted = set(keys)
    units: list[Unit] = []
    for corpus in sorted({k.split(":", 1)[0] for k in keys}):
        if corpus not in held:
            raise DataError(f"CONFIRM corpus {corpus!r} is not a held-out corpus of the model.")
        docs = sorted((d for d in held[corpus] if d.key in wanted), key=lambda d: d.key)
        encoded = tokenize_documents(docs, tokenizer, eot_id)
        units += group_units([(d.key, e) for d, e in zip(docs, encoded)], n_ctx)
        wanted -= {d.key for d in docs}
    if wanted:
        raise DataError(f"{len(wanted)} CONFIRM documents are not held-out documents of the "
                        f"model's split, e.g. {sorted(wanted)[:3]}.")
    return units


def confirm_domain(name: str, keys: list[str], held: dict[str, list[Doc]], tokenizer,
                   n_ctx: int, rules: ConfirmRules) -> ConfirmDomain:
    """One domain's CONFIRM windows (module docstring)."""
    eot_id = tokenizer.convert_tokens_to_ids(EOT)
    own = ordered(_own_units(keys, held, tokenizer, eot_id, n_ctx), CONFIRM_PREFIX)
    min_units = rules.min_units
    fallback_docs = checked_fallback(rules, name) if len(own) < min_units else None
    units: Iterable[Unit] = own
    if fallback_docs is not None:
        extra = fallback_units(fallback_docs, tokenizer, eot_id, n_ctx)
        units = heapq.merge(own, extra, key=lambda u: confirm_order(u.key))
    cap = rules.tokens_per_domain // n_ctx
    windows, window_units, read = take_windows(units, n_ctx, eot_id,
                                              rules.windows_per_unit(n_ctx), cap)
    return ConfirmDomain(name, len(own), STDLIB_TESTS if fallback_docs is not None else None,
                         read, tuple(windows), tuple(window_units),
                         domain_status(read, min_units))


def cal_domain(corpora: list[str], held: dict[str, list[Doc]], tokenizer, n_ctx: int,
               cal_windows: int) -> tuple[DomainData, list[Unit]]:
    """A domain's CAL tokens and windows as v1/v2's ``protocol_data`` makes them
    (:func:`~.data.cal_data`), and its CAL units."""
    eot_id = tokenizer.convert_tokens_to_ids(EOT)
    units = [u for corpus in sorted(corpora)
             for u in corpus_units(corpus, held[corpus], tokenizer, eot_id, n_ctx)
             if is_cal(u.key)]
    if not units:
        raise DataError(f"No CAL document in corpora {corpora}.")
    return cal_data(units, n_ctx, eot_id, cal_windows), units


def v3_data(tokenizer, run: TrainingRun, protocol: ProtocolV3, manifest: dict | None = None,
            corpora_dir: str | Path | None = None,
            domains: dict[str, tuple[str, ...]] = DOMAINS) -> V3Data:
    """CONFIRM windows of every domain of the manifest and CAL data of those with CONFIRM data."""
    manifest = manifest or load_confirm_manifest()
    corpora_dir = Path(corpora_dir) if corpora_dir else settings.corpora_root()
    if corpora_dir is None or not corpora_dir.is_dir():
        raise DataError("Protocol v3 reads the trained model's held-out documents from the "
                        f"offline corpora, not found here (set {settings.CORPORA.name}).")
    n_ctx = run.config.n_ctx
    by_domain = corpora_by_domain(run.trained_on, domains)
    held = _heldout_documents(sorted(c for cs in by_domain.values() for c in cs), run,
                              corpora_dir)
    confirm = {name: confirm_domain(name, keys, held, tokenizer, n_ctx, protocol.data)
               for name, keys in sorted(manifest["documents"].items())}
    cal, cal_units = {}, {}
    for name, item in confirm.items():
        if item.status != NO_DATA:
            cal[name], cal_units[name] = cal_domain(
                by_domain[name], held, tokenizer, n_ctx, protocol.data.cal_windows_per_domain)
    if len([c for c in confirm.values() if c.status == POOLED]) < 2:
        raise DataError("Fewer than two domains pool: protocol v3 has no truth for this model.")
    return V3Data(confirm, cal, cal_units)


__all__ = ["CONFIRM_PREFIX", "ConfirmDomain", "NOT_POOLED", "NO_DATA", "POOLED", "Unit",
           "V3Data", "cal_domain", "checked_fallback", "confirm_domain", "confirm_order",
           "confirm_value", "fallback_units", "group_units", "load_confirm_manifest",
           "stdlib_test_documents", "take_windows", "v3_data"]
