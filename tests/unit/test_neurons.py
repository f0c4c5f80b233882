"""Tests of neuron discovery (chapter 5): contributions by brute force, the score, the truth."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from context_neurons import circuit as C
from context_neurons.caching import IdentityCache
from context_neurons import decomposition as dec
from context_neurons import casestudies, gallery
from context_neurons import respelling as rs
from context_neurons.checks import DataError, InputError, OutOfRangeError, check_neuron
from context_neurons import discovery as N
from context_neurons.discovery import scores as scores_module
from context_neurons.models import load_model
from context_neurons.text.windows import domain_texts

torch.set_grad_enabled(False)


@pytest.fixture(scope="module")
def planted():
    return load_model("planted")


@pytest.fixture(scope="module")
def circuit(planted):
    return C.get_circuit(planted.model)


@pytest.fixture(scope="module")
def scores(planted, circuit):
    return N.get_scores(circuit, planted.model)


# ----------------------------------------------------------------------------------------------
# Contributions against a brute-force computation through hooks
# ----------------------------------------------------------------------------------------------


def _at_position(model, token_ids, position, names):
    filler = dec.token_id(model, " and")
    batch = torch.full((len(token_ids), position + 1), filler)
    batch[:, 0] = model.tokenizer.bos_token_id
    batch[:, position] = token_ids
    _, cache = model.run_with_cache(batch, stop_at_layer=1, names_filter=names)
    return [cache[name][:, position] for name in names]


@pytest.mark.slow
def test_contributions_match_hooks(planted):
    """contribution[j, t] rebuilt from hook_q/k/v, the MLP's own LN2 (scale fixed) and W_in."""
    model = planted.model
    reference = torch.tensor([262, 290, 286, 262, 1110, 3303, 13, 11, 50000, 1234])
    circuit = C.build_circuit(model, "prose", n_ref=48, reference_tokens=reference)
    heads, n_ref = circuit.heads, circuit.n_ref
    tokens = torch.tensor(
        [dec.token_id(model, s) for s in (" colour", " color", " war", " the")] + [999]
    )
    neurons = [0, 300, 704, 1710, model.cfg.d_mlp - 1]

    (q,) = _at_position(model, torch.tensor([circuit.dest_token]), n_ref, ["blocks.0.attn.hook_q"])
    k, v = _at_position(model, tokens, n_ref, ["blocks.0.attn.hook_k", "blocks.0.attn.hook_v"])
    ref, counts = torch.unique(reference, return_counts=True)
    (v_ref,) = _at_position(model, ref, n_ref, ["blocks.0.attn.hook_v"])
    mean_v = (v_ref * (counts / counts.sum())[:, None, None]).sum(0)
    log_c = torch.einsum("he,the->th", q[0, heads], k[:, heads]) / model.cfg.d_head**0.5
    weight = torch.exp(log_c - circuit.calibration.log_dhat)
    w_o = model.blocks[0].attn.W_O[heads]
    extended = torch.einsum("th,the,hed->td", weight, (v - mean_v)[:, heads], w_o)

    fixed = lambda scale, hook: torch.full_like(scale, 1 / circuit.ln2_scale)  # noqa: E731
    ln2 = model.blocks[0].ln2
    with model.hooks(fwd_hooks=[("blocks.0.ln2.hook_scale", fixed)]):
        linear = ln2(extended[None])[0] - ln2(torch.zeros_like(extended)[None])[0]
    expected = (linear @ model.blocks[0].mlp.W_in[:, neurons]).T

    got = N.contributions(circuit, model, neurons, tokens)
    assert got.shape == (len(neurons), len(tokens))
    assert torch.allclose(got, expected, rtol=1e-3, atol=1e-3 * expected.abs().max())


def test_contributions_are_one_gemm_of_all_tokens(planted, circuit):
    model = planted.model
    full = N.contributions(circuit, model, [300, 1710])
    assert full.shape == (2, model.cfg.d_vocab)
    some = N.contributions(circuit, model, [1710], torch.tensor([5, 17, 262]))
    assert torch.allclose(full[1, [5, 17, 262]], some[0], atol=1e-4)


# ----------------------------------------------------------------------------------------------
# The score
# ----------------------------------------------------------------------------------------------


def test_score_matches_numpy(planted, circuit, scores):
    model = planted.model
    vocab = scores.vocabulary
    assert not vocab[model.tokenizer.bos_token_id] and int(vocab.sum()) == model.cfg.d_vocab - 1
    for j in (0, 300, 2048):
        c = N.contributions(circuit, model, [j])[0][vocab].double().numpy()
        med = np.median(c)  # numpy averages the two middle values; torch takes the lower one
        spread = 1.4826 * np.median(np.abs(c - med))
        top = np.sort(np.abs(c - med) / spread)[-N.TOP_K :].mean()
        assert top == pytest.approx(float(scores.top[j]), rel=2e-3)


def test_extreme_tokens_and_loud_share_match_a_full_sort(planted, circuit, scores):
    model, vocab = planted.model, scores.vocabulary
    ids = vocab.nonzero().flatten()
    for j in (0, 300):
        c = N.contributions(circuit, model, [j])[0][vocab]
        order = ids[(c - c.median()).abs().argsort(descending=True)[: N.TOP_K]]
        assert set(scores.extreme_tokens[j].tolist()) == set(order.tolist())
    norms = circuit.extended[ids].norm(dim=-1)
    loud = set(ids[norms.argsort(descending=True)[: round(0.01 * len(ids))]].tolist())
    slots = scores.extreme_tokens.flatten().tolist()
    expected = sum(t in loud for t in slots) / len(slots)
    assert N.loud_token_share(scores, circuit) == pytest.approx(expected)
    shares = N.loud_slot_shares(scores, circuit)
    row = scores.extreme_tokens[300].tolist()
    assert float(shares[300]) == pytest.approx(sum(t in loud for t in row) / len(row))
    # the planted context neurons read topic directions, not the loudest tokens (measured: 0 to
    # 0.1 for 300, 1621 and 1710; the unplanted neurons' extremes are loud tokens more often)
    planted_shares = shares[sorted(planted.truth.context_neurons)]
    assert float(planted_shares.median()) < 0.25
    with pytest.raises(InputError):
        N.loud_token_share(scores, circuit, fraction=1.5)
    loudness = N.loudness(scores, circuit)  # the same two measures, as chapter 8.6 reads them
    assert set(loudness.loud.tolist()) == loud and torch.equal(loudness.shares, shares)


