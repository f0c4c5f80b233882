"""Do TransformerLens 4.3, 3.9 and raw ``transformers`` agree on what the method reads?

The package moved from TransformerLens 3.9's ``HookedTransformer`` (built from a Hugging Face GPT-2
with ``convert_gpt2_weights``) to TransformerLens 4's ``TransformerBridge`` in compatibility mode.
This script prints, for every weight and hook activation the method reads, the largest absolute
difference between

  (i)   TransformerLens 4.3's bridge and raw ``transformers`` (Hugging Face's forward pass read with
        PyTorch hooks on its submodules, no TransformerLens),
  (ii)  TransformerLens 3.9's HookedTransformer and raw ``transformers``,
  (iii) TransformerLens 4.3 and TransformerLens 3.9 (the tensors themselves),

on the shipped trained model and a GPT-2-Small-shaped checkpoint with seeded random weights (layers
0 and 1 only), each with weight processing off and with TransformerLens's default processing, on
a fixed 64-token text. With processing on, the comparison with Hugging Face is made on what the
re-parametrisation leaves unchanged, as in ``tests/unit/test_raw_transformers.py``: residual-stream
tensors against Hugging Face's centred over ``d_model``, ``v`` and ``z`` against Hugging Face's less
the value bias ``c_attn(LN1.bias)[V]`` (folded into ``b_O``), processed weights through what they
compute (``(gamma * LN1-normalised + beta) @ W_Q + b_Q`` against Hugging Face's q, ...).

One process cannot import both TransformerLens versions, so the script runs twice and compares:

    .venv/bin/python scripts/library_agreement.py dump --out tl4.pt
    /work/venv39/bin/python scripts/library_agreement.py dump --out tl3.pt
    python scripts/library_agreement.py compare tl4.pt tl3.pt

Each dump holds the raw-Hugging-Face reference it computed; ``compare`` checks that both dumps'
references (and tokens) are identical. The TransformerLens 3.9 branch is self-contained (the
project's former loader, ``hooked_from_hf``, copied here); only the 4.x branch imports
``context_neurons``. A dump of the GPT-2-Small-shaped case holds its full embeddings: about 1.3 GB.
"""

from __future__ import annotations

import argparse
import copy
import importlib.metadata
import sys
from pathlib import Path

import torch
from torch import Tensor
from transformers import AutoTokenizer, GPT2Config, GPT2LMHeadModel

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "unit"))  # the raw-transformers reference the tests use
from gpt2_reference import (  # noqa: E402
    LAYER_HOOKS,
    centred,
    expected_hook,
    hf_activations,
    hf_weights,
    hook_activations,
)

TRAINED_DIR = ROOT / "src" / "context_neurons" / "assets" / "trained-model"
DEFAULT_CHECKPOINT = Path("/tmp/library-agreement/gpt2-small-shaped-seed0")
N_TOKENS = 64
LAYERS = (0, 1)
TEXT = (
    "The committee met on a cold morning in early spring to review the budget for the new library. "
    "After a long discussion of the costs, the members agreed that the reading room would open in "
    "the autumn, and that the old building on the corner of the market square would be sold to "
    "pay for the books, the shelves and the heating. Nobody expected the vote to be unanimous."
)
PROCESSING = {
    "none": dict(fold_ln=False, center_writing_weights=False, center_unembed=False,
                 fold_value_biases=False),
    "default": dict(fold_ln=True, center_writing_weights=True, center_unembed=True,
                    fold_value_biases=True),
}
HOOKS = ("hook_embed", "hook_pos_embed", *(f"blocks.{l}.{h}" for l in LAYERS for h in LAYER_HOOKS))
LAYER_WEIGHTS = ("attn.W_Q", "attn.b_Q", "attn.W_K", "attn.b_K", "attn.W_V", "attn.b_V",
                 "attn.W_O", "attn.b_O", "ln1.w", "ln1.b", "ln2.w", "ln2.b", "mlp.W_in", "mlp.b_in")
