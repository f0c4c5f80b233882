"""Protocol discovery-verdict-gpt2's data source (``data`` of ``discovery-verdict-gpt2.json``).

Every non-empty document of the registered folders of the corpora dataset, minus the frozen
excluded keys (``discovery-verdict-gpt2-excluded.json``, read, never replayed), is split by
``sha256('gpt2-split:' + key) < 0.5`` into UNIGRAM and CONFIRM documents. Per folder and side,
documents in key order are grouped into units of at least ``n_ctx`` = 1024 tokens
(:func:`~.documents.group_units`); a domain's units are ordered by
``sha256('confirm-gpt2:' + key)`` (CONFIRM: the first window of each unit until 50,
:func:`~.documents.take_windows`) or
``sha256('unigram-gpt2:' + key)`` (UNIGRAM: ``p_D`` over the units taken until 262,144 tokens,
and the first 64 windows of the same units packed). A domain pools with at least 20 CONFIRM units.

The result is a :class:`GPT2Data`, v3's :class:`~.v3_data.V3Data` with UNIGRAM in the place of
CAL, so v3's context set, forward passes and truth read it unchanged. Without the corpora,
:func:`corpora_absent` gives the protocol's one line (:class:`CorporaAbsent`).

Tokenization dominates (the code folder alone is about 15M tokens, about 35 s on one core):
each folder's tokens are kept per tokenizer object for the process
(:class:`~context_neurons.caching.IdentityCache`), so a second evaluation reads them again free.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping

import numpy as np
import torch

from context_neurons import config as settings
from context_neurons.caching import IdentityCache
from context_neurons.checks import DataError
from context_neurons.text.dataset import CODE_FOLDER, code_files, load_manifest, verify_corpora
from context_neurons.text.dataset import NOT_CODE
from context_neurons.training.config import DOMAINS, EOT
from context_neurons.training.corpus import Doc, iter_documents, stdlib_dir
from context_neurons.training.heldout import domain_of_corpus
from context_neurons.training.stream import pack_windows, tokenize_documents
from context_neurons.verdict.data import DomainData
from context_neurons.verdict.gpt2_protocol import GPT2DataRules, excluded_keys
from context_neurons.verdict.documents import NO_DATA, Unit, domain_status, group_units
from context_neurons.verdict.documents import hash_value, ordered, take_windows
from context_neurons.verdict.v3_data import ConfirmDomain, V3Data

UNIGRAM, CONFIRM = "unigram", "confirm"


def side_of(key: str, rules: GPT2DataRules) -> str:
    """``UNIGRAM`` or ``CONFIRM`` by the registered split."""
    return UNIGRAM if hash_value(rules.split_prefix, key) < rules.unigram_below else CONFIRM


# ----------------------------------------------------------------------------------------------
# The corpora present, or the protocol's line
# ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class CorporaAbsent:
    """The protocol's "not computed" value when the corpora are absent
    (``when_corpora_absent``): the missing folders and the directory looked in."""

    model: str
    folders: tuple[str, ...]
    directory: str
    template: str

    def line(self) -> str:
        """The registered line, its three placeholders filled in."""
        values = iter([", ".join(self.folders), self.directory, " ".join(self.folders)])
        filled = re.sub(r"<[^<>]+>", lambda _: next(values), self.template)
        return self.model + filled[filled.index(":"):]

    def __str__(self) -> str:
        return self.line()


def corpora_directory() -> tuple[Path | None, str]:
    """The corpora directory found (None when none) and the directory named as looked in."""
    root = settings.corpora_root()
    named = root if root is not None else settings.REPOSITORY_ROOT.parent / "shared" / "corpora"
    return root, str(named)


def corpora_absent(model: str, rules: GPT2DataRules,
                   root: Path | None = None) -> CorporaAbsent | None:
    """None when every registered folder is present and matches the manifest: the corpora's
    folders their checksums, the code folder its file list as :func:`code_documents` reads it
    (:func:`code_listing`); else the protocol's line, naming every folder that does not."""
    if root is None:
        root, named = corpora_directory()
    else:
        named = str(root)
    folders = [f for f in rules.folders if f != rules.code_folder]
    if root is None or not root.is_dir():
        failing = set(folders)
    else:
        problems = verify_corpora(root, only=folders)
        failing = {f for f in folders if any(p.startswith(f"{f}/") for p in problems)}
    if not code_listing().matches:
        failing.add(rules.code_folder)
    missing = [f for f in rules.folders if f in failing]
    if not missing:
        return None
    return CorporaAbsent(model, tuple(missing), named, rules.absent_line)


