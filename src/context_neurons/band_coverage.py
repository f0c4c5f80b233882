"""Coverage of the certified band on real text. This module measures how often the band of
:mod:`context_neurons.evaluation.band` holds where chapter 3's model (independent tokens from the
calibration distribution) does not: on held-out real text (issue 56).

Everything below was fixed before any coverage was computed (2026-11-28):

* **Texts.** Held-out general windows (no calibration document,
  :func:`~context_neurons.evaluation.held_out_general_windows`) and held-out windows of the domains
  in :data:`DOMAINS`, each cut to :data:`LENGTH` tokens. A window is one *document* of the
  bootstrap.
* **Neurons.** The :data:`N_NEURONS` highest-scoring neurons of the model's own discovery score
  (chapter 5, ``get_scores(...).ranking()``), computed, not chosen.
* **Heads.** Two bands: ``"all contextual heads"`` writes every contextual head as a bag (the
  paper's circuit); ``"heads the check passes"`` writes as bags only the heads
  :mod:`context_neurons.assumptions` passes (measured on the first :data:`N_CHECK` general
  windows), and bounds each failed head by the range of its value outputs (probability one).
  When every head passes, the second band is the first and is not recomputed.
* **Statistic.** Coverage: the fraction of (neuron, position) pairs, positions ``1..LENGTH-1``,
  whose true pre-activation (the model's own, ``true_pre_activations``) lies in the band, pooled
  over documents; overall, per domain, per position bucket (:data:`POSITION_BUCKETS`); and, per
  contextual head, the fraction of positions ``n >= 2`` whose text denominator ``D_h(n)`` lies in
  step 1's interval (nominal ``1 - delta_head``), beside the interval's median relative
  half-width ``tau / mean`` and the fraction of positions where ``mean - tau <= 0`` (an interval
  that holds there says nothing).
* **Interval.** A percentile bootstrap over documents: :data:`N_BOOT` resamples of the documents
  with replacement (seed 0), the coverage of each resample pooled over its pairs, the 2.5% and
  97.5% quantiles.
* **Reading rule.** On a set, the band is *at or above nominal* when the interval's lower end is
  at least the nominal ``1 - delta``, *consistent with nominal* when the interval contains it,
  and *falls short* when the whole interval lies below it (then the assumption that broke is
  named from the per-head and per-position rows: a head whose denominators miss their interval,
  or the earliest positions).
* **Width.** For each neuron, its spread is the standard deviation of its true pre-activation
  over all pairs measured, and its range ``max - min``; the table reports the median of
  ``width / spread`` and the fraction of pairs whose band is at least the neuron's whole range
  (a band that wide certifies nothing) or infinite.

Numbers are rounded to four decimals (coverage) or three (widths) so that another CPU writes the
same file; the asset is written whole (:func:`context_neurons.files.write_text_whole`) by
``python -m context_neurons band-coverage`` only.

**The main job (added 2026-11-29, after the stored table; the table is unchanged).** ``reproduce``
measures the same bands with the same rules in its own run (:func:`measure_coverage`, which the
stored table calls too; rows in :mod:`context_neurons.reproduce.band_rows`), on the model it runs.
Three things differ, each said in its rows' labels: the texts are the run's own held-out general
windows (``--texts``, cut to :data:`LENGTH`; no domain windows), the assumptions check is the
run's own (on all those windows at full length, not the first :data:`N_CHECK` cut to
:data:`LENGTH`), and one statistic is added, chosen after the stored table was computed: per head
group of the taxonomy (:func:`denominator_group_rows`), step 1's coverage pooled over the group's
contextual heads, with the same bootstrap, nominal ``1 - delta_head`` and reading rule. With fewer
than two windows the main job computes no interval (a bootstrap over documents needs two).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch
from jaxtyping import Bool, Float
from torch import Tensor

from context_neurons.assumptions import AssumptionsCheck, measure_assumptions
from context_neurons.circuit import ContextualCircuit, get_circuit
from context_neurons.discovery import get_scores
from context_neurons.evaluation import held_out_domain_windows, held_out_general_windows
from context_neurons.evaluation.band import (
    CertifiedBand,
    certified_band,
    measure_residual,
    true_values,
)
from context_neurons.files import write_text_whole
from context_neurons.models.loading import TRAINED_SEED1_DIR, load_model
from context_neurons.models.weights import Model
from context_neurons.stability import denominator_study
from context_neurons.taxonomy import classify_heads

#: The band's failure probability per pair.
DELTA = 0.1
#: Tokens of each window (the band's positions).
LENGTH = 256
#: General windows, and windows per domain.
N_GENERAL, N_PER_DOMAIN = 16, 4
#: Domains beside general text: code repeats tokens, the Bible repeats words, Spanish is another
#: vocabulary.
DOMAINS = ("code", "bible", "spanish")
#: Neurons measured: the highest-scoring of the discovery score.
N_NEURONS = 8
#: General windows the assumptions check reads.
N_CHECK = 8
#: Position buckets ``[start, stop)``.
POSITION_BUCKETS = ((1, 32), (32, 128), (128, LENGTH))
#: Bootstrap resamples.
N_BOOT = 1000
#: The models of the stored table, and how each is loaded.
MODELS = {"planted": "planted", "trained": "trained", "trained-seed1": str(TRAINED_SEED1_DIR)}
#: Where the command writes the table.
ASSET = Path(__file__).resolve().parent / "assets" / "band-coverage.json"


def bootstrap_coverage(
    inside: Float[Tensor, " document"], pairs: Float[Tensor, " document"], n_boot: int = N_BOOT,
    seed: int = 0,
) -> tuple[float, float, float]:
    """Pooled coverage ``sum inside / sum pairs`` and its percentile bootstrap interval over
    documents (module docstring)."""
    inside, pairs = inside.double(), pairs.double()
    if float(pairs.sum()) == 0:
        return math.nan, math.nan, math.nan
    gen = torch.Generator().manual_seed(seed)
    draws = torch.randint(len(pairs), (n_boot, len(pairs)), generator=gen)
    rates = inside[draws].sum(1) / pairs[draws].sum(1).clamp(min=1)
    low, high = torch.quantile(rates, torch.tensor([0.025, 0.975], dtype=torch.float64)).tolist()
    return float(inside.sum() / pairs.sum()), low, high


def reading(low: float, high: float, nominal: float) -> str:
    """The reading rule of the module docstring."""
    if math.isnan(low):
        return "no pairs"
    if high < nominal:
        return "falls short"
    return "at or above nominal" if low >= nominal else "consistent with nominal"


@dataclass
class BandCoverage:
    """One band on a set of documents: what lies inside, per document, pair by pair."""

    heads: str
    certified: list[int]
    failed: list[int]
    delta: float
    domains: list[str]  # per document
    inside: Bool[Tensor, "document pos n_neurons"]
    width: Float[Tensor, "document pos n_neurons"]
    true: Float[Tensor, "document pos n_neurons"]

    def rows(self) -> list[dict]:
        """Coverage overall, per domain and per position bucket, with the interval and the
        reading (module docstring)."""
        nominal = 1 - self.delta
        selections = {("all", "all"): (slice(None), slice(1, None))}
        for domain in dict.fromkeys(self.domains):
            docs = torch.tensor([d == domain for d in self.domains])
            selections[("domain", domain)] = (docs, slice(1, None))
        for start, stop in POSITION_BUCKETS:
            selections[("positions", f"{start}-{stop - 1}")] = (slice(None), slice(start, stop))
        out = []
        for (kind, key), (docs, positions) in selections.items():
            inside = self.inside[docs][:, positions]
            counts = inside.flatten(1).double().sum(1)
            pairs = torch.full_like(counts, inside[0].numel())
            coverage, low, high = bootstrap_coverage(counts, pairs)
            out.append({"heads": self.heads, "by": kind, "set": key, "documents": len(counts),
                        "pairs": int(pairs.sum()), "coverage": coverage, "low": low, "high": high,
                        "nominal": nominal, "reading": reading(low, high, nominal)})
        return out

    def width_finding(self) -> str:
        """:meth:`widths` in a sentence."""
        w = self.widths()
        ratio, infinite = w["median width / spread"], w["fraction infinite"]
        whole = w["fraction at least the neuron's range"]
        return (f"{self.heads}: the band's median width is {ratio:.2f} times the neuron's "
                f"spread; {infinite:.1%} of the pairs have an infinite band and {whole:.1%} one "
                "at least as wide as the neuron's whole range on these texts (those certify "
                "nothing).")

    def widths(self) -> dict:
        """The band's width against each neuron's spread and range (module docstring)."""
        true, width = self.true[:, 1:].flatten(0, 1), self.width[:, 1:].flatten(0, 1)
        spread = true.std(0)
        span = true.max(0).values - true.min(0).values
        ratio = width / spread
        finite = torch.isfinite(width)
        return {
            "heads": self.heads,
            "median width / spread": float(ratio[finite].median()) if finite.any() else math.inf,
            "fraction infinite": float((~finite).double().mean()),
            "fraction at least the neuron's range": float((width >= span).double().mean()),
        }


def band_coverage(
    model: Model, circuit: ContextualCircuit, windows, domains: list[str], neurons: list[int],
    certified: list[int], heads: str, delta: float = DELTA, seed: int = 0,
) -> tuple[BandCoverage, CertifiedBand]:
    """The band of ``certified`` heads on every window, against the true pre-activations."""
    tokens = torch.stack([w[:LENGTH] for w in windows])
    residual = measure_residual(circuit, model, neurons, delta, certified, length=LENGTH,
                                seed=seed)
    band = certified_band(circuit, model, tokens, neurons, delta, certified, residual)
    true = true_values(model, tokens, neurons)
    coverage = BandCoverage(heads=heads, certified=band.certified, failed=band.failed,
                            delta=delta, domains=domains, inside=band.contains(true),
                            width=band.width, true=true)
    return coverage, band


def denominator_inside(circuit: ContextualCircuit, model: Model, band: CertifiedBand, windows
                       ) -> Bool[Tensor, "ctx_head document pos"]:
    """Per certified head of ``band`` (``band.denominators.heads``), per window and position
    ``n < LENGTH``: whether the text's ``D_h(n)`` lies in step 1's interval."""
    interval = band.denominators
    log_d = torch.stack([circuit.text_log_denominators(model, w[:LENGTH]) for w in windows])
    inside = []
    for k, head in enumerate(interval.heads):
        row = circuit.heads.index(head)
        ratio = torch.exp(log_d[:, row].double().cpu() - interval.log_mean_weight[k])
        inside.append((ratio >= interval.lower[k]) & (ratio <= interval.upper[k]))
    return torch.stack(inside)


def denominator_rows(circuit: ContextualCircuit, model: Model, band: CertifiedBand, windows,
                     check: AssumptionsCheck,
                     inside: Bool[Tensor, "ctx_head document pos"] | None = None) -> list[dict]:
    """Per certified head: how often the text's ``D_h(n)`` lies in step 1's interval
    (``inside``: :func:`denominator_inside`, computed when not given)."""
    interval = band.denominators
    inside = denominator_inside(circuit, model, band, windows) if inside is None else inside
    rows = []
    for k, head in enumerate(interval.heads):
        counts = inside[k][:, 2:].double().sum(1)
        pairs = torch.full_like(counts, inside.shape[2] - 2)
        coverage, low, high = bootstrap_coverage(counts, pairs)
        nominal = 1 - interval.delta_head
        verdict = check.verdict(head)
        relative = (interval.tau[k, 2:LENGTH] / interval.mean[k, 2:LENGTH]).median()
        rows.append({"head": head, "group": verdict.group,
                     "check": {True: "passes", False: "fails", None: "not measured"}[verdict.meets],
                     "coverage": coverage, "low": low, "high": high, "nominal": nominal,
                     "reading": reading(low, high, nominal),
                     "median tau / mean": float(relative),
                     "positions with mean - tau <= 0": float((interval.lower[k, 2:] <= 0)
                                                             .double().mean())})
    return rows


def denominator_group_rows(band: CertifiedBand, inside: Bool[Tensor, "ctx_head document pos"],
                           check: AssumptionsCheck) -> list[dict]:
    """Per head group of the taxonomy (the check's, :attr:`HeadVerdict.group`): the pooled
    fraction of ``(head, position)`` pairs, positions ``n >= 2``, of the group's certified heads
    whose text ``D_h(n)`` lies in step 1's interval, with the same bootstrap over documents and
    reading rule as :func:`denominator_rows` (added for the main job, module docstring)."""
    interval = band.denominators
    groups: dict[str, list[int]] = {}
    for k, head in enumerate(interval.heads):
        groups.setdefault(check.verdict(head).group, []).append(k)
    nominal = 1 - interval.delta_head
    rows = []
    for group, ks in groups.items():
        counts = inside[ks][:, :, 2:].double().sum((0, 2))
        pairs = torch.full_like(counts, len(ks) * (inside.shape[2] - 2))
        coverage, low, high = bootstrap_coverage(counts, pairs)
        heads = [interval.heads[k] for k in ks]
        rows.append({"group": group, "heads": heads, "coverage": coverage, "low": low,
                     "high": high, "nominal": nominal, "reading": reading(low, high, nominal),
                     "check fails": [h for h in heads if check.verdict(h).meets is False]})
    return rows


def measure_coverage(model: Model, circuit: ContextualCircuit, neurons: list[int], windows,
                     domains: list[str], check: AssumptionsCheck,
                     say: Callable[[str], None] | None = None) -> dict:
    """Both bands of the module docstring ("Heads") on ``windows`` (one domain name each):
    the coverage rows of each, its widths, step 1 per contextual head and per head group.

    The stored table (:func:`measure_model`) and the main job
    (:mod:`context_neurons.reproduce.band_rows`) both call this; ``say``, if given, is called
    with each band's name when it is done."""
    passing = [h for h in circuit.heads if check.verdict(h).meets]
    result = {"heads the check passes": passing, "coverage": [], "widths": [],
              "denominators": [], "denominators by group": []}
    configurations = [("all contextual heads", list(circuit.heads))]
    if passing != list(circuit.heads):
        configurations.append(("heads the check passes", passing))
    for heads, certified in configurations:
        coverage, band = band_coverage(model, circuit, windows, domains, neurons, certified,
                                       heads)
        result["coverage"] += coverage.rows()
        result["widths"].append(coverage.widths())
        if heads == "all contextual heads":
            inside = denominator_inside(circuit, model, band, windows)
            result["denominators"] = denominator_rows(circuit, model, band, windows, check,
                                                      inside)
            result["denominators by group"] = denominator_group_rows(band, inside, check)
        if say is not None:
            say(heads)
    return result


def measure_model(name: str, progress: bool = False) -> dict:
    """The whole table of the module docstring for one model of :data:`MODELS`."""
    loaded = load_model(MODELS[name], device="cpu")
    model = loaded.model
    circuit = get_circuit(model)
    neurons = get_scores(circuit, model).ranking()[:N_NEURONS]
    general, labels, _, _ = held_out_general_windows(model.tokenizer, N_GENERAL)
    windows, domains = list(general), ["general"] * len(general)
    for domain in DOMAINS:
        found, _ = held_out_domain_windows(model.tokenizer, domain, N_PER_DOMAIN)
        windows += found
        domains += [domain] * len(found)
    check_windows = [w[:LENGTH] for w in general[:N_CHECK]]
    study = denominator_study(model, check_windows, n=LENGTH // 2, heads=circuit.heads)
    check = measure_assumptions(model, circuit, classify_heads(model).groups, check_windows, study)
    measured = measure_coverage(
        model, circuit, neurons, windows, domains, check,
        say=(lambda heads: print(f"{name}: {heads} done", flush=True)) if progress else None)
    return {"model": name, "neurons": neurons, "contextual heads": circuit.heads,
            "heads the check passes": measured["heads the check passes"], "delta": DELTA,
            "length": LENGTH, "documents": {d: domains.count(d) for d in dict.fromkeys(domains)},
            **{key: measured[key] for key in ("coverage", "widths", "denominators")}}


def rounded(value, digits: int = 4):
    """Floats rounded (``None`` for NaN or infinity), recursively, for a file any CPU writes the
    same."""
    if isinstance(value, float):
        return round(value, digits) if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: rounded(v, 3 if "width" in str(k) or "range" in str(k) else digits)
                for k, v in value.items()}
    if isinstance(value, list):
        return [rounded(v, digits) for v in value]
    return value


def write_coverage(models=tuple(MODELS), path: Path = ASSET, progress: bool = False) -> dict:
    """Measure every model and write the asset whole (the command's only work)."""
    with torch.no_grad():
        table = {"statement": "see context_neurons.band_coverage's docstring",
                 "models": [rounded(measure_model(name, progress)) for name in models]}
    write_text_whole(path, json.dumps(table, indent=1) + "\n")
    return table


def stored_coverage(path: Path = ASSET) -> dict:
    """The stored table (written by ``python -m context_neurons band-coverage``)."""
    return json.loads(Path(path).read_text())


def coverage_findings(table: dict) -> list[str]:
    """One sentence per model and band of a stored table (:func:`stored_coverage`): coverage
    overall with its interval and reading, how much of the band is infinite or wider than the
    neuron's range, and which heads the check failed."""
    lines = []
    for entry in table["models"]:
        failed = [h for h in entry["contextual heads"] if h not in entry["heads the check passes"]]
        heads = (f"the check fails contextual heads {failed}" if failed
                 else "the check passes every contextual head")
        widths = {w["heads"]: w for w in entry["widths"]}
        for row in entry["coverage"]:
            if row["by"] != "all":
                continue
            w = widths[row["heads"]]
            lines.append(
                f"{entry['model']} ({heads}), band of {row['heads']}: coverage "
                f"{row['coverage']:.4f} [{row['low']:.4f}, {row['high']:.4f}] against nominal "
                f"{row['nominal']:g}: {row['reading']}; {w['fraction infinite']:.1%} of the pairs "
                f"have an infinite band, {w[RANGE_KEY]:.1%} one at least the neuron's range.")
    return lines


RANGE_KEY = "fraction at least the neuron's range"
