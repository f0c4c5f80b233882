"""What the method recovers of the planted model, over seeds and variants (issue 13), and the
GPT-2 difficulties planted in it, measured on its weights.

:func:`recover` builds one planted model and runs the method as the chapters do: classify the
layer-0 heads (chapter 2), build the circuit from the heads classified contextual (chapter 4),
score every layer-0 neuron (chapter 5), compare the neurons found at several thresholds with the
planted ones, evaluate the approximation of the neurons found at ``theta`` (chapter 6, both
denominator variants) and the decomposition's total-variation error (chapter 1). On the negative
control (``variant="shuffled-kernels"``) no head should be contextual and nothing found; the method
stops there and says so. ``scripts/planted_recovery.py`` runs it over seeds.

The appendix on the planted model prints its plan and its difficulties from here:
:func:`planned_heads` (the plan of the layer-0 heads) and :func:`difficulty_table` (each planted
difficulty, measured by :func:`difficulty_measurements`, beside what GPT-2 is described to show).
"""

from __future__ import annotations

import math
import time
from dataclasses import MISSING, dataclass, fields

import torch
import pandas as pd
from jaxtyping import Float
from torch import Tensor

from context_neurons import decomposition as dec
from context_neurons import discovery, evaluation
from context_neurons import taxonomy as tx
from context_neurons.checks import NoContextualHeadsError, token_id
from context_neurons.circuit import build_circuit
from context_neurons.hooks import run_until
from context_neurons.models import bridge_from_hf
from context_neurons.models.planted import build_planted_gpt2
from context_neurons.text.windows import calibration_tokens

#: Thresholds of the precision and recall curve, and the chapters' threshold.
THETAS = (4, 5, 6, 8, 12, 20)
THETA = discovery.THETA


@dataclass(frozen=True, kw_only=True)
class RecoveryRun:
    """What the method recovered of one planted model (:func:`recover`).

    Attributes:
        seed: the planted model's seed.
        variant: its variant: ``"standard"``, or the negative control ``"shuffled-kernels"``.
        build_s: seconds the build took, one decimal.
        contextual_heads: the layer-0 heads the taxonomy classified contextual, sorted.
        contextual_recovered: whether they are the planted contextual heads.
        groups_recovered: whether every group of heads is the planted one.
        content_sd_max_contextual: the largest median content sd of a contextual head; ``None``
            without one.
        difficulties: the planted GPT-2 difficulties measured (:func:`difficulty_measurements`);
            ``None`` unless asked for, and on the negative control.
        found: neurons found at each threshold of :data:`THETAS` (all 0 where the method stopped).
        stopped: why the method stopped (no contextual head); ``None`` where it did not. The
            fields below are ``None`` where it stopped.
        precision: precision at each threshold against the planted neurons (nan without them).
        recall: recall at each threshold, likewise.
        distractors_found: the distractor neurons found at :data:`THETA`.
        planted_missed: the planted neurons not found at :data:`THETA`.
        planted_top: each planted neuron's top score, one decimal.
        distractor_top: each distractor neuron's top score, one decimal.
        unplanted_top_max: the highest top score of the other neurons, two decimals.
        median_r_per_position: median Pearson r of the approximation of the neurons found
            (per-position denominators); ``None`` without windows or neurons found.
        median_fvu_per_position: their median FVU, likewise.
        median_fvu_planted_only: the median FVU of the planted neurons among them, likewise.
        median_r_median: median Pearson r with the median denominators, likewise.
        median_fvu_median: median FVU with the median denominators, likewise.
        tv_median: median total-variation error of the decomposition over the first windows;
            ``None`` without windows.
        seconds: the whole run's wall time, set by ``scripts/planted_recovery.py``; else ``None``.
    """

    seed: int
    variant: str
    build_s: float
    contextual_heads: list[int]
    contextual_recovered: bool
    groups_recovered: bool
    content_sd_max_contextual: float | None
    difficulties: dict | None = None
    found: dict[int, int]
    stopped: str | None = None
    precision: dict[int, float] | None = None
    recall: dict[int, float] | None = None
    distractors_found: list[int] | None = None
    planted_missed: list[int] | None = None
    planted_top: dict[int, float] | None = None
    distractor_top: dict[int, float] | None = None
    unplanted_top_max: float | None = None
    median_r_per_position: float | None = None
    median_fvu_per_position: float | None = None
    median_fvu_planted_only: float | None = None
    median_r_median: float | None = None
    median_fvu_median: float | None = None
    tv_median: float | None = None
    seconds: float | None = None

    def to_json(self) -> dict:
        """Every field in order, those that default to ``None`` left out where ``None`` (the
        thresholds stay integer keys: ``json.dumps`` writes them as strings)."""
        return {f.name: getattr(self, f.name) for f in fields(self)
                if getattr(self, f.name) is not None or f.default is MISSING}