def test_loudness_in_words():
    class Tokenizer:
        def decode(self, ids):
            return f"<{ids[0]}>"

    loudness = N.Loudness(torch.tensor([7, 3]), torch.tensor([0.5, 0.0, 0.25, 1.0]), 0.01)
    assert loudness.findings(Tokenizer(), shown=1) == [
        "the 1 loudest tokens: ['<7>']",
        "the loudest 1% of tokens (2) hold 44% of all neurons' extreme-token slots (median "
        "neuron: 25%)"]
    assert loudness.among([0, 3], "two neurons") == (
        "the loudest 1% hold 44% of all extreme slots, and a median 50% of two neurons' slots")


def test_gaussian_null_matches_simulation():
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(20, 50256, generator=gen)
    med = x.median(-1, keepdim=True).values
    z = (x - med).abs() / (1.4826 * (x - med).abs().median(-1, keepdim=True).values)
    simulated = z.topk(20, dim=-1).values.mean(-1).mean()
    assert float(simulated) == pytest.approx(N.gaussian_null_score(50256), abs=0.05)
    assert N.gaussian_null_score(50256) < N.THETA


@pytest.mark.parametrize("n_tokens", [1000, 8191])
def test_gaussian_null_depends_on_the_vocabulary(n_tokens):
    """The null for a smaller vocabulary, against a simulation of that many Gaussian tokens."""
    gen = torch.Generator().manual_seed(1)
    x = torch.randn(200, n_tokens, generator=gen, dtype=torch.float64)
    med = x.median(-1, keepdim=True).values
    z = (x - med).abs() / (1.4826 * (x - med).abs().median(-1, keepdim=True).values)
    simulated = float(z.topk(20, dim=-1).values.mean(-1).mean())
    assert simulated == pytest.approx(N.gaussian_null_score(n_tokens), abs=0.05)
    assert N.gaussian_null_score(n_tokens) < N.gaussian_null_score(50256) < N.THETA
    with pytest.raises(InputError):
        N.gaussian_null_score(10, k=20)


def test_scores_know_their_vocabulary(planted, scores):
    n = planted.model.cfg.d_vocab - 1  # every token but <|endoftext|>
    assert scores.n_tokens == n
    assert scores.null() == pytest.approx(N.gaussian_null_score(n, scores.k))


def test_carried_neurons_are_the_best_bounded():
    found = list(range(500, 0, -1))
    assert N.carried(found, limit=200) == found[:200]
    assert N.carried(found[:20]) == found[:20]
    assert N.selection_note(found[:20], found[:20]) == "all 20 found neurons"
    note = N.selection_note(N.carried(found), found)
    assert note == f"the {N.MAX_NEURONS} highest-scoring of 500 found neurons"
    with pytest.raises(InputError):
        N.carried(found, limit=0)


def test_planted_neurons_recovered(planted, scores):
    """Recovery on the planted model (by construction; gains are spread around theta, so neither
    precision nor recall need be 1): the case-study neurons are found, most planted ones too."""
    truth = sorted(planted.truth.context_neurons)
    precision, recall = N.precision_recall(scores.found(N.THETA), truth)
    assert precision >= 0.8 and recall >= 0.8  # weak planted neurons and distractors
    found = scores.found(N.THETA)
    assert found == sorted(found, key=lambda j: -float(scores.top[j]))
    assert {c.paper_neuron for c in casestudies.PAPER_CASE_STUDIES} <= set(found)


def test_theta_sweep_is_monotone(planted, scores):
    sweep = N.theta_sweep(scores, truth=sorted(planted.truth.context_neurons))
    counts = sweep["neurons found"].to_numpy()
    assert (np.diff(counts) <= 0).all()
    assert counts[0] > counts[-1]
    assert set(sweep.columns) == {"neurons found", "precision", "recall"}


def test_precision_recall():
    assert N.precision_recall([1, 2, 3, 4], [1, 2, 5]) == (0.5, 2 / 3)
    assert N.precision_recall([], [1])[1] == 0.0


# ----------------------------------------------------------------------------------------------
# Reading neurons
# ----------------------------------------------------------------------------------------------


def test_token_table_of_neuron_300(planted, circuit):
    model, truth = planted.model, planted.truth
    table = N.token_table(circuit, model, 300, k=10)
    assert list(table.index) == list(range(1, 11))
    assert (np.diff(table["top contribution"].to_numpy()) <= 0).all()
    assert (table["top contribution"] > 0).all() and (table["bottom contribution"] < 0).all()
    # The planted spellings sit at the extremes; the top and bottom also hold words that the
    # corpora tie to British or American text (graded, superposed topics).
    planted_british = set(truth.planting_token_ids["british"])
    planted_american = set(truth.planting_token_ids["american"])
    assert sum(t in planted_british for t in table["top id"]) >= 2
    assert sum(t in planted_american for t in table["bottom id"]) >= 2


