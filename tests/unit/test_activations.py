"""Truth from activations: AUC, window means and the ablation test against direct computations."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from context_neurons import activations as act
from context_neurons.checks import InputError, ModelLoadError
from context_neurons.models.toy import make_small_model
from context_neurons.models.weights import as_weights
from context_neurons.text.windows import pad_windows


def brute_auc(values: torch.Tensor, inside: torch.Tensor) -> float:
    """P(a value inside > a value outside), ties one half: every pair compared."""
    a, b = values[inside], values[~inside]
    greater = (a[:, None] > b[None]).double().sum() + 0.5 * (a[:, None] == b[None]).double().sum()
    return float(greater / (len(a) * len(b)))


def test_auc_equals_pairwise_comparison_with_ties():
    gen = torch.Generator().manual_seed(0)
    values = torch.randn(30, 4, generator=gen)
    values[:, 3] = torch.randint(0, 3, (30,), generator=gen).float()  # many ties
    labels = ["a"] * 10 + ["b"] * 12 + ["c"] * 8
    auc = act.one_vs_rest_auc(values, labels, ["a", "b", "c"])
    for d, name in enumerate(["a", "b", "c"]):
        inside = torch.tensor([label == name for label in labels])
        for j in range(4):
            assert float(auc[j, d]) == pytest.approx(brute_auc(values[:, j], inside), abs=1e-6)


def test_score_auc_is_the_pairwise_probability():
    gen = torch.Generator().manual_seed(2)
    scores = torch.randn(40, generator=gen).round(decimals=1)  # some ties
    truth = [1, 5, 7, 20, 33]
    inside = torch.zeros(40, dtype=torch.bool)
    inside[truth] = True
    assert act.score_auc(scores, truth) == pytest.approx(brute_auc(scores, inside), abs=1e-6)
    assert act.score_auc(-scores, truth) == pytest.approx(1 - brute_auc(scores, inside), abs=1e-6)
    ranked = torch.zeros(40)
    ranked[truth] = 1.0
    assert act.score_auc(ranked, truth) == 1.0
    assert np.isnan(act.score_auc(scores, [])) and np.isnan(act.score_auc(scores, list(range(40))))


@pytest.mark.parametrize("fold_ln", [False, True])
def test_layer_zero_from_the_weights_equals_the_hooks(fold_ln):
    """attention_from_weights against the bridge's hooks, with LayerNorms and value biases folded or
    not; a window padded to the batch's length (padding after its end) as the hooks give it
    alone."""
    model, _ = make_small_model(seed=5, fold_ln=fold_ln, n_ctx=64, n_layers=2)
    gen = torch.Generator().manual_seed(2)
    tokens = torch.randint(0, 500, (3, 64), generator=gen)
    names = ["blocks.0.hook_resid_pre", "blocks.0.attn.hook_z"]
    resid, z, _ = act.attention_from_weights(as_weights(model), tokens)
    _, cache = model.run_with_cache(tokens, names_filter=names)
    torch.testing.assert_close(resid, cache[names[0]], atol=1e-6, rtol=1e-5)
    torch.testing.assert_close(z, cache[names[1]], atol=1e-5, rtol=1e-4)
    padded, lengths = pad_windows([tokens[0, :40], tokens[1]])
    _, z_padded, _ = act.attention_from_weights(as_weights(model), padded)
    _, alone = model.run_with_cache(tokens[:1, :40], names_filter=names)
    assert lengths.tolist() == [40, 64]
    torch.testing.assert_close(z_padded[0, :40], alone[names[1]][0], atol=1e-5, rtol=1e-4)


def test_layer_zero_check_refuses_weights_read_wrongly(monkeypatch):
    """Every pass checks its first batch against the hooks, up to the MLP's input: a residual,
    a head's z or previous-token attention, or LayerNorm 2 read wrongly raises (the passes, the
    head statistics, the bag of tokens)."""
    from context_neurons.verdict.baselines import bag_responses

    model, _ = make_small_model(seed=5, n_ctx=64)
    windows = [torch.arange(1, 60)] * 2
    act.LayerZeroPasses.run(model, windows, start=6)  # read right: no error
    right, right_ln2 = act.attention_from_weights, act.ln2_output
    wrong_layer = {"hook_resid_pre": lambda a: a._replace(resid=a.resid + 0.01),
                   "hook_z": lambda a: a._replace(z=1.01 * a.z),
                   "hook_pattern": lambda a: a._replace(previous=a.previous + 0.01)}
    for hook, wrong in wrong_layer.items():
        monkeypatch.setattr(act, "attention_from_weights", lambda w, t: wrong(right(w, t)))
        for run in (lambda: act.LayerZeroPasses.run(model, windows, start=6),
                    lambda: act.mean_head_z(model, windows),
                    lambda: act.previous_token_attention(model, windows),
                    lambda: bag_responses(model, torch.tensor([3, 4]), 64, 32, 0)):
            with pytest.raises(ModelLoadError, match=hook):
                run()
    monkeypatch.setattr(act, "attention_from_weights", right)
    monkeypatch.setattr(act, "ln2_output", lambda w, r, z: 1.01 * right_ln2(w, r, z))
    with pytest.raises(ModelLoadError, match="hook_pre"):
        act.LayerZeroPasses.run(model, windows, start=6)


@pytest.mark.parametrize("fold_ln", [False, True])
def test_head_statistics_equal_the_hooked_pattern_and_z(fold_ln):
    """The previous-token share from the weights (one pass with the mean z, on windows of several
    lengths, padded) equals the mean of ``hook_pattern[:, :, n, n - 1]`` over ``n >= start`` from
    the hooks, window by window; the mean z is :meth:`LayerZeroPasses.mean_z`'s."""
    model, _ = make_small_model(seed=3, fold_ln=fold_ln, n_ctx=64, n_layers=2)
    gen = torch.Generator().manual_seed(4)
    windows = [torch.randint(0, 500, (n,), generator=gen) for n in (40, 64, 51)]
    stats = act.head_statistics(model, windows, start=7, batch_size=2)
    total, count = torch.zeros(model.cfg.n_heads, dtype=torch.float64), 0
    for tokens in windows:
        _, cache = model.run_with_cache(tokens[None], names_filter="blocks.0.attn.hook_pattern")
        pattern = cache["blocks.0.attn.hook_pattern"][0]  # [head, query, key]
        n = torch.arange(7, len(tokens))
        total += pattern[:, n, n - 1].double().sum(-1)
        count += len(n)
    torch.testing.assert_close(stats.previous_share.double(), total / count, atol=1e-6, rtol=0)
    passes = act.LayerZeroPasses.run(model, windows, start=7, batch_size=2)
    assert torch.equal(stats.mean_z, passes.mean_z())


