"""A certified band. This module turns chapter 3's bounds on denominators into an interval around
every approximated pre-activation (issue 56; chapter 6, section "A band on every activation").

**The model (chapter 3).** Position 0 holds ``<|endoftext|>``; the tokens ``t_1..t_{n-1}`` before a
destination ``n`` are independent draws from the *calibration distribution* (the unigram
distribution of the circuit's calibration text, BOS left out, :func:`calibration_distribution`).
Everything below is a statement about one (neuron, destination) pair with probability taken over
those draws; the destination's own token ``t_n`` is the text's.

**The exact pre-activation.** With ``r_n`` the input of LN2 (``blocks.0.hook_resid_mid``),
``u_j = centred(gamma2 * W_in[:, j])`` and ``beta_j = beta2 . W_in[:, j] + b_in[j]``,

    y_j(n) = s(n) <r_n, u_j> + beta_j,        s(n) = 1 / sqrt(|centred(r_n)|^2 / d + eps),

and ``r_n`` is the sum of

    F_n       = W_E[t_n] + W_pos[n] + b_O                    direct path (exact: it is known)
              + sum_{h certified} P_h(n)                     their positional part, own kernels
              + sum_{h not contextual} o_h(t_n, n)           other heads, at the current token
    B_h(n)    = N_h(n) / D_h(n)   for each certified head    the bag, denominator of the text
    H_h(n)    = the exact output of a contextual head the assumptions check fails (below)
    e_n       = everything else (the residual)

with ``N_h(n) = sum_{i<=n} K[n, i] c_h(t_i) v_h(t_i) W_O^h`` the bag's numerator (the shared
kernel, content weights and values at the reference position, :mod:`context_neurons.circuit`)
and ``D_h(n) = sum_{j<n} pos_{h,n}(j) c_h(t_j) + pos_{h,n}(n) c_h(' the')`` the text's denominator
in the circuit's frame (``ContextualCircuit.text_log_denominators``). The approximation of chapter
6 is ``F_n + sum_h N_h(n) / Dcal_h(n)`` read through one LN2 scale; the band replaces the
calibration's ``Dcal_h(n)`` by what chapter 3 says ``D_h(n)`` can be.

**Step 1, the denominator (bounded under the model).** ``D_h(n) = pos(0) c(BOS) + sum_{0<j<n}
pos(j) c(t_j) + pos(n) c(' the')`` has mean ``mu_h(n)`` (``c`` replaced by its mean ``m_h`` on the
calibration distribution); Hoeffding (``c`` in ``[a, b]``, the smallest and largest weight on the
distribution's support) and Chebyshev (variance ``sigma^2``) each give a ``tau`` with
``P(|D - mu| >= tau) <= delta_D / H``; the smaller is taken (both are fixed before the text is
drawn, so the smaller one holds too). On that event ``N_h / D_h`` lies between ``N_h / (mu + tau)``
and ``N_h / (mu - tau)`` (component by component, by the sign of ``<N_h, u_j>``). Where
``mu - tau <= 0`` the bound says nothing and the band is infinite (reported as such).

**Step 2, the residual (measured, named as such).** ``e_n`` holds what the model of chapter 3 does
not describe: the shared kernel against each head's own, the content weights and values read at
the reference position, the destination's query (``' the'`` against ``t_n``), and the other heads'
attention away from the current token. It is *measured* under the same model: on ``m`` texts drawn
from the calibration distribution (:func:`measure_residual`) we take, at each position, the
``ceil((m + 1)(1 - delta_r))``-th smallest of ``|<e_n, u_j>|`` (per neuron) and of
``|centred(e_n)|`` (the split-conformal quantile: for a new text drawn the same way, the residual
is at most it with probability ``>= 1 - delta_r``, whatever its distribution).

**Step 3, LN2's scale (bounded, not assumed).** With ``G_n = centred(F_n) + sum_h
centred(N_h) / mu_h`` the centre, the steps above give ``|centred(r_n) - G_n| <= Delta_n = sum_h
|centred(N_h)| max|1/D - 1/mu| + sum_h max_{i<=n} |centred(o_h(t_i, i))| + R_n``, so ``sqrt(d)
std(r_n)`` lies in ``[|G_n| - Delta_n, |G_n| + Delta_n]`` and ``s(n)`` between the two
corresponding scales.

**Step 4, ``W_in``.** ``<r_n, u_j>`` lies in ``[A_lo, A_hi]``: ``<F_n, u_j>`` plus each certified
head's interval from step 1, each failed head's interval, and ``+- rho_j(n)`` from step 2. Then
``y_j(n)`` lies between the smallest and largest of the four products of ``[s_lo, s_hi]`` and
``[A_lo, A_hi]``, plus ``beta_j`` (interval arithmetic, no approximation).

**A head the assumptions check fails** (``certified`` leaves it out) is not written as a bag: its
output is a convex combination of its exact value outputs ``o_h(t_i, i)`` at the sources
``i <= n``, so ``<H_h(n), u_j>`` lies between their running minimum and maximum, with probability
one but usually wide. Its share of the band says how much that head costs.

**The union bound.** Per (neuron, position) pair: ``delta / 2`` for the denominators (split evenly
over the certified heads), ``delta / 4`` for the projected residual, ``delta / 4`` for its norm;
so the band holds with probability ``>= 1 - delta`` for each pair. It is *not* simultaneous over
pairs: a statement about all ``P J`` pairs of a text at once would take ``delta / (P J)``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch
from jaxtyping import Bool, Float, Int
from torch import Tensor

from context_neurons import decomposition as dec
from context_neurons.checks import InputError, check_heads, check_neurons, check_tokens
from context_neurons.circuit import ContextualCircuit
from context_neurons.evaluation.approximation import approximator, true_pre_activations
from context_neurons.hooks import run_until
from context_neurons.models.weights import Model, as_weights
from context_neurons.stability.bounds import chebyshev_deviation, hoeffding_deviation

#: Shares of ``delta`` (module docstring, "The union bound").
BUDGET = {"denominators": 0.5, "projected residual": 0.25, "residual norm": 0.25}
#: Texts drawn from the calibration distribution to measure the residual (step 2).
N_RESIDUAL_TEXTS = 64


class BandError(InputError):
    """A band that cannot be computed as asked; the message says why."""


def check_delta(delta) -> float:
    """``delta`` as a float in ``(0, 1)``."""
    try:
        value = float(delta)
    except (TypeError, ValueError):
        raise BandError(f"delta must be a number in (0, 1), got {delta!r}.") from None
    if not 0 < value < 1:
        raise BandError(f"delta must be in (0, 1) (the band fails with probability at most "
                        f"delta), got {delta!r}.")
    return value


def calibration_distribution(
    circuit: ContextualCircuit,
) -> tuple[Int[Tensor, " n_tokens"], Float[Tensor, " n_tokens"]]:
    """The model's token distribution: the calibration text's unigram frequencies, BOS left out.

    Returns:
        ``(token_ids, probabilities)`` of the support.
    """
    tokens = circuit.calibration.tokens
    body = tokens[1:][tokens[1:] != tokens[0]]
    support, counts = torch.unique(body, return_counts=True)
    return support, counts.double() / counts.sum()


def sample_texts(
    circuit: ContextualCircuit, n_texts: int, length: int, seed: int = 0
) -> Int[Tensor, "batch pos"]:
    """Texts of the model of chapter 3: BOS, then ``length - 1`` independent draws from
    :func:`calibration_distribution`."""
    support, probs = calibration_distribution(circuit)
    gen = torch.Generator().manual_seed(seed)
    draws = torch.multinomial(probs, n_texts * (length - 1), replacement=True, generator=gen)
    body = support.cpu()[draws].view(n_texts, length - 1)
    bos = torch.full((n_texts, 1), int(circuit.calibration.tokens[0]), dtype=body.dtype)
    return torch.cat([bos, body], dim=1).to(circuit.kernel.device)


@dataclass
class DenominatorInterval:
    """Step 1: ``D_h(n) / m_h`` lies in ``[mean - tau, mean + tau]`` with probability
    ``>= 1 - delta_head`` (each certified head, each position), in units of the mean content
    weight ``m_h`` on the calibration distribution."""

    heads: list[int]
    delta_head: float
    log_mean_weight: Float[Tensor, " ctx_head"]  # log m_h
    mean: Float[Tensor, "ctx_head pos"]
    tau: Float[Tensor, "ctx_head pos"]

    @property
    def lower(self) -> Float[Tensor, "ctx_head pos"]:
        return self.mean - self.tau

    @property
    def upper(self) -> Float[Tensor, "ctx_head pos"]:
        return self.mean + self.tau


def denominator_interval(
    circuit: ContextualCircuit, heads: list[int], n_positions: int, delta_head: float
) -> DenominatorInterval:
    """Hoeffding and Chebyshev deviations of each certified head's ``D_h(n)`` (module docstring,
    step 1), the smaller of the two at probability ``delta_head``."""
    support, probs = calibration_distribution(circuit)
    rows = [circuit.heads.index(h) for h in heads]
    log_c = circuit.log_content[rows].double()  # [H, vocab]
    log_m = torch.logsumexp(log_c[:, support] + probs.log().to(log_c.device)[None], dim=-1)
    values = torch.exp(log_c[:, support] - log_m[:, None])  # c / m on the support
    variance = (probs.to(values.device)[None] * (values - 1) ** 2).sum(-1)
    kernels = circuit.head_kernels[rows, :n_positions, :n_positions].double()
    bos, dest = int(circuit.calibration.tokens[0]), circuit.dest_token
    c_bos = torch.exp(log_c[:, bos] - log_m)
    c_dest = torch.exp(log_c[:, dest] - log_m)
    mean = torch.empty(len(rows), n_positions, dtype=torch.float64)
    tau = torch.zeros_like(mean)
    for k in range(len(rows)):
        for n in range(n_positions):
            row = kernels[k, n]
            if n == 0:
                mean[k, 0] = c_bos[k]
                continue
            random = row[1:n]
            mean[k, n] = row[0] * c_bos[k] + random.sum() + row[n] * c_dest[k]
            if n == 1:
                continue
            sum_sq = float((random**2).sum())
            low, high = float(values[k].min()), float(values[k].max())
            tau[k, n] = min(hoeffding_deviation(delta_head, sum_sq, low, high),
                            chebyshev_deviation(delta_head, sum_sq, float(variance[k])))
    return DenominatorInterval(heads=list(heads), delta_head=delta_head,
                               log_mean_weight=log_m.cpu(), mean=mean, tau=tau)


@dataclass
class _Pieces:
    """The terms of the module docstring on a batch of texts (float64, on the CPU)."""

    fixed: Float[Tensor, "batch pos d_model"]  # F_n
    numerators: Float[Tensor, "batch pos ctx_head d_model"]  # N_h(n), units of m_h
    values: Float[Tensor, "batch pos head_index d_model"]  # o_h(t_i, i), every head


@torch.no_grad()
def _pieces(circuit: ContextualCircuit, model: Model, tokens: Int[Tensor, "batch pos"],
            certified: list[int], interval: DenominatorInterval) -> _Pieces:
    w = as_weights(model)
    n = tokens.shape[1]
    tokens = tokens.to(w.W_E.device)
    resid_pre = w.W_E[tokens] + w.W_pos[:n]
    values = torch.einsum("bnhe,hed->bnhd",
                          torch.einsum("bnd,hde->bnhe", dec.ln1_apply(w, resid_pre), w.W_V) + w.b_V,
                          w.W_O).double().cpu()
    other = [h for h in range(w.cfg.n_heads) if h not in circuit.heads]
    rows = [circuit.heads.index(h) for h in certified]
    fixed = (resid_pre + w.b_O).double().cpu() + values[:, :, other].sum(2)
    if rows:
        kernels = circuit.head_kernels[rows, :n, :n].double().cpu()
        value_out = torch.einsum("ihe,hed->hid", circuit.mean_values[:n, rows].double().cpu(),
                                 circuit.w_o[rows].double().cpu())
        fixed = fixed + torch.einsum("hni,hid->nd", kernels, value_out)[None]
        weight = torch.exp(circuit.log_content[rows].double().cpu()[:, tokens.cpu()]
                           - interval.log_mean_weight[:, None, None])  # [H, b, pos]
        z = torch.einsum("bihe,hed->bihd", circuit.token_values[tokens][:, :, rows].double().cpu(),
                         circuit.w_o[rows].double().cpu())
        z = z * weight.permute(1, 2, 0)[..., None]
        numerators = torch.einsum("ni,bihd->bnhd", circuit.kernel[:n, :n].double().cpu(), z)
    else:
        numerators = torch.zeros(len(tokens), n, 0, w.cfg.d_model, dtype=torch.float64)
    return _Pieces(fixed=fixed, numerators=numerators, values=values)


def _read(model: Model, neurons: list[int]) -> tuple[Tensor, Tensor]:
    """``u_j = centred(gamma2 * W_in[:, j])`` (``[d_model, n_neurons]``) and ``beta_j``."""
    w = as_weights(model)
    read = w.ln2_w[:, None] * w.W_in[:, neurons]
    beta = w.ln2_b @ w.W_in[:, neurons] + w.b_in[neurons]
    return (read - read.mean(0, keepdim=True)).double().cpu(), beta.double().cpu()


@dataclass
class BandResidual:
    """Step 2: the measured residual's split-conformal quantiles at each position (module
    docstring), measured on ``n_texts`` texts drawn from the calibration distribution.

    Attributes:
        projected: ``rho_j(n)``, the quantile of ``|<e_n, u_j>|``, ``[pos, n_neurons]``.
        norm: ``R_n``, the quantile of ``|centred(e_n)|``, ``[pos]``.
    """

    neurons: list[int]
    certified: list[int]
    delta_projected: float
    delta_norm: float
    n_texts: int
    seed: int
    projected: Float[Tensor, "pos n_neurons"]
    norm: Float[Tensor, " pos"]


def conformal_rank(n_texts: int, delta: float) -> int:
    """``ceil((m + 1)(1 - delta))``, the order statistic of the split-conformal quantile.

    Raises:
        BandError: when ``m`` texts are too few for level ``1 - delta``.
    """
    rank = math.ceil((n_texts + 1) * (1 - delta))
    if rank > n_texts:
        raise BandError(f"{n_texts} texts are too few for a quantile at level {1 - delta:g}: "
                        f"take at least {math.ceil(1 / delta) - 1}, or a larger delta.")
    return rank


@torch.no_grad()
def measure_residual(
    circuit: ContextualCircuit,
    model: Model,
    neurons,
    delta,
    certified=None,
    n_texts: int = N_RESIDUAL_TEXTS,
    length: int | None = None,
    seed: int = 0,
    batch: int = 4,
) -> BandResidual:
    """Measure step 2's residual ``e_n`` on texts of the model (module docstring).

    Args:
        circuit, model, neurons: as :func:`certified_band`.
        delta: the band's level; the residual gets ``delta / 4`` for its projection and as much
            for its norm (:data:`BUDGET`).
        certified: the contextual heads written as bags (default: all the circuit's).
        n_texts: texts drawn (:func:`sample_texts`).
        length: their length (default ``n_ctx``); the band covers positions below it.
        seed: the draws' seed.
        batch: texts per forward pass.
    """
    delta = check_delta(delta)
    neurons = check_neurons(model, neurons)
    certified = _certified(circuit, model, certified)
    length = length or model.cfg.n_ctx
    d_proj, d_norm = delta * BUDGET["projected residual"], delta * BUDGET["residual norm"]
    rank_proj, rank_norm = conformal_rank(n_texts, d_proj), conformal_rank(n_texts, d_norm)
    texts = sample_texts(circuit, n_texts, length, seed)
    interval = denominator_interval(circuit, certified, length, 0.5)
    read, _ = _read(model, neurons)
    w_o = as_weights(model).W_O
    failed = [h for h in circuit.heads if h not in certified]
    projected, norms = [], []
    for start in range(0, n_texts, batch):
        chunk = texts[start : start + batch]
        z = run_until(model, chunk, "blocks.0.attn.hook_z")["blocks.0.attn.hook_z"]
        exact = torch.einsum("bphe,hed->bphd", z, w_o).double().cpu()  # each head's output
        pieces = _pieces(circuit, model, chunk, certified, interval)
        rows = [circuit.heads.index(h) for h in certified]
        log_d = torch.stack([circuit.text_log_denominators(model, t)[rows] for t in chunk])
        own = torch.exp(log_d.double().cpu() - interval.log_mean_weight[None, :, None])
        w = as_weights(model)
        resid_pre = (w.W_E[chunk] + w.W_pos[:length]).double().cpu()
        r = resid_pre + exact.sum(2) + w.b_O.double().cpu()
        approx = (pieces.fixed + (pieces.numerators / own.permute(0, 2, 1)[..., None]).sum(2)
                  + exact[:, :, failed].sum(2))
        e = r - approx
        projected.append((e @ read).abs())
        norms.append(dec.centred(e).norm(dim=-1))
    projected, norms = torch.cat(projected), torch.cat(norms)
    return BandResidual(
        neurons=neurons, certified=certified, delta_projected=d_proj, delta_norm=d_norm,
        n_texts=n_texts, seed=seed,
        projected=projected.sort(dim=0).values[rank_proj - 1],
        norm=norms.sort(dim=0).values[rank_norm - 1],
    )


def _certified(circuit: ContextualCircuit, model: Model, certified) -> list[int]:
    if certified is None:
        return list(circuit.heads)
    if len(list(certified)) == 0:  # every contextual head bounded by its values' range
        return []
    certified = check_heads(model, certified)
    stray = [h for h in certified if h not in circuit.heads]
    if stray:
        raise BandError(f"Heads {stray} are not in the circuit (its heads: {circuit.heads}); only "
                        "a contextual head can be certified as a bag.")
    return certified


@dataclass
class CertifiedBand:
    """An interval per (text, position, neuron) holding the true pre-activation with probability
    ``>= 1 - delta`` under chapter 3's model (module docstring).

    Attributes:
        neurons: the neurons, in the last axis.
        certified: the contextual heads written as bags (step 1); ``failed``: the circuit's other
            heads, bounded by their value outputs' range.
        delta: the failure probability per pair; ``budget``: its split (:data:`BUDGET`).
        lower, upper: the band (``-inf``/``inf`` where a denominator bound says nothing).
        approximate: chapter 6's approximate pre-activation (per-position denominators).
        scale_lower, scale_upper: the LN2 scale's bounds (step 3).
        denominators: step 1's intervals.
        residual: step 2's measured quantiles.
    """

    neurons: list[int]
    certified: list[int]
    failed: list[int]
    delta: float
    budget: dict[str, float]
    lower: Float[Tensor, "batch pos n_neurons"]
    upper: Float[Tensor, "batch pos n_neurons"]
    approximate: Float[Tensor, "batch pos n_neurons"]
    scale_lower: Float[Tensor, "batch pos"]
    scale_upper: Float[Tensor, "batch pos"]
    denominators: DenominatorInterval = field(repr=False)
    residual: BandResidual = field(repr=False)

    @property
    def width(self) -> Float[Tensor, "batch pos n_neurons"]:
        return self.upper - self.lower

    def contains(self, values: Float[Tensor, "batch pos n_neurons"]) -> Bool[Tensor, "batch pos n_neurons"]:
        """Whether each value lies in the band."""
        values = values.to(self.lower.device, self.lower.dtype)
        if values.shape != self.lower.shape:
            raise BandError(f"Values of shape {tuple(values.shape)} do not match the band's "
                            f"{tuple(self.lower.shape)} (batch, pos, neurons).")
        return (values >= self.lower) & (values <= self.upper)


_RESIDUALS: dict = {}


def cached_residual(circuit, model, neurons, delta, certified, length, n_texts=N_RESIDUAL_TEXTS,
                    seed=0) -> BandResidual:
    """:func:`measure_residual`, kept per circuit, neurons, delta, heads and length."""
    key = (id(circuit), id(model), tuple(neurons), float(delta), tuple(certified), length,
           n_texts, seed)
    if key not in _RESIDUALS:
        if len(_RESIDUALS) > 8:
            _RESIDUALS.clear()
        _RESIDUALS[key] = measure_residual(circuit, model, neurons, delta, certified, n_texts,
                                           length, seed)
    return _RESIDUALS[key]


@torch.no_grad()
def certified_band(
    circuit: ContextualCircuit,
    model: Model,
    tokens: Int[Tensor, "*batch pos"],
    neurons,
    delta=0.1,
    certified=None,
    residual: BandResidual | None = None,
    batch: int | None = None,
) -> CertifiedBand:
    """The band ``[lower, upper]`` around each pre-activation of ``neurons`` along ``tokens``.

    Args:
        circuit: the contextual circuit.
        model: the model.
        tokens: a batch of texts (``<|endoftext|>`` first), at most the residual's length.
        neurons: layer-0 neurons.
        delta: the probability, per (neuron, position), that the band misses under the model.
        certified: the contextual heads written as bags (default all the circuit's; leave out
            those the assumptions check fails, :func:`context_neurons.assumptions`).
        residual: step 2's measurement (:func:`measure_residual`; default: measured once on
            :data:`N_RESIDUAL_TEXTS` texts of the model's length and kept).
        batch: texts computed together (default: about ``2^22`` floats of head outputs,
            ``batch * pos * n_heads * d_model``).

    Returns:
        A :class:`CertifiedBand`.
    """
    delta = check_delta(delta)
    tokens = check_tokens(model, tokens)
    neurons = check_neurons(model, neurons)
    certified = _certified(circuit, model, certified)
    if residual is None:
        residual = cached_residual(circuit, model, neurons, delta, certified, model.cfg.n_ctx)
    if (residual.neurons != neurons or residual.certified != certified
            or not math.isclose(residual.delta_projected, delta * BUDGET["projected residual"])):
        raise BandError("The residual was measured for other neurons, heads or delta: measure it "
                        "with measure_residual(circuit, model, neurons, delta, certified).")
    n = tokens.shape[1]
    if n > len(residual.norm):
        raise BandError(f"The texts have {n} positions; the residual was measured on "
                        f"{len(residual.norm)}: measure it on longer texts (length=...).")
    delta_head = delta * BUDGET["denominators"] / max(len(certified), 1)
    interval = denominator_interval(circuit, certified, n, delta_head)
    read, beta = _read(model, neurons)
    batch = batch or max(1, 2**22 // (n * model.cfg.n_heads * model.cfg.d_model))
    parts = [_band_terms(circuit, model, tokens[start : start + batch], certified, interval,
                         residual, read, beta)
             for start in range(0, len(tokens), batch)]
    lower, upper, s_lo, s_hi = (torch.cat([part[k] for part in parts]) for k in range(4))
    approx = approximator(circuit, model, neurons)(tokens).double().cpu()
    return CertifiedBand(
        neurons=neurons, certified=certified,
        failed=[h for h in circuit.heads if h not in certified], delta=delta,
        budget=dict(BUDGET), lower=lower, upper=upper, approximate=approx, scale_lower=s_lo,
        scale_upper=s_hi, denominators=interval, residual=residual,
    )


def _band_terms(circuit, model, tokens, certified, interval, residual, read, beta):
    """Steps 1 to 4 (module docstring) on one batch of texts: lower, upper, and the scale's
    bounds."""
    n = tokens.shape[1]
    pieces = _pieces(circuit, model, tokens, certified, interval)
    failed = [h for h in circuit.heads if h not in certified]

    # Step 1 and step 4: the projection <r_n, u_j>.
    mean, low, high = (x.T[None, :, :, None] for x in (interval.mean, interval.lower,
                                                        interval.upper))  # [1, pos, H, 1]
    num = pieces.numerators @ read  # [b, pos, H, J]
    bounded = low > 0
    inf = torch.tensor(math.inf, dtype=torch.float64)
    at_high = torch.where(bounded, num / high, -inf * num.sign())
    at_low = torch.where(bounded, num / low.clamp(min=1e-300), inf * num.sign())
    heads_lo = torch.minimum(at_low, at_high).nan_to_num(nan=0.0).sum(2)
    heads_hi = torch.maximum(at_low, at_high).nan_to_num(nan=0.0).sum(2)
    fail_proj = pieces.values[:, :, failed] @ read  # [b, pos, F, J]
    fail_lo = fail_proj.cummin(dim=1).values.sum(2)
    fail_hi = fail_proj.cummax(dim=1).values.sum(2)
    rho = residual.projected[:n].double().cpu()[None]
    base = pieces.fixed @ read
    a_lo = base + heads_lo + fail_lo - rho
    a_hi = base + heads_hi + fail_hi + rho

    # Step 3: LN2's scale.
    centre = dec.centred(pieces.fixed) + (dec.centred(pieces.numerators) / mean).sum(2)
    gap = torch.where(bounded, 1 / low.clamp(min=1e-300) - 1 / mean, inf)[..., 0]  # [1, pos, H]
    spread = (dec.centred(pieces.numerators).norm(dim=-1) * gap).nan_to_num(nan=0.0).sum(-1)
    spread = spread + dec.centred(pieces.values[:, :, failed]).norm(dim=-1).cummax(1).values.sum(-1)
    spread = spread + residual.norm[:n].double().cpu()[None]
    d_model, eps = read.shape[0], as_weights(model).cfg.eps
    size = centre.norm(dim=-1)
    s_lo = torch.rsqrt((size + spread) ** 2 / d_model + eps)
    s_hi = torch.rsqrt((size - spread).clamp(min=0) ** 2 / d_model + eps)

    lower, upper = interval_product(s_lo[..., None], s_hi[..., None], a_lo, a_hi)
    return lower + beta, upper + beta, s_lo, s_hi


def interval_product(s_lo: Tensor, s_hi: Tensor, a_lo: Tensor, a_hi: Tensor
                     ) -> tuple[Tensor, Tensor]:
    """``{s a : s in [s_lo, s_hi], a in [a_lo, a_hi]}`` with ``s_lo >= 0``: the smallest and
    largest of the four corner products. A corner ``0 * (+-inf)`` (a scale bound of zero against
    an unbounded projection) counts as ``+-inf``: ``s > 0`` can be arbitrarily small and ``a``
    arbitrarily large, so the product reaches any value of that sign."""
    corners = torch.stack([a_lo, a_hi, a_lo, a_hi])
    products = torch.stack([s_lo * a_lo, s_lo * a_hi, s_hi * a_lo, s_hi * a_hi])
    products = torch.where(products.isnan(), corners.sign() * math.inf, products)
    return products.min(0).values, products.max(0).values


def true_values(model: Model, tokens: Int[Tensor, "*batch pos"], neurons
                ) -> Float[Tensor, "batch pos n_neurons"]:
    """The model's own pre-activations (float64, CPU), to compare with a band."""
    return true_pre_activations(model, check_tokens(model, tokens), neurons).double().cpu()
