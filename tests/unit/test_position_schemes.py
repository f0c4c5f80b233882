"""Tests of chapter 9's rotary and ALiBi factorisation against independent computations: rotation
matrices built from scratch, scores rebuilt from the weights, the models' own hooks
(``hook_pattern``, Bloom's pre-softmax ``hook_attn_scores``, Llama's ``hook_rot_q``/``hook_rot_k``),
exact exponentials and brute-force loops. Besides the chapter's toy models (TransformerLens's
native rotary model, Hugging Face's Bloom), small random Hugging Face GPT-NeoX (Pythia) and Llama
(grouped-query) models booted with ``TransformerBridge.boot_transformers`` check that real
TransformerLens 4 rotary models are factorised."""

from __future__ import annotations

import math

import pytest
import torch
from transformer_lens.model_bridge import TransformerBridge
from transformers import GPTNeoXConfig, GPTNeoXForCausalLM, LlamaConfig, LlamaForCausalLM

from context_neurons import position_schemes as ps
from context_neurons.checks import InputError
from context_neurons.models.loading import placeholder_tokenizer, quiet_bridge
from context_neurons.models.toy import make_small_model
from context_neurons.taxonomy import exponential_width

torch.set_grad_enabled(False)


@pytest.fixture(scope="module")
def rope():
    model, heads = ps.rotary_toy_model(seed=0, n_ctx=64, d_vocab=100)
    texts = ps.random_texts(model, 3, seed=1)
    return model, heads, texts, ps.factorise_attention(model, texts)


@pytest.fixture(scope="module")
def alibi():
    model = ps.alibi_toy_model(seed=0, n_ctx=64, d_vocab=100)
    texts = ps.random_texts(model, 3, seed=1)
    return model, texts, ps.factorise_attention(model, texts)


def boot_hf(name: str, hf_model) -> TransformerBridge:
    with quiet_bridge():
        model = TransformerBridge.boot_transformers(
            name, hf_model=hf_model.eval(), tokenizer=placeholder_tokenizer(100), device="cpu"
        )
        model.enable_compatibility_mode(disable_warnings=True, no_processing=True)
    return model


@pytest.fixture(scope="module")
def hf_rotary():
    """Random one-layer Pythia-architecture (a quarter of each head rotates) and Llama-architecture
    (8 query heads, 2 key heads) models, queries and keys scaled up for sharp patterns."""
    torch.manual_seed(0)
    neox = GPTNeoXForCausalLM(GPTNeoXConfig(
        vocab_size=100, hidden_size=128, num_hidden_layers=1, num_attention_heads=4,
        intermediate_size=128, rotary_pct=0.25, max_position_embeddings=64,
    ))
    neox.gpt_neox.layers[0].attention.query_key_value.weight.data.mul_(10)
    llama = LlamaForCausalLM(LlamaConfig(
        vocab_size=100, hidden_size=64, num_hidden_layers=1, num_attention_heads=8,
        num_key_value_heads=2, head_dim=16, intermediate_size=128, max_position_embeddings=64,
    ))
    for proj in (llama.model.layers[0].self_attn.q_proj, llama.model.layers[0].self_attn.k_proj):
        proj.weight.data.mul_(15)
    texts = torch.randint(0, 100, (3, 64), generator=torch.Generator().manual_seed(1))
    return boot_hf("pythia-toy", neox), boot_hf("llama-toy", llama), texts


def rotation(omega: torch.Tensor, pairs: torch.Tensor, d_head: int, j: int) -> torch.Tensor:
    """The rotation ``R_j`` of a head's dimensions, built from scratch (float64)."""
    r = torch.eye(d_head, dtype=torch.float64)
    for (a, b), w in zip(pairs.tolist(), omega.double().tolist()):
        c, s = math.cos(j * w), math.sin(j * w)
        r[a, a], r[a, b], r[b, a], r[b, b] = c, -s, s, c
    return r


def test_exact_patterns_are_the_models(rope, alibi):
    for model, texts, fit in ((rope[0], rope[2], rope[3]), alibi):
        _, cache = model.run_with_cache(texts)
        assert torch.allclose(fit.exact_pattern(), cache["blocks.0.attn.hook_pattern"], atol=1e-6)
        assert fit.pattern_gap < 1e-5