WEIGHTS = ("W_E", "W_pos", "W_U", *(f"blocks.{l}.{w}" for l in LAYERS for w in LAYER_WEIGHTS))


# ----------------------------------------------------------------------------------------------
# The TransformerLens models
# ----------------------------------------------------------------------------------------------


def tl4_model(hf: GPT2LMHeadModel, tokenizer, name: str, processing: str):
    """TransformerLens 4: the package's own loader (``bridge_from_hf``, compatibility mode)."""
    # deferred: the package's loader needs TransformerLens 4, absent from the 3.9 environment
    from context_neurons.models.loading import WeightProcessing, bridge_from_hf

    return bridge_from_hf(copy.deepcopy(hf), tokenizer, name,
                          WeightProcessing(**PROCESSING[processing]), device="cpu")


def tl3_model(hf: GPT2LMHeadModel, name: str, processing: str):
    """TransformerLens 3.9: the project's former ``hooked_from_hf`` (git show e4ad3db), verbatim
    but for the device (CPU) and the tokenizer (none: the model is fed token ids)."""
    # deferred: only TransformerLens 3.x has HookedTransformer's GPT-2 conversion at this path
    from transformer_lens import HookedTransformer, HookedTransformerConfig
    from transformer_lens.pretrained.weight_conversions.gpt2 import convert_gpt2_weights

    hf = copy.deepcopy(hf).float()
    c = hf.config
    cfg = HookedTransformerConfig(
        model_name=name, original_architecture="GPT2LMHeadModel", d_model=c.n_embd,
        d_head=c.n_embd // c.n_head, n_heads=c.n_head, d_mlp=c.n_inner or 4 * c.n_embd,
        n_layers=c.n_layer, n_ctx=c.n_positions, eps=c.layer_norm_epsilon, d_vocab=c.vocab_size,
        act_fn=c.activation_function, use_attn_scale=getattr(c, "scale_attn_weights", True),
        scale_attn_by_inverse_layer_idx=c.scale_attn_by_inverse_layer_idx,
        normalization_type="LN", positional_embedding_type="standard", default_prepend_bos=True,
        device="cpu",
    )
    model = HookedTransformer(cfg, tokenizer=None, move_to_device=False)
    model.load_and_process_state_dict(convert_gpt2_weights(hf, cfg), **PROCESSING[processing])
    return model.eval()


def get(model, name: str) -> Tensor:
    module = model
    for part in name.split("."):
        module = module[int(part)] if part.isdigit() else getattr(module, part, None)
        if module is None:  # a folded LayerNormPre (TransformerLens 3.9) has no w, b
            return torch.ones(model.cfg.d_model) if part == "w" else torch.zeros(model.cfg.d_model)
    return module.detach().float().clone()


@torch.no_grad()
def tl_hooks(model, tokens: Tensor) -> tuple[dict[str, Tensor], dict[str, int]]:
    """Each hook's activation (under the name asked for) and how often it fired, and logits."""
    fired = hook_activations(model, tokens, HOOKS)
    acts = {name: xs[-1] for name, xs in fired.items() if xs}
    return acts, {name: len(xs) for name, xs in fired.items() if name != "logits"}


# ----------------------------------------------------------------------------------------------
# One case: a model under one processing
# ----------------------------------------------------------------------------------------------


