"""Building the contextual circuit from the weights and one calibration text (chapter 4, sections
4.1 to 4.4): the three approximations that turn the contextual heads into the bag of tokens
``sum_i K[n, i] e(t_i)`` of :mod:`context_neurons.circuit`, each a choice made explicit below:

1. **Calibrated denominators.** ``A_{n,i} = pos_n(i) c_n(t_i) / D_n`` (chapter 1). For a
   contextual head the denominator ``D_n`` hardly depends on the text (chapter 3), so we replace
   it by one number per head, ``Dhat_h``: the median over the positions ``n >= n_min`` of one
   calibration text of

       D_h(n) = sum_{j<n} pos_n(j) c_h(t_j) + pos_n(n) c_h(' the'),

   i.e. the calibration text with ``' the'`` placed at the destination, with the content weights
   ``c_h(t) = c_{n_ref}(t)`` the extended embeddings use (the *reference frame*, the default).
   The bag divides ``c_h(t_i)`` by ``D_h(n)``, so both must be read in one frame: a content score
   ``q_n . E[n, t]`` carries a part that depends (almost) on ``n`` alone, shared by every source
   token, which the softmax cancels but a ratio of weights read at two positions does not.
   Reading ``D`` with ``c_n`` (``frame="destination"``, what this package did before issue 50)
   leaves the bag's weights summing to about ``D_ref(n) / D_dest(n)`` instead of 1 (the *drift*,
   chapter 8, section 8.11: up to nearly twenty nats on the trained models, the approximation's median FVU in
   the hundreds of thousands there; little on the planted model). (Positions before
   ``n_min = 100`` are excluded from the median, where ``D`` averages few tokens.)
2. **One shared kernel.** The six heads' positional patterns (destination ``' the'``) are similar;
   we replace them by their element-wise median ``K[n, i]``, renormalised over ``i <= n``. Since
   ``pos_n(i) = softmax_i q_n . M[i] / sqrt(d)`` (the ``M[n]`` term is constant in ``i``), the whole
   ``[n_ctx, n_ctx]`` kernel of a head is one matrix product ``Q_the M^T``, independent of text.
3. **Position-free token values.** The value of token ``t`` at position ``i`` is split into the
   token-averaged value ``M_V[i]`` (the *positional part*, kept separately, each head with its own
   kernel) plus a token-dependent remainder, which we evaluate at the reference position
   ``n_ref = n_ctx / 2``: ``v_h(t) = value_h(t, n_ref) - M_V^h[n_ref]``. The content weight is
   also taken at ``n_ref``.

Then the extended embedding of ``t`` is

    e(t) = sum_h (c_h(t) / Dhat_h) v_h(t) W_O^h,      c_h(t) = c_{n_ref}(t)  (destination ' the'),

and the positional part is ``sum_h sum_i pos_{h,n}(i) M_V^h[i] W_O^h``. Biases: TransformerLens
folds the value bias into the attention output bias ``b_O`` (``fold_value_biases``); ``M_V``
includes whatever value bias remains, and ``b_O`` (shared by all heads) is not part of the six
heads' output.

**Per-position denominators.** Where position 0 holds an attention sink (a large content weight
of ``<|endoftext|>``), ``D_h(n)`` at the first positions is well above ``Dhat_h`` and the
constant-denominator bag overstates the heads' output there. The method allows the calibration
denominators "median over its positions, or per position": ``denominators="per_position"`` uses
``D_h(n)`` of the calibration text itself at each ``n`` (the median beyond the text's length). The
extended embeddings, which must not depend on ``n``, always use the median ``Dhat_h``. How far
another text's ``D_h(n)`` strays from the calibration's is measured per head by
:mod:`context_neurons.assumptions` (``denominator_factor``).

Shapes: ``ctx_head`` is the axis of the contextual heads only (``head_index`` runs over all
twelve).

The circuit also records the LayerNorm-2 scale of the calibration text (the median of
``1 / std`` of the input to ``blocks.0.ln2``), which chapter 5 uses to linearise LN2.

Which heads: :func:`contextual_heads`, those chapter 2's taxonomy computes (:class:`KnownHeads`
sets them beside the known ones); :func:`get_circuit` builds each circuit once per model.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from einops import rearrange
from jaxtyping import Float, Int
from torch import Tensor

from context_neurons import decomposition as dec
from context_neurons.caching import IdentityCache
from context_neurons.checks import (
    InputError,
    as_token_batch,
    NoContextualHeadsError,
    check_heads,
    check_position,
    check_sequence,
    token_id,
)
from context_neurons.hooks import run_until
from context_neurons.models.weights import Model, TransformerBridge, as_weights
from context_neurons.taxonomy import classify_heads
from context_neurons.text.windows import calibration_tokens


#: Calibration positions before this are left out of the median denominator.
N_MIN = 100


class CircuitError(InputError):
    """A circuit could not be built or applied; the message says why."""


@dataclass
class Calibration:
    """What the circuit takes from one calibration text.

    Attributes:
        name: the calibration text's name (``data.CALIBRATION_TEXTS``) or ``"custom"``.
        tokens: the calibration tokens, BOS first.
        log_denominators: ``log D_h(n)`` at every calibration position, ``[head, pos]``.
        n_min: first position used for the median.
        log_dhat: ``log Dhat_h``, the median of ``log D_h(n)`` over ``n >= n_min``, ``[head]``.
        ln2_inverse_scales: ``1 / std`` of the input of ``blocks.0.ln2`` at each position.
        ln2_scale: the median of ``ln2_inverse_scales`` over positions ``n >= 1``.
    """

    name: str
    tokens: Int[Tensor, " pos"]
    log_denominators: Float[Tensor, "ctx_head pos"]
    n_min: int
    log_dhat: Float[Tensor, " ctx_head"]
    ln2_inverse_scales: Float[Tensor, " pos"]
    ln2_scale: float

    def position_log_denominators(self, n_positions: int) -> Float[Tensor, "ctx_head pos"]:
        """``log D_h(n)`` for ``n < n_positions``: the calibration text's, then the median."""
        known = self.log_denominators[:, :n_positions]
        if known.shape[1] == n_positions:
            return known
        rest = self.log_dhat[:, None].expand(-1, n_positions - known.shape[1])
        return torch.cat([known, rest], dim=1)