def recover(tokenizer, seed: int, windows, variant: str = "standard", n_tv: int = 4,
            difficulties: bool = False) -> RecoveryRun:
    """Build one planted model and measure what the method recovers of it (and, with
    ``difficulties``, the GPT-2 difficulties planted in it: :func:`difficulty_measurements`)."""
    start = time.time()
    hf_model, truth = build_planted_gpt2(tokenizer, seed=seed, variant=variant)
    build_s = time.time() - start
    model = bridge_from_hf(hf_model, tokenizer, "planted")
    taxonomy = tx.classify_heads(model)
    heads = sorted(taxonomy.groups["contextual"])
    planted_heads = sorted(truth.head_groups.get("contextual", []))
    common = dict(
        seed=seed, variant=variant, build_s=round(build_s, 1), contextual_heads=heads,
        contextual_recovered=heads == planted_heads,
        groups_recovered=all(
            sorted(taxonomy.groups[g]) == sorted(truth.head_groups.get(g, [])) for g in tx.GROUPS
        ),
        content_sd_max_contextual=max(
            (float(taxonomy.content_sd[:, taxonomy.column(h)].median()) for h in heads),
            default=None
        ),
    )
    if difficulties and variant == "standard":
        common["difficulties"] = difficulty_measurements(model, truth)
    planted = sorted(truth.context_neurons)
    try:  # the chapters' path: the circuit of the heads the taxonomy calls contextual
        circuit = build_circuit(model, "prose")
    except NoContextualHeadsError as error:  # the method stops and says why; nothing stands in
        return RecoveryRun(**common, found={theta: 0 for theta in THETAS}, stopped=str(error))
    scores = discovery.score_neurons(circuit, model)
    n_found, precision, recall = _threshold_sweep(scores, planted)
    found = scores.found(THETA)
    neurons = _neurons_at_theta(scores, found, planted, truth, model.cfg.d_mlp)
    approximation = _approximation(circuit, model, windows, found, truth)
    return RecoveryRun(**common, found=n_found, precision=precision, recall=recall, **neurons,
                       **approximation, tv_median=_tv_median(model, windows[:n_tv], heads))


def _threshold_sweep(scores, planted: list[int]) -> tuple[dict, dict, dict]:
    """Neurons found, precision and recall (nan without ``planted``) at each of :data:`THETAS`."""
    n_found, precision, recall = {}, {}, {}
    for theta in THETAS:
        found = scores.found(theta)
        precision[theta], recall[theta] = (
            discovery.precision_recall(found, planted) if planted else (math.nan, math.nan))
        n_found[theta] = len(found)
    return n_found, precision, recall


def _neurons_at_theta(scores, found: list[int], planted: list[int], truth, d_mlp: int) -> dict:
    """The distractors found and the planted neurons missed at :data:`THETA` (``found``), and the
    top scores of the planted, distractor and other neurons, by :class:`RecoveryRun` field."""
    others = [j for j in range(d_mlp)
              if j not in truth.context_neurons and j not in truth.distractor_neurons]
    return dict(
        distractors_found=sorted(set(found) & set(truth.distractor_neurons)),
        planted_missed=sorted(set(planted) - set(found)),
        planted_top={j: round(float(scores.top[j]), 1) for j in planted},
        distractor_top={j: round(float(scores.top[j]), 1) for j in truth.distractor_neurons},
        unplanted_top_max=round(float(scores.top[others].max()), 2),
    )


