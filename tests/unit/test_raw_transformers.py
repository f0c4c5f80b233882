"""Every weight and hook the method reads, checked against Hugging Face's own GPT-2 module.

The package runs a TransformerLens 4 ``TransformerBridge`` in compatibility mode. These tests run
the Hugging Face ``GPT2LMHeadModel`` the bridge was built from through its plain ``transformers``
forward pass, with PyTorch hooks on its submodules (``wte``, ``h[l].ln_1``, ``h[l].attn.c_attn``,
``h[l].attn.c_proj``, ``h[l].ln_2``, ``h[l].mlp.c_fc``, ``h[l].mlp.act``, ...) and no
TransformerLens, and check that the bridge's weights and hook activations are what Hugging Face
computes. That makes the method's numbers independent of TransformerLens's hook semantics, which
changed between versions (issue 1317: compatibility aliases firing on other tensors).

* Processing off (nothing folded or centred): every weight equals Hugging Face's weight
  rearranged (``c_attn`` split into per-head ``W_Q, W_K, W_V``, ``c_proj`` into per-head ``W_O``,
  ...) bit for bit, and every hook equals the tensor at the matching point of the forward pass.
* Default processing (LayerNorms folded, writing weights and unembedding centred, value biases
  folded into ``b_O``): what the re-parametrisation leaves unchanged. Residual-stream tensors are
  Hugging Face's minus their mean over ``d_model``; ``v`` and ``z`` lack Hugging Face's value bias
  ``c_attn(LN1.bias)[V]`` (moved into ``b_O``); LayerNorm scales and normalised inputs, q, k,
  scores, patterns, MLP pre- and post-activations and log-probabilities are unchanged. Weights are
  checked through what the method computes with them: ``(gamma * LN1-normalised + beta) @ W_Q +
  b_Q`` is Hugging Face's q, head by head, and so on.

Models: the shipped trained model (2 layers) and a small GPT-2-architecture model with non-trivial
LayerNorms and biases (:func:`~context_neurons.models.toy.make_small_model`, 2 layers), each with
processing off and with the default processing. Each hook must fire exactly once per forward pass.
``hook_attn_in`` and ``hook_mlp_in`` (issue 1317) are not tested: the package does not read them.

Tolerance (float32): ``|bridge - reference| <= 1e-5 * max(1, max|reference|)``; raw weights with
processing off are compared exactly.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest
import torch
from jaxtyping import Int
from torch import Tensor
from transformers import GPT2LMHeadModel

from context_neurons.models.loading import (
    TRAINED_DIR,
    WeightProcessing,
    load_checkpoint,
    load_model,
)
from context_neurons.models.toy import make_small_model
from context_neurons.text.windows import calibration_tokens
from gpt2_reference import (  # tests/unit/gpt2_reference.py, shared with scripts/library_agreement.py
    LAYER_HOOKS,
    centred,
    expected_hook,
    hf_activations,
    hf_weights,
    hook_activations,
)

RTOL = 1e-5  # relative to the reference's largest magnitude (at least 1)
LAYERS = (0, 1)
NO_PROCESSING = WeightProcessing(False, False, False, False)
HOOKS = ("hook_embed", "hook_pos_embed", *(f"blocks.{l}.{h}" for l in LAYERS for h in LAYER_HOOKS))





def assert_close(actual: Tensor, expected: Tensor, what: str) -> None:
    assert actual.shape == expected.shape, f"{what}: shape {actual.shape} != {expected.shape}"
    tol = RTOL * max(1.0, expected.abs().max().item())
    diff = (actual - expected).abs().max().item()
    assert diff <= tol, f"{what}: max |difference| {diff:.3g} > {tol:.3g}"


# ----------------------------------------------------------------------------------------------
# The reference: Hugging Face's forward pass, read with PyTorch hooks
# ----------------------------------------------------------------------------------------------






def bridge_weight(model, name: str) -> Tensor:
    module = model
    for part in name.split("."):
        module = module[int(part)] if part.isdigit() else getattr(module, part)
    return module.detach()




# ----------------------------------------------------------------------------------------------
# Fixtures: (model, processing) cases
# ----------------------------------------------------------------------------------------------


@dataclass
class Case:
    model: object  # the TransformerBridge
    hf: GPT2LMHeadModel
    tokens: Int[Tensor, "batch pos"]
    processed: bool
    ref: dict[str, Tensor]  # Hugging Face's activations
    acts: dict[str, list[Tensor]]  # every tensor each bridge hook fired on


@pytest.fixture(scope="module")
def trained_hf() -> GPT2LMHeadModel:
    return load_checkpoint(TRAINED_DIR).float().eval()


@pytest.fixture(scope="module")
def small_hf() -> GPT2LMHeadModel:
    return make_small_model(seed=0, n_layers=2)[1]




@pytest.fixture(scope="module", params=["trained-off", "trained-default", "small-off",
                                        "small-default"])
def case(request, trained_hf, small_hf) -> Case:
    which, processing = request.param.split("-")
    processed = processing == "default"
    if which == "trained":
        model = load_model("trained", device="cpu",
                           processing=WeightProcessing() if processed else NO_PROCESSING).model
        hf = trained_hf
        tokens = calibration_tokens(model.tokenizer)[None, :64]
    else:
        model = make_small_model(seed=0, fold_ln=processed, n_layers=2)[0]
        hf = small_hf
        tokens = torch.randint(0, 500, (2, 48), generator=torch.Generator().manual_seed(0))
    ref, acts = hf_activations(hf, tokens), hook_activations(model, tokens, HOOKS)
    return Case(model, hf, tokens, processed, ref, acts)


# ----------------------------------------------------------------------------------------------
# The reference itself
# ----------------------------------------------------------------------------------------------


def test_reference_is_huggingface_forward(case):
    """The hooked eager pass gives the model's default (SDPA) logits, and the LayerNorm parts
    recombine into ``nn.LayerNorm``'s output."""
    ref = case.ref
    with torch.no_grad():
        assert_close(ref["logits"], case.hf(case.tokens).logits, "eager vs default attention")
    for l in LAYERS:
        for ln, hf_ln in (("ln1", case.hf.transformer.h[l].ln_1),
                          ("ln2", case.hf.transformer.h[l].ln_2)):
            p = f"blocks.{l}.{ln}"
            assert_close(ref[p + ".hook_normalized"] * hf_ln.weight + hf_ln.bias,
                         ref[p + ".hf_output"], p)
        assert_close(ref[f"blocks.{l}.hook_resid_pre"] + ref[f"blocks.{l}.hook_attn_out"],
                     ref[f"blocks.{l}.hook_resid_mid"], f"layer {l} residual")