# ----------------------------------------------------------------------------------------------
# Documents and their tokens
# ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class CodeListing:
    """The code folder as the protocol reads it: its root, the ``*.py`` files there and the
    manifest's list of them (the same list: the registered code domain)."""

    root: Path
    present: list[str]
    listed: list[str]

    @property
    def matches(self) -> bool:
        return self.present == self.listed

    def difference(self) -> str:
        """How the two lists differ, in words."""
        extra = sorted(set(self.present) - set(self.listed))
        missing = sorted(set(self.listed) - set(self.present))
        return (f"{len(self.present)} files, not the manifest's {len(self.listed)} (CPython "
                f"3.11.7's standard library): {len(missing)} missing (e.g. {missing[:3]}), "
                f"{len(extra)} not listed (e.g. {extra[:3]})")


def code_listing() -> CodeListing:
    """The code folder read from :func:`~context_neurons.training.corpus.stdlib_dir`: its
    ``*.py`` files (:func:`~context_neurons.text.dataset.code_files`) beside the manifest's
    (site-packages, dist-packages and ``__pycache__`` left out of both)."""
    root = stdlib_dir()
    entry = load_manifest()["folders"][CODE_FOLDER]
    listed = sorted(f["path"] for f in entry["files"] if f["path"].endswith(".py")
                    and not any(part in NOT_CODE for part in f["path"].split("/")))
    return CodeListing(root, code_files(root), listed)


def code_documents(rules: GPT2DataRules) -> list[Doc]:
    """The code folder's non-empty documents, after checking that the library's file list is
    the manifest's (another list is a :class:`DataError`: not the registered code domain)."""
    listing = code_listing()
    if not listing.matches:
        raise DataError(
            f"The code folder {rules.code_folder} read from {listing.root} has "
            f"{listing.difference()}. Set {settings.CODE.name} to that library or fetch the "
            f"folder (`python -m context_neurons fetch-corpora --only {CODE_FOLDER}`): the code "
            "domain would not be the registered one.")
    root = listing.root
    docs = [Doc(rules.code_folder, path, (root / path).read_text(encoding="utf-8",
                                                                 errors="replace"))
            for path in listing.present]
    return [d for d in docs if d.text.strip()]


def folder_documents(folder: str, root: Path, rules: GPT2DataRules) -> list[Doc]:
    """A folder's non-empty documents, in file order."""
    if folder == rules.code_folder:
        return code_documents(rules)
    return [d for d in iter_documents(folder, root) if d.text.strip()]


#: Each folder's ``(key, tokens)`` documents per tokenizer object (tokenizing is the slow part).
_TOKENS = IdentityCache(size=64)


def folder_tokens(folder: str, root: Path, tokenizer,
                  rules: GPT2DataRules) -> list[tuple[str, np.ndarray]]:
    """A folder's documents as ``(key, [<|endoftext|>, tokens...])``, in file order (cached)."""
    def build() -> list[tuple[str, np.ndarray]]:
        docs = folder_documents(folder, root, rules)
        encoded = tokenize_documents(docs, tokenizer, tokenizer.convert_tokens_to_ids(EOT))
        return [(d.key, e) for d, e in zip(docs, encoded)]

    return _TOKENS.get((tokenizer,), (folder, str(root), str(stdlib_dir())), build)


def split_units(documents: list[tuple[str, np.ndarray]], excluded: frozenset[str],
                rules: GPT2DataRules) -> dict[str, list[Unit]]:
    """One folder's units per side: excluded keys left out, each side's documents in key order
    (a stable sort: documents sharing a key stay in file order, side by side)."""
    out = {}
    kept = [(k, t) for k, t in documents if k not in excluded]
    for side in (UNIGRAM, CONFIRM):
        docs = sorted(((k, t) for k, t in kept if side_of(k, rules) == side), key=lambda d: d[0])
        out[side] = group_units(docs, rules.n_ctx)
    return out


# ----------------------------------------------------------------------------------------------
# Each domain's data
# ----------------------------------------------------------------------------------------------