def test_rotary_toy_scores_from_the_weights(rope):
    """Queries, keys and scores rebuilt from the weights written by hand (float64, rotations
    built from scratch): the writes through the bridge's weight views reach the model."""
    model, heads, texts, fit = rope
    attn, ln = model.blocks[0].attn, model.blocks[0].ln1
    x = torch.nn.functional.layer_norm(
        model.W_E[texts[0]].double(), (64,), ln.w.double(), ln.b.double(), eps=1e-5
    )
    q = torch.einsum("pm,hme->phe", x, attn.W_Q.double()) + attn.b_Q.double()
    k = torch.einsum("pm,hme->phe", x, attn.W_K.double()) + attn.b_K.double()
    assert torch.allclose(q.float(), fit.queries[0], atol=1e-5)
    assert torch.allclose(k.float(), fit.keys[0], atol=1e-5)
    omega = 10000 ** (-torch.arange(6, dtype=torch.float64) / 6)
    pairs = torch.tensor([[2 * p, 2 * p + 1] for p in range(6)])
    for n, i in ((12, 5), (63, 63), (63, 1)):
        r_n, r_i = rotation(omega, pairs, 16, n), rotation(omega, pairs, 16, i)
        scores = torch.einsum("he,he->h", q[n] @ r_n.T, k[i] @ r_i.T) / 4.0
        assert torch.allclose(scores.float(), fit.exact_scores[0, :, n, i], atol=1e-4)
    # the structure set by hand: one query component of 4 per head, carriers in their own pair
    for h in range(6):
        assert attn.b_Q[h].nonzero().flatten().tolist() == [2 * h]
        assert attn.b_K[h, 2 * h] == 6.0
    assert attn.W_K[7, :, :12].abs().max() == 0 and heads.loc[6, "carrier pair"] == 2


def test_alibi_toy_pattern_from_the_weights(alibi):
    """Bloom's pattern rebuilt from the embeddings, its two LayerNorms (unit gains), W_Q, W_K and
    slopes 2^-h written from scratch, against the model's hook_pattern."""
    model, texts, fit = alibi
    attn = model.blocks[0].attn
    assert attn.b_Q.abs().max() == 0 and attn.b_K.abs().max() == 0
    x = model.W_E[texts].double()
    for _ in range(2):  # embed_ln, then ln1
        x = torch.nn.functional.layer_norm(x, (64,), eps=1e-5)
    q = torch.einsum("bpm,hme->bphe", x, attn.W_Q.double())
    k = torch.einsum("bpm,hme->bphe", x, attn.W_K.double())
    slopes = 2.0 ** -torch.arange(1, 9, dtype=torch.float64)
    positions = torch.arange(64, dtype=torch.float64)
    distance = positions[:, None] - positions[None, :]
    scores = torch.einsum("bnhe,bihe->bhni", q, k) / math.sqrt(8) - slopes[:, None, None] * distance
    pattern = torch.softmax(scores.masked_fill(distance < 0, float("-inf")), dim=-1)
    _, cache = model.run_with_cache(texts)
    assert torch.allclose(pattern.float(), cache["blocks.0.attn.hook_pattern"], atol=1e-5)
    assert torch.allclose(fit.exact_pattern().double(), pattern, atol=1e-5)
    content = fit.content_scores[..., distance >= 0]
    assert 0.7 < float(content.std()) < 1.3  # content scores of standard deviation about 1


def test_rotary_frequencies_and_pairs_rebuild_the_models_scores(rope):
    model, _, texts, fit = rope
    omega = ps.rotary_frequencies(model)
    assert torch.allclose(omega, 10000 ** (-torch.arange(6) / 6.0), rtol=1e-4)
    pairs = ps.rotary_pairs(model)
    assert pairs.tolist() == [[2 * p, 2 * p + 1] for p in range(6)]  # native: adjacent pairs
    q, k = fit.queries[0].double(), fit.keys[0].double()  # [pos, head, d_head]
    for n, i in ((10, 3), (40, 40), (63, 0)):
        r_n = rotation(omega, pairs, 16, n)
        r_i = rotation(omega, pairs, 16, i)
        scores = torch.einsum("he,he->h", q[n] @ r_n.T, k[i] @ r_i.T) / 4.0
        assert torch.allclose(scores.float(), fit.exact_scores[0, :, n, i], atol=1e-4)