# ----------------------------------------------------------------------------------------------
# Hooks
# ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", HOOKS)
def test_hook_matches_huggingface(case, name):
    fired = case.acts[name]
    assert len(fired) == 1, f"{name} fired {len(fired)} times in one forward pass"
    actual, expected = fired[0], expected_hook(name, case.ref, case.processed)
    if name.endswith("hook_attn_scores"):  # the causal part; above the diagonal is masked
        causal = torch.ones(actual.shape[-2:], dtype=torch.bool).tril()
        actual, expected = actual[..., causal], expected[..., causal]
    assert_close(actual, expected, name)


def test_log_probabilities_match_huggingface(case):
    assert_close(case.acts["logits"][0].log_softmax(-1), case.ref["logits"].log_softmax(-1),
                 "log-softmax of logits")


# ----------------------------------------------------------------------------------------------
# Weights
# ----------------------------------------------------------------------------------------------


def test_weights_are_huggingface_weights_without_processing(case):
    if case.processed:
        pytest.skip("processed weights are checked through what they compute")
    for name, expected in hf_weights(case.hf).items():
        actual = bridge_weight(case.model, name)
        assert actual.shape == expected.shape, name
        assert torch.equal(actual, expected), f"{name}: {(actual - expected).abs().max():.3g}"


def test_embeddings(case):
    """``W_E`` and ``W_pos``: Hugging Face's (centred over d_model when processed)."""
    for name, hf_w in (("W_E", case.hf.transformer.wte.weight),
                       ("W_pos", case.hf.transformer.wpe.weight)):
        expected = centred(hf_w) if case.processed else hf_w
        assert_close(bridge_weight(case.model, name), expected.detach(), name)


def ln_output(model, layer: int, ln: str, normalized: Tensor) -> Tensor:
    """``gamma * normalised + beta`` with the bridge's own LayerNorm weights (ones and zeros when
    folded), as the method reads them."""
    module = getattr(model.blocks[layer], ln)
    return normalized * module.w.detach() + module.b.detach()


@pytest.mark.parametrize("layer", LAYERS)
def test_attention_weights(case, layer):
    """``LN1-out @ W_Q + b_Q`` (and K, V) are Hugging Face's q (k, v) per head; ``z @ W_O + b_O``
    is its attention output."""
    p, ref, attn = f"blocks.{layer}.", case.ref, case.model.blocks[layer].attn
    x = ln_output(case.model, layer, "ln1", ref[p + "ln1.hook_normalized"])
    for which in "QKV":
        w, b = getattr(attn, f"W_{which}").detach(), getattr(attn, f"b_{which}").detach()
        computed = torch.einsum("bpd,hde->bphe", x, w) + b
        hook = p + f"attn.hook_{which.lower()}"
        assert_close(computed, expected_hook(hook, ref, case.processed), f"{hook} from weights")
    z = expected_hook(p + "attn.hook_z", ref, case.processed)
    computed = torch.einsum("bphe,hed->bpd", z, attn.W_O.detach()) + attn.b_O.detach()
    assert_close(computed, expected_hook(p + "hook_attn_out", ref, case.processed),
                 f"{p}hook_attn_out from W_O, b_O")


@pytest.mark.parametrize("layer", LAYERS)
def test_mlp_input_weights(case, layer):
    """``LN2-out @ W_in + b_in`` is Hugging Face's ``c_fc`` output."""
    p, mlp = f"blocks.{layer}.", case.model.blocks[layer].mlp
    x = ln_output(case.model, layer, "ln2", case.ref[p + "ln2.hook_normalized"])
    computed = x @ mlp.W_in.detach() + mlp.b_in.detach()
    assert_close(computed, case.ref[p + "mlp.hook_pre"], f"{p}mlp.hook_pre from W_in, b_in")


def test_unembedding(case):
    """``log_softmax(LN_final-out @ W_U + b_U)`` is Hugging Face's."""
    model, ref = case.model, case.ref
    x = ref["ln_final.hook_normalized"] * model.ln_final.w.detach() + model.ln_final.b.detach()
    logits = x @ model.W_U.detach() + model.b_U.detach()
    assert_close(logits.log_softmax(-1), ref["logits"].log_softmax(-1), "log-softmax from W_U")