def test_sub_latents_split_two_topics(planted, circuit):
    """Neuron 1301 reads law and medicine: among its 100 top tokens, the planting words of the
    two topics fall into different clusters (a check of the code by construction: the topics were
    planted with those words). With 40 tokens too few planting words reach the top on this model
    (the topics are graded and spread by the corpora) for the split to be tested."""
    model, truth = planted.model, planted.truth
    law, medicine = set(truth.planting_token_ids["law"]), set(truth.planting_token_ids["medicine"])
    split = N.sub_latents(circuit, model, 1301, k=100)
    ids, _ = N.top_tokens(circuit, model, 1301, k=100)
    labels = dict(zip(split.table["token"], split.table["cluster"]))
    rows = [(labels[N.token_str(model, t)], t in law) for t in ids.tolist() if t in law | medicine]
    assert len(rows) >= 10 and 0 < sum(is_law for _, is_law in rows) < len(rows)
    agree = max(sum((c == k) == is_law for c, is_law in rows) for k in (0, 1))
    assert agree >= 0.85 * len(rows), (agree, len(rows))


def test_token_tables_match_a_full_sort(planted, circuit, scores):
    """topk per side equals sorting all contributions; z uses the score's median and spread."""
    model = planted.model
    neurons = [300, 1710, 5]
    tables = N.token_tables(circuit, model, neurons, k=7, scores=scores)
    ids = scores.vocabulary.nonzero().flatten()
    for j in neurons:
        c = N.contributions(circuit, model, [j])[0][ids]
        order = c.argsort(descending=True)
        table = tables[j]
        assert table["top id"].tolist() == ids[order[:7]].tolist()
        assert table["bottom id"].tolist() == ids[order.flip(0)[:7]].tolist()
        z = (table["top contribution"].to_numpy() - float(scores.median[j])) / float(
            scores.spread[j]
        )
        assert np.allclose(table["top z"].to_numpy(), z, rtol=1e-3)
        single = N.token_table(circuit, model, j, k=7, scores=scores)  # a GEMV: float noise
        assert single["top id"].tolist() == table["top id"].tolist()
        assert np.allclose(single["bottom z"], table["bottom z"], rtol=1e-4)
    ids_top, values = N.top_tokens(circuit, model, 300, k=7)
    assert ids_top.tolist() == tables[300]["top id"].tolist()
    assert np.allclose(values.numpy(), tables[300]["top contribution"].to_numpy())


def test_contributions_of_few_and_many_tokens_agree(planted, circuit):
    """The index-first path (few tokens) and the product-first path (most tokens) agree."""
    model = planted.model
    full = N.contributions(circuit, model, [300, 57])
    few = torch.tensor([262, 50000, 11])
    many = torch.arange(0, model.cfg.d_vocab - 3)
    assert torch.allclose(N.contributions(circuit, model, [300, 57], few), full[:, few], atol=1e-4)
    assert torch.allclose(N.contributions(circuit, model, [300, 57], many), full[:, many])


def test_scores_cache_checks_identity(planted, circuit, scores):
    """Cached scores are keyed by the circuit's identity (see test_identity_cache_...)."""
    model = planted.model
    assert N.get_scores(circuit, model) is scores
    assert isinstance(scores_module._SCORES, IdentityCache)  # one cache, where it is used


def test_gallery_table_and_markdown(planted, circuit, scores):
    model = planted.model
    table = gallery.gallery_table(circuit, model, [300, 1710], scores, planted.truth)
    assert list(table.index) == [300, 1710]
    assert table.loc[1710, "planted truth"] == planted.truth.context_neurons[1710].description
    assert 0 <= table.loc[300, "label-word share"] <= 1
    tables = N.token_tables(circuit, model, [300, 1710], k=4, scores=scores)
    index = gallery.index_markdown([300, 1710], scores, tables, {300: {"planted as": "a|b"}})
    lines = index.splitlines()
    assert lines[0].startswith("| neuron | score | top tokens | bottom tokens | planted as |")
    assert '<a href="#neuron-300">300</a>' in lines[2] and "a\\|b" in lines[2]
    assert len(lines) == 4
    unlinked = gallery.index_markdown([300, 1710], scores, tables, linked=[300]).splitlines()
    assert '<a href="#neuron-300">' in unlinked[2] and unlinked[3].startswith("| 1710 |")
    page = gallery.neuron_markdown(300, tables[300], {"score": "174"}, k=3)
    assert page.splitlines()[0] == "### Neuron 300" and gallery.anchor(300) == "neuron-300"
    assert "- **score**: 174" in page
    assert page.count("\n| ") == 4  # header row and three token rows
    assert tables[300]["top token"].iloc[0] in page
    named = gallery.neuron_markdown(300, tables[300], {"score": "174"}, k=3, model="planted model")
    caption = "*planted model: the 3 tokens that push neuron 300 up and down most*"
    assert f"\n{caption}\n\n| rank" in named
    captioned = gallery.index_markdown([300], scores, tables, model="planted model").splitlines()
    assert captioned[0].startswith("*planted model: ") and captioned[2].startswith("| neuron |")
    # a threshold that finds thousands of neurons: the index is bounded and says so (issue 52)
    bounded = gallery.index_markdown([300, 1710], scores, tables, limit=1).splitlines()
    assert len(bounded) == 5 and bounded[2].startswith('| <a href="#neuron-300">')
    assert bounded[-1] == ("*The 1 highest-scoring of 2 found neurons are listed: a threshold "
                           "that finds this many separates little on this model.*")


def test_a_study_that_needs_found_neurons_stops_with_a_clear_message(scores):
    """Issue 52: ``found[0]`` on a model where theta finds nothing was an IndexError; a chapter
    now stops with what happened and what to do. Here the planted model at a theta nothing
    reaches."""
    from context_neurons.checks import NoNeuronsFoundError
    from context_neurons.own_domain import first_with_domain

    found = scores.found(1e9)
    assert found == [] or len(found) == 0
    with pytest.raises(NoNeuronsFoundError, match=r"No layer-0 neuron reaches top\[j\] >= theta "
                                                  r"= 1e\+09 on this model, and the gallery needs"):
        N.require_found(found, 1e9, "the gallery")
    assert N.require_found([300], 6.0, "x") == [300]
    assert first_with_domain([5, 300, 1710], {5: None, 300: "war", 1710: "law"}) == 300
    with pytest.raises(NoNeuronsFoundError, match="None of the 2 neurons studied has a domain"):
        first_with_domain([5, 6], {5: None, 6: None})


