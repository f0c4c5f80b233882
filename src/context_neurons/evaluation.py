"""How good is the circuit? This module implements the paper's evaluation of context neurons.

Gibson's paper, section "Evaluating the approximation": for the discovered neurons, compare the
pre-activation the model computes (hook ``blocks.0.mlp.hook_pre``) with the one the contextual
circuit predicts from the weights, text by text. The approximate residual stream entering LN2 at
position ``n`` of tokens ``t_0..t_n`` is

    x(n) = sum_i K[n, i] e(t_i)                                  the bag (chapter 4)
         + sum_{h contextual} sum_i pos_{h,n}(i) M_V^h[i] W_O^h  positional part, own kernels
         + W_E[t_n] + W_pos[n]                                   direct path
         + sum_{h not contextual} v_h(t_n, n) W_O^h              other heads, as if attending
                                                                 only to the current token
         + b_O                                                   attention output bias

with the bag's denominators taken per position from the calibration text by default (the
``<|endoftext|>`` sink, :mod:`context_neurons.circuit`; ``denominators="median"`` gives the
constant-denominator version), and LN2 is linearised with the calibration text's scale ``s2``:
``pre_j(n) ~ s2 (gamma2 * centred(x(n))) . W_in[:, j] + beta2 . W_in[:, j] + b_in[j]``.
Every term is linear in ``x``, so we project each onto the neurons' read vectors *first* and the
whole prediction becomes table look-ups plus, per text, the kernel ``[pos, pos]`` applied to each
contextual head's ``[pos, neurons]`` contributions (their per-position denominators differ): for
``J`` neurons, ``B`` texts of ``P`` tokens and ``H_ctx`` contextual heads the bag costs
``B P^2 H_ctx J`` multiply-adds (``B P^2 J`` with the constant median denominators, which let the
heads be summed first). The only non-linear piece, the other heads' exact LN1 scale
``1 / sigma(t_n, n)``, is one norm per position.

Accuracy per neuron and text, over positions ``1..len-1`` (position 0 is ``<|endoftext|>``, the
same in every text): the Pearson correlation ``r`` of true and approximate pre-activations, and the
fraction of variance unexplained ``FVU = sum_n (y_n - yhat_n)^2 / sum_n (y_n - mean y)^2`` (the
approximation used as is, no regression fitted; FVU > 1 is possible). The paper reports, on GPT-2
Small and 1000 OpenWebText texts, median ``r = 0.9485`` and median ``FVU = 0.1426``.

Much of a neuron's pre-activation is *local*: the direct path, the other heads at the current
token and the constant depend on ``(t_n, n)`` only. To measure the context part on its own,
:func:`evaluate` also compares ``y - local`` (the true pre-activation minus the local terms) with
``bag + positional`` (the contextual heads' predicted share): ``context_pearson`` and
``context_fvu``, and ``context_share``, the fraction of the true variance that ``y - local``
carries. The residual ``y - yhat`` is the same in both comparisons; only the variance it is
measured against differs.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import pandas as pd
import torch
import torch.nn.functional as F
from jaxtyping import Bool, Float, Int
from torch import Tensor
from transformer_lens import HookedTransformer

from context_neurons import decomposition as dec
from context_neurons.circuit import ContextualCircuit
from context_neurons.data import (
    CALIBRATION_TEXTS,
    DOMAINS,
    DataError,
    WindowReport,
    corpus_windows,
    domain_documents,
    pad_windows,
    tokenize_windows,
)
from context_neurons.neurons import check_neurons, read_vectors

#: First position evaluated (position 0 holds <|endoftext|> in every text).
START = 1
#: Default denominators of the bag (see :mod:`context_neurons.circuit`).
DENOMINATORS = "per_position"
#: Terms of :meth:`NeuronApproximator.terms` that depend on the current token and position only.
LOCAL_TERMS = ("direct", "other heads", "constant")
#: Terms that carry the contextual heads' output: the bag and their positional part.
CONTEXT_TERMS = ("bag", "positional")


class EvaluationError(ValueError):
    """Texts or neurons that cannot be evaluated; the message says why."""


def _check_batch(model: HookedTransformer, tokens) -> Tensor:
    tokens = torch.as_tensor(tokens)
    if tokens.ndim == 1:
        tokens = tokens[None]
    if tokens.ndim != 2 or tokens.numel() == 0:
        raise EvaluationError(
            "Expected a non-empty [batch, pos] tensor of token ids, got shape "
            f"{tuple(tokens.shape)}."
        )
    if tokens.shape[1] > model.cfg.n_ctx:
        raise EvaluationError(f"{tokens.shape[1]} tokens exceed the context of {model.cfg.n_ctx}.")
    return tokens.to(model.cfg.device)


@dataclass
class NeuronApproximator:
    """Pre-activation predictor of a set of neurons, every term projected onto their read vectors.

    Attributes (all ``[..., n_neurons]``):
        denominators: ``"per_position"`` or ``"median"`` (see :mod:`context_neurons.circuit`).
        contribution: ``e(t) . w_j`` for every token (the bag's summands, median denominators).
        head_contribution: each head's ``c_h(t) v_h(t) W_O^h . w_j`` before its denominator
            (for per-position denominators).
        positional: the contextual heads' positional part at each position.
        direct_token, direct_position: ``W_E[t] . w_j`` and ``W_pos[n] . w_j``.
        other_token, other_position: the non-contextual heads' ``(gamma1 * centred(W_E[t]))
            W_V W_O . w_j`` and the same for ``W_pos[n]``; multiplied by ``1 / sigma(t_n, n)``.
        constant: ``(beta1 W_V + b_V) W_O . w_j`` of the other heads, ``b_O . w_j``, LN2's
            ``beta2 . W_in[:, j]`` and ``b_in[j]``.
    """

    circuit: ContextualCircuit
    neurons: list[int]
    other_heads: list[int]
    denominators: str
    contribution: Float[Tensor, "d_vocab n_neurons"]
    head_contribution: Float[Tensor, "d_vocab ctx_head n_neurons"] | None
    positional: Float[Tensor, "pos n_neurons"]
    direct_token: Float[Tensor, "d_vocab n_neurons"]
    direct_position: Float[Tensor, "pos n_neurons"]
    other_token: Float[Tensor, "d_vocab n_neurons"]
    other_position: Float[Tensor, "pos n_neurons"]
    constant: Float[Tensor, "n_neurons"]
    eps: float
    w_e: Float[Tensor, "d_vocab d_model"] = field(repr=False)
    w_pos: Float[Tensor, "pos d_model"] = field(repr=False)

    @torch.no_grad()
    def terms(
        self, tokens: Int[Tensor, "batch pos"]
    ) -> dict[str, Float[Tensor, "batch pos n_neurons"]]:
        """Each term of the approximate pre-activation, separately (keys: :data:`LOCAL_TERMS`
        and :data:`CONTEXT_TERMS`)."""
        tokens = torch.as_tensor(tokens).to(self.w_e.device)
        n = tokens.shape[1]
        kernel = self.circuit.kernel[:n, :n]
        x = dec.centred(self.w_e[tokens] + self.w_pos[:n])
        inv_sigma = torch.rsqrt((x**2).mean(-1) + self.eps)  # LN1 scale of (t_n, n)
        if self.denominators == "median":
            bag = torch.einsum("ni,bij->bnj", kernel, self.contribution[tokens])
        else:
            inv_d = self.circuit.inverse_denominators(n, self.denominators)
            bag = torch.einsum("ni,bihj,hn->bnj", kernel, self.head_contribution[tokens], inv_d)
        return {
            "bag": bag,
            "positional": self.positional[:n].expand(len(tokens), -1, -1),
            "direct": self.direct_token[tokens] + self.direct_position[:n],
            "other heads": inv_sigma[..., None]
            * (self.other_token[tokens] + self.other_position[:n]),
            "constant": self.constant.expand(len(tokens), n, -1),
        }

    @torch.no_grad()
    def __call__(self, tokens: Int[Tensor, "batch pos"]) -> Float[Tensor, "batch pos n_neurons"]:
        """The approximate pre-activations of ``self.neurons`` along each text of the batch."""
        return sum(self.terms(tokens).values())


@torch.no_grad()
def approximator(
    circuit: ContextualCircuit,
    model: HookedTransformer,
    neurons,
    denominators: str = DENOMINATORS,
) -> NeuronApproximator:
    """Project every term of the approximation (module docstring) onto the neurons' read vectors.

    Args:
        circuit: the contextual circuit.
        model: the model.
        neurons: layer-0 neuron indices.
        denominators: ``"per_position"`` (default: ``D_h(n)`` of the calibration text, which
            follows the ``<|endoftext|>`` sink over the first ~100 positions) or ``"median"``
            (the constant ``Dhat_h`` of the extended embeddings).
    """
    neurons = check_neurons(model, neurons)
    circuit.inverse_denominators(1, denominators)  # validates the name
    attn, n_heads = model.blocks[0].attn, model.cfg.n_heads
    w = read_vectors(circuit, model, neurons)  # [d_model, J], LN2 scale and gamma2 included
    other = [h for h in range(n_heads) if h not in circuit.heads]
    gamma1, beta1 = dec.ln_affine(model.blocks[0].ln1, model.cfg.d_model)
    gamma2, beta2 = dec.ln_affine(model.blocks[0].ln2, model.cfg.d_model)
    if other:
        w_vo = torch.einsum("hde,hef->df", attn.W_V[other], attn.W_O[other])  # [d_model, d_model]
        read_other = w_vo @ w  # [d_model, J]
        other_token = (gamma1 * dec.centred(model.W_E)) @ read_other
        other_position = (gamma1 * dec.centred(model.W_pos)) @ read_other
        value_bias = torch.einsum("d,hde->he", beta1, attn.W_V[other]) + attn.b_V[other]
        other_constant = torch.einsum("he,hef->f", value_bias, attn.W_O[other]) @ w
    else:
        zeros = torch.zeros(len(neurons), device=w.device)
        other_token = torch.zeros(model.cfg.d_vocab, len(neurons), device=w.device)
        other_position = torch.zeros(model.cfg.n_ctx, len(neurons), device=w.device)
        other_constant = zeros
    mlp = model.blocks[0].mlp
    constant = other_constant + attn.b_O @ w + beta2 @ mlp.W_in[:, neurons] + mlp.b_in[neurons]
    return NeuronApproximator(
        circuit=circuit,
        neurons=neurons,
        other_heads=other,
        denominators=denominators,
        contribution=circuit.extended @ w,
        head_contribution=(
            None if denominators == "median" else circuit.head_contributions(w, circuit.w_o)
        ),
        positional=circuit.positional_part @ w,
        direct_token=model.W_E @ w,
        direct_position=model.W_pos @ w,
        other_token=other_token,
        other_position=other_position,
        constant=constant,
        eps=model.cfg.eps,
        w_e=model.W_E,
        w_pos=model.W_pos,
    )


@torch.no_grad()
def true_pre_activations(
    model: HookedTransformer, tokens: Int[Tensor, "batch pos"], neurons
) -> Float[Tensor, "batch pos n_neurons"]:
    """The model's layer-0 MLP pre-activations of ``neurons``, running layer 0 only.

    Computes the MLP's input ``blocks.0.hook_resid_mid`` (:func:`layer0_resid_mid`), which the
    model's own ``ln2`` and ``W_in[:, neurons]``, ``b_in[neurons]`` then map to the
    pre-activations: the computation of hook ``blocks.0.mlp.hook_pre`` restricted to the chosen
    neurons (tested equal), without the MLP's other neurons, its output and the later layers.
    """
    tokens = _check_batch(model, tokens)
    neurons = check_neurons(model, neurons)
    mlp = model.blocks[0].mlp
    resid_mid = layer0_resid_mid(model, tokens)
    return model.blocks[0].ln2(resid_mid) @ mlp.W_in[:, neurons] + mlp.b_in[neurons]


def _fused_attention_applies(model: HookedTransformer) -> bool:
    """Whether layer 0 is plain GPT-2 attention with no hooks attached (see layer0_resid_mid)."""
    cfg = model.cfg
    plain = (
        cfg.original_architecture == "GPT2LMHeadModel"
        and cfg.positional_embedding_type == "standard"
        and cfg.attention_dir == "causal"
        and cfg.attn_scores_soft_cap <= 0
        and not (cfg.use_split_qkv_input or cfg.use_attn_in or cfg.use_logn_attn)
        and cfg.n_key_value_heads is None
        and cfg.attn_types is None
    )
    hooked = any(
        point.fwd_hooks for name, point in model.hook_dict.items()
        if name.startswith(("hook_", "blocks.0.attn.", "blocks.0.ln1.", "blocks.0.hook_"))
    )
    return plain and not hooked


@torch.no_grad()
def layer0_resid_mid(
    model: HookedTransformer, tokens: Int[Tensor, "batch pos"]
) -> Float[Tensor, "batch pos d_model"]:
    """The residual stream after layer 0's attention (hook ``blocks.0.hook_resid_mid``).

    For GPT-2-architecture models this uses the model's own embeddings, ``ln1`` and attention
    weights with PyTorch's fused causal attention (``scaled_dot_product_attention``), which never
    materialises the ``[batch, head, pos, pos]`` pattern TransformerLens builds for its hooks; it
    is tested equal to the hooked forward pass. For other architectures, or when hooks are
    attached to layer 0, it runs the model's forward pass and stops it at that hook.
    """
    if not _fused_attention_applies(model):
        return _resid_mid_through_hooks(model, tokens)
    attn = model.blocks[0].attn
    resid_pre = model.embed(tokens) + model.pos_embed(tokens)
    x = model.blocks[0].ln1(resid_pre)
    w_qkv = torch.stack([attn.W_Q, attn.W_K, attn.W_V])  # [3, head, d_model, d_head], one GEMM
    b_qkv = torch.stack([attn.b_Q, attn.b_K, attn.b_V])  # [3, head, d_head]
    q, k, v = torch.einsum("bpd,shde->sbhpe", x, w_qkv) + b_qkv[:, None, :, None]
    scale = 1.0 / attn.attn_scale if model.cfg.use_attn_scale else 1.0
    z = F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=scale)
    return resid_pre + torch.einsum("bhpe,hef->bpf", z, attn.W_O) + attn.b_O


def _resid_mid_through_hooks(
    model: HookedTransformer, tokens: Int[Tensor, "batch pos"]
) -> Float[Tensor, "batch pos d_model"]:
    captured: dict[str, Tensor] = {}

    def capture_and_stop(resid_mid: Tensor, hook) -> None:
        captured["resid_mid"] = resid_mid
        raise _StopForward

    try:
        model.run_with_hooks(tokens, fwd_hooks=[("blocks.0.hook_resid_mid", capture_and_stop)])
    except _StopForward:
        pass
    return captured["resid_mid"]


class _StopForward(Exception):
    """Raised by a hook to end a forward pass once the needed activation is captured."""


def pearson_and_fvu(
    true: Float[Tensor, "batch pos n_neurons"],
    approx: Float[Tensor, "batch pos n_neurons"],
    mask: Bool[Tensor, "batch pos"],
) -> tuple[Float[Tensor, "batch n_neurons"], Float[Tensor, "batch n_neurons"]]:
    """Pearson r and FVU over the positions where ``mask`` is 1, per text and neuron."""
    m = mask[..., None].to(true.dtype)
    count = m.sum(1)
    mean_t = (true * m).sum(1) / count
    mean_a = (approx * m).sum(1) / count
    dt, da = (true - mean_t[:, None]) * m, (approx - mean_a[:, None]) * m
    var_t, var_a = (dt**2).sum(1), (da**2).sum(1)
    pearson = (dt * da).sum(1) / torch.sqrt(var_t * var_a).clamp(min=1e-30)
    fvu = (((true - approx) * m) ** 2).sum(1) / var_t.clamp(min=1e-30)
    return pearson, fvu


def masked_variance(
    values: Float[Tensor, "batch pos n_neurons"], mask: Bool[Tensor, "batch pos"]
) -> Float[Tensor, "batch n_neurons"]:
    """Sum of squared deviations from the mean over the positions where ``mask`` is 1."""
    m = mask[..., None].to(values.dtype)
    mean = (values * m).sum(1) / m.sum(1)
    return (((values - mean[:, None]) * m) ** 2).sum(1)


@dataclass
class Evaluation:
    """Accuracy of the approximation over a set of texts.

    Attributes:
        neurons: the neurons evaluated (columns).
        labels: the texts (rows).
        pearson: Pearson r per text and neuron, ``[n_texts, n_neurons]``.
        fvu: fraction of variance unexplained per text and neuron.
        true_max: the largest true pre-activation of each neuron in each text.
        approx_max: the same for the approximation.
        context_pearson: Pearson r of the context part, ``true - local`` against
            ``bag + positional`` (module docstring).
        context_fvu: FVU of the same comparison.
        context_share: the variance of ``true - local`` over the variance of ``true``.
        true_mean: the mean true pre-activation of each neuron in each text.
    """

    neurons: list[int]
    labels: list[str]
    pearson: Float[Tensor, "n_texts n_neurons"]
    fvu: Float[Tensor, "n_texts n_neurons"]
    true_max: Float[Tensor, "n_texts n_neurons"]
    approx_max: Float[Tensor, "n_texts n_neurons"]
    context_pearson: Float[Tensor, "n_texts n_neurons"]
    context_fvu: Float[Tensor, "n_texts n_neurons"]
    context_share: Float[Tensor, "n_texts n_neurons"]
    true_mean: Float[Tensor, "n_texts n_neurons"]

    @property
    def median_pearson(self) -> float:
        return float(self.pearson.flatten().nanmedian())

    @property
    def median_fvu(self) -> float:
        return float(self.fvu.flatten().nanmedian())

    @property
    def median_context_pearson(self) -> float:
        return float(self.context_pearson.flatten().nanmedian())

    @property
    def median_context_fvu(self) -> float:
        return float(self.context_fvu.flatten().nanmedian())

    @property
    def median_context_share(self) -> float:
        return float(self.context_share.flatten().nanmedian())

    def per_neuron(self) -> pd.DataFrame:
        """Median r and FVU of each neuron over the texts, of the whole and of the context part."""
        return pd.DataFrame(
            {
                "median r": self.pearson.nanmedian(0).values.tolist(),
                "median FVU": self.fvu.nanmedian(0).values.tolist(),
                "context share": self.context_share.nanmedian(0).values.tolist(),
                "context r": self.context_pearson.nanmedian(0).values.tolist(),
                "context FVU": self.context_fvu.nanmedian(0).values.tolist(),
                "max true pre-activation": self.true_max.max(0).values.tolist(),
            },
            index=pd.Index(self.neurons, name="neuron"),
        )

    def context_view(self) -> "Evaluation":
        """A copy whose ``pearson`` and ``fvu`` are the context part's (for the same plots)."""
        return replace(self, pearson=self.context_pearson, fvu=self.context_fvu)

    def select(self, pairs: Bool[Tensor, "n_texts n_neurons"]) -> dict[str, float]:
        """Medians of every measure over the neuron-text pairs where ``pairs`` is true."""
        if not bool(pairs.any()):
            raise EvaluationError("No neuron-text pair selected.")
        return {name: float(v[pairs].nanmedian()) for name, v in _pair_measures(self).items()}


@torch.no_grad()
def evaluate(
    circuit: ContextualCircuit,
    model: HookedTransformer,
    windows: list[Int[Tensor, "_pos"]],
    neurons,
    labels: list[str] | None = None,
    batch_size: int = 8,
    start: int = START,
    progress: bool = False,
    truth_cache: dict | None = None,
    denominators: str = DENOMINATORS,
) -> Evaluation:
    """True against approximate pre-activations of ``neurons`` on every window, in batches.

    Args:
        circuit: the contextual circuit (chapter 4).
        model: the model.
        windows: 1-D token tensors, ``<|endoftext|>`` first (``data.tokenize_windows``).
        neurons: layer-0 neuron indices.
        labels: one name per window (default ``text 0``, ``text 1``, ...).
        batch_size: texts per batch (right-padded; causal attention makes padding harmless).
        start: first position evaluated.
        progress: show a progress bar.
        truth_cache: a dict in which true pre-activations are kept per batch (keyed by the
            batch's tokens and the neurons), so that several circuits, denominators or start
            positions can be evaluated against one model run.
        denominators: ``"per_position"`` or ``"median"`` (:func:`approximator`).
    """
    _check_windows(windows, start)
    neurons = check_neurons(model, neurons)
    approx_fn = approximator(circuit, model, neurons, denominators)
    return _evaluate_with(
        approx_fn, model, windows, labels, batch_size, start, progress, truth_cache
    )


@torch.no_grad()
def evaluate_sets(
    circuit: ContextualCircuit,
    model: HookedTransformer,
    window_sets: dict[str, list[Int[Tensor, "_pos"]]],
    neurons,
    batch_size: int = 8,
    start: int = START,
    truth_cache: dict | None = None,
    denominators: str = DENOMINATORS,
) -> dict[str, Evaluation]:
    """:func:`evaluate` on each named set of texts, projecting the approximation only once."""
    if not window_sets:
        raise EvaluationError("No sets of texts to evaluate: give at least one named set.")
    for windows in window_sets.values():
        _check_windows(windows, start)
    neurons = check_neurons(model, neurons)
    approx_fn = approximator(circuit, model, neurons, denominators)
    return {
        name: _evaluate_with(
            approx_fn, model, windows, None, batch_size, start, False, truth_cache
        )
        for name, windows in window_sets.items()
    }


def _check_windows(windows: list[Int[Tensor, "_pos"]], start: int) -> None:
    if not windows:
        raise EvaluationError("No texts to evaluate: give at least one token window.")
    for w in windows:
        if len(w) < start + 2:
            raise EvaluationError(
                f"A text has {len(w)} tokens; evaluation needs at least {start + 2} (BOS and two "
                f"positions) to compute a correlation."
            )


def _evaluate_with(
    approx_fn: NeuronApproximator,
    model: HookedTransformer,
    windows: list[Int[Tensor, "_pos"]],
    labels: list[str] | None,
    batch_size: int,
    start: int,
    progress: bool,
    truth_cache: dict | None,
) -> Evaluation:
    """The batches of :func:`evaluate`, with the neurons' approximator already projected."""
    from tqdm.auto import tqdm

    neurons = approx_fn.neurons
    out: dict[str, list[Tensor]] = {name: [] for name in _EVALUATION_TENSORS}
    batches = range(0, len(windows), batch_size)
    for b in tqdm(batches, desc="evaluating", disable=not progress):
        tokens, lengths = pad_windows(windows[b : b + batch_size])
        tokens = _check_batch(model, tokens)
        key = (tuple(neurons), tuple(tokens.shape), hash(tokens.cpu().numpy().tobytes()))
        if truth_cache is not None and key in truth_cache:
            true = truth_cache[key]
        else:
            true = true_pre_activations(model, tokens, neurons)
            if truth_cache is not None:
                truth_cache[key] = true
        mask = _position_mask(tokens, lengths, start)
        for name, values in _measures(true, approx_fn.terms(tokens), mask).items():
            out[name].append(values)
    return Evaluation(
        neurons=neurons,
        labels=list(labels or [f"text {i}" for i in range(len(windows))]),
        **{name: torch.cat(values).cpu() for name, values in out.items()},
    )


_EVALUATION_TENSORS = (
    "pearson",
    "fvu",
    "true_max",
    "approx_max",
    "context_pearson",
    "context_fvu",
    "context_share",
    "true_mean",
)


def _measures(
    true: Float[Tensor, "batch pos n_neurons"],
    terms: dict[str, Float[Tensor, "batch pos n_neurons"]],
    mask: Bool[Tensor, "batch pos"],
) -> dict[str, Float[Tensor, "batch n_neurons"]]:
    """Every per-text measure of :class:`Evaluation` for one batch."""
    local = sum(terms[name] for name in LOCAL_TERMS)
    context = sum(terms[name] for name in CONTEXT_TERMS)
    approx = local + context
    r, f = pearson_and_fvu(true, approx, mask)
    context_r, context_f = pearson_and_fvu(true - local, context, mask)
    share = masked_variance(true - local, mask) / masked_variance(true, mask).clamp(min=1e-30)
    m = mask[..., None].to(true.dtype)
    neg = torch.tensor(float("-inf"), device=true.device)
    return {
        "pearson": r,
        "fvu": f,
        "true_max": torch.where(mask[..., None], true, neg).amax(1),
        "approx_max": torch.where(mask[..., None], approx, neg).amax(1),
        "context_pearson": context_r,
        "context_fvu": context_f,
        "context_share": share,
        "true_mean": (true * m).sum(1) / m.sum(1),
    }


@torch.no_grad()
def activation_curves(
    circuit: ContextualCircuit,
    model: HookedTransformer,
    tokens: Int[Tensor, "pos"],
    neuron,
    denominators: str = DENOMINATORS,
    parts: bool = False,
) -> dict[str, Float[Tensor, "pos"]]:
    """True and approximate pre-activation of one neuron along one text, and the bag term alone.

    Args:
        circuit: the contextual circuit.
        model: the model.
        tokens: one text, ``<|endoftext|>`` first.
        neuron: a layer-0 neuron index.
        denominators: ``"per_position"`` or ``"median"`` (:func:`approximator`).
        parts: also return ``"local terms"`` (direct path, other heads, constant),
            ``"true minus local"`` and ``"bag + positional"`` (the context part, true and
            approximate; their difference is the approximation's error).

    Returns:
        CPU curves, each ``[pos]``: ``"true"``, ``"approximation"``, ``"bag only"`` (and the parts).
    """
    if torch.as_tensor(tokens).numel() == 0:
        raise EvaluationError("The text is empty: give at least one token.")
    tokens = _check_batch(model, tokens)
    approx_fn = approximator(circuit, model, [neuron], denominators)
    terms = {name: values[0, :, 0].cpu() for name, values in approx_fn.terms(tokens).items()}
    true = true_pre_activations(model, tokens, [neuron])[0, :, 0].cpu()
    curves = {"true": true, "approximation": sum(terms.values()), "bag only": terms["bag"]}
    if parts:
        local = sum(terms[name] for name in LOCAL_TERMS)
        curves["local terms"] = local
        curves["true minus local"] = true - local
        curves["bag + positional"] = sum(terms[name] for name in CONTEXT_TERMS)
    return curves


# ----------------------------------------------------------------------------------------------
# Calibration
# ----------------------------------------------------------------------------------------------


@torch.no_grad()
def calibration_sensitivity(
    model: HookedTransformer,
    window_sets: dict[str, list[Int[Tensor, "_pos"]]],
    neurons,
    calibrations=tuple(CALIBRATION_TEXTS),
    batch_size: int = 8,
    denominators: str = DENOMINATORS,
    truth_cache: dict | None = None,
    own_neurons: dict[str, list[int]] | None = None,
) -> pd.DataFrame:
    """Median r, FVU and context-part FVU for each calibration text and set of texts.

    The true pre-activations of each set are computed once and shared by all calibrations (and
    kept in ``truth_cache`` when given, for later :func:`evaluate` calls).

    Args:
        model: the model.
        window_sets: named sets of texts.
        neurons: layer-0 neuron indices.
        calibrations: names of ``data.CALIBRATION_TEXTS``.
        batch_size: texts per batch.
        denominators: ``"per_position"`` or ``"median"`` (:func:`approximator`).
        truth_cache: see :func:`evaluate`.
        own_neurons: for some sets, the neurons of that set's domain (:func:`matched_domains`):
            adds the measure ``"own neurons' FVU"``, the median FVU over those neurons only
            (NaN where a set has none).

    Returns:
        A DataFrame: rows calibration texts, columns ``(measure, text set)`` with the measures
        ``"median r"``, ``"median FVU"`` and ``"median context FVU"`` (and ``"own neurons' FVU"``).
    """
    from context_neurons.circuit import get_circuit

    neurons = check_neurons(model, neurons)
    cache = {} if truth_cache is None else truth_cache
    rows = {}
    for calib in calibrations:
        circuit = get_circuit(model, calib)
        evaluations = evaluate_sets(
            circuit,
            model,
            window_sets,
            neurons,
            batch_size=batch_size,
            truth_cache=cache,
            denominators=denominators,
        )
        row = {}
        for name, ev in evaluations.items():
            row[("median r", name)] = ev.median_pearson
            row[("median FVU", name)] = ev.median_fvu
            row[("median context FVU", name)] = ev.median_context_fvu
            if own_neurons is not None:
                own = [neurons.index(j) for j in own_neurons.get(name, []) if j in neurons]
                row[("own neurons' FVU", name)] = (
                    float(ev.fvu[:, own].nanmedian()) if own else float("nan")
                )
        rows[calib] = row
    table = pd.DataFrame(rows).T
    table.columns = pd.MultiIndex.from_tuples(table.columns)
    table.index.name = "calibration text"
    return table


#: A neuron is quiet on the calibration text when its largest output there (after the MLP's
#: activation function) is below this fraction of its largest output on its best set of texts...
QUIET_FRACTION = 0.1
#: ... and it counts as firing strongly there when that largest output is at least this.
STRONG_OUTPUT = 1.0


@torch.no_grad()
def silent_on_calibration(
    circuit: ContextualCircuit,
    model: HookedTransformer,
    neurons,
    evaluations: dict[str, Evaluation] | None = None,
    quiet: float = QUIET_FRACTION,
    strong: float = STRONG_OUTPUT,
) -> pd.DataFrame:
    """Each neuron's largest activation on the calibration text, beside its best set of texts.

    Without ``evaluations``: the largest true pre-activation on the calibration text only. With
    them (:func:`evaluate_sets` on named sets of texts, domains say, for the same neurons): its
    largest pre-activation on each set, the set where it is largest, and a relative criterion.
    Outputs are the MLP's activation function (GELU) of the pre-activations. A neuron is
    ``quiet on calibration`` when its largest output on the calibration text is below ``quiet``
    times its largest output on its best set, and that output is at least ``strong``: it is
    (nearly) silent on the text that calibrates the circuit, yet fires strongly in its domain.

    Returns:
        A DataFrame, rows neurons: ``max on calibration text`` (pre-activation), then with
        ``evaluations`` the ``max on <set>`` columns, ``best set``, ``max on best set``,
        ``output ratio`` (calibration over best set, after GELU) and ``quiet on calibration``.
    """
    neurons = check_neurons(model, neurons)
    tokens = circuit.calibration.tokens
    pre = true_pre_activations(model, tokens[None], neurons)[0, START:]
    table = pd.DataFrame(
        {"max on calibration text": pre.max(0).values.cpu().tolist()},
        index=pd.Index(neurons, name="neuron"),
    )
    if not evaluations:
        return table
    for name, ev in evaluations.items():
        if ev.neurons != neurons:
            raise EvaluationError(
                f"The evaluation of {name!r} is of neurons {ev.neurons[:5]}..., not of the "
                f"neurons asked for: evaluate every set with the same neurons."
            )
        table[f"max on {name}"] = ev.true_max.max(0).values.tolist()
    per_set = table[[f"max on {name}" for name in evaluations]]
    table["best set"] = per_set.idxmax(axis=1).str.removeprefix("max on ")
    table["max on best set"] = per_set.max(axis=1)
    act = model.blocks[0].mlp.act_fn
    calib_out = act(torch.tensor(table["max on calibration text"].to_numpy()))
    best_out = act(torch.tensor(table["max on best set"].to_numpy()))
    table["output ratio"] = (calib_out / best_out).tolist()
    table["quiet on calibration"] = ((calib_out < quiet * best_out) & (best_out >= strong)).tolist()
    return table


def matched_domains(evaluations: dict[str, Evaluation]) -> tuple[pd.DataFrame, dict[str, float]]:
    """Each neuron on the texts of its own domain: the set where its mean pre-activation is highest.

    Args:
        evaluations: :func:`evaluate_sets` on named sets of texts (domains), same neurons.

    Returns:
        A per-neuron DataFrame (``domain`` and the medians of :meth:`Evaluation.select` over that
        domain's texts), and the medians over all matched neuron-text pairs pooled.
    """
    if not evaluations:
        raise EvaluationError("No evaluations: give at least one named set of texts.")
    names = list(evaluations)
    means = torch.stack([evaluations[name].true_mean.mean(0) for name in names])  # [set, neuron]
    best = means.argmax(0).tolist()
    neurons = evaluations[names[0]].neurons
    rows, pooled = {}, {}
    for k, (neuron, b) in enumerate(zip(neurons, best)):
        ev = evaluations[names[b]]
        pairs = torch.zeros_like(ev.pearson, dtype=torch.bool)
        pairs[:, k] = True
        rows[neuron] = {"domain": names[b], **ev.select(pairs)}
        for measure, values in _pair_measures(ev).items():
            pooled.setdefault(measure, []).append(values[:, k])
    table = pd.DataFrame(rows).T
    table.index.name = "neuron"
    return table, {m: float(torch.cat(v).nanmedian()) for m, v in pooled.items()}


def _pair_measures(ev: Evaluation) -> dict[str, Float[Tensor, "n_texts n_neurons"]]:
    """The per-pair measures of an evaluation, by the names :meth:`Evaluation.select` uses."""
    return {
        "median r": ev.pearson,
        "median FVU": ev.fvu,
        "context share": ev.context_share,
        "context r": ev.context_pearson,
        "context FVU": ev.context_fvu,
    }


def _position_mask(
    tokens: Int[Tensor, "batch pos"], lengths: Int[Tensor, "batch"], start: int
) -> Bool[Tensor, "batch pos"]:
    """True at the positions ``start <= n < length`` of each padded text (on the tokens' device)."""
    positions = torch.arange(tokens.shape[1], device=tokens.device)
    return (positions[None] >= start) & (positions[None] < lengths.to(tokens.device)[:, None])


# ----------------------------------------------------------------------------------------------
# The reproduction table
# ----------------------------------------------------------------------------------------------


def reproduce_section(ctx) -> list:
    """Chapter 6: median Pearson r and FVU of the discovered neurons over the evaluation texts."""
    from context_neurons.circuit import get_circuit
    from context_neurons.neurons import THETA, get_scores
    from context_neurons.reproduce import Row

    model = ctx.model
    taxonomy = ctx.shared.get("head_taxonomy")
    heads = taxonomy.groups.get("contextual") if taxonomy is not None else None
    circuit = ctx.shared.get("circuit") or get_circuit(model, heads=heads or None)
    ctx.shared["circuit"] = circuit
    found = ctx.shared.get("neurons_found")
    if found is None:
        found = get_scores(circuit, model).found(THETA)
    if not found:
        return [
            Row("median_pearson_r", float("nan"), "0.9485", label="no neurons found"),
            Row("median_fvu", float("nan"), "0.1426", label="no neurons found"),
        ]
    if not ctx.windows:
        raise DataError("No evaluation texts.")
    cache: dict = {}
    ev = evaluate(
        circuit,
        model,
        ctx.windows,
        found,
        labels=ctx.labels,
        progress=ctx.progress,
        truth_cache=cache,
    )
    constant = evaluate(
        circuit, model, ctx.windows, found, truth_cache=cache, denominators="median"
    )
    ctx.shared["evaluation"] = ev
    return [
        Row(
            "median_pearson_r",
            ev.median_pearson,
            "0.9485",
            label=f"true vs approximate pre-activations, {len(found)} discovered neurons x "
            f"{len(ctx.windows)} texts (median over neuron-text pairs; per-position "
            f"calibrated denominators)",
        ),
        Row(
            "median_fvu",
            ev.median_fvu,
            "0.1426",
            label="fraction of variance unexplained, same pairs (median)",
        ),
        Row(
            "median_context_share",
            ev.median_context_share,
            "",
            label="variance of (true - local terms) / variance of true, same pairs (median)",
        ),
        Row(
            "median_context_pearson_r",
            ev.median_context_pearson,
            "",
            label="Pearson r of the context part: true - local terms vs bag + positional part",
        ),
        Row(
            "median_context_fvu",
            ev.median_context_fvu,
            "",
            label="FVU of the context part, same pairs (median)",
        ),
        Row(
            "median_pearson_r_constant_denominator",
            constant.median_pearson,
            "0.9485",
            label="same, with one median denominator per head at every position",
        ),
        Row(
            "median_fvu_constant_denominator",
            constant.median_fvu,
            "0.1426",
            label="FVU, one median denominator per head",
        ),
    ]


# ----------------------------------------------------------------------------------------------
# Texts of a domain
# ----------------------------------------------------------------------------------------------

def domain_windows(
    tokenizer,
    domain: str,
    n: int = 4,
    min_tokens: int = 1023,
    interleave: bool = False,
    n_ctx: int = 1024,
) -> tuple[list[Int[Tensor, "_pos"]], list[str]]:
    """``n`` windows of a domain's texts (one of ``data.DOMAINS``, ``data.domain_documents``).

    Documents shorter than ``min_tokens`` are concatenated, separated by ``<|endoftext|>``, so
    corpora of short items (Pokemon moves, abstracts, Bible chapters) give full-length windows.

    Args:
        tokenizer: the model's tokenizer.
        domain: e.g. ``"bible"``, ``"spanish"``, ``"code"``.
        n: windows wanted (fewer if the domain's texts run out).
        min_tokens: documents shorter than this are concatenated with the next ones.
        interleave: alternate between the domain's corpora instead of reading them in turn.
        n_ctx: the window length (BOS included).
    """
    documents = domain_documents(domain, interleave=interleave)
    windows, labels, _ = tokenize_windows(
        tokenizer, documents, n_ctx, min_tokens=min_tokens, short="concat", max_windows=n
    )
    if not windows:
        raise DataError(f"Domain {domain!r} gave no windows of {n_ctx} tokens.")
    return windows, labels


def evaluation_windows(
    tokenizer, n: int, corpora=None, min_tokens: int = 1023
) -> tuple[list[Int[Tensor, "_pos"]], list[str], WindowReport]:
    """``n`` full-length evaluation windows, one document from each corpus in turn.

    Offline, the documents of ``corpora`` (default ``reproduce.EVAL_CORPORA``) are interleaved so
    that every genre is represented whatever ``n``; documents shorter than ``min_tokens`` are
    dropped (one window per document). Without the corpora, OpenWebText.
    """
    from context_neurons.reproduce import EVAL_CORPORA

    names = list(EVAL_CORPORA if corpora is None else corpora)
    return corpus_windows(tokenizer, names, n=n, min_tokens=min_tokens, interleave=True)