DENOMINATORS = ("median", "per_position")
#: The frames the calibration denominators can be read in (:func:`build_circuit`).
FRAMES = ("reference", "destination")


@dataclass
class ContextualCircuit:
    """The bag-of-tokens approximation of the contextual heads (module docstring).

    Attributes:
        heads: the contextual heads, in order.
        dest_token: the destination token id (``' the'``).
        n_ref: the reference position of content weights and token values.
        calibration: the :class:`Calibration`.
        head_kernels: each head's positional pattern ``pos_{h,n}(i)``, ``[head, n, i]``.
        kernel: the shared median kernel ``K[n, i]``, rows summing to 1 over ``i <= n``.
        log_content: ``log c_h(t)`` at ``n_ref`` for every token, ``[head, d_vocab]``.
        token_values: ``v_h(t) = value_h(t, n_ref) - M_V^h[n_ref]``, ``[d_vocab, head, d_head]``.
        extended: the extended embeddings ``e(t)``, ``[d_vocab, d_model]``.
        mean_values: ``M_V^h[i]``, the token-averaged values, ``[pos, head, d_head]``.
        positional_part: ``sum_h sum_i pos_{h,n}(i) M_V^h[i] W_O^h``, ``[pos, d_model]``.
        frame: the frame its calibrated denominators were read in (:data:`FRAMES`).
        mean_keys: the mean keys ``M`` its kernels were built from, ``[n_ctx, head_index,
            d_head]`` (None for a circuit built by hand).
    """

    heads: list[int]
    dest_token: int
    n_ref: int
    calibration: Calibration
    head_kernels: Float[Tensor, "ctx_head query_pos key_pos"]
    kernel: Float[Tensor, "query_pos key_pos"]
    log_content: Float[Tensor, "ctx_head d_vocab"]
    token_values: Float[Tensor, "d_vocab ctx_head d_head"]
    extended: Float[Tensor, "d_vocab d_model"]
    mean_values: Float[Tensor, "pos ctx_head d_head"]
    positional_part: Float[Tensor, "pos d_model"]
    w_o: Float[Tensor, "ctx_head d_head d_model"] = field(repr=False)
    notes: dict = field(default_factory=dict)
    frame: str = "reference"
    mean_keys: Float[Tensor, "n_ctx head_index d_head"] | None = field(default=None, repr=False)

    def text_log_denominators(
        self, model: Model, tokens: Int[Tensor, " pos"]
    ) -> Float[Tensor, "ctx_head pos"]:
        """``log D_h(n)`` of any text in this circuit's frame (``' the'`` at every destination),
        the quantity the calibration text's denominators stand for."""
        tokens = check_sequence(model, tokens)
        if self.frame == "reference":
            return reference_log_denominators(
                self.head_kernels, self.log_content, tokens, self.dest_token)
        if self.mean_keys is None:
            raise CircuitError("This circuit holds no mean keys (built by hand): the destination "
                               "frame's denominators need them.")
        return calibration_log_denominators(model, tokens, self.heads, self.mean_keys,
                                            self.dest_token)

    @property
    def ln2_scale(self) -> float:
        return self.calibration.ln2_scale

    @property
    def dhat(self) -> Float[Tensor, " ctx_head"]:
        return self.calibration.log_dhat.exp()

    def inverse_denominators(
        self, n_positions: int, denominators: str = "median"
    ) -> Float[Tensor, "ctx_head pos"]:
        """``1 / Dhat_h`` (``"median"``) or the calibration's ``1 / D_h(n)`` (``"per_position"``).

        Returns ``[ctx_head, pos]`` for positions ``0..n_positions-1``.
        """
        if denominators == "median":
            return torch.exp(-self.calibration.log_dhat)[:, None].expand(-1, n_positions)
        if denominators == "per_position":
            return torch.exp(-self.calibration.position_log_denominators(n_positions))
        raise CircuitError(f"denominators must be one of {DENOMINATORS}, got {denominators!r}.")

    def head_contributions(
        self, read: Float[Tensor, "d_model n_read"], w_o: Float[Tensor, "ctx_head d_head d_model"]
    ) -> Float[Tensor, "d_vocab ctx_head n_read"]:
        """``c_h(t) v_h(t) W_O^h . read``: each head's token term before its denominator."""
        out = torch.einsum("the,hej->thj", self.token_values, w_o @ read)
        return out * rearrange(self.log_content.exp(), "h t -> t h 1")

    def bag(
        self,
        tokens: Int[Tensor, "*batch pos"],
        denominators: str = "median",
        kernel: str = "shared",
    ) -> Float[Tensor, "batch pos d_model"]:
        """``sum_i K[n, i] e(t_i)`` for a batch of sequences (positions 0..pos-1).

        With ``denominators="per_position"`` each head's share is divided by ``D_h(n)`` instead
        of ``Dhat_h``; with ``kernel="per_head"`` each head keeps its own kernel
        ``pos_{h,n}(i)`` instead of the shared ``K[n, i]`` (both for measuring what each
        approximation costs): ``sum_h sum_i pos_{h,n}(i) c_h(t_i) v_h(t_i) W_O^h / D_h(n)``.
        """
        tokens = as_token_batch(tokens).to(self.kernel.device)
        n = tokens.shape[1]
        if kernel not in ("shared", "per_head"):
            raise CircuitError(f"kernel must be 'shared' or 'per_head', got {kernel!r}.")
        if denominators == "median" and kernel == "shared":
            return torch.einsum("ni,bid->bnd", self.kernel[:n, :n], self.extended[tokens])
        inv_d = self.inverse_denominators(n, denominators)  # [head, n]
        content = rearrange(self.log_content.exp(), "h t -> t h 1")  # c_h(t)
        weighted = self.token_values[tokens] * content[tokens]  # [batch, pos, head, d_head]
        if kernel == "shared":
            per_head = torch.einsum("ni,bihe,hn->bnhe", self.kernel[:n, :n], weighted, inv_d)
        else:
            kernels = self.head_kernels[:, :n, :n]
            per_head = torch.einsum("hni,bihe,hn->bnhe", kernels, weighted, inv_d)
        return torch.einsum("bnhe,hed->bnd", per_head, self.w_o)

    def approximate_output(
        self,
        tokens: Int[Tensor, "*batch pos"],
        denominators: str = "median",
        kernel: str = "shared",
    ) -> Float[Tensor, "batch pos d_model"]:
        """The contextual heads' approximate combined output: the bag plus the positional part."""
        tokens = as_token_batch(tokens).to(self.kernel.device)
        return self.bag(tokens, denominators, kernel) + self.positional_part[: tokens.shape[1]]