def test_chapter_6_stops_when_no_studied_neuron_has_a_domain_on_the_planted_model(
    planted, circuit, scores
):
    """Issue 52: chapter 6's capstone takes the first studied neuron with a domain from its
    weights. Its own-domain steps (``held_out_domain_texts``, ``token_densities``,
    ``domain_from_weights``, ``to_dict``), run on the planted model's eight lowest-scoring
    neurons, none a planted context neuron, give none a domain: the check stops saying so. After
    them, planted context neuron 300 has one, and is taken."""
    from context_neurons import evaluation as ev
    from context_neurons.checks import NoNeuronsFoundError
    from context_neurons.own_domain import first_with_domain
    from context_neurons.text.corpora import DOMAINS

    studied = [int(j) for j in scores.top.argsort()[:8]]
    assert not set(studied) & set(planted.truth.context_neurons)
    _, texts = ev.held_out_domain_texts(planted.model.tokenizer, DOMAINS, n=4)
    densities = casestudies.token_densities(circuit, planted.model, [*studied, 300], texts,
                                            scores)
    own_domain = casestudies.domain_from_weights(densities, scores)["domain"].to_dict()
    assert set(own_domain) == {*studied, 300} and own_domain[300] is not None
    with pytest.raises(NoNeuronsFoundError) as stopped:
        first_with_domain(studied, own_domain)
    assert str(stopped.value) == (
        "None of the 8 neurons studied has a domain of its own from its weights (its driving "
        "tokens are not denser in any domain's texts), so there is no domain to predict its "
        "shift on. Chapter 6's own-domain table shows each neuron's densities.")
    assert first_with_domain([*studied, 300], own_domain) == 300


@pytest.mark.parametrize(
    "text, expected",
    [("' the'", "`' the'`"), ("'`'", "``'`'``"), ("`a", "`` `a ``"), ("'a|b'", "`'a\\|b'`")],
)
def test_code_span(text, expected):
    assert gallery.code_span(text, in_table=True) == expected


def test_verdict():
    assert casestudies.verdict(1.2, 0.5) == "confirmed"
    assert casestudies.verdict(-1.2, -0.1) == "confirmed"
    assert casestudies.verdict(0.7, 0.3) == "weak"
    assert casestudies.verdict(0.2, 0.3) == "not shown"
    assert casestudies.verdict(-0.8, 0.4) == "contradicted"


@pytest.fixture(scope="module")
def acts(planted, circuit, scores):
    texts = domain_texts(planted.model.tokenizer, ["bible", "spanish"], n=1, n_ctx=200)
    return casestudies.text_activations(circuit, planted.model, [1710, 1450], texts, scores)


def test_text_activations_match_the_model(planted, circuit, scores, acts):
    from context_neurons import evaluation as ev

    model = planted.model
    assert acts.texts.domains == ["bible", "spanish"] and acts.tokens.shape == (2, 200)
    true = ev.true_pre_activations(model, acts.tokens, [1710, 1450]).cpu()
    assert torch.allclose(acts.true, true, atol=1e-5)
    approx = ev.approximator(circuit, model, [1710, 1450])(acts.tokens).cpu()
    assert torch.allclose(acts.approx, approx, atol=1e-5)
    # marks: the sign of z where |z| >= theta, by a direct computation
    c = N.contributions(circuit, model, [1450], acts.tokens[1])[0]
    z = (c - scores.median[1450]) / scores.spread[1450]
    expected = (z >= N.THETA).long() - (z <= -N.THETA).long()
    expected[acts.tokens[1] == model.tokenizer.bos_token_id] = 0
    assert torch.equal(acts.marks[1, :, 1], expected)
    assert int((acts.marks[1, :, 1] > 0).sum()) > 20  # Spanish text: many Spanish tokens


def test_domain_evidence_arithmetic(acts):
    means = acts.true[:, 100:].mean(1)  # both windows are full length
    assert torch.allclose(acts.window_means(), means, atol=1e-5)
    evidence = casestudies.domain_evidence(acts, [(1450, "spanish"), (1710, "bible")])
    row = evidence.loc[(1450, "spanish")]
    assert row["excess"] == pytest.approx(float(means[1, 1] - means[0, 1]), abs=1e-5)
    assert row["within-text SD"] == pytest.approx(float(acts.true[1, 100:, 1].std()), rel=1e-4)
    assert row["excess / SD"] == pytest.approx(row["excess"] / row["within-text SD"])
    assert row["verdict"] == "confirmed"  # the planted Spanish neuron on Spanish text
    assert acts.best_window(1450) == 1 and acts.best_window(1450, "bible") == 0
    assert acts.texts.others("bible") == [1]
    with pytest.raises(ValueError, match="not computed"):
        acts.column(300)
    with pytest.raises(Exception, match="No texts of domain"):
        casestudies.domain_evidence(acts, [(1450, "code")])


def test_token_densities_equal_the_marks(planted, circuit, scores, acts):
    """Densities counted from the weights and token counts (no model run) equal the densities of
    the marks along the texts (TextActivations), two separate computations."""
    model = planted.model
    densities = casestudies.token_densities(circuit, model, acts.neurons, acts.texts, scores)
    up, down = acts.marks_per_1000()
    assert torch.allclose(densities.up, up.float(), atol=1e-4)
    assert torch.allclose(densities.down, down.float(), atol=1e-4)
    assert casestudies.token_matched_neuron(densities, "spanish") == 1450
    assert casestudies.token_matched_neuron(densities, "bible") == 1710
    assert casestudies.token_matched_neuron(densities, "bible", exclude=[1710]) == 1450
    with pytest.raises(InputError):
        casestudies.token_matched_neuron(densities, "bible", [1710], exclude=[1710])