def _approximation(circuit, model, windows, found: list[int], truth) -> dict[str, float]:
    """The median r and FVU of the approximation of the neurons ``found`` on ``windows`` under
    both denominator variants, and the median FVU of the planted ones among them (per-position),
    by :class:`RecoveryRun` field; empty without neurons or windows."""
    if not (found and windows):
        return {}
    per_position = evaluation.evaluate(circuit, model, windows, found, denominators="per_position")
    median = evaluation.evaluate(circuit, model, windows, found, denominators="median")
    planted_cols = [k for k, j in enumerate(found) if j in truth.context_neurons]
    return dict(
        median_r_per_position=per_position.median_pearson,
        median_fvu_per_position=per_position.median_fvu,
        median_fvu_planted_only=float(per_position.fvu[:, planted_cols].nanmedian()),
        median_r_median=median.median_pearson,
        median_fvu_median=median.median_fvu,
    )


def _tv_median(model, windows, heads: list[int]) -> float | None:
    """Median TV error of the decomposition of ``heads`` over ``windows`` (``None`` without)."""
    tv = []
    mean_keys = dec.default_mean_keys(model)
    for tokens in windows:
        decomposition = dec.decompose_attention(model, tokens, heads=heads, mean_keys=mean_keys)
        tv.append(decomposition.tv_distance()[:, 1:].flatten())
    return float(torch.cat(tv).median()) if tv else None


def matched_exponential(pattern: Float[Tensor, " key_pos"]) -> Float[Tensor, " key_pos"]:
    """The exponential kernel over ``i = 0..n`` with the same mean distance ``n - i`` as
    ``pattern`` (bisection on the decay length)."""
    pattern = pattern.double()
    target = float(tx.mean_distance(pattern))
    distance = torch.arange(len(pattern) - 1, -1, -1, dtype=torch.float64, device=pattern.device)
    low, high = 0.01, 1e4
    for _ in range(80):
        mid = math.sqrt(low * high)
        if float((torch.softmax(-distance / mid, 0) * distance).sum()) < target:
            low = mid
        else:
            high = mid
    return torch.softmax(-distance / math.sqrt(low * high), 0)


def exponential_tv(pattern: Float[Tensor, " key_pos"]) -> float:
    """TV distance between a kernel ``pos(i), i = 0..n`` and :func:`matched_exponential` (0 for an
    exponential kernel)."""
    return float(0.5 * (matched_exponential(pattern) - pattern.double()).abs().sum())


@torch.no_grad()
def difficulty_measurements(model, truth, text_tokens=None) -> dict:
    """Measure, on the weights and one text, each GPT-2 difficulty planted (issue 13).

    Returns a flat dict of numbers (see the keys); ``text_tokens`` is a ``[BOS, ...]`` window
    (default: the calibration text).
    """
    return {
        **position_measurements(model, truth),
        **kernel_measurements(model, truth),
        **previous_token_measurements(model, truth, text_tokens),
        **topic_measurements(model, truth),
    }


def position_measurements(model, truth) -> dict:
    """Position norms and their principal components; how much tokens overlap positions."""
    out: dict = {}
    w_e, w_pos = model.W_E.double(), model.W_pos.double()
    norms = w_pos.norm(dim=1)
    late = norms[100:].median()
    out["pos_norm_0_over_late"] = float(norms[0] / late)
    out["pos_norm_1_over_late"] = float(norms[1] / late)
    out["pos_norm_50_over_late"] = float(norms[50] / late)
    out["pos_norm_late_max_over_min"] = float(norms[100:].max() / norms[100:].min())
    centred = w_pos[1:] - w_pos[1:].mean(0)
    u, s, _ = torch.linalg.svd(centred, full_matrices=False)
    share = (s**2).cumsum(0) / (s**2).sum()
    out["pos_pca_top2_share"], out["pos_pca_top6_share"] = float(share[1]), float(share[5])
    out["pos_pca_top6_sign_changes"] = [
        int((u[1:, k] * u[:-1, k] < 0).sum()) for k in range(6)]
    unit_e = torch.nn.functional.normalize(w_e[:-1], dim=1)
    unit_p = torch.nn.functional.normalize(w_pos, dim=1)
    max_cos = (unit_e @ unit_p.T).abs().max(1).values
    out["token_pos_max_abs_cos_median"] = float(max_cos.median())
    out["token_pos_max_abs_cos_max"] = float(max_cos.max())
    out["token_pos_max_abs_cos_argmax"] = model.tokenizer.decode([int(max_cos.argmax())])
    if truth.glitch_token_ids:
        out["token_pos_max_abs_cos_glitch_median"] = float(max_cos[truth.glitch_token_ids].median())
    return out


