"""Where the approximation's error comes from. This module splits the true pre-activation of
layer-0 neurons into the pieces the approximation (:mod:`context_neurons.evaluation.approximation`)
estimates one by one, measures each piece exactly through the model's hooks, and reports the
accuracy when any subset of pieces is replaced by its exact value.

With ``w_j = s2 * centred(gamma2 * W_in[:, j])`` the read vector of neuron ``j`` at the calibration
text's LN2 scale ``s2`` and ``s(n) = 1 / std(x(n))`` the exact LN2 scale at position ``n`` of the
residual stream ``x(n)`` entering LN2 (hook ``blocks.0.hook_resid_mid``), the true pre-activation
is exactly the sum of

    direct       (W_E[t_n] + W_pos[n]) . w_j
    head h       z_h(n) W_O^h . w_j              each contextual head (``blocks.0.attn.hook_z``)
    other heads  sum_{h not contextual} z_h(n) W_O^h . w_j
    constant     b_O . w_j + beta2 . W_in[:, j] + b_in[j]
    ln2          (s(n) / s2 - 1) (direct + sum_h head h + other heads + b_O . w_j)

because ``s(n) centred(x) . (gamma2 * W_in[:, j]) = (s(n) / s2) x . w_j``. The approximation's
estimate of each piece: ``direct`` and ``constant`` are exact; ``head h`` is the head's share of
the bag, ``sum_i K[n, i] c_h(t_i) v_h(t_i) W_O^h . w_j / D_h(n)``, plus its positional part;
``other heads`` is the other heads as if attending only to the current token, value biases
included; ``ln2`` is 0 (LN2 linearised at ``s2``). The estimates sum to
:class:`~context_neurons.evaluation.approximation.NeuronApproximator`'s prediction (with
``denominators="per_position"`` or ``"median"``).

The bag's denominators ``D_h(n)`` (:data:`DENOMINATORS`): ``"per_position"`` and ``"median"`` as
in the circuit (:mod:`context_neurons.circuit.build`, in the circuit's frame: build it with
``frame="destination"`` to see the failure of issue 50); ``"text_at_reference"``, each text's own
``sum_i K[n, i] c_h(t_i)`` in the bag's frame (content weights ``c_{n_ref}``, the shared kernel
``K`` and the text's own ``t_n`` at ``i = n``, where the calibration's have each head's kernel and
``' the'``), so that the bag's weights sum to 1 at every position: what the calibrated
denominators stand for, without their transfer from the calibration text.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from jaxtyping import Bool, Float, Int
from torch import Tensor
from transformer_lens.model_bridge import TransformerBridge

from context_neurons import decomposition as dec
from context_neurons.checks import check_neurons, check_tokens
from context_neurons.circuit import ContextualCircuit
from context_neurons.discovery import read_vectors
from context_neurons.evaluation.accuracy import pearson_and_fvu
from context_neurons.evaluation.approximation import START, approximator
from context_neurons.hooks import run_until
from context_neurons.models.weights import as_weights

#: The bag's denominators :class:`ErrorTerms` can use (module docstring).
DENOMINATORS = ("per_position", "median", "text_at_reference")


@dataclass
class ErrorTerms:
    """Every piece of the neurons' pre-activation, exact and approximated, on a batch of texts.

    Attributes:
        heads: the contextual heads (pieces ``"head {h}"``).
        neurons: the neurons (last axis).
        true: the model's pre-activations.
        exact: each piece measured through the hooks (module docstring); they sum to ``true``.
        approx: each piece as the approximation estimates it, the contextual heads' without
            their bag (``positional`` part only).
        bags: each contextual head's bag under each denominator choice, ``{choice: [batch, pos,
            ctx_head, n_neurons]}``.
        mask: the positions evaluated (``>= start``, inside each text).
    """

    heads: list[int]
    neurons: list[int]
    true: Float[Tensor, "batch pos n_neurons"]
    exact: dict[str, Float[Tensor, "batch pos n_neurons"]]
    approx: dict[str, Float[Tensor, "batch pos n_neurons"]]
    bags: dict[str, Float[Tensor, "batch pos ctx_head n_neurons"]]
    mask: Bool[Tensor, "batch pos"]

    @property
    def pieces(self) -> list[str]:
        return list(self.exact)

    def prediction(
        self, exact=(), denominators: str = "per_position"
    ) -> Float[Tensor, "batch pos n_neurons"]:
        """The approximation with the pieces named in ``exact`` replaced by their exact values."""
        total = torch.zeros_like(self.true)
        for name in self.pieces:
            if name in exact:
                total = total + self.exact[name]
            else:
                total = total + self.approx[name]
                if name.startswith("head "):
                    total = total + self.bags[denominators][:, :, self.heads.index(int(name[5:]))]
        return total

    def accuracy(
        self, exact=(), denominators: str = "per_position", positions: tuple[int, int] | None = None
    ) -> tuple[Float[Tensor, "batch n_neurons"], Float[Tensor, "batch n_neurons"]]:
        """Pearson r and FVU per text and neuron of :meth:`prediction`, over the evaluated
        positions in ``[first, last)`` when ``positions`` is given."""
        mask = self.mask
        if positions is not None:
            n = torch.arange(mask.shape[1], device=mask.device)
            mask = mask & (n >= positions[0]) & (n < positions[1])
        return pearson_and_fvu(self.true, self.prediction(exact, denominators), mask)


@torch.no_grad()
def error_terms(
    circuit: ContextualCircuit,
    model: TransformerBridge,
    tokens: Int[Tensor, "batch pos"],
    neurons,
    start: int = START,
) -> ErrorTerms:
    """Measure every piece of the module docstring on a batch of full-length texts."""
    tokens = check_tokens(model, tokens)
    neurons = check_neurons(model, neurons)
    w = as_weights(model)
    heads, n = circuit.heads, tokens.shape[1]
    other = [h for h in range(w.cfg.n_heads) if h not in heads]
    read = read_vectors(circuit, model, neurons)  # [d_model, J]
    acts = run_until(model, tokens, "blocks.0.hook_resid_mid", ["blocks.0.attn.hook_z"])
    z, resid = acts["blocks.0.attn.hook_z"], acts["blocks.0.hook_resid_mid"]  # [b p h e], [b p d]
    scale = torch.rsqrt((dec.centred(resid) ** 2).mean(-1) + w.cfg.eps) / circuit.ln2_scale
    per_head = torch.einsum("bphe,hej->bphj", z, w.W_O @ read)  # [b, p, head_index, J]
    outside = w.ln2_b @ w.W_in[:, neurons] + w.b_in[neurons]
    exact = {"direct": (w.W_E[tokens] + w.W_pos[:n]) @ read}
    exact |= {f"head {h}": per_head[:, :, h] for h in heads}
    exact["other heads"] = per_head[:, :, other].sum(2)
    linear = sum(exact.values()) + w.b_O @ read
    exact["constant"] = (w.b_O @ read + outside).expand_as(linear)
    exact["ln2"] = (scale[..., None] - 1) * linear

    fn = approximator(circuit, model, neurons, "median")
    terms = fn.terms(tokens)
    value_out = torch.einsum("ihe,hej->hij", circuit.mean_values[:n], circuit.w_o @ read)
    positional = torch.einsum("hni,hij->nhj", circuit.head_kernels[:, :n, :n], value_out)
    approx = {"direct": terms["direct"]}
    approx |= {f"head {h}": positional[:, k].expand_as(linear) for k, h in enumerate(heads)}
    approx["other heads"] = terms["other heads"] + terms["constant"] - exact["constant"]
    approx["constant"] = exact["constant"]
    approx["ln2"] = torch.zeros_like(linear)

    contribution = circuit.head_contributions(read, circuit.w_o)[tokens]  # [b, i, h, J]
    numerator = torch.einsum("ni,bihj->bnhj", circuit.kernel[:n, :n], contribution)
    log_d = {d: circuit.inverse_denominators(n, d).log().neg()[None] for d in DENOMINATORS[:2]}
    log_weights = circuit.log_content[:, tokens].permute(1, 0, 2)  # [b, h, i]: log c_h(t_i)
    log_kernel = circuit.kernel[:n, :n].log()  # -inf above the diagonal
    log_d["text_at_reference"] = torch.logsumexp(
        log_kernel[None, None] + log_weights[:, :, None], -1)
    bags = {d: numerator * torch.exp(-v).transpose(1, 2)[..., None] for d, v in log_d.items()}
    positions = torch.arange(n, device=tokens.device)
    mask = (positions >= start)[None].expand(len(tokens), -1)
    true = dec.layer_norm(resid, w.ln2_w, w.ln2_b, w.cfg.eps) @ w.W_in[:, neurons] + w.b_in[neurons]
    return ErrorTerms(heads, neurons, true, exact, approx, bags, mask)