def _driving_tokens(circuit, model, scores, j, margin=0.5):
    """Neuron j's driving tokens (robust |z| >= theta + margin on its dominant side), from its
    contributions by numpy (not the package's z)."""
    c = N.contributions(circuit, model, [j])[0].double().cpu().numpy()
    keep = scores.vocabulary.cpu().numpy()
    med = np.median(c[keep])
    spread = 1.4826 * np.median(np.abs(c[keep] - med))
    z = (c - med) / spread
    sign = 1.0 if float(scores.sign[j]) > 0 else -1.0
    return z, set(np.flatnonzero((sign * z >= N.THETA + margin) & keep).tolist())


def test_domain_from_weights_by_construction(planted, circuit, scores):
    """Texts built so the answer is known: domain "a" uses an up-driven neuron's up-tokens,
    "b" a down-driven neuron's down-tokens, "c" that neuron's opposite (non-driving) tokens."""
    from context_neurons.text.windows import DomainTexts

    model = planted.model
    found = scores.found(N.THETA)
    up_j = next(j for j in found if float(scores.sign[j]) > 0)
    down_j = next(j for j in found if float(scores.sign[j]) < 0)
    z_up, up_tokens = _driving_tokens(circuit, model, scores, up_j)
    z_down, down_tokens = _driving_tokens(circuit, model, scores, down_j)
    # Tokens near either neuron's threshold are left out of every text (the package counts
    # driving tokens from theta, these sets from theta + 0.5).
    # Superposed topics make neurons share tokens, so each set leaves out what the other neuron
    # may count (the package counts driving tokens from theta, these sets from theta + 0.5).
    near_up = _driving_tokens(circuit, model, scores, up_j, margin=-0.5)[1]
    near_down = _driving_tokens(circuit, model, scores, down_j, margin=-0.5)[1]
    up_tokens, down_tokens = up_tokens - near_down, down_tokens - near_up
    opposite = set(np.flatnonzero(z_down >= N.THETA + 0.5).tolist()) - near_up - near_down
    keep = scores.vocabulary.cpu().numpy()
    neutral = np.flatnonzero((np.abs(z_up) < 1) & (np.abs(z_down) < 1) & keep)[:500].tolist()
    used = up_tokens | down_tokens | opposite | set(neutral)
    # A neuron none of whose driving tokens is in any text: a found one if one qualifies (on the
    # planted model found neurons share tokens through superposed topics), else the best-scoring
    # one of the layer that does.
    by_score = sorted(range(model.cfg.d_mlp), key=lambda j: -float(scores.top[j]))
    none_j = next(
        j for j in [*found, *by_score] if j not in (up_j, down_j)
        and not (_driving_tokens(circuit, model, scores, j, margin=-0.5)[1] & used)
    )
    bos = model.tokenizer.bos_token_id

    def window(special, offset):
        ids = [neutral[(offset + i) % len(neutral)] for i in range(300)]
        special = sorted(special)
        for k, i in enumerate(range(5, 300, 10)):
            ids[i] = special[(offset + k) % len(special)]
        return torch.tensor([bos, *ids])

    sets = {"a": up_tokens, "b": down_tokens, "c": opposite or {neutral[0]}, "d": set(neutral)}
    windows, domains = [], []
    for name, special in sets.items():
        for offset in (0, 7):
            windows.append(window(special, offset))
            domains.append(name)
    texts = DomainTexts(windows, [f"x:{d}{k}" for k, d in enumerate(domains)], domains)
    neurons = [up_j, down_j, none_j]
    densities = casestudies.token_densities(circuit, model, neurons, texts, scores)
    # brute force: 30 special tokens in 300 -> 100 per 1000 tokens of the up-driven neuron
    assert float(densities.up[0, 0]) == pytest.approx(100.0, abs=1e-3)
    table = casestudies.domain_from_weights(densities, scores)
    assert table.loc[up_j, "domain"] == "a" and table.loc[up_j, "side"] == "up"
    assert table.loc[down_j, "domain"] == "b" and table.loc[down_j, "side"] == "down"
    assert table.loc[none_j, "domain"] is None
    assert table.loc[up_j, "density, domain"] == pytest.approx(100.0, abs=1e-3)
    assert table.loc[up_j, "density, others"] == pytest.approx(0.0, abs=1e-6)
    tokens = casestudies.frequent_driving_tokens(circuit, model, up_j, texts, "a", scores, k=2)
    assert len(tokens) == 2 and all(count >= 1 for _, count in tokens)


def test_case_studies_paper_numbers_or_weights(planted, circuit, scores):
    from types import SimpleNamespace

    model = planted.model
    found = scores.found(N.THETA)
    texts = domain_texts(model.tokenizer, ["british", "american", "war", "bible"], n=1, n_ctx=200)
    densities = casestudies.token_densities(circuit, model, found, texts, scores)
    paper = [c.paper_neuron for c in casestudies.PAPER_CASE_STUDIES]
    assert casestudies.uses_paper_neurons(planted)
    table = casestudies.case_studies(planted, densities, found)
    assert list(table["neuron"]) == paper and "construction" in table["chosen by"].iloc[0]
    gpt2 = SimpleNamespace(name="gpt2", is_planted=False, truth=None)
    assert list(casestudies.case_studies(gpt2, densities, found)["neuron"]) == paper
    other = SimpleNamespace(name="trained", is_planted=False, truth=None)
    assert not casestudies.uses_paper_neurons(other)
    chosen = casestudies.case_studies(other, densities, found)
    assert "from the weights" in chosen["chosen by"].iloc[0]
    first = chosen.loc["British spelling", "neuron"]
    second = chosen.loc["British spelling, second", "neuron"]
    assert first == casestudies.token_matched_neuron(densities, "british", found)
    assert second != first
    assert chosen.loc["war", "neuron"] == casestudies.token_matched_neuron(densities, "war", found)