def derived(model, ref: dict[str, Tensor], processed: bool):
    """What the weights compute, from Hugging Face's normalised inputs: ``{row: (tl, hf)}``."""
    rows = {}
    for l in LAYERS:
        p = f"blocks.{l}."
        x = ref[p + "ln1.hook_normalized"] * get(model, p + "ln1.w") + get(model, p + "ln1.b")
        for which in "QKV":
            w, b = get(model, p + f"attn.W_{which}"), get(model, p + f"attn.b_{which}")
            hook = p + f"attn.hook_{which.lower()}"
            rows[f"{p}ln1.w,b + W_{which},b_{which} -> {which.lower()}"] = (
                torch.einsum("bpd,hde->bphe", x, w) + b, expected_hook(hook, ref, processed))
        z = expected_hook(p + "attn.hook_z", ref, processed)
        w_o, b_o = get(model, p + "attn.W_O"), get(model, p + "attn.b_O")
        rows[f"{p}W_O,b_O -> attn_out"] = (torch.einsum("bphe,hed->bpd", z, w_o) + b_o,
                                           expected_hook(p + "hook_attn_out", ref, processed))
        x = ref[p + "ln2.hook_normalized"] * get(model, p + "ln2.w") + get(model, p + "ln2.b")
        rows[f"{p}ln2.w,b + W_in,b_in -> mlp pre"] = (
            x @ get(model, p + "mlp.W_in") + get(model, p + "mlp.b_in"), ref[p + "mlp.hook_pre"])
    x = ref["ln_final.hook_normalized"] * get(model, "ln_final.w") + get(model, "ln_final.b")
    rows["ln_final.w,b + W_U,b_U -> log-probs"] = (
        (x @ get(model, "W_U") + get(model, "b_U")).log_softmax(-1), ref["logits"].log_softmax(-1))
    return rows


def run_case(model, hf: GPT2LMHeadModel, tokens: Tensor, ref: dict, processed: bool) -> dict:
    """``{"tl": {row: tensor}, "hf": {row: tensor or None}, "fired": {hook: count}}``."""
    acts, fired = tl_hooks(model, tokens)
    tl, hf_rows = {}, {}
    raw = hf_weights(hf)
    for name in WEIGHTS:
        tl[name] = get(model, name)
        hf_rows[name] = raw[name] if not processed else (
            centred(raw[name]) if name in ("W_E", "W_pos") else None)
    for name, (ours, theirs) in derived(model, ref, processed).items():
        tl[name], hf_rows[name] = ours, theirs
    causal = torch.ones(tokens.shape[-1], tokens.shape[-1], dtype=torch.bool).tril()
    for name in HOOKS:
        ours, theirs = acts.get(name), expected_hook(name, ref, processed)
        if name.endswith("hook_attn_scores"):  # the causal part (above: masked, -inf)
            ours, theirs = ours[..., causal], theirs[..., causal]
        tl[name], hf_rows[name] = ours, theirs
    tl["log-probs"], hf_rows["log-probs"] = (acts["logits"].log_softmax(-1),
                                             ref["logits"].log_softmax(-1))
    return {"tl": tl, "hf": hf_rows, "fired": fired}


def gpt2_small_checkpoint(path: Path, tl_major: int) -> Path:
    """GPT-2 Small's shape, seed 0 (``save_gpt2_shaped_checkpoint``; the same code inline under
    TransformerLens 3.9, where the package does not import)."""
    if (path / "config.json").is_file():
        return path
    if tl_major >= 4:
        # deferred: the package needs TransformerLens 4
        from context_neurons.models.loading import save_gpt2_shaped_checkpoint

        return save_gpt2_shaped_checkpoint(path, seed=0)
    torch.manual_seed(0)
    GPT2LMHeadModel(GPT2Config(n_layer=12)).save_pretrained(path)
    return path


def dump(out: Path, checkpoint: Path) -> None:
    version = importlib.metadata.version("transformer-lens")
    major = int(version.split(".")[0])
    tokenizer = AutoTokenizer.from_pretrained(str(TRAINED_DIR))
    ids = [tokenizer.bos_token_id, *tokenizer(TEXT)["input_ids"]][:N_TOKENS]
    assert len(ids) == N_TOKENS, f"the text gives only {len(ids)} tokens"
    tokens = torch.tensor([ids])
    models = {
        "trained": (GPT2LMHeadModel.from_pretrained(str(TRAINED_DIR)), tokenizer),
        "gpt2-small-shaped": (
            GPT2LMHeadModel.from_pretrained(str(gpt2_small_checkpoint(checkpoint, major))), None),
    }
    cases = {}
    for model_name, (hf, tok) in models.items():
        hf = hf.float().eval()
        ref = hf_activations(hf, tokens)
        for processing in PROCESSING:
            model = (tl4_model(hf, tok, model_name, processing) if major >= 4
                     else tl3_model(hf, model_name, processing))
            cases[f"{model_name}, processing {processing}"] = run_case(
                model, hf, tokens, ref, processing == "default")
            print(f"TransformerLens {version}: {model_name}, processing {processing} done")
            del model
    versions = {pkg: importlib.metadata.version(pkg) for pkg in ("torch", "transformers")}
    torch.save({"transformer_lens": version, **versions, "tokens": tokens, "cases": cases}, out)
    print(f"wrote {out}")