# ----------------------------------------------------------------------------------------------
# Pieces
# ----------------------------------------------------------------------------------------------


def _all_heads(score_fn, model: Model, *args) -> Tensor:
    """Call a score function of :mod:`decomposition` for all heads (select heads afterwards).

    Its shape annotations name the head axis of the queries and of the result alike, so a call
    with a subset of heads fails the runtime shape checks the tests run.
    """
    return score_fn(model, *args, list(range(model.cfg.n_heads)))


@torch.no_grad()
def head_kernels(
    model: Model,
    heads,
    mean_keys: Float[Tensor, "n_ctx head_index d_head"],
    dest_token: int,
    n_positions: int | None = None,
) -> Float[Tensor, "ctx_head query_pos key_pos"]:
    """Positional patterns ``pos_{h,n}(i)`` of ``heads`` for every destination ``n`` at once.

    One ``[n, d_head] x [d_head, n]`` product per head: the query of ``dest_token`` placed at ``n``
    against the mean keys ``M[i]`` (``M[n]`` cancels in the softmax).
    """
    heads = check_heads(model, heads)
    n_positions = n_positions or model.cfg.n_ctx
    positions = torch.arange(n_positions, device=model.cfg.device)
    queries = dec.destination_queries(model, dest_token, positions)
    scores = _all_heads(dec.positional_scores, model, queries, positions, n_positions, mean_keys)
    return dec.masked_softmax(scores[heads], dec.causal_mask(n_positions, scores.device))