def test_planted_topic_share_uses_the_label_half():
    from types import SimpleNamespace

    from context_neurons.models.planted_plan import DistractorPlan, NeuronPlan

    truth = SimpleNamespace(
        context_neurons={5: NeuronPlan({"x": 1.0, "y": -0.5}, 3.0, "x minus y")},
        distractor_neurons={7: DistractorPlan("glitch-direct", {}, 6.0, "glitch tokens")},
        label_token_ids={"x": [3, 4], "y": [5]},
    )
    assert N.planted_topic_share(truth, 5, [1, 2, 3, 5]) == 0.5  # 3 and 5 are label words
    assert np.isnan(N.planted_topic_share(truth, 6, [1]))
    assert N.planted_topics(truth, 5) == {"x": 1.0, "y": -0.5} and N.planted_topics(truth, 7) == {}
    assert N.planted_description(truth, 5) == "x minus y"
    assert N.planted_description(truth, 7) == "distractor: glitch tokens"
    assert N.planted_description(truth, 8) == "not planted"


def test_precision_recall_rows_have_no_typed_truth(planted, circuit):
    from context_neurons.reproduce.pipeline import discovery_rows

    scores = N.get_scores(circuit, planted.model)
    rows = {row.key: row for row in discovery_rows(scores, circuit, N.THETA, planted.truth)}
    n_planted = len(planted.truth.context_neurons)
    assert rows["neurons_found"].truth == n_planted
    precision, recall = N.precision_recall(scores.found(N.THETA), planted.truth.context_neurons)
    assert rows["neuron_precision"].value == precision and rows["neuron_recall"].value == recall
    for key in ("neuron_precision", "neuron_recall"):
        assert rows[key].truth is None and f"{n_planted}" in rows[key].label
        assert 0.8 <= rows[key].value <= 1.0
    # issue 34: a threshold that finds every neuron is flagged under the table, one that does
    # not is not
    d_mlp = planted.model.cfg.d_mlp
    saturated = [f"{t:g}" for t, n in rows["neurons_found_sweep"].value.items() if n == d_mlp]
    assert rows["neurons_found_sweep"].reading == (
        f"every neuron is found at theta {', '.join(saturated)}" if saturated else "")
    assert rows["neurons_found"].value < d_mlp and rows["neurons_found"].reading == ""


# ----------------------------------------------------------------------------------------------
# The respelling experiment
# ----------------------------------------------------------------------------------------------

SPELLINGS = [
    ("colour", "color"),
    ("centre", "center"),
    ("labour", "labor"),
    ("defence", "defense"),
    ("realisation", "realization"),  # ' realisation' is two tokens, ' realization' one
]
AMERICAN = (
    "The town center was painted in a bright color for the labor festival, and the council "
    "spoke about defense and the harbor. "  # 'harbor' is not in SPELLINGS: left as it is
)
FILLER = "People walked along the river, talked about the weather and bought bread at the market. "
GOOD = FILLER * 12 + AMERICAN + FILLER * 6 + AMERICAN + FILLER * 4


def _documents():
    from context_neurons.text.corpora import Document

    return [
        Document("test", "good", GOOD),
        Document("test", "none", FILLER * 30),
        Document("test", "shifted", FILLER * 20 + "the realization of it. " + AMERICAN),
    ]


def test_length_preserving_pairs(planted):
    tokenizer = planted.model.tokenizer
    kept = rs.length_preserving_pairs(SPELLINGS, tokenizer)
    assert ("realisation", "realization") not in kept and ("colour", "color") in kept
    for british, american in kept:
        for gb, us in (
            (f" {british}", f" {american}"),
            (f" {british.title()}", f" {american.title()}"),
        ):
            assert len(tokenizer.encode(gb)) == len(tokenizer.encode(us))


def test_respelled_texts_are_minimal_pairs(planted):
    from context_neurons.text.topics import swap_spellings

    tokenizer = planted.model.tokenizer
    respelling = rs.respelled_texts(tokenizer, _documents(), SPELLINGS, n=5, min_tokens=100)
    # 'none' has nothing to respell; 'shifted' changes its token count (realization)
    assert respelling.labels == ["test:good"]
    assert (respelling.n_examined, respelling.n_dropped) == (2, 1)
    assert respelling.words == [8]  # center, color, labor, defense, twice
    length = int(respelling.lengths[0])
    american = tokenizer.decode(respelling.american[0, 1:length])
    british = tokenizer.decode(respelling.british[0, 1:length])
    assert american == GOOD and british == swap_spellings(GOOD, SPELLINGS)[0]
    changed = respelling.respelled[0].nonzero().flatten()
    assert len(changed) == 8 and respelling.respelled[0, 0].item() is False
    assert {tokenizer.decode(respelling.american[0, i]) for i in changed} == {
        " center",
        " color",
        " labor",
        " defense",
    }
    assert respelling.per_1000() == pytest.approx(1000 * 8 / (length - 1))
    # with the length-preserving pairs 'shifted' aligns too ('realization' is left as it is)
    aligned = rs.length_preserving_pairs(SPELLINGS, tokenizer)
    both = rs.respelled_texts(tokenizer, _documents(), aligned, n=5, min_tokens=100)
    assert both.labels == ["test:good", "test:shifted"] and both.words == [8, 4]
    # a window that ends after the first paragraph counts only its words
    n_ctx = len(tokenizer.encode(FILLER * 12 + AMERICAN)) + 6
    cut = rs.respelled_texts(tokenizer, _documents()[:1], SPELLINGS, n_ctx=n_ctx)
    assert cut.words == [4] and cut.american.shape == (1, n_ctx)
    with pytest.raises(DataError, match="aligned respelling"):
        rs.respelled_texts(tokenizer, _documents()[1:2], SPELLINGS)
    with pytest.raises(DataError, match="at least one text"):
        rs.respelled_texts(tokenizer, _documents(), SPELLINGS, n=0)


