"""The main job. This module reproduces the paper's numbers: ``python -m context_neurons reproduce``.

Each chapter's module contributes a *section*: a function ``(ReproContext) -> list[Row]`` that
computes its quantities in this run. :func:`reproduce` runs the sections in order, prints the table
"quantity | paper (GPT-2 Small) | this run | planted truth" and returns the JSON-ready results.
Paper values are typed in only here, in the ``paper`` column, never as results.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any, Callable

import torch
from tqdm.auto import tqdm

from context_neurons.data import DataError, corpus_windows
from context_neurons.models import LoadedModel, load_model

#: Offline evaluation corpora: long documents of varied English prose.
EVAL_CORPORA = ("nltk_brown_us", "nltk_masc", "wikitext2_pytorch_examples", "nltk_state_union_us")


@dataclass
class Row:
    """One reproduced quantity."""

    key: str
    value: Any
    paper: str = ""
    truth: Any = None
    label: str = ""


@dataclass
class ReproContext:
    """What every section gets: the model, the evaluation windows and shared intermediate results."""

    loaded: LoadedModel
    windows: list[torch.Tensor]
    labels: list[str]
    progress: bool = True
    device: str = "cpu"
    shared: dict[str, Any] = field(default_factory=dict)

    @property
    def model(self):
        return self.loaded.model


def fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4f}"
    if isinstance(value, (list, tuple)) and (
        len(value) > 12 or any(isinstance(v, dict) for v in value)
    ):
        return f"[{len(value)} items, see the JSON]"
    if isinstance(value, dict):
        text = json.dumps(value, default=str)
        return text if len(text) < 60 else text[:57] + "..."
    return str(value)


def decomposition_section(ctx: ReproContext) -> list[Row]:
    """Chapter 1: TV distance between exact and reconstructed patterns of the contextual heads."""
    from context_neurons.circuit import CONTEXTUAL_HEADS
    from context_neurons.decomposition import (
        decompose_attention,
        default_reference_tokens,
        mean_positional_keys,
    )

    model = ctx.model
    heads = list(CONTEXTUAL_HEADS)  # the six heads whose TV the paper reports (Figure 1)
    mean_keys = mean_positional_keys(model, default_reference_tokens(model))
    tv = [
        decompose_attention(model, tokens, heads=heads, mean_keys=mean_keys).tv_distance().cpu()
        for tokens in tqdm(ctx.windows, desc="TV distance", disable=not ctx.progress)
    ]
    pooled = torch.cat(tv, dim=-1)  # [head, all positions of all texts]
    per_head = {h: round(float(v), 4) for h, v in zip(heads, pooled.median(dim=-1).values)}
    return [
        Row("tv_distance_median", float(pooled.median()), "~0.05",
            label="TV distance, exact vs reconstructed patterns: median over heads "
                  f"{','.join(map(str, heads))} and every position of every text"),
        Row("tv_distance_median_per_head", per_head,
            label="the same median, per head"),
    ]


SECTIONS: list[Callable[[ReproContext], list[Row]]] = [decomposition_section]


def register_optional_sections() -> list[Callable[[ReproContext], list[Row]]]:
    """The sections of later chapters, where their modules exist."""
    import importlib

    sections = list(SECTIONS)
    for module_name in ("taxonomy", "stability", "neurons", "evaluation", "lookups"):
        try:
            module = importlib.import_module(f"context_neurons.{module_name}")
        except ModuleNotFoundError as err:
            if err.name != f"context_neurons.{module_name}":
                raise
            continue
        section = getattr(module, "reproduce_section", None)
        if section is not None:
            sections.append(section)
    return sections


def reproduce(
    model: str = "planted",
    n_texts: int = 20,
    device: str = "cpu",
    progress: bool = True,
    source: str = "corpora",
) -> dict[str, Any]:
    """Run every section and return ``{key: value}`` plus ``model``, ``n_texts``, ``seconds``.

    Args:
        model: ``"gpt2"`` or ``"planted"``.
        n_texts: evaluation texts (full 1024-token windows); at least 1.
        device: ``"cpu"``, ``"cuda"`` or ``"auto"``.
        progress: show progress bars.
        source: evaluation texts from the offline ``"corpora"`` or ``"openwebtext"`` (online).

    Returns:
        The results, JSON-ready through :func:`to_json`; ``"_rows"`` holds the table rows.
    """
    if n_texts < 1:
        raise DataError(f"n_texts must be at least 1, got {n_texts}.")
    start = time.perf_counter()
    torch.set_grad_enabled(False)
    loaded = load_model(model, device=device)
    windows, labels, report = corpus_windows(
        loaded.model.tokenizer, EVAL_CORPORA, n=n_texts, source=source, interleave=True
    )
    if len(windows) < n_texts:
        print(f"note: only {len(windows)} full-length windows available ({report}).")
    windows = [w.to(loaded.model.cfg.device) for w in windows]
    ctx = ReproContext(loaded, windows, labels, progress=progress, device=device)
    rows: list[Row] = []
    for section in register_optional_sections():
        rows += section(ctx)
    results: dict[str, Any] = {
        "model": loaded.name,
        "model_source": loaded.source,
        "n_texts": len(windows),
        "texts": report.__dict__,
        "device": str(loaded.model.cfg.device),
    }
    for row in rows:
        results[row.key] = row.value
    results["seconds"] = round(time.perf_counter() - start, 1)
    results["_rows"] = rows
    return results


def format_table(results: dict[str, Any]) -> str:
    """The table "quantity | paper (GPT-2 Small) | this run [| planted truth]"."""
    rows: list[Row] = results["_rows"]
    planted = results["model"] == "planted"
    head = ["quantity", "paper (GPT-2 Small)", f"this run ({results['model']})"]
    if planted:
        head.append("planted truth")
    body = [
        [r.key, r.paper or "-", fmt(r.value)]
        + ([fmt(r.truth) if r.truth is not None else "-"] if planted else [])
        for r in rows
    ]
    body.append(["seconds", "-", f"{results['seconds']:.1f}"] + (["-"] if planted else []))
    widths = [max(len(str(x)) for x in col) for col in zip(head, *body)]
    line = lambda cells: "| " + " | ".join(str(c).ljust(w) for c, w in zip(cells, widths)) + " |"  # noqa: E731
    out = [line(head), "|" + "|".join("-" * (w + 2) for w in widths) + "|"]
    out += [line(r) for r in body]
    return "\n".join(out)


def to_json(results: dict[str, Any]) -> str:
    clean = {k: v for k, v in results.items() if not k.startswith("_")}
    clean["labels"] = {r.key: r.label for r in results["_rows"] if r.label}
    clean["paper"] = {r.key: r.paper for r in results["_rows"] if r.paper}
    if results["model"] == "planted":
        clean["planted_truth"] = {r.key: r.truth for r in results["_rows"] if r.truth is not None}
    return json.dumps(clean, indent=2, default=str)