def test_rotary_score_error_is_the_rotated_deviation(rope):
    """error = q . (R_{i-n} - I)(k(t_i) - kbar) / sqrt(d), with R built from scratch."""
    model, _, _, fit = rope
    omega, pairs = ps.rotary_frequencies(model), ps.rotary_pairs(model)
    q, k, kbar = fit.queries[1].double(), fit.keys[1].double(), fit.mean_key.double()
    error = fit.score_error()[1]
    for n, i in ((30, 2), (50, 49), (63, 10)):
        # R_n q . R_i x = q . R_n^T R_i x = q . R_{i - n} x (R_{-j} = R_j^T)
        r = rotation(omega, pairs, 16, n).T @ rotation(omega, pairs, 16, i)
        expected = torch.einsum("he,he->h", q[n], (k[i] - kbar) @ (r - torch.eye(16)).T) / 4.0
        assert torch.allclose(error[:, n, i].double(), expected, atol=2e-4)
    assert error[:, 5, 5].abs().max() < 1e-4  # exact at i = n


def test_factorisation_is_exact_when_content_does_not_rotate(rope):
    model, heads, _, fit = rope
    exact = heads.index[heads["content in"] == "unrotated dimension"].tolist()
    assert exact == [6, 7]
    assert fit.tv()[:, exact].max() < 1e-5
    assert fit.tv()[:, :2].median() > 1e-2  # fast pairs with rotating content do not factorise
    uniform = fit.positional_pattern()[:, 7, 40, :41]  # head 7: no rotated query component
    assert torch.allclose(uniform, torch.full_like(uniform, 1 / 41), atol=1e-6)


def test_error_bound_holds_everywhere(rope):
    model, _, _, fit = rope
    bound = ps.rotary_error_bound(model, fit)
    assert (fit.score_error().abs() <= bound + 1e-4).all()
    assert bound[:, 6:].max() < 1e-6  # nothing rotates for the exact heads
    assert (bound[:, :6] > 0).float().mean() > 0.4  # and the bound is not trivially zero


def test_alibi_kernels_are_exact_exponentials(alibi):
    model, texts, fit = alibi
    slopes = ps.alibi_slopes(model)
    assert torch.allclose(slopes, 2.0 ** (-torch.arange(1, 9, dtype=torch.float32)))
    n = 50
    distance = torch.arange(n, -1, -1, dtype=torch.float64)
    for h, m in enumerate(slopes.tolist()):
        expected = torch.exp(-m * distance)
        expected = expected / expected.sum()
        got = fit.positional_pattern()[0, h, n, : n + 1].double()
        assert torch.allclose(got, expected, atol=1e-6, rtol=1e-4)
    assert fit.tv().max() < 1e-6


def test_alibi_bias_is_the_models(alibi):
    """Bloom's hook_attn_scores is pre-softmax: q . k / sqrt(d) + m_h i, which is the
    factorisation's -m_h (n - i) plus m_h n, a constant per destination."""
    model, texts, fit = alibi
    _, cache = model.run_with_cache(texts)
    q, k = cache["blocks.0.attn.hook_q"], cache["blocks.0.attn.hook_k"]
    content = torch.einsum("bnhe,bihe->bhni", q, k) / math.sqrt(model.cfg.d_head)
    bias = cache["blocks.0.attn.hook_attn_scores"] - content
    lower = torch.ones(64, 64, dtype=torch.bool).tril()
    shifted = bias - bias.diagonal(dim1=-2, dim2=-1)[..., None]  # 0 at i = n
    assert torch.allclose(shifted[..., lower], fit.positional_scores[..., lower], atol=1e-4)
    slopes_from_hook = -shifted[0, :, 10, 9]
    assert torch.allclose(slopes_from_hook, ps.alibi_slopes(model), atol=1e-5)