def test_respelling_effect_against_hooks(planted, circuit):
    from context_neurons import evaluation as ev

    model = planted.model
    respelling = rs.respelled_texts(model.tokenizer, _documents(), SPELLINGS, min_tokens=100)
    effect = rs.respelling_effect(circuit, model, [300, 704], respelling, start=20, near=10)
    # the true difference, from the hook, British minus American
    name = "blocks.0.mlp.hook_pre"
    pre = {}
    for version in ("american", "british"):
        _, cache = model.run_with_cache(getattr(respelling, version), names_filter=name)
        pre[version] = cache[name][..., [300, 704]].cpu()
    assert torch.allclose(effect.true, pre["british"] - pre["american"], atol=1e-4)
    approx_fn = ev.approximator(circuit, model, [300, 704])
    approx = approx_fn(respelling.british).cpu() - approx_fn(respelling.american).cpu()
    assert torch.allclose(effect.approx, approx, atol=1e-4)
    assert effect.before_first() == 0.0  # causal attention: nothing differs before the first word
    # the masks, position by position
    masks, respelled = effect.masks(), respelling.respelled[0].tolist()
    for n in range(int(respelling.lengths[0])):
        at = n >= 20 and respelled[n]
        near = n >= 20 and not respelled[n] and any(respelled[max(0, n - 10) : n])
        assert bool(masks["at word"][0, n]) == at and bool(masks["next 10"][0, n]) == near
        assert bool(masks["elsewhere"][0, n]) == (n >= 20 and not at and not near)
    # the summary's arithmetic
    differences, summary = effect.differences(), effect.summary()
    near_true = float(effect.true[0][masks["next 10"][0]][:, 0].mean())
    assert differences.loc[300, ("next 10", "true")] == pytest.approx(near_true, rel=1e-5)
    spread = float(pre["american"][0, 20:, 0].std())
    assert summary.loc[300, "within-text SD"] == pytest.approx(spread, rel=1e-4)
    assert summary.loc[300, "next 10 / SD"] == pytest.approx(near_true / spread, rel=1e-4)
    # planted: 300 reads British minus American spelling; the approximation tracks the truth
    assert summary.loc[300, "verdict"] == "confirmed"
    assert differences.loc[300, ("next 10", "approx")] == pytest.approx(near_true, rel=0.2)
    panel = effect.panel(704, 0)
    assert torch.equal(panel["curves"]["true"], effect.true[0, :, 1])
    with pytest.raises(ValueError, match="near"):
        rs.respelling_effect(circuit, model, [300], respelling, near=0)
    with pytest.raises(DataError, match="start"):
        rs.respelling_effect(circuit, model, [300], respelling, start=10_000)


# ----------------------------------------------------------------------------------------------
# Errors
# ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("bad", [-1, 3072, 10**6, 2.5, "three", None])
def test_bad_neuron_index(planted, circuit, bad):
    with pytest.raises(OutOfRangeError, match="0..3071|integer"):
        check_neuron(planted.model, bad)
    with pytest.raises(OutOfRangeError):
        N.token_table(circuit, planted.model, bad)


def test_bad_neuron_lists(planted, circuit):
    with pytest.raises(OutOfRangeError, match="at least one"):
        N.contributions(circuit, planted.model, [])
    with pytest.raises(OutOfRangeError, match="0..3071"):
        N.contributions(circuit, planted.model, [5, 4000])
    with pytest.raises(ValueError, match="n_clusters"):
        N.sub_latents(circuit, planted.model, 300, k=3, n_clusters=4)
    with pytest.raises(ValueError, match="side"):
        N.top_tokens(circuit, planted.model, 300, side="middle")


# ---- chapter 5's findings, computed in the package (issue 33) ----------------------------------


def _scores_of(top, n_tokens=1000, k=20):
    n = len(top)
    vocabulary = torch.ones(n_tokens + 1, dtype=torch.bool)
    vocabulary[0] = False  # <|endoftext|>
    return N.NeuronScores(top=torch.tensor(top), median=torch.zeros(n), spread=torch.ones(n),
                          sign=torch.ones(n), k=k, vocabulary=vocabulary,
                          extreme_tokens=torch.zeros(n, k, dtype=torch.long))


def test_score_summary_against_the_threshold():
    summary = N.score_summary(_scores_of([1.0, 2.0, 7.0, 30.0]), theta=6.0)
    null = N.gaussian_null_score(1000)
    assert (summary.n_tokens, summary.n_found, summary.n_neurons) == (1000, 2, 4)
    assert summary.null == pytest.approx(null) and summary.median == pytest.approx(2.0)
    assert list(summary.other_nulls) == list(N.OTHER_VOCABULARIES) and not summary.saturated
    assert summary.findings() == [
        f"1000 scored tokens: Gaussian null {null:.2f}; theta = 6 ({6 - null:.2f} above the null)",
        "the null for other vocabularies: 8191 tokens 3.31, 50256 tokens 3.79, 200000 tokens 4.12",
        "neurons found: 2 of 4 (50.0%); median score over all neurons: 2.00",
    ]
    saturated = N.score_summary(_scores_of([6.5, 7.0, 8.0]), theta=6.0)
    assert saturated.saturated and saturated.findings()[-1].startswith(
        "the typical neuron of this model scores above theta")


def _evidence(cases, verdicts, excess, predicted):
    import pandas as pd

    rows = [{"neuron": j, "domain": d, "excess": e, "predicted excess": p, "excess / SD": e / 2,
             "verdict": v, "up-tokens /1000, domain": 10.0 * j, "down-tokens /1000, domain": 1.25}
            for (j, d), v, e, p in zip(cases, verdicts, excess, predicted)]
    return pd.DataFrame(rows).set_index(["neuron", "domain"])


