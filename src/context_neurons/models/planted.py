"""The planted ground-truth model. This module builds the offline model of the book's appendix.

GPT-2 Small's weights cannot be downloaded where this book is built and tested, so every chapter
also runs on a model with GPT-2 Small's architecture and tokenizer whose structure we planted and
therefore know. The method must recover it: that is the end-to-end test.

Construction (all directions orthonormal and orthogonal to the all-ones vector, so LayerNorm's
mean subtraction leaves them alone; ``ell(x) = LN(x) ~ s(x) * x`` with ``s = sqrt(768)/|x|``):

* **Positions**: ``W_pos[i] = u_const + r(i) u_ramp + sqrt(1 - r(i)^2) u_comp + noise`` with
  ``r(i) = (i - 511.5)/512``: constant norm, and a coordinate linear in ``i``.
* **Tokens**: a random unit "identity" vector in a free subspace, plus a loading on a topic
  direction ``u_k`` for every word list the token belongs to, a stop-word direction and, for
  ``<|endoftext|>``, a BOS direction; norms ``3 (1 + 0.04 eps)``.
* **Layer-0 positional kernels**: ``W_QK = A_h (u_const u_ramp^T - u_ramp u_const^T)`` gives the
  score ``beta_h s_n s_i / s^2 * (i - n)``, an exponentially decaying kernel of width
  ``1/beta_h`` that vanishes at ``i = n`` whatever the tokens. Widths per head: :data:`LAYER0_HEADS`.
* **Content scores**: a constant query against a key direction mixing a random token direction
  (standard deviation ``content_sd``), the stop-word direction (head 6 down-weights stop words,
  head 8 up-weights them) and the BOS direction (an attention sink early in the text).
  Duplicate-token heads match 60 dimensions of the identity subspace of query and key.
* **Contextual heads' OV**: each copies the topic directions ``u_k`` to context directions ``m_k``
  (plus a random part); together the six heads write a decaying bag of topics.
* **Layer-0 MLP**: planted context neurons read ``m_k`` (:data:`CONTEXT_NEURONS`; 704 reads what
  300 reads and writes the opposite output); all other neurons are random.
* **Layer 1**: look-up heads attend to the tokens of one topic (else to BOS) and copy the topic
  to a direction ``o_l``; a look-up neuron reads ``o_l`` and writes the unembedding of one token
  (:data:`LOOKUPS`). Everything else is random.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch
from transformers import GPT2Config, GPT2LMHeadModel

from context_neurons.text.corpora import corpora_dir
from context_neurons.text.topics import (
    BUILTIN_TOPICS,
    gb_us_token_lists,
    read_gb_us_pairs,
    single_token_variants,
    stopword_ids,
)

#: Negative controls the planted model can be built as (besides ``"standard"``).
VARIANTS = ("standard",)

D_MODEL, N_HEADS, D_HEAD, D_MLP, N_CTX, D_VOCAB = 768, 12, 64, 3072, 1024, 50257
BOS_ID = 50256


@dataclass(frozen=True)
class HeadPlan:
    """What one planted layer-0 head does."""

    group: str  # contextual | detokenization | duplicate | miscellaneous
    kernel: str  # slowly decaying | local | uniform
    width: float  # kernel decay length in tokens (score slope 1/width per token)
    content_sd: float  # standard deviation of the key-side content score
    stopword_weight: float = 0.0  # added to the score of stop words
    bos_weight: float = 0.0  # added to the score of <|endoftext|>
    duplicate_strength: float = 0.0  # score of a token attending to a copy of itself
    qk_noise: float = 0.1  # standard deviation of a random query-dependent score part


LAYER0_HEADS: dict[int, HeadPlan] = {
    0: HeadPlan("contextual", "slowly decaying", 25.0, 0.25, bos_weight=4.0),
    1: HeadPlan("duplicate", "uniform", 2000.0, 0.3, duplicate_strength=9.0, qk_noise=0.2),
    2: HeadPlan("contextual", "slowly decaying", 40.0, 0.25, bos_weight=4.0),
    3: HeadPlan("detokenization", "local", 0.6, 1.0, qk_noise=0.5),
    4: HeadPlan("detokenization", "local", 1.2, 1.0, qk_noise=0.5),
    5: HeadPlan("duplicate", "local", 15.0, 0.3, duplicate_strength=9.0, qk_noise=0.2),
    6: HeadPlan("contextual", "slowly decaying", 30.0, 0.25, stopword_weight=-0.8, bos_weight=4.0),
    7: HeadPlan("detokenization", "local", 2.0, 1.0, qk_noise=0.5),
    8: HeadPlan("contextual", "slowly decaying", 35.0, 0.25, stopword_weight=0.8, bos_weight=4.0),
    9: HeadPlan("contextual", "slowly decaying", 50.0, 0.25, bos_weight=4.0),
    10: HeadPlan("contextual", "slowly decaying", 20.0, 0.25, bos_weight=4.0),
    11: HeadPlan("miscellaneous", "uniform", 600.0, 0.3, bos_weight=2.0, qk_noise=0.2),
}


@dataclass(frozen=True)
class NeuronPlan:
    """A planted layer-0 context neuron: reads a signed mix of topics through the context heads."""

    topics: dict[str, float]
    gain: float
    description: str


# Named neurons follow the paper's case studies; the rest give discovery a population to find.
CONTEXT_NEURONS: dict[int, NeuronPlan] = {
    300: NeuronPlan({"british": 1.0, "american": -1.0}, 22.0, "British minus American spelling"),
    704: NeuronPlan({"british": 1.0, "american": -1.0}, 18.0, "British context, output opposite 300"),
    1621: NeuronPlan({"war": 1.0, "modern": -0.6}, 9.0, "19th-20th century war (minus modern)"),
    1710: NeuronPlan({"religion": 1.0, "bible_archaic": 0.8}, 8.0, "religious text, Bible"),
    57: NeuronPlan({"medicine": 1.0}, 8.0, "medical studies"),
    2390: NeuronPlan({"medicine": 0.7}, 5.0, "medical (weaker)"),
    488: NeuronPlan({"law": 1.0}, 8.0, "legal text"),
    1301: NeuronPlan({"law": 0.8, "medicine": 0.8}, 6.0, "legal or medical (two sub-latents)"),
    912: NeuronPlan({"code": 1.0}, 8.0, "programming"),
    2781: NeuronPlan({"code": -0.8}, 6.0, "not programming"),
    1450: NeuronPlan({"spanish": 1.0}, 7.0, "Spanish"),
    2048: NeuronPlan({"spanish": -0.7}, 5.0, "not Spanish"),
    640: NeuronPlan({"astronomy": 1.0}, 8.0, "astronomy"),
    2203: NeuronPlan({"astronomy": 0.6, "religion": 0.6}, 6.0, "astronomy or religion"),
    1099: NeuronPlan({"climate": 1.0}, 9.0, "climate change"),
    2870: NeuronPlan({"pokemon": 1.0}, 9.0, "Pokemon"),
    155: NeuronPlan({"war": 0.8}, 6.0, "war (second neuron)"),
    3001: NeuronPlan({"religion": 0.5, "bible_archaic": 1.0}, 7.0, "archaic Bible English"),
    1888: NeuronPlan({"modern": 1.0}, 7.0, "21st century technology"),
    2567: NeuronPlan({"british": 0.8, "american": -0.8, "law": 0.4}, 10.0, "British legal text"),
}


@dataclass(frozen=True)
class LookupPlan:
    """A planted context look-up: a layer-1 head attends to a topic, a neuron predicts a token."""

    layer: int
    head: int
    neuron: int
    topic: str
    target: str


LOOKUPS: tuple[LookupPlan, ...] = (
    LookupPlan(1, 4, 1200, "religion", " Lord"),
    LookupPlan(1, 9, 2400, "war", " troops"),
    LookupPlan(1, 2, 777, "astronomy", " telescope"),
    LookupPlan(1, 7, 3000, "spanish", " que"),
)


@dataclass
class PlantedTruth:
    """Everything planted in the offline model, for checking what the method recovers."""

    seed: int
    head_groups: dict[str, list[int]]
    kernel_shapes: dict[int, str]
    kernel_widths: dict[int, float]
    topic_words: dict[str, list[str]]
    topic_token_ids: dict[str, list[int]]
    context_neurons: dict[int, dict]
    lookups: list[dict]
    stopword_ids: list[int]
    gb_us_source: str
    layer0_heads: dict[int, dict] = field(default_factory=dict)  # asdict(HeadPlan) per head
    identity_dimensions: int = 0  # dimension of the subspace of token identities

    @property
    def contextual_heads(self) -> list[int]:
        return self.head_groups["contextual"]

    def to_dict(self) -> dict:
        return asdict(self)


def _orthonormal_directions(gen: torch.Generator) -> torch.Tensor:
    """A ``[768, 767]`` orthonormal basis of the subspace orthogonal to the all-ones vector."""
    matrix = torch.randn(D_MODEL, D_MODEL, generator=gen, dtype=torch.float64)
    matrix[:, 0] = 1.0
    q, _ = torch.linalg.qr(matrix)
    return q[:, 1:]


def _topic_tokens(tokenizer, corpora: Path | None) -> tuple[dict, dict, str]:
    pairs, source = read_gb_us_pairs(corpora / "wordlists_en_gb_us" if corpora else None)
    british, american = gb_us_token_lists(pairs, tokenizer)
    words = {"british": sorted(british), "american": sorted(american)}
    ids = {"british": sorted(set(british.values())), "american": sorted(set(american.values()))}
    for topic, topic_words in BUILTIN_TOPICS.items():
        found = single_token_variants(topic_words, tokenizer)
        words[topic] = sorted(found)
        ids[topic] = sorted(set(found.values()))
    return words, ids, source


def build_planted_state(
    tokenizer, seed: int = 0, corpora=None, variant: str = "standard"
) -> tuple[dict, PlantedTruth]:
    """Build the planted model's Hugging Face GPT-2 state dict and its truth record.

    Args:
        tokenizer: GPT-2's tokenizer (for the word lists' token ids).
        seed: the seed every random part is drawn from.
        corpora: the corpora directory (for ``wordlists_en_gb_us``); ``None`` finds it.

    Returns:
        ``(state_dict, truth)``: tensors named as in ``GPT2LMHeadModel``, and the record.
    """
    if variant not in VARIANTS:
        raise ValueError(f"Unknown planted variant {variant!r}: choose from {VARIANTS}.")
    if corpora is None:
        corpora = corpora_dir(required=False)
    gen = torch.Generator().manual_seed(seed)
    randn = lambda *shape: torch.randn(*shape, generator=gen, dtype=torch.float64)  # noqa: E731

    topic_words, topic_ids, gb_us_source = _topic_tokens(tokenizer, corpora)
    topics = list(topic_words)
    stop_ids = stopword_ids(tokenizer)

    # --- directions -------------------------------------------------------------------------
    basis = _orthonormal_directions(gen)
    cols = iter(range(basis.shape[1]))
    take = lambda: basis[:, next(cols)]  # noqa: E731
    u_const, u_ramp, u_comp, u_bos, u_stop = take(), take(), take(), take(), take()
    u_topic = {k: take() for k in topics}
    m_topic = {k: take() for k in topics}
    o_lookup = [take() for _ in LOOKUPS]
    free = basis[:, next(cols) :]  # the rest: token identity, random reads and writes
    n_free = free.shape[1]
    rand_dir = lambda *lead: torch.nn.functional.normalize(  # noqa: E731
        randn(*lead, n_free) @ free.T, dim=-1
    )

    # --- embeddings -------------------------------------------------------------------------
    topic_loading = torch.zeros(D_VOCAB, len(topics), dtype=torch.float64)
    for k, topic in enumerate(topics):
        topic_loading[topic_ids[topic], k] = 0.45
    stop_loading = torch.zeros(D_VOCAB, dtype=torch.float64)
    stop_loading[stop_ids] = 0.3
    structured = topic_loading @ torch.stack([u_topic[k] for k in topics]) + stop_loading[
        :, None
    ] * u_stop
    structured_sq = (topic_loading**2).sum(1) + stop_loading**2
    scale = structured_sq.clamp(max=0.8)
    structured = structured * torch.sqrt(scale / structured_sq.clamp(min=1e-12))[:, None]
    identity = rand_dir(D_VOCAB)
    w_e = torch.sqrt(1 - scale)[:, None] * identity + structured
    w_e[BOS_ID] = 0.6 * identity[BOS_ID] + 0.8 * u_bos
    token_norm = 3.0 * (1 + 0.04 * randn(D_VOCAB))
    w_e = w_e * token_norm[:, None]

    positions = torch.arange(N_CTX, dtype=torch.float64)
    ramp = (positions - (N_CTX - 1) / 2) / (N_CTX / 2)
    w_pos = (
        u_const[None]
        + ramp[:, None] * u_ramp[None]
        + torch.sqrt(1 - ramp**2)[:, None] * u_comp[None]
        + 0.1 * rand_dir(N_CTX)
    )

    # Mean LayerNorm scale s = sqrt(d)/|x| of a token at a typical position.
    s_bar = math.sqrt(D_MODEL) / torch.sqrt((w_e**2).sum(1).mean() + (w_pos[512] ** 2).sum())
    s_bar = float(s_bar)
    ones = lambda: 1 + 0.05 * randn(D_MODEL)  # noqa: E731
    small = lambda: 0.01 * randn(D_MODEL)  # noqa: E731
    state: dict[str, torch.Tensor] = {"transformer.wte.weight": w_e, "transformer.wpe.weight": w_pos}

    def random_qk_pair(noise: float, n_dims: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Random query/key reads whose product has score standard deviation ``noise``."""
        norm = math.sqrt(8 * noise / math.sqrt(n_dims))
        # ell has norm sqrt(d); a random unit read gives ell.w ~ N(0, 1), so scale by ``norm``.
        return norm * rand_dir(n_dims).T, norm * rand_dir(n_dims).T

    # --- layer 0 attention ------------------------------------------------------------------
    w_q = torch.zeros(N_HEADS, D_MODEL, D_HEAD, dtype=torch.float64)
    w_k = torch.zeros_like(w_q)
    w_v = torch.zeros_like(w_q)
    w_o = torch.zeros(N_HEADS, D_HEAD, D_MODEL, dtype=torch.float64)
    stop_mask = stop_loading > 0
    topic_matrix = torch.stack([u_topic[k] for k in topics], dim=1)  # [d_model, n_topics]
    context_out = torch.stack([m_topic[k] for k in topics], dim=0)  # [n_topics, d_model]
    n_topics = len(topics)
    for h, plan in LAYER0_HEADS.items():
        slope = 1.0 / plan.width
        amplitude = slope * 8 * (N_CTX / 2) / s_bar**2
        w_q[h, :, 0], w_k[h, :, 0] = amplitude * u_const, u_ramp
        w_q[h, :, 1], w_k[h, :, 1] = -amplitude * u_ramp, u_const
        # Content: a constant query (8/s^2 along u_const) against a key direction.
        key_dir = rand_dir()
        proj = w_e @ key_dir
        key_dir = key_dir * plan.content_sd / proj[~stop_mask].std()
        key_dir = key_dir + plan.stopword_weight * u_stop / (0.3 * 3.0)
        key_dir = key_dir + plan.bos_weight * u_bos / (0.8 * 3.0)
        w_q[h, :, 2], w_k[h, :, 2] = 8 / s_bar**2 * u_const, key_dir
        first_free = 3
        if plan.duplicate_strength:
            sub = torch.linalg.qr(randn(n_free, 60))[0]
            match = free @ sub  # [d_model, 60]
            self_score = ((w_e @ match) ** 2).sum(1).mean() * s_bar**2 / 8
            w_q[h, :, 3:63] = match * plan.duplicate_strength / self_score
            w_k[h, :, 3:63] = match
            first_free = 63
        qn, kn = random_qk_pair(plan.qk_noise, D_HEAD - first_free)
        w_q[h, :, first_free:], w_k[h, :, first_free:] = qn, kn
        if plan.group == "contextual":
            w_v[h, :, :n_topics] = 0.12 * topic_matrix
            w_o[h, :n_topics, :] = 0.12 * context_out
            w_v[h, :, n_topics:] = 0.5 * rand_dir(D_HEAD - n_topics).T
            w_o[h, n_topics:, :] = 0.3 * rand_dir(D_HEAD - n_topics)
        else:
            w_v[h] = 0.3 * rand_dir(D_HEAD).T
            w_o[h] = 0.15 * rand_dir(D_HEAD)
    _write_attention(state, 0, w_q, w_k, w_v, w_o, randn)
    # LN1's weight must be exactly uniform: noise would leak the large identity component into
    # the positional read-outs, whose amplitudes are large for the local heads.
    state["transformer.h.0.ln_1.weight"] = torch.ones(D_MODEL, dtype=torch.float64)
    state["transformer.h.0.ln_1.bias"] = small()

    # --- layer 0 MLP ------------------------------------------------------------------------
    w_in = 1.2 * rand_dir(D_MLP).T  # [d_model, d_mlp]
    b_in = -0.5 + 0.2 * randn(D_MLP)
    w_out = 0.03 * rand_dir(D_MLP)  # [d_mlp, d_model]
    context_neurons: dict[int, dict] = {}
    for j, plan in CONTEXT_NEURONS.items():
        read = sum(w * m_topic[k] for k, w in plan.topics.items())
        w_in[:, j] = plan.gain * read + 0.5 * rand_dir()
        b_in[j] = -1.0
        w_out[j] = 0.5 * rand_dir()
        context_neurons[j] = {"topics": dict(plan.topics), "gain": plan.gain,
                              "description": plan.description}
    w_out[704] = -w_out[300]
    state["transformer.h.0.mlp.c_fc.weight"], state["transformer.h.0.mlp.c_fc.bias"] = w_in, b_in
    state["transformer.h.0.mlp.c_proj.weight"] = w_out
    state["transformer.h.0.mlp.c_proj.bias"] = small()
    state["transformer.h.0.ln_2.weight"], state["transformer.h.0.ln_2.bias"] = ones(), small()

    # --- layer 1: look-up heads and token-predicting neurons --------------------------------
    w_q = torch.zeros(N_HEADS, D_MODEL, D_HEAD, dtype=torch.float64)
    w_k, w_v = torch.zeros_like(w_q), torch.zeros_like(w_q)
    w_o = torch.zeros(N_HEADS, D_HEAD, D_MODEL, dtype=torch.float64)
    lookup_heads = {plan.head: (plan, o_lookup[i]) for i, plan in enumerate(LOOKUPS)}
    for h in range(N_HEADS):
        width = 200.0 if h in lookup_heads else float(torch.exp(randn(1) * 1.5 + 2.5).item())
        amplitude = 8 * (N_CTX / 2) / (width * s_bar**2)
        w_q[h, :, 0], w_k[h, :, 0] = amplitude * u_const, u_ramp
        w_q[h, :, 1], w_k[h, :, 1] = -amplitude * u_ramp, u_const
        if h in lookup_heads:
            plan, out_dir = lookup_heads[h]
            # Topic tokens score +6, BOS +3 (the sink when no topic token is present).
            w_q[h, :, 2] = 8 / s_bar**2 * u_const
            w_k[h, :, 2] = 6.0 * u_topic[plan.topic] / (0.45 * 3.0) + 3.0 * u_bos / (0.8 * 3.0)
            w_v[h, :, 0], w_o[h, 0, :] = 0.09 * u_topic[plan.topic], 1.0 * out_dir
            w_v[h, :, 1:], w_o[h, 1:, :] = 0.2 * rand_dir(D_HEAD - 1).T, 0.1 * rand_dir(D_HEAD - 1)
        else:
            w_v[h], w_o[h] = 0.3 * rand_dir(D_HEAD).T, 0.15 * rand_dir(D_HEAD)
        qn, kn = random_qk_pair(0.3, D_HEAD - 3)
        w_q[h, :, 3:], w_k[h, :, 3:] = qn, kn
    _write_attention(state, 1, w_q, w_k, w_v, w_o, randn)
    state["transformer.h.1.ln_1.weight"] = torch.ones(D_MODEL, dtype=torch.float64)
    state["transformer.h.1.ln_1.bias"] = small()
    w_in = 1.0 * rand_dir(D_MLP).T
    b_in = -0.5 + 0.2 * randn(D_MLP)
    w_out = 0.03 * rand_dir(D_MLP)
    lookups = []
    for i, plan in enumerate(LOOKUPS):
        target_ids = tokenizer.encode(plan.target, add_special_tokens=False)
        assert len(target_ids) == 1, plan.target
        w_in[:, plan.neuron] = 0.75 * o_lookup[i] + 0.2 * rand_dir()
        b_in[plan.neuron] = -2.0
        w_out[plan.neuron] = 0.3 * torch.nn.functional.normalize(w_e[target_ids[0]], dim=0)
        lookups.append({**asdict(plan), "target_id": target_ids[0],
                        "topic_token_ids": topic_ids[plan.topic]})
    state["transformer.h.1.mlp.c_fc.weight"], state["transformer.h.1.mlp.c_fc.bias"] = w_in, b_in
    state["transformer.h.1.mlp.c_proj.weight"] = w_out
    state["transformer.h.1.mlp.c_proj.bias"] = small()
    state["transformer.h.1.ln_2.weight"], state["transformer.h.1.ln_2.bias"] = ones(), small()
    state["transformer.ln_f.weight"] = torch.ones(D_MODEL, dtype=torch.float64)
    state["transformer.ln_f.bias"] = torch.zeros(D_MODEL, dtype=torch.float64)

    groups: dict[str, list[int]] = {}
    for h, plan in LAYER0_HEADS.items():
        groups.setdefault(plan.group, []).append(h)
    truth = PlantedTruth(
        seed=seed,
        head_groups=groups,
        kernel_shapes={h: p.kernel for h, p in LAYER0_HEADS.items()},
        kernel_widths={h: p.width for h, p in LAYER0_HEADS.items()},
        topic_words=topic_words,
        topic_token_ids=topic_ids,
        context_neurons=context_neurons,
        lookups=lookups,
        stopword_ids=stop_ids,
        gb_us_source=gb_us_source,
        layer0_heads={h: asdict(p) for h, p in LAYER0_HEADS.items()},
        identity_dimensions=n_free,
    )
    return {k: v.float() for k, v in state.items()}, truth