def median_kernel(
    kernels: Float[Tensor, "ctx_head query_pos key_pos"],
) -> Float[Tensor, "query_pos key_pos"]:
    """Element-wise median over heads, renormalised so that each row sums to 1."""
    if kernels.shape[0] == 1:
        return kernels[0].clone()
    med = kernels.median(dim=0).values if kernels.shape[0] % 2 else kernels.quantile(0.5, dim=0)
    return med / med.sum(-1, keepdim=True)


@torch.no_grad()
def calibration_log_denominators(
    model: Model,
    tokens: Int[Tensor, " pos"],
    heads,
    mean_keys: Float[Tensor, "n_ctx head_index d_head"],
    dest_token: int,
) -> Float[Tensor, "ctx_head pos"]:
    """``log D_h(n)`` on a calibration text with ``dest_token`` placed at every destination ``n``,
    in the destination frame (the content weights ``c_n`` at each ``n``).

    ``D_h(n) = sum_{j<n} pos_n(j) c_n(t_j) + pos_n(n) c_n(dest)`` for ``n >= 1``, and
    ``D_h(0) = c_0(t_0)`` (position 0 holds ``<|endoftext|>`` in every text), in log space (content
    weights overflow float32) from the positional scores and content scores of chapter 1.
    """
    tokens = check_sequence(model, tokens)
    heads = check_heads(model, heads)
    n = len(tokens)
    positions = torch.arange(n, device=tokens.device)
    queries = dec.destination_queries(model, dest_token, positions)
    mask = dec.causal_mask(n, tokens.device)
    scores = _all_heads(dec.positional_scores, model, queries, positions, n, mean_keys)[heads]
    log_pos = torch.log_softmax(scores.masked_fill(~mask, float("-inf")), dim=-1)
    log_c = _all_heads(dec.content_scores, model, queries, positions, tokens)[heads]
    # The destination holds dest_token, not t_n: its content score is q_n . E[n, dest]. Except at
    # n = 0, which holds <|endoftext|> in every text (and is its own only source).
    dest = torch.full_like(tokens, dest_token)
    log_c_dest = _all_heads(dec.content_scores, model, queries, positions, dest)[heads]
    replaced = positions[1:]
    log_c[:, replaced, replaced] = log_c_dest[:, replaced, replaced]
    return torch.logsumexp(log_pos + log_c.masked_fill(~mask, float("-inf")), dim=-1)