# ----------------------------------------------------------------------------------------------
# Comparison
# ----------------------------------------------------------------------------------------------


def max_diff(a: Tensor | None, b: Tensor | None) -> float | None:
    if a is None or b is None:
        return None
    if a.shape != b.shape:
        return float("nan")
    return (a.double() - b.double()).abs().max().item()


def fmt(x: float | None) -> str:
    return "—" if x is None else ("0" if x == 0 else f"{x:.1e}")


def compare(path_a: Path, path_b: Path) -> None:
    a, b = (torch.load(p, weights_only=True) for p in (path_a, path_b))
    def key(dump: dict) -> tuple[int, ...]:
        return tuple(int(x) for x in dump["transformer_lens"].split(".")[:2])

    new, old = (a, b) if key(a) >= key(b) else (b, a)
    v_new, v_old = new["transformer_lens"], old["transformer_lens"]
    assert torch.equal(new["tokens"], old["tokens"]), "the dumps ran on different tokens"
    print(f"TransformerLens {v_new} vs {v_old}; torch {new['torch']} / {old['torch']}, "
          f"transformers {new['transformers']} / {old['transformers']}; "
          f"{new['tokens'].shape[-1]} tokens; float32, CPU.\n")
    for case, n in new["cases"].items():
        o = old["cases"][case]
        refs = [max_diff(n["hf"][k], o["hf"][k]) for k in n["hf"] if n["hf"][k] is not None]
        print(f"### {case}\n")
        print(f"Raw-transformers reference, dump vs dump: max |difference| {fmt(max(refs))}.")
        misfired = [f"`{name}` {d['fired'][name]}x (TL {v})" for v, d in ((v_new, n), (v_old, o))
                    for name in HOOKS if d["fired"][name] != 1]
        print(f"Hooks not firing exactly once per forward pass: {', '.join(misfired) or 'none'}.")
        if "default" in case:
            print("Processed weights have no Hugging Face counterpart (—): the `->` rows check "
                  "them through what they compute.")
        print()
        print(f"| quantity | max \\|HF\\| | (i) TL {v_new} vs HF | (ii) TL {v_old} vs HF "
              f"| (iii) TL {v_new} vs {v_old} |")
        print("|---|---:|---:|---:|---:|")
        for row in n["tl"]:
            ref = n["hf"][row]
            scale = None if ref is None else ref.abs().max().item()
            cells = (max_diff(n["tl"][row], ref), max_diff(o["tl"][row], o["hf"][row]),
                     max_diff(n["tl"][row], o["tl"][row]))
            print(f"| `{row}` | {'—' if scale is None else f'{scale:.3g}'} | "
                  + " | ".join(fmt(x) for x in cells) + " |")
        print()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    d = sub.add_parser("dump", help="one TransformerLens version's tensors, and the reference")
    d.add_argument("--out", type=Path, required=True)
    d.add_argument("--checkpoint", type=Path, default=DEFAULT_CHECKPOINT,
                   help="the GPT-2-Small-shaped checkpoint (written there if missing)")
    c = sub.add_parser("compare", help="print the tables (markdown) from two dumps")
    c.add_argument("dumps", type=Path, nargs=2)
    args = parser.parse_args()
    torch.set_grad_enabled(False)
    if args.command == "dump":
        dump(args.out, args.checkpoint)
    else:
        compare(*args.dumps)


if __name__ == "__main__":
    main()