def confirm_side(name: str, units: list[Unit], rules: GPT2DataRules,
                 eot_id: int) -> ConfirmDomain:
    """A domain's CONFIRM windows (:func:`~.documents.take_windows`, this protocol's order
    and cap)."""
    windows, keys, read = take_windows(ordered(units, rules.confirm.order_prefix), rules.n_ctx,
                                       eot_id, rules.windows_per_unit,
                                       rules.confirm.tokens_per_domain // rules.n_ctx)
    return ConfirmDomain(name, len(units), None, read, tuple(windows), tuple(keys),
                         domain_status(read, rules.min_units))


def unigram_side(units: list[Unit], rules: GPT2DataRules,
                 eot_id: int) -> tuple[DomainData, list[Unit]]:
    """A domain's ``p_D`` tokens (separators left out) over its UNIGRAM units in order until
    ``tokens_per_domain``, and the first windows of the same units packed."""
    taken, count = [], 0
    for unit in ordered(units, rules.unigram.order_prefix):
        if count >= rules.unigram.tokens_per_domain:
            break
        taken.append(unit)
        count += int((unit.tokens != eot_id).sum())
    if not taken:
        raise DataError("A domain with CONFIRM data has no UNIGRAM unit.")
    stream = np.concatenate([u.tokens for u in taken])
    packed = pack_windows(stream, rules.n_ctx, eot_id)[: rules.unigram.windows_per_domain]
    tokens = torch.from_numpy(stream[stream != eot_id].astype("int64"))
    return DomainData(cal_tokens=tokens, cal_windows=[torch.from_numpy(w.astype("int64"))
                                                      for w in packed]), taken


@dataclass(frozen=True)
class GPT2Data(V3Data):
    """v3's data with UNIGRAM in CAL's place (``cal``: each domain's ``p_D`` tokens and UNIGRAM
    windows; ``cal_units``: the UNIGRAM units taken), and every domain's UNIGRAM unit count
    (``unigram_units``) and ``p_D`` token count (``unigram_tokens``)."""

    unigram_units: Mapping[str, int] = field(default_factory=dict)
    unigram_tokens: Mapping[str, int] = field(default_factory=dict)


def domain_folders(rules: GPT2DataRules,
                   domains: dict[str, tuple[str, ...]] = DOMAINS) -> dict[str, list[str]]:
    """Each domain's registered folders (a folder two domains name is in none: it is not
    registered either, a :class:`DataError` otherwise)."""
    owner = domain_of_corpus(domains)
    unowned = [f for f in rules.folders if f not in owner]
    if unowned:
        raise DataError(f"Registered folders {unowned} are in no single domain.")
    out: dict[str, list[str]] = {}
    for folder in rules.folders:
        out.setdefault(owner[folder], []).append(folder)
    return {d: sorted(out[d]) for d in sorted(out)}


def gpt2_data(tokenizer, rules: GPT2DataRules, root: Path | None = None) -> GPT2Data:
    """Every domain's CONFIRM windows and UNIGRAM data (module docstring); the corpora must be
    present (:func:`corpora_absent` first: a :class:`DataError` otherwise)."""
    root = root or settings.corpora_root()
    if root is None or not root.is_dir():
        raise DataError("Protocol discovery-verdict-gpt2 reads the offline corpora, not found "
                        f"here: {rules.fetch_command}.")
    eot_id, excluded = tokenizer.convert_tokens_to_ids(EOT), excluded_keys()
    confirm, cal, cal_units, unigram_units, unigram_tokens = {}, {}, {}, {}, {}
    for name, folders in domain_folders(rules).items():
        sides: dict[str, list[Unit]] = {UNIGRAM: [], CONFIRM: []}
        for folder in folders:
            for side, units in split_units(folder_tokens(folder, root, tokenizer, rules),
                                           excluded, rules).items():
                sides[side] += units
        confirm[name] = confirm_side(name, sides[CONFIRM], rules, eot_id)
        unigram_units[name] = len(sides[UNIGRAM])
        if confirm[name].status != NO_DATA:
            cal[name], cal_units[name] = unigram_side(sides[UNIGRAM], rules, eot_id)
            unigram_tokens[name] = len(cal[name].cal_tokens)
    return GPT2Data(confirm, cal, cal_units, unigram_units, unigram_tokens)


__all__ = ["CONFIRM", "CodeListing", "CorporaAbsent", "GPT2Data", "UNIGRAM", "code_documents",
           "code_listing", "confirm_side", "corpora_absent", "corpora_directory", "domain_folders",
           "folder_documents", "folder_tokens", "gpt2_data", "hash_value", "ordered", "side_of",
           "split_units", "unigram_side"]