def reference_log_denominators(
    kernels: Float[Tensor, "ctx_head query_pos key_pos"],
    log_content: Float[Tensor, "ctx_head d_vocab"],
    tokens: Int[Tensor, " pos"],
    dest_token: int,
) -> Float[Tensor, "ctx_head pos"]:
    """``log D_h(n)`` in the frame of the extended embeddings: the content weights taken at the
    reference position, as ``e(t)`` takes them.

    ``D_h(n) = sum_{j<n} pos_n(j) c_h(t_j) + pos_n(n) c_h(dest)`` with ``c_h(t) = c_{n_ref}(t)``
    (``log_content``) and each head's own kernel; position 0 holds ``<|endoftext|>``. The bag
    divides ``c_h(t_i)`` by ``D_h(n)``, so both must be one frame: a content score
    ``q_n . E[n, t]`` carries terms that depend on the destination position ``n`` alone (the
    position and bias parts of ``E[n, t]`` read by ``q_n``), which cancel in the softmax but not
    in ``c_{n_ref}(t) / D_h(n)`` when ``D`` is read with ``c_n``
    (:func:`calibration_log_denominators`, the ``"destination"`` frame).
    """
    n = len(tokens)
    log_c = log_content[:, tokens][:, None, :].expand(-1, n, -1).clone()  # [head, query, key]
    at = torch.arange(1, n, device=tokens.device)
    log_c[:, at, at] = log_content[:, dest_token][:, None]
    log_pos = torch.log(kernels[:, :n, :n])  # -inf above the diagonal
    return torch.logsumexp(log_pos + log_c, dim=-1)


@torch.no_grad()
def ln2_inverse_scales(
    model: TransformerBridge, tokens: Int[Tensor, " pos"]
) -> Float[Tensor, " pos"]:
    """``1 / std`` of the input of ``blocks.0.ln2`` (``resid_mid``) at each position of a text,
    measured through the model's hooks (the one measurement on a text the circuit needs)."""
    tokens = check_sequence(model, tokens)
    resid_mid = run_until(model, tokens[None], "blocks.0.hook_resid_mid")["blocks.0.hook_resid_mid"]
    resid = dec.centred(resid_mid[0])
    return torch.rsqrt((resid**2).mean(-1) + model.cfg.eps)


@torch.no_grad()
def token_values(
    model: Model,
    heads,
    position: int,
    token_ids: Int[Tensor, " n_tokens"] | None = None,
    chunk: int = 8192,
) -> Float[Tensor, "n_tokens ctx_head d_head"]:
    """Exact layer-0 values of tokens placed at ``position``: ``LN1(W_E[t] + W_pos[n]) W_V + b_V``.

    Returns ``[n_tokens, head, d_head]`` (all tokens of the vocabulary by default).
    """
    heads = check_heads(model, heads)
    position = check_position(model, position)
    if token_ids is None:
        token_ids = torch.arange(model.cfg.d_vocab, device=model.cfg.device)
    w = as_weights(model)
    w_v, b_v = w.W_V[heads], w.b_V[heads]
    out = []
    for start in range(0, len(token_ids), chunk):
        ids = token_ids[start : start + chunk]
        ln = dec.ln1_apply(w, w.W_E[ids] + w.W_pos[position])
        out.append(torch.einsum("td,hde->the", ln, w_v) + b_v)
    return torch.cat(out)


