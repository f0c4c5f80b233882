"""The reference for TransformerLens's GPT-2 tensors: Hugging Face's own forward pass.

:func:`hf_activations` runs a Hugging Face ``GPT2LMHeadModel`` through its plain ``transformers``
forward pass with PyTorch hooks on its submodules (no TransformerLens) and returns the tensors at
the points TransformerLens names; :func:`hf_weights` rearranges its weights into TransformerLens's
shapes; :func:`expected_hook` says what a hook should hold once TransformerLens's weight processing
has re-parametrised the model. Shared by ``tests/unit/test_raw_transformers.py`` and
``scripts/library_agreement.py``; it imports nothing of ``context_neurons`` (the script also runs
under TransformerLens 3.9).
"""

from __future__ import annotations

import copy

import torch
from jaxtyping import Float, Int
from torch import Tensor
from transformers import GPT2LMHeadModel

#: Hooks the method reads in each layer (``blocks.{l}.`` + name), besides ``hook_embed`` and
#: ``hook_pos_embed``.
LAYER_HOOKS = (
    "hook_resid_pre", "ln1.hook_scale", "ln1.hook_normalized",
    "attn.hook_q", "attn.hook_k", "attn.hook_v", "attn.hook_attn_scores", "attn.hook_pattern",
    "attn.hook_z", "hook_attn_out", "hook_resid_mid", "ln2.hook_scale", "ln2.hook_normalized",
    "mlp.hook_pre", "mlp.hook_post", "hook_mlp_out",
)
#: Tensors written into the residual stream: centred over d_model by ``center_writing_weights``.
RESIDUAL = {"hook_embed", "hook_pos_embed", "hook_resid_pre", "hook_attn_out", "hook_resid_mid",
            "hook_mlp_out"}
#: Tensors that lose the value bias under ``fold_value_biases``.
VALUES = {"attn.hook_v", "attn.hook_z"}


def centred(x: Float[Tensor, "... d_model"]) -> Float[Tensor, "... d_model"]:
    return x - x.mean(-1, keepdim=True)


@torch.no_grad()
def hf_activations(
    hf: GPT2LMHeadModel, tokens: Int[Tensor, "batch pos"]
) -> dict[str, Tensor]:
    """Hugging Face's tensors at the points TransformerLens names, from ``hf``'s own forward pass
    (eager attention, so that the attention module returns its pattern). LayerNorm scale and
    normalised input are ``nn.LayerNorm``'s definition applied to the module's input; the
    pre-softmax scores are ``q k^T * attn.scaling`` of ``c_attn``'s output (their causal part)."""
    hf = copy.deepcopy(hf).float().eval()
    hf.set_attn_implementation("eager")
    out: dict[str, Tensor] = {}
    handles = []

    def heads(x: Float[Tensor, "b p d"]) -> Float[Tensor, "b p h e"]:
        return x.reshape(*x.shape[:-1], hf.config.n_head, -1)

    def layer_norm(name: str, eps: float):
        def hook(module, args, output):
            c = centred(args[0])
            scale = (c.pow(2).mean(-1, keepdim=True) + eps).sqrt()
            out[f"{name}.hook_scale"], out[f"{name}.hook_normalized"] = scale, c / scale
            out[f"{name}.hf_output"] = output  # nn.LayerNorm's own output (sanity check)
        return hook

    def on(module, hook, pre=False, **kw):
        register = module.register_forward_pre_hook if pre else module.register_forward_hook
        handles.append(register(hook, **kw))

    def store(name, pick=lambda o: o):
        return lambda module, args, output: out.__setitem__(name, pick(output))

    t = hf.transformer
    for l, block in enumerate(t.h):  # before any hook: the value when LN1's normalised input
        # is 0, which fold_value_biases moves into b_O; [head, d_head]
        value_bias = block.attn.c_attn(block.ln_1.bias).view(3, hf.config.n_head, -1)[2]
        out[f"blocks.{l}.value_bias"] = value_bias
    on(t.wte, store("hook_embed"))
    on(t.wpe, store("hook_pos_embed", lambda o: o.expand(len(tokens), -1, -1)))  # [1, p, d]
    for l, block in enumerate(t.h):
        p, attn, mlp = f"blocks.{l}.", block.attn, block.mlp

        def resid_pre(module, args, kwargs, p=p):
            out[p + "hook_resid_pre"] = args[0] if args else kwargs["hidden_states"]

        def qkv(module, args, output, p=p, scaling=attn.scaling):
            q, k, v = (heads(x) for x in output.split(hf.config.n_embd, dim=-1))
            out[p + "attn.hook_q"], out[p + "attn.hook_k"], out[p + "attn.hook_v"] = q, k, v
            out[p + "attn.hook_attn_scores"] = torch.einsum("bqhe,bkhe->bhqk", q, k) * scaling

        on(block, resid_pre, pre=True, with_kwargs=True)
        on(block.ln_1, layer_norm(p + "ln1", block.ln_1.eps))
        on(attn.c_attn, qkv)
        on(attn, store(p + "hook_attn_out", lambda o: o[0]))
        on(attn, store(p + "attn.hook_pattern", lambda o: o[1]))
        on(attn.c_proj, lambda m, args, p=p: out.__setitem__(p + "attn.hook_z", heads(args[0])),
           pre=True)
        on(block.ln_2, layer_norm(p + "ln2", block.ln_2.eps))
        on(block.ln_2, lambda m, args, p=p: out.__setitem__(p + "hook_resid_mid", args[0]),
           pre=True)
        on(mlp.c_fc, store(p + "mlp.hook_pre"))
        on(mlp.act, store(p + "mlp.hook_post"))
        on(mlp, store(p + "hook_mlp_out"))
    on(t.ln_f, layer_norm("ln_final", t.ln_f.eps))
    try:
        out["logits"] = hf(tokens).logits
    finally:
        for handle in handles:
            handle.remove()
    return out