def kernel_measurements(model, truth) -> dict:
    """How far the contextual kernels are from exponential, and how they change with the
    destination token and the position; how content weights depend on the destination."""
    out: dict = {}
    heads = truth.head_groups["contextual"]
    reference = dec.default_reference_tokens(model)
    mean_keys = dec.default_mean_keys(model)
    if heads:
        patterns = tx.layer0_patterns(model, 500, tx.DESTINATIONS, heads, mean_keys[:501])
        n_eff = tx.kernel_width(patterns)  # [dest, head]
        out["kernel_exponential_tv"] = {h: round(exponential_tv(patterns[0, k]), 3)
                                        for k, h in enumerate(heads)}
        out["kernel_n_eff_the"] = {h: round(float(n_eff[0, k]), 1) for k, h in enumerate(heads)}
        ratio = n_eff.max(0).values / n_eff.min(0).values
        out["kernel_n_eff_destination_max_over_min"] = {
            h: round(float(ratio[k]), 3) for k, h in enumerate(heads)}
        the = token_id(model, " the")
        by_position = {}
        for n in (150, 300, 500, 900):
            pattern = dec.positional_pattern(
                model, n, the, heads=heads, mean_keys=mean_keys[: n + 1])
            by_position[n] = tx.kernel_width(pattern)
        stacked = torch.stack(list(by_position.values()))
        out["kernel_n_eff_position_max_over_min"] = {
            h: round(float(stacked[:, k].max() / stacked[:, k].min()), 3)
            for k, h in enumerate(heads)}
        # Content weights against the destination token.
        ids = torch.unique(reference)
        log_c = torch.stack([dec.content_log_weights(model, 500, d, ids, heads).double()
                             for d in tx.DESTINATIONS])  # [dest, head, token]
        corr = []
        for k in range(len(heads)):
            x = log_c[:, k] - log_c[:, k].mean(-1, keepdim=True)
            x = x / x.norm(dim=-1, keepdim=True)
            c = x @ x.T
            corr.append(c[0, 1:])  # ' the' against every other destination
        corr = torch.stack(corr)
        out["content_corr_the_vs_other_destinations_median"] = float(corr.median())
        out["content_corr_the_vs_other_destinations_min"] = float(corr.min())
        spread = log_c.std(-1)  # [dest, head]
        out["content_sd_destination_max_over_min_median"] = float(
            (spread.max(0).values / spread.min(0).values).median())
    return out


def previous_token_measurements(model, truth, text_tokens=None) -> dict:
    """Where the detokenization heads attend on a real text: previous token, current token."""
    out: dict = {}
    if text_tokens is None:
        text_tokens = calibration_tokens(model.tokenizer)
    hook = "blocks.0.attn.hook_pattern"
    pattern = run_until(model, text_tokens[None], hook)[hook][0].cpu().double()  # [head, q, k]
    n = pattern.shape[-1]
    rows = torch.arange(2, n)
    for h in truth.head_groups.get("detokenization", []):
        out[f"head{h}_attention_previous"] = float(pattern[h, rows, rows - 1].mean())
        out[f"head{h}_attention_current"] = float(pattern[h, rows, rows].mean())
    return out


def topic_measurements(model, truth) -> dict:
    """How graded, overlapping and superposed the topic directions are (directions from the
    planting tokens' embeddings), and how far label words carry their topic."""
    out: dict = {}
    w_e = model.W_E.cpu().double()
    unit = torch.nn.functional.normalize(w_e[:-1] - w_e[:-1].mean(0), dim=1)
    topics = list(truth.planting_token_ids)
    directions = torch.stack([unit[truth.planting_token_ids[t]].mean(0) for t in topics])
    directions = torch.nn.functional.normalize(directions, dim=1)
    cos = directions @ directions.T
    off = cos[~torch.eye(len(topics), dtype=torch.bool)]
    out["topic_direction_abs_cos_median"] = float(off.abs().median())
    out["topic_direction_abs_cos_max"] = float(off.abs().max())
    projection = unit @ directions.T  # [vocab, topic]
    z = (projection - projection.median(0).values) / projection.std(0)
    strong = z > 4
    out["tokens_on_two_or_more_topics"] = int((strong.sum(1) >= 2).sum())
    graded, label_z, planting_z = [], {}, {}
    for k, t in enumerate(topics):
        p = projection[truth.planting_token_ids[t], k]
        graded.append(float(p.std() / p.mean()))
        planting_z[t] = round(float(z[truth.planting_token_ids[t], k].median()), 1)
        if truth.label_token_ids.get(t):
            label_z[t] = round(float(z[truth.label_token_ids[t], k].median()), 1)
    out["planting_projection_cv_median"] = float(torch.tensor(graded).median())
    out["planting_tokens_median_z"] = planting_z
    out["label_tokens_median_z"] = label_z
    return out