def test_head_table_widths(alibi):
    model, texts, fit = alibi
    table = ps.head_table(fit)
    n = texts.shape[1] - 1
    for h, m in enumerate(ps.alibi_slopes(model).tolist()):
        assert math.isclose(table.loc[h, "n_eff"], exponential_width(1 / m, n + 1), rel_tol=1e-4)
    assert table.loc[0, "kernel"] == "local" and table.loc[7, "kernel"] == "uniform"
    assert (table["median TV"] < 1e-6).all()


def test_by_distance_brute_force():
    gen = torch.Generator().manual_seed(0)
    values = torch.randn(2, 3, 6, 6, generator=gen)
    got = ps.by_distance(values)
    for h in range(3):
        for d in range(6):
            entries = [values[b, h, n, n - d].abs() for b in range(2) for n in range(d, 6)]
            assert math.isclose(float(got[h, d]), float(torch.stack(entries).mean()), rel_tol=1e-5)


def test_reference_tokens_set_the_mean_key(rope):
    model, _, texts, _ = rope
    reference = ps.random_texts(model, 2, seed=7)
    fit = ps.factorise_attention(model, texts, reference_tokens=reference)
    _, cache = model.run_with_cache(reference)
    assert torch.allclose(fit.mean_key, cache["blocks.0.attn.hook_k"].mean((0, 1)), atol=1e-6)


def test_learned_positions_are_refused():
    model = make_small_model(seed=0)[0]
    with pytest.raises(InputError, match="decompose_attention"):
        ps.factorise_attention(model, torch.zeros(1, 8, dtype=torch.long))
    with pytest.raises(InputError):
        ps.rotary_frequencies(model)


def test_bound_is_for_rotary_only(alibi):
    model, _, fit = alibi
    with pytest.raises(InputError):
        ps.rotary_error_bound(model, fit)


def test_rebuilt_scores_must_give_the_models_pattern(rope, monkeypatch):
    """A wrong scale (or rotation, or slope) is refused, not reported as the model's scores."""
    model, _, texts, _ = rope
    monkeypatch.setattr(ps, "_attn_scale", lambda model: 2.0)
    with pytest.raises(InputError, match="hook_pattern"):
        ps.factorise_attention(model, texts)


def test_hugging_face_rotary_models(hf_rotary):
    """Pythia and Llama layouts: pairs (p, p + r/2), frequencies base^(-2p/r), exact patterns
    and scores (Llama: from its own rotated hooks), the error bound, the shared keys."""
    neox, llama, texts = hf_rotary
    for model, r in ((neox, 8), (llama, 16)):
        fit = ps.factorise_attention(model, texts)
        _, cache = model.run_with_cache(texts)
        assert torch.allclose(fit.exact_pattern(), cache["blocks.0.attn.hook_pattern"], atol=1e-5)
        assert ps.rotary_pairs(model).tolist() == [[p, p + r // 2] for p in range(r // 2)]
        expected = 10000.0 ** (-torch.arange(0, r, 2) / r)
        assert torch.allclose(ps.rotary_frequencies(model), expected, rtol=1e-4)
        assert (fit.score_error().abs() <= ps.rotary_error_bound(model, fit) + 1e-4).all()
        assert fit.score_error().diagonal(dim1=-2, dim2=-1).abs().max() < 1e-4
        assert fit.exact_scores.abs().max() > 10  # sharp enough to test the pattern
    assert fit.keys.shape[2] == fit.mean_key.shape[0] == 8  # grouped keys, one per query head
    rotated_q = cache["blocks.0.attn.hook_rot_q"]
    rotated_k = cache["blocks.0.attn.hook_rot_k"].repeat_interleave(4, dim=2)
    exact = torch.einsum("bnhe,bihe->bhni", rotated_q, rotated_k) / 4.0
    lower = torch.ones(64, 64, dtype=torch.bool).tril()
    assert torch.allclose(exact[..., lower], fit.exact_scores[..., lower], atol=1e-5)