def hf_weights(hf: GPT2LMHeadModel) -> dict[str, Tensor]:
    """Hugging Face's weights rearranged into TransformerLens's shapes (no processing)."""
    t, n_heads, d = hf.transformer, hf.config.n_head, hf.config.n_embd
    w = {"W_E": t.wte.weight, "W_pos": t.wpe.weight, "W_U": hf.lm_head.weight.T}
    for l, block in enumerate(t.h):
        p = f"blocks.{l}."
        c_attn_w = block.attn.c_attn.weight.view(d, 3, n_heads, -1)  # [d_model, qkv, head, d_head]
        c_attn_b = block.attn.c_attn.bias.view(3, n_heads, -1)
        for i, x in enumerate("QKV"):
            w[p + f"attn.W_{x}"] = c_attn_w[:, i].permute(1, 0, 2)  # [head, d_model, d_head]
            w[p + f"attn.b_{x}"] = c_attn_b[i]
        w[p + "attn.W_O"] = block.attn.c_proj.weight.view(n_heads, -1, d)  # [head, d_head, d_model]
        w[p + "attn.b_O"] = block.attn.c_proj.bias
        for ln, hf_ln in (("ln1", block.ln_1), ("ln2", block.ln_2)):
            w[p + f"{ln}.w"], w[p + f"{ln}.b"] = hf_ln.weight, hf_ln.bias
        w[p + "mlp.W_in"], w[p + "mlp.b_in"] = block.mlp.c_fc.weight, block.mlp.c_fc.bias
    return {name: x.detach().float() for name, x in w.items()}


def expected_hook(name: str, ref: dict[str, Tensor], processed: bool) -> Tensor:
    """What the bridge's hook ``name`` should hold, from Hugging Face's tensors."""
    x = ref[name]
    if not processed:
        return x
    short = name.split(".", 2)[2] if name.startswith("blocks.") else name
    if short in RESIDUAL:
        return centred(x)
    if short in VALUES:
        return x - ref[name.rsplit(".", 2)[0] + ".value_bias"]
    return x


def hook_activations(model, tokens, names: tuple[str, ...]) -> dict[str, list[Tensor]]:
    """Every tensor each hook of ``names`` fired on in one forward pass of a TransformerLens model,
    under the name asked for (compatibility aliases report their bridge name, e.g.
    ``blocks.0.hook_in`` for ``blocks.0.hook_resid_pre``), and the logits under ``"logits"``."""
    acts: dict[str, list[Tensor]] = {name: [] for name in names}

    def recorder(name: str):
        return lambda x, hook: acts[name].append(x.detach().clone())

    with torch.no_grad():
        logits = model.run_with_hooks(tokens, fwd_hooks=[(n, recorder(n)) for n in names])
    acts["logits"] = [logits]
    return acts