def test_causal_attention_previous_share_is_the_same_on_every_path():
    """The fused CPU kernel's log-sum-exp and the scores' own (the path every other device
    takes) give the same attention to the previous token, and the output of
    ``scaled_dot_product_attention``."""
    gen = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(2, 3, 20, 8, generator=gen) for _ in range(3))
    z, previous = act.causal_attention(q, k, v, 0.3)
    z64, previous64 = act.causal_attention(q.double(), k.double(), v.double(), 0.3)
    pattern = torch.softmax((q.double() @ k.double().transpose(-1, -2) * 0.3).masked_fill(
        torch.ones(20, 20, dtype=torch.bool).triu(1), float("-inf")), -1)
    n = torch.arange(1, 20)
    expected = torch.nn.functional.pad(pattern[:, :, n, n - 1], (1, 0))
    torch.testing.assert_close(previous64, expected)
    torch.testing.assert_close(previous.double(), expected, atol=1e-6, rtol=0)
    assert torch.equal(z, torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True,
                                                                           scale=0.3))
    torch.testing.assert_close(z.double(), z64, atol=1e-6, rtol=0)


@pytest.mark.parametrize("fold_ln", [False, True])
def test_window_means_equal_the_hooks_and_ablation_replaces_the_heads(fold_ln):
    """LayerNorm 2, W_O and W_in from the weights, folded (as the shipped models load) or not."""
    model, _ = make_small_model(seed=4, n_ctx=64, n_layers=1, fold_ln=fold_ln)
    gen = torch.Generator().manual_seed(1)
    windows = [torch.randint(0, 500, (n,), generator=gen) for n in (40, 50, 64)]
    means = act.window_means(model, windows, start=5, batch_size=2)
    for w, tokens in enumerate(windows):
        _, cache = model.run_with_cache(tokens[None], names_filter="blocks.0.mlp.hook_pre")
        expected = cache["blocks.0.mlp.hook_pre"][0, 5:].mean(0)
        torch.testing.assert_close(means[w], expected, atol=1e-5, rtol=1e-5)
    mean_z = act.mean_head_z(model, windows)
    ablated = act.window_means(model, windows, start=5, ablate=[1, 3], mean_z=mean_z)

    def replace(z, hook):
        z[:, :, [1, 3]] = mean_z[[1, 3]]
        return z

    for w, tokens in enumerate(windows):
        model.reset_hooks()
        with model.hooks(fwd_hooks=[("blocks.0.attn.hook_z", replace)]):
            _, cache = model.run_with_cache(tokens[None], names_filter="blocks.0.mlp.hook_pre")
        expected = cache["blocks.0.mlp.hook_pre"][0, 5:].mean(0)
        torch.testing.assert_close(ablated[w], expected, atol=1e-5, rtol=1e-5)
    assert not torch.allclose(ablated, means)  # the ablation changed something