def _write_attention(state, layer, w_q, w_k, w_v, w_o, randn) -> None:
    """Pack per-head matrices into GPT-2's fused ``c_attn`` / ``c_proj`` (Conv1D: x @ W)."""
    pack = lambda w: w.permute(1, 0, 2).reshape(D_MODEL, N_HEADS * D_HEAD)  # noqa: E731
    prefix = f"transformer.h.{layer}.attn"
    state[f"{prefix}.c_attn.weight"] = torch.cat([pack(w_q), pack(w_k), pack(w_v)], dim=1)
    state[f"{prefix}.c_attn.bias"] = 0.01 * randn(3 * D_MODEL)
    state[f"{prefix}.c_proj.weight"] = w_o.reshape(N_HEADS * D_HEAD, D_MODEL)
    state[f"{prefix}.c_proj.bias"] = 0.01 * randn(D_MODEL)


def build_planted_gpt2(tokenizer, seed: int = 0, corpora=None, variant: str = "standard"):
    """The planted model as a Hugging Face ``GPT2LMHeadModel`` (GPT-2 Small config, 2 layers)."""
    state, truth = build_planted_state(tokenizer, seed=seed, corpora=corpora, variant=variant)
    config = GPT2Config(n_layer=2, n_embd=D_MODEL, n_head=N_HEADS, n_positions=N_CTX,
                        vocab_size=D_VOCAB, tie_word_embeddings=True)
    with torch.device("meta"):
        hf_model = GPT2LMHeadModel(config)
    hf_model.load_state_dict(state, strict=False, assign=True)
    hf_model.tie_weights()
    hf_model.eval()
    return hf_model, truth
