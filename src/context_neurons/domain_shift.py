"""Frequency-aware discovery: each neuron's predicted shift on a domain, from the weights, one
calibration text and unigram counts (chapter 8, section "A frequency-aware score").

The paper's score ``top[j]`` (:mod:`context_neurons.discovery.scores`) asks which tokens move
neuron ``j`` most, each token weighted equally. Under the paper's own assumptions (a text's
tokens drawn from its domain's distribution ``p_D``, denominators concentrated) a token moves the
neuron's expected input on a domain by ``p_D(t) eps_j(t)``, not by ``eps_j(t)``. This module
writes that algebra down for every path from a token to a layer-0 neuron's input and turns it into
a score.

**Paths.** The input of neuron ``j`` at position ``n`` reads the residual stream through LayerNorm
2, linearised with the calibration text's scale (chapter 5): ``x . w_j`` with the read vector
``w_j = s2 * centred(gamma2 * W_in[:, j])``. The residual holds the token's own embedding (the
*direct path*, ``eps_dir,j(t) = W_E[t] . w_j``) and each layer-0 head's output
``sum_i A_h[n, i] u_h(t_i)``, with ``u_h(t) = value_h(t) W_O^h`` and, from chapter 1,
``A_h[n, i] = pos_n(i) c_h(t_i) / D_h(n)``. Write ``eps_hj(t) = u_h(t) . w_j``.

**Mean.** Position 0 holds ``<|endoftext|>`` (BOS) with the weight ``b_n = pos_n(0) c_n(BOS)``;
the other keys are drawn from ``p``. With ``S_h(p) = sum_t p(t) c_h(t)`` and ``kappa_n =
pos_n(0)``, the expected denominator is ``E D_h(n) = b_n + (1 - kappa_n) S_h(p)`` and, to first
order in the denominator's fluctuation,

    E[head h's input to j at n] = beta_n eps_hj(BOS) + (1 - beta_n) m_hj(p),
    m_hj(p) = sum_t p(t) c_h(t) eps_hj(t) / S_h(p),    beta_n = b_n / E D_h(n)   (the BOS share).

The kernel drops out of the mean but for the BOS share. A window mean over positions
``start <= n < L`` averages ``beta_n``. The predicted **shift** of domain ``D`` is the mean under
``p_D`` minus the mean of the other domains' means (each domain weighted equally), per path; the
contextual heads' part and the rest (direct path and the other heads) are kept apart.

**Spread.** The fluctuation of a window mean around its expectation is, to first order,
``sum_i sum_paths a_hi g_h(t_i)`` with ``g_h(t) = (c_h(t) / S_h) (eps_hj(t) - m_hj)`` and the
path's position weights ``a_hi = (1/N) sum_{n >= i} pos_n(i) (1 - beta_n) / (1 - kappa_n)``
(``1/N`` at ``i`` itself for the direct path). For tokens drawn independently from ``p`` its
variance is ``sum_t p(t) g(t)^T A g(t)`` with ``A = a a^T`` over paths (the kernel's ``1 /
n_eff``, generalised to window means and to several paths reading the same token). Real text is
not independent draws (topics persist through a document), so the absolute spread is too small;
the score uses it only to put every neuron on its own scale.

**Score.** ``d_j(D) = shift_j(D) / sd_j`` (``sd_j``: the root mean over domains of the predicted
variance) and the contextual heads' predicted share ``rho_j(D) = shift_ctx_j(D) / shift_j(D)``. At
the domain ``D*`` of largest ``|d_j|``, ``score_j = |d_j(D*)| * clip(rho_j(D*), 0, 1)``: a neuron
scores high when its domain moves it by many of its own spreads and the contextual heads carry
that move. Fixed before any comparison with a truth (chapter 8's pre-registered protocol).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from jaxtyping import Float, Int
from torch import Tensor

from context_neurons import decomposition as dec
from context_neurons.checks import InputError, check_position, token_id
from context_neurons.circuit.build import _all_heads
from context_neurons.models.weights import Model, as_weights

#: First position of a window mean (as in :data:`context_neurons.activations.START`).
START = 32


@dataclass
class DomainShiftPrediction:
    """Predicted window-mean shifts and spreads of every neuron on every domain.

    Attributes:
        domains: the domain names, in order.
        heads: the heads counted as the contextual part.
        shift_context: the contextual heads' predicted shift, ``[domain, neuron]``.
        shift_other: the direct path's and the other heads' predicted shift.
        variance: the predicted within-domain variance of a window mean, ``[domain, neuron]``.
    """

    domains: list[str]
    heads: list[int]
    shift_context: Float[Tensor, "domain d_mlp"]
    shift_other: Float[Tensor, "domain d_mlp"]
    variance: Float[Tensor, "domain d_mlp"]

    @property
    def shift(self) -> Float[Tensor, "domain d_mlp"]:
        return self.shift_context + self.shift_other

    @property
    def sd(self) -> Float[Tensor, " d_mlp"]:
        """The pooled predicted spread: root mean over domains of the variance."""
        return self.variance.mean(0).clamp(min=1e-30).sqrt()

    def standardized(self) -> Float[Tensor, "domain d_mlp"]:
        return self.shift / self.sd

    def best_domain(self) -> Int[Tensor, " d_mlp"]:
        return self.standardized().abs().argmax(0)

    def context_share(self) -> Float[Tensor, "domain d_mlp"]:
        """``shift_context / shift`` (0 where the shift is exactly 0)."""
        total = self.shift
        safe = torch.where(total == 0, torch.ones_like(total), total)
        return torch.where(total == 0, torch.zeros_like(total), self.shift_context / safe)

    def score(self) -> Float[Tensor, " d_mlp"]:
        """``|d_j(D*)| * clip(rho_j(D*), 0, 1)`` (module docstring)."""
        best = self.best_domain()[None]
        d = self.standardized().gather(0, best)[0].abs()
        return d * self.context_share().gather(0, best)[0].clamp(0, 1)


# ----------------------------------------------------------------------------------------------
# Token distributions
# ----------------------------------------------------------------------------------------------


def unigram_distribution(
    windows: list[Int[Tensor, " _pos"]], d_vocab: int, skip_first: int = 1
) -> Float[Tensor, " d_vocab"]:
    """Token frequencies of ``windows`` (positions ``>= skip_first``: BOS is not drawn)."""
    counts = torch.zeros(d_vocab, dtype=torch.float64)
    for window in windows:
        counts += torch.bincount(window[skip_first:].long().cpu(), minlength=d_vocab).double()
    if counts.sum() == 0:
        raise InputError("No tokens to count: every window is shorter than skip_first + 1.")
    return counts / counts.sum()


def uniform_distributions(
    token_ids: dict[str, list[int]], d_vocab: int
) -> dict[str, Float[Tensor, " d_vocab"]]:
    """One ``p_D`` per named token list, uniform over its tokens (lists without tokens are left
    out): domains given by word lists rather than by documents."""
    out = {}
    for name, ids in token_ids.items():
        ids = sorted(set(int(i) for i in ids))
        if ids and not 0 <= ids[0] <= ids[-1] < d_vocab:
            raise InputError(f"Token ids of {name!r} must be in 0..{d_vocab - 1}.")
        if ids:
            p = torch.zeros(d_vocab, dtype=torch.float64)
            p[ids] = 1.0 / len(ids)
            out[name] = p
    return out


# ----------------------------------------------------------------------------------------------
# Per-path pieces
# ----------------------------------------------------------------------------------------------


@dataclass
class PathPieces:
    """What the domain algebra needs of each path (all heads, then the direct path last).

    Attributes:
        log_content: ``log c_h(t)`` at the reference position (0 for the direct path).
        kernels: ``pos_{h,n}(i)``, ``[head, n, i]`` (heads only).
        log_bos: ``log b_n = log(pos_n(0) c_n(BOS))``, ``[head, n]``.
        values: ``v_h(t)``, each token's value at the reference position, ``[head, d_vocab,
            d_head]``: a head's output is ``u_h(t) = v_h(t) W_O[h]`` (:attr:`outputs`), kept
            factored (``d_head`` columns, not ``d_model``: a read vector meets ``W_O[h] w`` first).
        out_proj: ``W_O``, ``[head, d_head, d_model]``.
        direct: ``W_E``, the direct path's outputs, ``[d_vocab, d_model]``.
        bos_outputs: ``u_h(BOS)`` at position 0, ``[head, d_model]``.
    """

    log_content: Float[Tensor, "path d_vocab"]
    kernels: Float[Tensor, "head query_pos key_pos"]
    log_bos: Float[Tensor, "head query_pos"]
    values: Float[Tensor, "head d_vocab d_head"]
    out_proj: Float[Tensor, "head d_head d_model"]
    direct: Float[Tensor, "d_vocab d_model"]
    bos_outputs: Float[Tensor, "head d_model"]

    @property
    def outputs(self) -> Float[Tensor, "path d_vocab d_model"]:
        """``u_h(t)`` and ``W_E[t]`` (direct): every path's output (a ``[path, d_vocab,
        d_model]`` tensor, made when asked)."""
        heads = torch.einsum("hte,hed->htd", self.values, self.out_proj)
        return torch.cat([heads, self.direct[None].to(heads)])


def path_reads(
    values: Float[Tensor, "head k d_head"],
    out_proj: Float[Tensor, "head d_head d_model"],
    direct: Float[Tensor, "k d_model"],
    read: Float[Tensor, "d_model n"],
) -> Float[Tensor, "path k n"]:
    """``u_p(t) . w`` for every path, in ``read``'s type: ``v_h(t) (W_O[h] w)`` for a head
    (``d_head`` products a token and neuron, not ``d_model``), ``W_E[t] w`` for the direct path."""
    heads = torch.bmm(values, out_proj @ read)
    return torch.cat([heads, (direct @ read)[None]])


@torch.no_grad()
def path_pieces(
    model: Model,
    reference_tokens: Int[Tensor, " n_ref"],
    dest_token: str | int = dec.DEFAULT_DESTINATION,
    n_ref: int | None = None,
    bos_token: int | None = None,
) -> PathPieces:
    """Content weights, kernels, BOS terms and token outputs of every layer-0 head and the
    direct path (module docstring), with the destination ``dest_token`` as in chapter 4.
    ``bos_token`` defaults to the tokenizer's ``<|endoftext|>``."""
    n_ctx = model.cfg.n_ctx
    n_ref = check_position(model, n_ctx // 2 if n_ref is None else n_ref)
    dest = token_id(model, dest_token)
    bos = getattr(model.tokenizer, "bos_token_id", None) if bos_token is None else int(bos_token)
    if bos is None:
        raise InputError("The model's tokenizer has no BOS token: give bos_token.")
    device = model.cfg.device
    mean_keys = dec.mean_positional_keys(model, reference_tokens.to(device), n_ctx, which="K")
    positions = torch.arange(n_ctx, device=device)
    queries = dec.destination_queries(model, dest, positions)
    scores = _all_heads(dec.positional_scores, model, queries, positions, n_ctx, mean_keys)
    mask = dec.causal_mask(n_ctx, device)
    kernels = dec.masked_softmax(scores, mask)  # [head, n, i]
    log_pos0 = torch.log_softmax(scores.masked_fill(~mask, float("-inf")), dim=-1)[..., 0]
    sequence = torch.full((n_ctx,), dest, device=device)
    sequence[0] = bos
    log_c0 = _all_heads(dec.content_scores, model, queries, positions, sequence)[..., 0]
    log_bos = log_pos0 + log_c0  # [head, n]

    log_content = dec.content_log_weights(model, n_ref, dest)  # [head, vocab]
    w = as_weights(model)
    ln = dec.ln1_apply(w, w.W_E + w.W_pos[n_ref])  # [vocab, d_model]
    values = torch.einsum("td,hde->hte", ln, w.W_V) + w.b_V[:, None]
    ln_bos = dec.ln1_apply(w, w.W_E[bos] + w.W_pos[0])
    bos_values = torch.einsum("d,hde->he", ln_bos, w.W_V) + w.b_V
    bos_outputs = torch.einsum("he,hed->hd", bos_values, w.W_O)
    return PathPieces(
        log_content=torch.cat([log_content, torch.zeros_like(log_content[:1])]),
        kernels=kernels,
        log_bos=log_bos,
        values=values,
        out_proj=w.W_O,
        direct=w.W_E,
        bos_outputs=bos_outputs,
    )


# ----------------------------------------------------------------------------------------------
# The algebra
# ----------------------------------------------------------------------------------------------


def _domain_terms(
    pieces: PathPieces,
    p: Float[Tensor, " d_vocab"],
    start: int,
    length: int,
) -> tuple[Float[Tensor, " path"], Float[Tensor, "head pos"], Float[Tensor, "path d_vocab"],
           Float[Tensor, "path pos"]]:
    """For one token distribution: ``log S_h``, the BOS shares ``beta_n``, the normalised weights
    ``p(t) c_h(t) / S_h`` and the position weights ``a_hi`` (module docstring)."""
    log_p = torch.log(p.clamp(min=0)).to(pieces.log_content)
    log_pc = log_p[None] + pieces.log_content  # [path, vocab]
    log_s = torch.logsumexp(log_pc, dim=-1)  # [path]
    weights = torch.exp(log_pc - log_s[:, None])  # p c / S
    n_heads = pieces.kernels.shape[0]
    kappa = pieces.kernels[:, :length, 0]  # [head, n]
    log_b = pieces.log_bos[:, :length]
    log_rest = torch.log1p(-kappa.clamp(max=1 - 1e-12)) + log_s[:n_heads, None]
    beta = torch.sigmoid(log_b - log_rest)  # b / (b + (1 - kappa) S)
    n = torch.arange(length, device=beta.device)
    inside = (n >= start).to(beta)  # the window mean's positions
    count = inside.sum()
    factor = (1 - beta) / (1 - kappa).clamp(min=1e-12) * inside / count  # [head, n]
    a_heads = torch.einsum("hn,hni->hi", factor, pieces.kernels[:, :length, :length])
    a_heads[:, 0] = 0.0  # BOS is fixed, not drawn
    a_direct = (inside / count)[None]
    return log_s, beta, weights, torch.cat([a_heads, a_direct])


@dataclass
class PathShifts:
    """Each path's predicted shift of every neuron on every domain, and the spread.

    Attributes:
        domains: the domain names, in order.
        shifts: ``[domain, path, neuron]``, the heads first and the direct path last.
        variance: the predicted within-domain variance of a window mean, ``[domain, neuron]``.
    """

    domains: list[str]
    shifts: Float[Tensor, "domain path d_mlp"]
    variance: Float[Tensor, "domain d_mlp"]

    def split(self, context_heads: list[int]) -> DomainShiftPrediction:
        """The contextual part (``context_heads``) and the rest of every shift."""
        n_heads = self.shifts.shape[1] - 1
        bad = [h for h in context_heads if not 0 <= h < n_heads]
        if bad:
            raise InputError(f"Heads {bad} are out of range for {n_heads} heads.")
        inside = torch.zeros(n_heads + 1, dtype=torch.bool)
        inside[list(context_heads)] = True
        return DomainShiftPrediction(
            domains=self.domains,
            heads=sorted(int(h) for h in context_heads),
            shift_context=self.shifts[:, inside].sum(1),
            shift_other=self.shifts[:, ~inside].sum(1),
            variance=self.variance,
        )


def predict_domain_shifts(
    pieces: PathPieces,
    read: Float[Tensor, "d_model d_mlp"],
    distributions: dict[str, Float[Tensor, " d_vocab"]],
    context_heads: list[int],
    start: int = START,
    length: int | None = None,
) -> DomainShiftPrediction:
    """:func:`predict_path_shifts` split into the part of ``context_heads`` and the rest."""
    return predict_path_shifts(pieces, read, distributions, start, length).split(context_heads)


@torch.no_grad()
def predict_path_shifts(
    pieces: PathPieces,
    read: Float[Tensor, "d_model d_mlp"],
    distributions: dict[str, Float[Tensor, " d_vocab"]],
    start: int = START,
    length: int | None = None,
    chunk: int = 256,
) -> PathShifts:
    """Every neuron's predicted shift along every path, and its spread, on every domain.

    Args:
        pieces: :func:`path_pieces` of the model.
        read: the read vectors ``w_j`` (:func:`context_neurons.discovery.scores.read_vectors` of
            all neurons).
        distributions: each domain's token distribution ``p_D`` (:func:`unigram_distribution`),
            at least two domains.
        start: first position of the window mean.
        length: window length ``L`` (default the model's context).
        chunk: neurons per step (memory).
    """
    if len(distributions) < 2:
        raise InputError("Shifts are defined against the other domains: give at least two.")
    n_heads, n_ctx = pieces.kernels.shape[0], pieces.kernels.shape[1]
    length = n_ctx if length is None else length
    if not 0 <= start < length <= n_ctx:
        raise InputError(f"Need 0 <= start < length <= n_ctx, got {start}, {length}, {n_ctx}.")
    domains = list(distributions)
    dtype = torch.float64
    device = pieces.values.device
    support = torch.stack(list(distributions.values())).sum(0).to(device) > 0
    support = support.nonzero().flatten()  # tokens of any domain
    # The outputs are read in float32 on the support only (path_reads): not copied
    # to float64 with the other pieces.
    factors = (pieces.values[:, support].float(), pieces.out_proj.float(),
               pieces.direct[support].float())
    pieces = pieces_as(pieces, dtype, keep=("values", "out_proj", "direct"))
    read = read.to(dtype)

    beta_bars, weights, own = [], [], []  # per domain; own: its tokens, p and c / S on them
    for name in domains:
        p = distributions[name].to(dtype).to(device)
        _, beta, w_p, a = _domain_terms(pieces, p, start, length)
        evals, evecs = torch.linalg.eigh(a @ a.T)  # the Gram matrix over paths
        root = evecs * evals.clamp(min=0).sqrt()  # [path, k]
        beta_bars.append(beta[:, start:length].mean(-1).float())  # [head]
        weights.append(w_p[:, support].float())  # p c / S
        inside = (p[support] > 0).nonzero().flatten()  # the domain's tokens, on the support
        p_in = p[support][inside]
        ratio = w_p[:, support][:, inside] / p_in  # c_h(t) / S_h
        own.append((inside, p_in.float(), ratio.float(), root.float()))
    weights_all = torch.stack(weights, dim=1)  # [path, domain, support]
    means, variances = [], []  # per chunk: [domain, path, neuron] and [domain, neuron]
    for lo in range(0, read.shape[1], chunk):
        w = read[:, lo : lo + chunk]
        eps = path_reads(*factors, w.float())  # [path, support, neuron], float32: the bulk
        eps_bos = (pieces.bos_outputs @ w).float()  # [head, neuron]
        m = torch.bmm(weights_all, eps).transpose(0, 1)  # [domain, path, neuron]: the means
        means.append(torch.stack([
            torch.cat([beta_bar[:, None] * eps_bos + (1 - beta_bar[:, None]) * m_d[:n_heads],
                       m_d[n_heads:]]) for beta_bar, m_d in zip(beta_bars, m)]))
        variances.append(torch.stack([_window_variance(eps, m_d, *terms, VARIANCE_BLOCK)
                                      for m_d, terms in zip(m, own)]))
    means_t = torch.cat(means, dim=-1).to(dtype)  # [domain, path, neuron]
    n_dom = len(domains)
    rest = (means_t.sum(0, keepdim=True) - means_t) / (n_dom - 1)
    shifts = means_t - rest
    return PathShifts(domains, shifts.float().cpu(), torch.cat(variances, dim=-1).cpu())


#: Tokens per step of :func:`_window_variance` (measured: 256 to 1024 run alike, 2.4x the
#: unblocked pass on 40,000 tokens and 256 neurons).
VARIANCE_BLOCK = 512


def _window_variance(
    eps: Float[Tensor, "path support neuron"],
    m: Float[Tensor, "path neuron"],
    inside: Int[Tensor, " n_own"],
    p: Float[Tensor, " n_own"],
    ratio: Float[Tensor, "path n_own"],
    root: Float[Tensor, "path k"],
    block: int,
) -> Float[Tensor, " neuron"]:
    """``sum_t p(t) |root^T g(t)|^2`` over the domain's own tokens ``inside`` (positions on
    the support), ``g_p(t) = ratio_p(t) (eps_p(t) - m_p)``, ``block`` tokens at a time (each
    step's ``[path, block, neuron]`` stays in cache: one pass over ``eps`` from memory, not
    five)."""
    total = torch.zeros(root.shape[1], eps.shape[-1], dtype=eps.dtype, device=eps.device)
    for lo in range(0, len(inside), block):
        g = eps[:, inside[lo : lo + block]]  # a copy, [path, block, neuron]
        g.sub_(m[:, None]).mul_(ratio[:, lo : lo + block, None])
        mixed = (root.T @ g.flatten(1)).view(root.shape[1], *g.shape[1:])  # [k, block, neuron]
        total += torch.einsum("t,ktj->kj", p[lo : lo + block], mixed.square_())
    return total.sum(0)


def pieces_as(pieces: PathPieces, dtype: torch.dtype, keep: tuple[str, ...] = ()) -> PathPieces:
    """The same pieces in another floating-point type (the fields named in ``keep`` as they are)."""
    return PathPieces(**{f: getattr(pieces, f) if f in keep else getattr(pieces, f).to(dtype)
                         for f in PathPieces.__dataclass_fields__})


def permuted_vocabulary(
    distributions: dict[str, Float[Tensor, " d_vocab"]], seed: int = 0
) -> dict[str, Float[Tensor, " d_vocab"]]:
    """The control of chapter 8: every ``p_D`` with token ids permuted (one seeded permutation
    for all domains): the same frequencies on the wrong tokens."""
    first = next(iter(distributions.values()))
    generator = torch.Generator().manual_seed(seed)
    perm = torch.randperm(len(first), generator=generator)
    return {name: p[perm] for name, p in distributions.items()}