def test_case_verdicts_list_the_cases_and_the_largest_gap():
    cases = [(3, "british"), (3, "american"), (4, "british"), (7, "bible")]
    against = rs.CaseVerdicts(
        _evidence(cases, ["not shown", "weak", "confirmed", "confirmed"], [0.1, -0.8, 2.0, 5.0],
                  [0.2, -0.7, 1.0, 4.9]), (3, 4))
    assert against.verdicts() == {"confirmed": "4 on british, 7 on bible",
                                  "weak": "3 on american", "not shown": "3 on british",
                                  "contradicted": "-"}
    findings = against.findings()
    assert findings[0] == "largest |excess - predicted excess|: 1.00 (neuron 4 on british)"
    assert findings[1] == ("3 on british: not shown with 30.0 up-tokens and 1.2 down-tokens per "
                           "1000 tokens; the respelling experiment tests it at fixed text")
    assert len(findings) == 4 and findings[3].endswith("experiment measures it at fixed text")


def _respelling(n_texts=2, pos=8):
    american = torch.arange(n_texts * pos).reshape(n_texts, pos)
    respelled = torch.zeros(n_texts, pos, dtype=torch.bool)
    respelled[:, 3] = True
    return rs.Respelling(labels=[f"t:{i}" for i in range(n_texts)], american=american,
                         british=american + 100 * respelled, lengths=torch.tensor([pos, pos - 2]),
                         respelled=respelled, words=[1, 1], n_examined=4, n_dropped=1)


def test_respelling_coverage_counts_the_marks(planted, circuit, scores):
    """The coverage of neuron 300's tokens by a respelled text, against the marks recomputed."""
    from context_neurons import printing

    model = planted.model
    respelling = rs.respelled_texts(model.tokenizer, _documents(), SPELLINGS, n=5, min_tokens=100)
    against = rs.CaseVerdicts(_evidence([(300, "british")], ["weak"], [1.0], [1.0]), (300, 704))
    coverage = respelling.coverage(circuit, model, 300, scores, against)
    british = casestudies.token_marks(circuit, model, [300], respelling.british, scores)[..., 0]
    american = casestudies.token_marks(circuit, model, [300], respelling.american, scores)[..., 0]
    changed = respelling.respelled
    n_tokens = int(respelling.lengths[0]) - 1
    assert coverage.up_british == pytest.approx(float((british[changed] > 0).float().mean()))
    assert coverage.down_american == pytest.approx(float((american[changed] < 0).float().mean()))
    assert coverage.up_density == pytest.approx(1000 * int((british > 0).sum()) / n_tokens)
    assert coverage.table_density == 3000.0  # the "british" case's density in the table
    findings = coverage.findings()
    assert findings[:3] == [
        "texts: 1, from 2 examined (1 left out: not aligned)",
        "respelled words per text: 8",
        f"respelled words per 1000 tokens: {1000 * 8 / n_tokens:.1f}",
    ]
    assert findings[3] == (f"respelled tokens: British up-tokens of 300 {coverage.up_british:.0%}, "
                           f"American down-tokens {coverage.down_american:.0%}")
    assert findings[4] == printing.wrapped(
        f"up-tokens of 300 per 1000 tokens: {coverage.up_density:.1f} in the respelled texts, "
        "3000.0 in the british texts of the table")
    assert "\n  " in findings[4]  # a long line, wrapped to the text width


def test_respelling_compared_with_the_texts():
    respelling = _respelling()
    true = torch.zeros(2, 8, 2)
    true[:, 3:] = torch.tensor([2.0, 1.0])  # both rise from the respelled word on
    effect = rs.RespellingEffect(neurons=[3, 4], respelling=respelling, true=true, approx=true,
                                 spread=torch.tensor([1.0, 1.0]), start=1, near=2)
    cases = [(3, "british"), (4, "british")]
    against = rs.CaseVerdicts(_evidence(cases, ["not shown", "weak"], [0.2, 1.2], [0.1, 1.0]),
                              (3, 4))
    comparison = rs.compare_with_texts(against, effect, output_cos=-0.9)
    assert comparison.ratio == pytest.approx(0.5) and comparison.near == 2
    assert comparison.table["respelling"].tolist() == ["confirmed", "confirmed"]
    findings = comparison.findings()
    assert findings[0] == ("neuron 3: british texts not shown (+0.10 SD); respelling confirmed "
                           "(+2.00 SD within 2 tokens of a respelled word, +1.33 SD over the "
                           "whole text)")
    assert findings[2] == "4's effect near respelled words is +0.50 times 3's; cosine of their " \
                          "output weights: -0.900"
    assert findings[3] == "both read British spelling the same way and write opposite outputs"
    apart = rs.compare_with_texts(against, effect, output_cos=0.2).findings()[3]
    assert apart == "both read British spelling the same way; their outputs are not opposite"
    effect.true[..., 1] = 0.0  # the second neuron ignores the spelling
    assert rs.compare_with_texts(against, effect, -0.9).findings()[3] == (
        "a response to the spelling is shown for: [3]")


def test_the_score_exercise_check_accepts_the_definition_and_rejects_plausible_slips(
        planted, circuit, scores):
    """Issue 55: exercise 5.1's check on the planted model, against the solution's recipe; a
    MAD without its factor 1.4826 and contributions over every token (``<|endoftext|>``
    included) are refused."""
    from context_neurons.book.exercise_checks import FAILED, run_check

    model, found = planted.model, scores.found(N.THETA)
    vocabulary = N.scoring_vocabulary(model).nonzero().flatten()
    c = N.contributions(circuit, model, [found[0]], vocabulary)[0]
    median, mad = c.median(), (c - c.median()).abs().median()
    ns = {"circuit": circuit, "model": model, "scores": scores, "found": found, "c": c}
    right = ((c - median) / (1.4826 * mad)).abs().topk(20).values.mean()
    assert run_check("ex-ch05-score", {**ns, "top_j": right}).correct
    no_scale = ((c - median) / mad).abs().topk(20).values.mean()
    every_token = N.contributions(circuit, model, [found[0]])[0]
    for slip in ({"top_j": no_scale}, {"top_j": right, "c": every_token}):
        verdict = run_check("ex-ch05-score", {**ns, **slip})
        assert verdict.status == FAILED and "Not correct yet" in verdict.message, slip