def summarise(runs: list[RecoveryRun]) -> list[str]:
    """Mean and worst over seeds of each measure (worst: lowest recall/precision/r, highest FVU)."""
    lines = []
    ok = [r for r in runs if r.variant == "standard"]
    if not ok:
        return lines
    lines.append(f"contextual heads recovered: {sum(r.contextual_recovered for r in ok)}"
                 f"/{len(ok)} seeds; all four groups: {sum(r.groups_recovered for r in ok)}"
                 f"/{len(ok)}")
    for theta in THETAS:
        p = [r.precision[theta] for r in ok]
        rc = [r.recall[theta] for r in ok]
        n = [r.found[theta] for r in ok]
        lines.append(
            f"theta {theta:>2}: precision mean {sum(p) / len(p):.3f} worst {min(p):.3f} | recall "
            f"mean {sum(rc) / len(rc):.3f} worst {min(rc):.3f} | found mean {sum(n) / len(n):.1f}"
            f" range {min(n)}-{max(n)}")
    for key, worst in (("median_r_per_position", min), ("median_fvu_per_position", max),
                       ("median_r_median", min), ("median_fvu_median", max),
                       ("median_fvu_planted_only", max), ("tv_median", max)):
        values = [getattr(r, key) for r in ok if getattr(r, key) is not None]
        if values:
            lines.append(f"{key}: mean {sum(values) / len(values):.4f} worst {worst(values):.4f}")
    measured = [r.difficulties for r in ok if r.difficulties is not None]
    if measured:
        lines += _difficulty_lines(measured)
    return lines


def _difficulty_lines(measured: list[dict]) -> list[str]:
    """Each difficulty's range over seeds (per-head values pooled), as :func:`summarise` prints."""
    lines = ["difficulties (min .. max over seeds; per-head values pooled):"]
    for key in measured[0]:
        values = []
        for m in measured:
            value = m[key]
            if isinstance(value, dict):
                values += [v for v in value.values() if isinstance(v, (int, float))]
            elif isinstance(value, (int, float)):
                values.append(value)
        if values:
            lines.append(f"  {key}: {min(values):.3f} .. {max(values):.3f}")
    return lines


# ----------------------------------------------------------------------------------------------
# The appendix's tables: the plan of the heads, and the difficulties measured
# ----------------------------------------------------------------------------------------------

#: Decimals of :func:`planned_heads`' columns (the other numbers: one decimal).
PLAN_DECIMALS = {"width w": 1, "stretch": 2, "tail": 2, "n_eff (planned)": 1, "content sd": 2}


def planned_heads(truth) -> pd.DataFrame:
    """The plan of the planted layer-0 heads (``truth``: the planted model's
    :class:`~context_neurons.models.planted_plan.PlantedTruth`), one row per head: its group,
    kernel shape, decay length ``w``, stretch and tail of its target log-kernel and the planned
    kernel's width at ``n = 500`` (the first six columns: the kernel), then the content part of
    its score: the content sd at the destination ``' the'`` and across destinations, and the
    stop-word, BOS and duplicate-token weights (nats)."""
    return pd.DataFrame(
        [
            {
                "head": h,
                "group": plan.group,
                "kernel": plan.kernel,
                "width w": plan.width,
                "stretch": plan.stretch,
                "tail": plan.tail,
                "n_eff (planned)": round(truth.kernel_n_eff[h], 1),
                "content sd": plan.content_sd,
                "destination sd": plan.content_destination_sd,
                "stop-word": plan.stopword_weight,
                "BOS": plan.bos_weight,
                "duplicate": plan.duplicate_strength,
            }
            for h, plan in sorted(truth.layer0_heads.items())
        ]
    ).set_index("head")