def test_window_moments_give_the_mean_square_of_single_positions():
    model, _ = make_small_model(seed=4, n_ctx=64, n_layers=1)
    gen = torch.Generator().manual_seed(2)
    windows = [torch.randint(0, 500, (n,), generator=gen) for n in (33, 64, 47)]
    means, squares = act.window_moments(model, windows, start=7, batch_size=2)
    torch.testing.assert_close(means, act.window_means(model, windows, start=7, batch_size=3))
    for w, tokens in enumerate(windows):
        _, cache = model.run_with_cache(tokens[None], names_filter="blocks.0.mlp.hook_pre")
        pre = cache["blocks.0.mlp.hook_pre"][0, 7:]
        torch.testing.assert_close(squares[w], pre.square().mean(0), atol=1e-5, rtol=1e-5)
    assert bool((squares >= means.square() - 1e-5).all())  # a mean square bounds the squared mean


def test_one_pass_gives_every_ablation_as_the_hooks_do():
    """LayerZeroPasses: one pass to hook_z, then window means computed from the weights. The
    full and mean-ablated means are checked against the hooks by the two tests above (through
    window_means and window_moments, which use the passes); here they must not depend on the
    batch size, and the resample ablation must equal passes through the hooks (LayerNorm 2 with
    weights that are not folded: the small model's are not ones and zeros)."""
    model, _ = make_small_model(seed=4, n_ctx=64, n_layers=2)
    gen = torch.Generator().manual_seed(3)
    windows = [torch.randint(0, 500, (n,), generator=gen) for n in (40, 50, 64)]
    passes = act.LayerZeroPasses.run(model, windows, start=6, batch_size=2)
    means, squares = passes.moments()
    expected = act.window_moments(model, windows, start=6, batch_size=3)  # another batching
    torch.testing.assert_close(means, expected[0], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(squares, expected[1], atol=1e-5, rtol=1e-5)
    mean_z = act.mean_head_z(model, windows)
    torch.testing.assert_close(passes.ablated([0, 2], mean_z), act.window_means(
        model, windows, start=6, ablate=[0, 2], mean_z=mean_z), atol=1e-5, rtol=1e-5)
    # The mean z from what the pass already holds, without another pass: the same number.
    assert torch.equal(act.mean_head_z(model, windows, batch_size=2), passes.mean_z())

    same = [torch.randint(0, 500, (48,), generator=gen) for _ in range(5)]
    labels = ["a", "a", "b", "c", "c"]
    donors = act.donor_windows(labels)
    assert donors == [2, 2, 3, 0, 0]  # the next window of another label, wrapping around
    resampled = act.LayerZeroPasses.run(model, same, start=6, batch_size=2).resampled([1], donors)
    name, stop = "blocks.0.attn.hook_z", "blocks.0.mlp.hook_pre"
    for i, tokens in enumerate(same):
        _, donor = model.run_with_cache(same[donors[i]][None], names_filter=name)

        def patch(z, hook, donor_z=donor[name]):
            z[:, :, [1]] = donor_z[:, :, [1]]
            return z

        model.reset_hooks()
        with model.hooks(fwd_hooks=[(name, patch)]):
            _, cache = model.run_with_cache(tokens[None], names_filter=stop)
        torch.testing.assert_close(resampled[i], cache[stop][0, 6:].mean(0), atol=1e-5,
                                   rtol=1e-5)
    assert not torch.allclose(resampled, act.LayerZeroPasses.run(model, same, 6).means())
    with pytest.raises(InputError, match="one length"):
        passes.resampled([1], [1, 2, 0])


def test_truth_separates_the_context_path_from_the_direct_path():
    """A neuron fed by a head's bag of tokens loses its separation under ablation; a neuron fed
    by the current token's embedding keeps it."""
    model, _ = make_small_model(seed=5, n_ctx=64, n_layers=1)
    d_model = model.cfg.d_model
    with torch.no_grad():
        marker = torch.zeros(d_model)
        marker[0], marker[1] = 1.0, -1.0  # mean-free, so LayerNorm keeps it
        model.W_E[:] = 0.05 * torch.randn(model.W_E.shape, generator=torch.Generator().manual_seed(2))
        model.W_E[:, 2:4] = 0.0  # dims 2-3 carry only what head 0 writes
        model.W_pos[:, 2:4] = 0.0
        model.W_E[100:150] += 3 * marker  # domain "b" tokens carry the marker,
        model.W_E[200:400] -= 3 * marker  # domain "a" tokens its opposite (same norm)
        model.blocks[0].ln2.w[2:4] = 1.0
        attn = model.blocks[0].attn
        attn.W_Q[0] = 0.0  # head 0: uniform attention, a bag of tokens
        attn.W_V[0] = 0.0
        attn.W_O[0] = 0.0
        attn.W_V[0, :, 0] = marker * 5
        attn.W_O[0, 0] = 0.0
        attn.W_O[0, 0, 2], attn.W_O[0, 0, 3] = 1.0, -1.0  # write the bag to dims 2-3
        attn.W_O[1:] = 0.0  # no other head writes anything
        attn.b_O[:] = 0.0
        w_in = model.blocks[0].mlp.W_in
        w_in[:, 0] = 0.0
        w_in[2, 0], w_in[3, 0] = 5.0, -5.0  # neuron 0 reads the bag
        w_in[:, 1] = 0.0
        w_in[0, 1], w_in[1, 1] = 5.0, -5.0  # neuron 1 reads the current token
    gen = torch.Generator().manual_seed(3)
    windows, labels = [], []
    for k in range(16):
        low, high = (100, 150) if k % 2 else (200, 400)
        share = 0.3 + 0.4 * torch.rand((), generator=gen)  # windows differ within a domain
        own = torch.rand(40, generator=gen) < share
        body = torch.where(own, torch.randint(low, high, (40,), generator=gen),
                           torch.randint(400, 500, (40,), generator=gen))  # shared filler
        windows.append(torch.cat([torch.tensor([0]), body]))
        labels.append("b" if k % 2 else "a")
    truth = act.activation_truth(model, windows, labels, heads=[0], start=8)
    assert truth.separation[0] > 0.4 and truth.separation[1] > 0.4
    assert truth.removed[0] > 0.5 > truth.removed[1]
    assert 0 in truth.context_neurons() and 1 not in truth.context_neurons()
    assert set(truth.separating_neurons()) >= {0, 1}
    assert truth.table([0, 1])["context neuron"].tolist() == [True, False]


def test_bad_input():
    model, _ = make_small_model(seed=0)
    with pytest.raises(InputError, match="one per window"):
        act.activation_truth(model, [torch.tensor([0, 1, 2])], ["a", "b"], heads=[0])
    with pytest.raises(InputError, match="two domains"):
        act.activation_truth(model, [torch.tensor([0, 1, 2])], ["a"], heads=[0])
    with pytest.raises(InputError, match="mean_z"):
        act.window_means(model, [torch.tensor([0, 1, 2])], ablate=[0])


def test_precision_recall_curve():
    scores = torch.tensor([9.0, 7.0, 5.0, 3.0])
    curve = act.precision_recall_curve(scores, [0, 2], [4.0, 6.0, 10.0])
    assert curve.loc[4.0].tolist() == [3, pytest.approx(2 / 3), 1.0]
    assert curve.loc[6.0].tolist() == [2, 0.5, 0.5]
    assert curve.loc[10.0, "neurons found"] == 0