# ----------------------------------------------------------------------------------------------
# Building the circuit
# ----------------------------------------------------------------------------------------------


@torch.no_grad()
def build_circuit(
    model: TransformerBridge,
    calibration: str | Tensor = "prose",
    heads=None,
    dest_token: str | int = dec.DEFAULT_DESTINATION,
    n_ref: int | None = None,
    n_min: int = N_MIN,
    reference_tokens: Int[Tensor, " n_ref"] | None = None,
    frame: str = "reference",
) -> ContextualCircuit:
    """Build the contextual circuit from the weights and one calibration text.

    Args:
        model: a GPT-2-architecture TransformerBridge.
        calibration: a calibration text's name (``text.corpora.CALIBRATION_TEXTS``) or its
            tokens (``[BOS, ...]``, at most ``n_ctx``).
        heads: the contextual heads (default: those the model's own taxonomy finds,
            :func:`contextual_heads`).
        dest_token: the fixed destination token (default ``' the'``).
        n_ref: the reference position of content weights and values (default ``n_ctx // 2``).
        n_min: the first calibration position of the median denominator.
        reference_tokens: the token distribution of the mean keys and values ``M``, ``M_V``
            (default: the calibration text's tokens without BOS).
        frame: the content weights the denominators are read with (:data:`FRAMES`):
            ``"reference"`` (default) those at ``n_ref``, as the extended embeddings take them;
            ``"destination"`` those at each destination position, the frame of chapter 1's
            decomposition, kept to show why it fails in the bag (chapter 8; issue 50).

    Returns:
        A :class:`ContextualCircuit`.
    """
    if frame not in FRAMES:
        raise CircuitError(f"frame must be one of {FRAMES}, got {frame!r}.")
    heads = check_heads(model, contextual_heads(model) if heads is None else heads)
    dest = token_id(model, dest_token)
    n_ctx = model.cfg.n_ctx
    n_ref = check_position(model, n_ctx // 2 if n_ref is None else n_ref)
    if isinstance(calibration, str):
        name = calibration
        tokens = calibration_tokens(model.tokenizer, calibration, n_ctx).to(model.cfg.device)
    else:
        name, tokens = "custom", check_sequence(model, calibration)
    if len(tokens) <= n_min + 1:
        raise CircuitError(
            f"The calibration text has {len(tokens)} tokens; the median denominator uses "
            f"positions >= n_min = {n_min}, so give a longer text (several hundred tokens) or a "
            "smaller n_min."
        )
    if reference_tokens is None:
        reference_tokens = tokens[1:]
    reference_tokens = torch.as_tensor(reference_tokens).to(model.cfg.device)
    mean_keys = dec.mean_positional_keys(model, reference_tokens, n_ctx, which="K")
    mean_values_all = dec.mean_positional_keys(model, reference_tokens, n_ctx, which="V")

    kernels = head_kernels(model, heads, mean_keys, dest, n_ctx)
    log_content = dec.content_log_weights(model, n_ref, dest)[heads]  # [head, vocab]

    # 1. Calibrated denominators, in the frame of the extended embeddings (or the destination's).
    if frame == "reference":
        log_d = reference_log_denominators(kernels, log_content, tokens, dest)
    else:
        log_d = calibration_log_denominators(model, tokens, heads, mean_keys, dest)
    log_dhat = log_d[:, n_min:].median(dim=-1).values
    inv_scales = ln2_inverse_scales(model, tokens)
    calib = Calibration(
        name=name,
        tokens=tokens,
        log_denominators=log_d,
        n_min=n_min,
        log_dhat=log_dhat,
        ln2_inverse_scales=inv_scales,
        ln2_scale=float(inv_scales[1:].median()),
    )

    # 2. The shared median kernel of the heads' kernels.
    kernel = median_kernel(kernels)

    # 3. Extended embeddings at n_ref, and the positional part with each head's own kernel.
    mean_values = mean_values_all[:, heads]  # [pos, head, d_head]
    w_o = as_weights(model).W_O[heads]  # [head, d_head, d_model]
    weights = torch.exp(log_content - log_dhat[:, None])  # c_h(t) / Dhat_h
    values = token_values(model, heads, n_ref) - mean_values[n_ref]  # [d_vocab, head, d_head]
    weighted = values * rearrange(weights, "h t -> t h 1")  # (c_h(t) / Dhat_h) v_h(t)
    extended = rearrange(weighted, "t h e -> t (h e)") @ rearrange(w_o, "h e d -> (h e) d")
    value_out = torch.einsum("ihe,hed->hid", mean_values, w_o)  # M_V^h[i] W_O^h
    positional_part = torch.einsum("hni,hid->nd", kernels, value_out)
    return ContextualCircuit(
        heads=heads,
        dest_token=dest,
        n_ref=n_ref,
        calibration=calib,
        head_kernels=kernels,
        kernel=kernel,
        log_content=log_content,
        token_values=values,
        extended=extended,
        mean_values=mean_values,
        positional_part=positional_part,
        w_o=w_o,
        frame=frame,
        mean_keys=mean_keys,
    )


_CIRCUITS = IdentityCache(size=6)
_HEADS = IdentityCache(size=4)


def contextual_heads(model: Model) -> list[int]:
    """The heads chapter 2's taxonomy classifies as contextual (computed, cached per model).

    Raises:
        NoContextualHeadsError: when the taxonomy finds none. Nothing stands in for them: pass
            ``heads=[...]`` to :func:`build_circuit` to build a circuit of heads you choose.
    """
    found = _HEADS.get((model,), (), lambda: sorted(classify_heads(model).groups["contextual"]))
    if not found:
        raise NoContextualHeadsError(
            "The taxonomy of this model's layer 0 found no contextual head (slowly decaying "
            "kernel and weak content dependence), so there is no contextual circuit: no bag of "
            "tokens, no extended embeddings, no context neurons to discover from the weights. "
            "To study chosen heads anyway, pass heads=[...] explicitly."
        )
    return list(found)


@dataclass(frozen=True)
class KnownHeads:
    """The computed contextual heads beside the known ones (chapter 4, section 4.1): the paper's
    on GPT-2 Small (where they can differ), the planted ones on the planted model (the same by
    construction), else GPT-2 Small's in the paper as a reference.

    Attributes:
        computed: the contextual heads computed from the weights (:func:`contextual_heads`).
        paper: GPT-2 Small's in the paper.
        gpt2: whether the model is GPT-2 Small.
        planted: the planted contextual heads (the planted model only).
    """

    computed: list[int]
    paper: list[int]
    gpt2: bool = False
    planted: list[int] | None = None

    def findings(self) -> list[str]:
        """The computed heads, then the known ones (and on GPT-2 Small, an alarm when they
        differ), one line each."""
        lines = [f"contextual heads (computed):  {self.computed}"]
        if self.gpt2:
            lines.append(f"paper (GPT-2 Small):          {self.paper}")
            if sorted(self.computed) != sorted(self.paper):
                lines.append(
                    "!!! THE COMPUTED CONTEXTUAL HEADS DIFFER FROM THE PAPER'S. This chapter uses "
                    "the COMPUTED heads; chapter 2's margins say which differences are close "
                    "calls."
                )
        elif self.planted is not None:
            lines.append(f"planted truth:                {self.planted}  (by construction)")
        else:
            lines.append(f"GPT-2 Small's in the paper:   {self.paper}  (another model; reference)")
        return lines


def get_circuit(
    model: TransformerBridge, calibration: str = "prose", heads=None
) -> ContextualCircuit:
    """:func:`build_circuit` with default options, cached per model, calibration text and heads.

    ``heads=None`` uses :func:`contextual_heads` (computed from the weights, as chapter 2 does).
    """
    heads = tuple(check_heads(model, contextual_heads(model) if heads is None else heads))
    return _CIRCUITS.get(
        (model,), (calibration, heads), lambda: build_circuit(model, calibration, list(heads))
    )
