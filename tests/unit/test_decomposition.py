"""The decomposition of layer-0 attention against the exact patterns from TransformerLens hooks."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from context_neurons import decomposition as dec
from context_neurons.checks import InputError, TokenError
from context_neurons.models.toy import make_small_model
from context_neurons.models.weights import (
    ARCHITECTURE,
    check_architecture,
    layer_norm_affine,
    read_weights,
)


def hook_scores(model, tokens):
    _, cache = model.run_with_cache(tokens[None], stop_at_layer=1,
                                    names_filter=lambda n: n.startswith("blocks.0.attn.hook_"))
    return cache["blocks.0.attn.hook_attn_scores"][0], cache["blocks.0.attn.hook_pattern"][0]


@pytest.mark.parametrize("fold_ln", [False, True])
def test_exact_split_equals_hook_scores_small_model(fold_ln):
    model, _ = make_small_model(seed=3, fold_ln=fold_ln)
    tokens = torch.randint(0, model.cfg.d_vocab, (model.cfg.n_ctx,), generator=torch.Generator().manual_seed(0))
    scores, pattern = hook_scores(model, tokens)
    decomposed = dec.decompose_attention(model, tokens, reference_tokens=torch.arange(200))
    mask = decomposed.mask
    torch.testing.assert_close(decomposed.exact_scores[:, mask], scores[:, mask], atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(decomposed.exact_pattern(), pattern, atol=1e-5, rtol=0)


def test_exact_queries_keys_values_equal_hooks(small_model):
    tokens = torch.arange(40) * 7 % small_model.cfg.d_vocab
    _, cache = small_model.run_with_cache(tokens[None], stop_at_layer=1)
    for which, hook in [("Q", "q"), ("K", "k"), ("V", "v")]:
        torch.testing.assert_close(dec.project_exact(small_model, which, tokens),
                                   cache[f"blocks.0.attn.hook_{hook}"][0], atol=1e-4, rtol=1e-4)


def test_reconstruction_exact_on_diagonal_and_when_ln_scale_is_constant():
    """With the same LayerNorm scale for every token, the decomposition is exact everywhere."""
    model, _ = make_small_model(seed=5, fold_ln=True)
    with torch.no_grad():  # equal-norm, mean-zero embeddings orthogonal to positions: constant scale
        d = model.cfg.d_model
        basis, _ = torch.linalg.qr(torch.randn(d, d))
        basis = basis[:, :-1] - basis[:, :-1].mean(0)  # away from the ones direction
        basis, _ = torch.linalg.qr(basis)
        token_space, pos_space = basis[:, : d // 2], basis[:, d // 2 : d - 1]
        e = torch.nn.functional.normalize(torch.randn(model.cfg.d_vocab, d // 2), dim=-1) @ token_space.T
        p = torch.nn.functional.normalize(torch.randn(model.cfg.n_ctx, pos_space.shape[1]), dim=-1) @ pos_space.T
        model.embed.W_E.copy_(3 * e)
        model.pos_embed.W_pos.copy_(p)
    tokens = torch.randint(0, model.cfg.d_vocab, (model.cfg.n_ctx,), generator=torch.Generator().manual_seed(1))
    decomposed = dec.decompose_attention(model, tokens, reference_tokens=torch.arange(300))
    _, pattern = hook_scores(model, tokens)
    tv = dec.tv_distance(pattern, decomposed.reconstructed_pattern())
    assert tv.max() < 1e-4


def test_planted_contextual_heads_reconstructed_within_paper_tolerance(planted):
    from context_neurons.text.windows import corpus_windows

    model = planted.model
    windows, _, _ = corpus_windows(model.tokenizer, "nltk_brown_us", n=1, min_tokens=1023)
    tokens = windows[0]
    decomposed = dec.decompose_attention(model, tokens, heads=[0, 2, 6, 8, 9, 10])
    _, pattern = hook_scores(model, tokens)
    torch.testing.assert_close(decomposed.exact_pattern(), pattern[[0, 2, 6, 8, 9, 10]], atol=1e-4, rtol=0)
    tv = decomposed.tv_distance()
    assert tv.median() < 0.08  # the paper reports ~0.05 on GPT-2 Small
    diag = torch.arange(len(tokens))
    rec = decomposed.positional_scores + decomposed.content_scores
    assert (rec - decomposed.exact_scores)[:, diag, diag].abs().max() < 1e-2


def test_positional_pattern_is_a_distribution_with_planted_widths(planted):
    pattern = dec.positional_pattern(planted.model, 500, " the")
    assert pattern.shape == (12, 501)
    torch.testing.assert_close(pattern.sum(-1), torch.ones(12))
    n_eff = 1 / (pattern**2).sum(-1)
    for head, width in planted.truth.kernel_widths.items():
        expected = min(2 * width, 501)  # an exponential kernel of width w averages ~2w tokens
        assert expected / 3 < n_eff[head] < expected * 3, (head, n_eff[head], width)


def test_content_weights_shape_and_duplicate_heads(planted):
    model = planted.model
    the = dec.token_id(model, " the")
    log_c = dec.content_log_weights(model, 500, " the")
    assert log_c.shape == (12, model.cfg.d_vocab)
    # The destination's own token stands out: among the top 1% of the vocabulary (the planted
    # content scores have heavy tails, so a few other tokens may score as high; the taxonomy's
    # self z over several destinations is tested in test_taxonomy).
    for head in planted.truth.head_groups["duplicate"]:
        assert log_c[head, the] > log_c[head].quantile(0.99), head


def test_tv_distance():
    p = torch.tensor([0.5, 0.5, 0.0])
    q = torch.tensor([0.0, 0.5, 0.5])
    assert dec.tv_distance(p, q).item() == pytest.approx(0.5)
    assert dec.tv_distance(p, p).item() == 0.0


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda m: dec.positional_pattern(m, 5000), "Position 5000 out of range"),
        (lambda m: dec.positional_pattern(m, 10, heads=[12]), r"Head 12 out of range"),
        (lambda m: dec.decompose_attention(m, torch.tensor([], dtype=torch.long)), "non-empty"),
        (lambda m: dec.decompose_attention(m, torch.zeros(2000, dtype=torch.long)), "exceed the context"),
        (lambda m: dec.token_id(m, " the quick"), "not one"),
    ],
)
def test_bad_input_gives_clear_errors(planted, call, message):
    with pytest.raises(InputError, match=message):
        call(planted.model)


@pytest.mark.parametrize("fold_ln", [False, True])
def test_small_model_exact_on_diagonal_and_close_elsewhere(fold_ln):
    """A generic seeded model (non-trivial LayerNorm): exact at i = n, a bounded TV elsewhere."""
    model, _ = make_small_model(seed=7, fold_ln=fold_ln)
    gen = torch.Generator().manual_seed(2)
    tokens = torch.randint(0, model.cfg.d_vocab, (model.cfg.n_ctx,), generator=gen)
    decomposed = dec.decompose_attention(model, tokens, reference_tokens=torch.arange(300))
    diag = torch.arange(len(tokens))
    reconstructed = decomposed.positional_scores + decomposed.content_scores
    scale = decomposed.exact_scores.abs().max()
    assert (reconstructed - decomposed.exact_scores)[:, diag, diag].abs().max() < 1e-5 * scale
    tv = decomposed.tv_distance()
    assert tv[:, 0].abs().max() < 1e-6  # one source position: nothing to approximate
    # Random embeddings make LayerNorm scales vary far more than GPT-2's (the approximation's
    # one assumption), yet the reconstruction stays much closer than an uninformed pattern.
    uniform = torch.tril(torch.ones_like(decomposed.exact_scores[0]))
    uniform = uniform / uniform.sum(-1, keepdim=True)
    tv_uniform = dec.tv_distance(decomposed.exact_pattern(), uniform[None])
    assert tv.median() < 0.15 and tv.median() < 0.3 * tv_uniform.median()  # seen: 0.077, 0.56


@pytest.mark.parametrize("fold_ln", [False, True])
def test_positional_pattern_equals_hook_pattern_on_a_constant_sequence(fold_ln):
    """With every token identical and M averaged over that token, pos_n(i) IS the attention."""
    model, _ = make_small_model(seed=11, fold_ln=fold_ln)
    token, n = 17, model.cfg.n_ctx - 1
    tokens = torch.full((n + 1,), token)
    _, pattern = hook_scores(model, tokens)
    positional = dec.positional_pattern(model, n, token, reference_tokens=torch.tensor([token]))
    torch.testing.assert_close(positional, pattern[:, n, : n + 1], atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("fold_ln", [False, True])
def test_content_weights_equal_hook_queries_dot_keys(fold_ln):
    """``log c_n(t)`` is the destination's query (hook_q) dotted with t's key at n (hook_k)."""
    model, _ = make_small_model(seed=13, fold_ln=fold_ln)
    n, dest = 20, 5
    sources = torch.tensor([3, 99, 250, 498])
    log_c = dec.content_log_weights(model, n, dest, token_ids=sources)

    def at_n(token: int, hook: str) -> torch.Tensor:
        tokens = torch.zeros(n + 1, dtype=torch.long)
        tokens[n] = token
        _, cache = model.run_with_cache(tokens[None], stop_at_layer=1)
        return cache[f"blocks.0.attn.hook_{hook}"][0, n]  # [head, d_head]

    query = at_n(dest, "q")
    expected = torch.stack([(query * at_n(int(t), "k")).sum(-1) for t in sources], dim=-1)
    torch.testing.assert_close(log_c, expected / model.cfg.d_head**0.5, atol=1e-4, rtol=1e-4)


def test_folded_layernorm_reads_as_ones_and_zeros_on_the_model_device():
    """Folded LayerNorms read as ones and zeros (the weights carry them), on the model's device;
    a LayerNorm with no parameters at all (``w`` and ``b`` absent) reads the same way."""
    model, _ = make_small_model(seed=0, fold_ln=True)
    weights = read_weights(model)
    assert weights is read_weights(model)  # read once per model
    for gamma, beta in [(weights.ln1_w, weights.ln1_b), (weights.ln2_w, weights.ln2_b)]:
        assert gamma.device == model.W_E.device
        assert torch.equal(gamma, torch.ones(model.cfg.d_model))
        assert torch.equal(beta, torch.zeros(model.cfg.d_model))
    bare = torch.nn.Module()  # a LayerNorm folded away entirely, on another device
    gamma, beta = layer_norm_affine(bare, 8, torch.device("meta"))
    assert gamma.device.type == "meta" and beta.device.type == "meta" and gamma.shape == (8,)


def brute_force_key(model, token: int, position: int) -> torch.Tensor:
    """``k(t, i) = LN1(W_E[t] + W_pos[i]) W_K + b_K`` from the definition, every head."""
    x = model.W_E[token] + model.W_pos[position]
    normed = model.blocks[0].ln1(x[None, None])[0, 0]
    attn = model.blocks[0].attn
    return torch.einsum("d,hde->he", normed, attn.W_K) + attn.b_K


def brute_force_sigma(model, token: int, position: int) -> float:
    x = model.W_E[token] + model.W_pos[position]
    return float(((x - x.mean()) ** 2).mean().add(model.cfg.eps).sqrt())


def _error_parts(model):
    """Random tokens and reference text of the small model, its first and last heads, their
    score-error parts and their decomposition."""
    gen = torch.Generator().manual_seed(2)
    tokens = torch.randint(0, model.cfg.d_vocab, (model.cfg.n_ctx,), generator=gen)
    reference = torch.randint(0, model.cfg.d_vocab, (50,), generator=gen)
    heads = [0, model.cfg.n_heads - 1]
    parts = dec.score_error_parts(model, tokens, heads=heads, reference_tokens=reference)
    decomposed = dec.decompose_attention(model, tokens, heads=heads, reference_tokens=reference)
    return tokens, reference, heads, parts, decomposed


@pytest.mark.parametrize("fold_ln", [False, True])
def test_score_error_parts_against_the_definitions(fold_ln):
    """The two parts add up to reconstructed minus exact scores, and each equals its formula
    evaluated from the definitions (keys through the model's own LayerNorm, sigma from x)."""
    model, _ = make_small_model(seed=7, fold_ln=fold_ln)
    tokens, reference, heads, parts, decomposed = _error_parts(model)
    difference = decomposed.positional_scores + decomposed.content_scores - decomposed.exact_scores
    torch.testing.assert_close(parts.total(), difference * decomposed.mask, atol=1e-4, rtol=1e-4)
    assert parts.token_scale[:, torch.arange(len(tokens)), torch.arange(len(tokens))].abs().max() == 0
    queries = dec.project_exact(model, "Q", tokens)[:, heads]
    gamma = read_weights(model).ln1_w
    scale = model.cfg.d_head**0.5
    for n, i in [(5, 0), (model.cfg.n_ctx - 1, 3), (17, 16)]:
        t = int(tokens[i])
        key_e = torch.einsum(  # K_E[t] = (gamma * centred W_E[t]) W_K
            "d,hde->he", gamma * dec.centred(model.W_E[t]), model.blocks[0].attn.W_K
        )[heads]
        expected_token = (queries[n] * key_e).sum(-1) / scale * (
            1 / brute_force_sigma(model, t, n) - 1 / brute_force_sigma(model, t, i)
        )
        torch.testing.assert_close(parts.token_scale[:, n, i], expected_token, atol=1e-4, rtol=1e-3)
        mean_key = lambda p: torch.stack([brute_force_key(model, int(r), p) for r in reference]).mean(0)  # noqa: E731
        recon = brute_force_key(model, t, n) + mean_key(i) - mean_key(n)
        total = (queries[n] * (recon - brute_force_key(model, t, i))[heads]).sum(-1) / scale
        torch.testing.assert_close(parts.total()[:, n, i], total, atol=1e-4, rtol=1e-3)


def test_scale_change_from_the_residual_std(small_model):
    tokens = torch.tensor([3, 3, 17, 40])
    n = 12
    change = dec.scale_change(small_model, tokens, n)
    assert change.shape == (4, n + 1)
    for row, t in enumerate(tokens.tolist()):
        for i in (0, 5, n):
            expected = abs(1 - brute_force_sigma(small_model, t, n) / brute_force_sigma(small_model, t, i))
            assert float(change[row, i]) == pytest.approx(expected, abs=1e-6)
    table = dec.scale_change_by_distance(small_model, tokens, n, distances=(1, 5, 100))
    assert list(table.index) == [1, 5] and list(table.columns) == ["median", "90th percentile"]
    assert table.loc[5, "median"] == pytest.approx(float(change[:, n - 5].quantile(0.5)), abs=1e-6)


def test_the_method_takes_the_model_or_its_weights_alike():
    """The plain value read once (models.weights) gives the same numbers as the model itself, and
    sees weights edited in place on the model (its tensors are the model's own)."""
    model, _ = make_small_model(seed=3, fold_ln=False)
    weights = read_weights(model)
    gen = torch.Generator().manual_seed(0)
    tokens = torch.randint(0, model.cfg.d_vocab, (model.cfg.n_ctx,), generator=gen)
    reference = torch.randint(0, model.cfg.d_vocab, (40,), generator=gen)
    from_model = dec.decompose_attention(model, tokens, reference_tokens=reference)
    from_weights = dec.decompose_attention(weights, tokens, reference_tokens=reference)
    for name in ("exact_scores", "positional_scores", "content_scores"):
        assert torch.equal(getattr(from_model, name), getattr(from_weights, name))
    with torch.no_grad():
        model.blocks[0].attn.W_K[1] *= 2.0
    assert torch.equal(weights.W_K[1], model.blocks[0].attn.W_K[1])
    edited = dec.decompose_attention(weights, tokens, reference_tokens=reference)
    assert not torch.equal(edited.exact_scores[1], from_model.exact_scores[1])
    assert torch.equal(edited.exact_scores[0], from_model.exact_scores[0])


def test_kept_mean_keys_follow_weights_edited_in_place():
    """``M`` is computed once per model and kept, but not past an edit of the weights it reads."""
    from transformers import AutoTokenizer

    from context_neurons.models.loading import TRAINED_DIR, bridge_from_hf, load_checkpoint

    # A copy of its own (the cached trained model of the other tests is left as it is).
    tokenizer = AutoTokenizer.from_pretrained(str(TRAINED_DIR))
    model = bridge_from_hf(load_checkpoint(TRAINED_DIR), tokenizer, "trained")
    kept = dec.default_mean_keys(model)
    assert dec.default_mean_keys(model) is kept  # computed once
    with torch.no_grad():
        model.blocks[0].attn.W_K[0] *= 2.0
    fresh = dec.mean_positional_keys(model, dec.default_reference_tokens(model), None)
    assert torch.equal(dec.default_mean_keys(model), fresh)
    assert not torch.equal(fresh, kept)


def test_a_word_outside_a_placeholder_vocabulary_is_refused():
    """Small id-only models have a placeholder tokenizer: a word is not silently its unknown id."""
    model, _ = make_small_model(seed=0)
    with pytest.raises(TokenError, match="not in this model's vocabulary"):
        dec.positional_pattern(model, 5, " the")


def test_read_weights_refuses_another_architecture_in_words(monkeypatch):
    model, _ = make_small_model(seed=0)

    def no_positions(self):  # what a rotary model's bridge has instead of W_pos
        raise AttributeError(f"'{type(self).__name__}' object has no attribute 'W_pos'")

    monkeypatch.setattr(type(model), "W_pos", property(no_positions))
    with pytest.raises(InputError, match="lacks a weight it needs.*W_pos"):
        read_weights(model)
    monkeypatch.undo()
    rotary = SimpleNamespace(model_name="a-rotary-model", positional_embedding_type="rotary",
                             normalization_type="RMS", gated_mlp=True)
    with pytest.raises(InputError, match="a-rotary-model is not a GPT-2-architecture") as error:
        check_architecture(rotary)
    assert all(name in str(error.value) for name in ARCHITECTURE)
    check_architecture(model.cfg)  # GPT-2's choices pass
    check_architecture(SimpleNamespace(normalization_type="LNPre"))  # LayerNorm folded


# ---- chapter 1's findings, computed in the package (issue 33) ----------------------------------


def test_error_part_sizes_are_the_attention_weighted_parts():
    model, _ = make_small_model(seed=7)
    tokens, _, heads, parts, decomposed = _error_parts(model)
    sizes = dec.error_part_sizes(decomposed, parts)
    assert list(sizes.table.index) == heads and sizes.table.index.name == "head"
    assert sizes.mismatch < 1e-4  # the two parts add up to the score error
    attention = decomposed.exact_pattern()
    for k in range(len(heads)):
        for part, column in ((parts.token_scale, "token scale (nats)"),
                             (parts.position, "positional key (nats)")):
            per_destination = [float((attention[k, n] * part[k, n].abs()).sum())
                               for n in range(1, len(tokens))]
            assert sizes.table[column].iloc[k] == pytest.approx(
                float(torch.tensor(per_destination).median()), rel=1e-5)
    tv = decomposed.tv_distance()
    assert sizes.table["median TV"].tolist() == pytest.approx(tv.median(-1).values.tolist())
    assert dec.error_part_sizes(decomposed, parts, tv).table.equals(sizes.table)
    with pytest.raises(InputError):
        dec.error_part_sizes(decomposed, dec.ScoreErrorParts(heads[::-1], parts.token_scale,
                                                             parts.position))


def test_error_part_sizes_finding_names_the_dominant_part():
    import pandas as pd

    def finding(token_scale, position):
        table = pd.DataFrame({"token scale (nats)": token_scale,
                              "positional key (nats)": position, "median TV": 0.1})
        return dec.ErrorPartSizes(table, 0.0).finding("a model")

    assert finding([0.1, 0.3], [0.2, 0.2]) == (
        "the token-scale part is the larger one for 1 of 2 heads, the positional-key part for "
        "1: on a model, neither part dominates")
    assert finding([0.3, 0.3, 0.1], [0.2, 0.2, 0.2]).endswith("the token-scale part dominates")
    assert finding([0.1], [0.2]).endswith("the positional-key part dominates")