def planned_neurons(truth) -> pd.DataFrame:
    """The planted layer-0 neurons (``truth``: the planted model's record), one row per neuron:
    the context neurons, then the distractors (which discovery should not return); what each
    reads (signed topic weights, or the glitch direction), its gain and its description."""

    def row(j: int, kind: str, plan) -> dict:
        reads = ", ".join(f"{w:+.1f} {k}" for k, w in plan.topics.items())
        return {"neuron": j, "kind": kind, "reads": reads or "glitch", "gain": plan.gain,
                "description": plan.description}

    return pd.DataFrame(
        [row(j, "context", plan) for j, plan in sorted(truth.context_neurons.items())]
        + [row(j, f"distractor: {plan.kind}", plan)
           for j, plan in sorted(truth.distractor_neurons.items())]
    ).set_index("neuron")


def planned_lookups(truth) -> pd.DataFrame:
    """The planted layer-1 look-ups, one row each: head, neuron, topic, target token and, for
    the hard one, its second head and what makes it hard."""
    return pd.DataFrame([
        {"layer": plan.layer, "head": plan.head, "neuron": plan.neuron, "topic": plan.topic,
         "target": plan.target,
         "second head": "" if plan.second_head is None else plan.second_head,
         "description": plan.description}
        for plan in truth.lookups
    ])


def _spread(values: dict) -> str:
    """``min .. max`` of per-head values, two decimals."""
    return f"{min(values.values()):.2f} .. {max(values.values()):.2f}"


def difficulty_table(measured: dict, truth) -> pd.DataFrame:
    """Each planted difficulty as :func:`difficulty_measurements` measured it (``measured``),
    as printed text, beside what GPT-2 is described to show (from the literature and the paper's
    appendix: a description, not a measurement); one row per difficulty."""
    detokenization = truth.head_groups["detokenization"]
    previous = {h: measured[f"head{h}_attention_previous"] for h in detokenization}
    current = {h: measured[f"head{h}_attention_current"] for h in detokenization}
    return pd.DataFrame(
        [
            ("position 0 norm / typical norm", f"{measured['pos_norm_0_over_late']:.2f}",
             "position 0 stands out"),
            ("position 1 norm / typical norm", f"{measured['pos_norm_1_over_late']:.2f}",
             "norms fall over the first positions"),
            ("max / min norm beyond position 100",
             f"{measured['pos_norm_late_max_over_min']:.2f}", "norms vary"),
            ("share of W_pos variance in 6 components", f"{measured['pos_pca_top6_share']:.2f}",
             "low-dimensional helix"),
            ("sign changes of those 6 components", str(measured["pos_pca_top6_sign_changes"]),
             "sinusoids of rising frequency"),
            ("token-position max |cos|, median token",
             f"{measured['token_pos_max_abs_cos_median']:.3f}", "not orthogonal"),
            ("same, glitch tokens", f"{measured['token_pos_max_abs_cos_glitch_median']:.3f}",
             "glitch tokens overlap most"),
            ("TV to the nearest exponential, per head", _spread(measured["kernel_exponential_tv"]),
             "kernels are not exactly exponential"),
            ("n_eff max/min over destinations, per head",
             _spread(measured["kernel_n_eff_destination_max_over_min"]),
             "kernels change with the query"),
            ("n_eff max/min over n = 150..900, per head",
             _spread(measured["kernel_n_eff_position_max_over_min"]), "and with the position"),
            ("content: correlation ' the' vs other destinations",
             f"{measured['content_corr_the_vs_other_destinations_median']:.2f}",
             "content weights depend on the destination"),
            ("detokenization heads: attention on i = n - 1", _spread(previous),
             "previous-token heads"),
            ("detokenization heads: attention on i = n", _spread(current),
             "the paper's appendix: 41-80% at i = n"),
            ("topic directions: median |cos|",
             f"{measured['topic_direction_abs_cos_median']:.2f}", "features are not orthogonal"),
            ("tokens strongly on two or more topics", str(measured["tokens_on_two_or_more_topics"]),
             "superposition"),
            ("planting tokens: sd / mean of topic projection",
             f"{measured['planting_projection_cv_median']:.2f}", "graded membership"),
        ],
        columns=["difficulty", "measured here", "GPT-2 (described)"],
    ).set_index("difficulty")
