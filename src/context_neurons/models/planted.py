"""The planted ground-truth model: the offline model of the book's appendix.

GPT-2 Small's weights cannot be downloaded where this book is built and tested, so every chapter
also runs on a model with GPT-2 Small's architecture (two layers) and tokenizer whose structure we
planted and therefore know. It is a test bench for the code, not evidence for the method, and it
carries GPT-2's difficulties for the method (issue 13) so that recovering it is not free. The plans
are in :mod:`.planted_plan`, the topics in :mod:`.planted_topics`, the residual stream's
directions and the weight writers in :mod:`.planted_space`; ``tests/unit/test_planted.py``
measures each difficulty and ``scripts/planted_recovery.py`` what the method recovers over seeds.

Construction (every structured direction is mean-free, so LayerNorm's mean subtraction leaves it
alone):

* **Positions** follow published descriptions of GPT-2's ``W_pos`` (a helix of sinusoid-like
  components; norms that fall over the first ~100 positions, then vary by ~10%; a position 0 of
  about three times the typical norm): 23 frequencies (periods 4096 down to 2.4 positions,
  amplitudes falling with frequency, a slow amplitude modulation), a mean vector, an early-position
  component decaying over ~25 positions and a position-0 component. Token embeddings overlap the
  positional subspace a little (|cos| ~ 0.04), glitch tokens most.
* **Tokens**: a random identity vector (British and American spellings of a word share most of
  it), graded loadings on 13 named topics and 19 unnamed background features packed into 24
  dimensions (so the directions overlap: superposition), a stop-word direction, a BOS direction, a
  glitch direction for eight glitch tokens; log-normal norms. Loadings come from the planting half
  of each word list and from the corpora (:mod:`.planted_topics`).
* **Layer-0 kernels** are fitted sums of the helix's sinusoids (:func:`.planted_plan.fit_kernel`),
  not exponential. The score is multiplied by the LayerNorm scales of both ends, so the kernel
  changes with the destination token and with the position.
* **Content scores**: a query bias against a key direction (random token direction, stop words,
  BOS), times a destination-dependent factor, plus a destination-by-source bilinear term, and a
  position-0 sink. Duplicate-token heads match 32 dimensions of the identity subspace.
* **Layer-0 OV**: the contextual heads copy the topic subspace to a context subspace (each head
  with its own gain and perturbation); head 11 (uniform) and head 3 (previous token) copy it to
  subspaces that overlap the context subspace slightly; two contextual heads carry the glitch
  direction, weakly.
* **Layer-0 MLP**: context neurons (:data:`.planted_plan.CONTEXT_NEURONS`) read a signed mix of
  topic images in the context subspace, with gains from below the discovery threshold to well
  above it, plus noise from the heads' other outputs, the current token's topic and a random
  direction. Distractors (:data:`.planted_plan.DISTRACTOR_NEURONS`) read glitch tokens through the
  direct path, or topics through the non-contextual heads 11 and 3.
* **Layer 1**: look-up heads attend to one topic (else to position 0) and write a direction that a
  neuron reads to predict one token (:data:`.planted_plan.LOOKUPS`); the war look-up is hard.

``variant="shuffled-kernels"`` is the negative control: the six contextual heads take the kernels
of non-contextual heads (previous-token, local, uniform), everything else unchanged; no head is
contextual, so the method should build no circuit and find no neuron.
"""

from __future__ import annotations

import math
from dataclasses import asdict, replace
from pathlib import Path

import torch
from jaxtyping import Float
from torch import Tensor
from torch.nn.functional import normalize
from transformers import GPT2Config, GPT2LMHeadModel

from context_neurons.checks import HEAD_GROUPS
from context_neurons.models.planted_plan import (
    BOS_ID,
    CONTEXT_NEURONS,
    CONTEXT_OUT,
    CORPUS_LOADING,
    D_HEAD,
    D_MLP,
    D_MODEL,
    D_VOCAB,
    DIRECT_READ,
    DISTRACTOR_NEURONS,
    DUPLICATE_DIMS,
    EARLY_DECAY,
    EARLY_NORM,
    GLITCH_LEAK,
    GLITCH_POSITION_OVERLAP,
    GLITCH_TOKENS,
    HARD_CONFUSER_TOPIC,
    HARD_LAYER0_NEURON,
    HARD_RUNNER_UP,
    HARD_SECOND_HEAD,
    HEAD_OUT_DIMENSIONS,
    HELIX_NORM,
    LAYER0_HEADS,
    LOCAL_READ,
    LOOKUP_VALUE,
    LOOKUPS,
    N_BACKGROUND,
    N_CTX,
    N_HEADS,
    NOISE_READ,
    PERIODS,
    POS0_NORM,
    POS_MEAN_NORM,
    POSITION_OVERLAP,
    SEED_LOADING,
    SHUFFLED_KERNELS,
    THE_ID,
    TOKEN_NORM,
    TOKEN_NORM_SD,
    TOPIC_DIMENSIONS,
    VARIANTS,
    DistractorPlan,
    HeadPlan,
    NeuronPlan,
    PlantedLookup,
    PlantedTruth,
    planned_kernel,
)
from context_neurons.models.planted_space import (
    Directions,
    Scales,
    Space,
    empty_heads,
    residual_space,
    scales_of,
    write_attention,
    write_kernel,
    write_mlp,
)
from context_neurons.models.planted_topics import (
    corpus_topic_association,
    topic_word_halves,
)
from context_neurons.text.corpora import corpora_dir
from context_neurons.text.topics import stopword_ids


def _topic_loadings(
    dirs: Directions, planting_ids: dict[str, list[int]], association: Tensor
) -> Float[Tensor, "d_vocab n_all"]:
    """Graded loadings of every token on the named topics (corpus association, planting words
    strongest) and on the background features (random members)."""
    loading = CORPUS_LOADING * association
    for k, ids in enumerate(planting_ids.values()):
        ids = torch.tensor(ids, dtype=torch.long)
        strength = SEED_LOADING * (0.55 + 0.45 * dirs.rand(len(ids)))
        loading[ids, k] = torch.maximum(loading[ids, k], strength)
    background = torch.zeros(D_VOCAB, N_BACKGROUND, dtype=torch.float64)
    for b in range(N_BACKGROUND):
        members = torch.randint(256, BOS_ID, (int(100 + 300 * dirs.rand(1)),), generator=dirs.gen)
        background[members, b] = 0.15 + 0.3 * dirs.rand(len(members))
    return torch.cat([loading, background], dim=1)


def _embeddings(
    dirs: Directions, space: Space, loading: Tensor, halves: dict,
    stop_ids: list[int], glitch_ids: list[int],
) -> tuple[Float[Tensor, "d_vocab d_model"], Float[Tensor, " d_vocab"]]:
    """``W_E`` (float32, as the checkpoint holds it) and the planted token norms."""
    f32 = lambda x: x.float()
    u_topic_all = space.coords @ space.topic_space.T
    structure = f32(loading) @ f32(u_topic_all)
    structure[stop_ids] += 0.3 * f32(space.u_stop)
    # Overlap with the positional subspace: the mean and early-position directions only (a helix
    # component would meet the kernels' large positional queries and act as a strong,
    # position-dependent content weight, which GPT-2's contextual heads do not show).
    overlap_space = torch.stack([space.mu_pos, space.u_early], dim=1)
    overlap = normalize(dirs.randn(D_VOCAB, 2), dim=1)
    overlap = overlap * (POSITION_OVERLAP * (1 + 0.4 * dirs.randn(D_VOCAB, 1)).abs())
    structure.addmm_(f32(overlap), f32(overlap_space.T))
    glitch_pos = normalize(space.mu_pos + 0.3 * space.u_early, dim=0)
    structure[glitch_ids] = f32(0.7 * space.u_glitch + GLITCH_POSITION_OVERLAP * glitch_pos)
    structure_sq = structure.square().sum(1)
    structure.mul_((structure_sq.clamp(max=0.8) / structure_sq.clamp(min=1e-12)).sqrt()[:, None])
    structure_sq = structure_sq.clamp(max=0.8)
    w_e = dirs.rand_dir(D_VOCAB, dtype=torch.float32)  # identity: unit, clear of the structure
    pairs = [
        pair for half in ("planting", "label")
        for pair in zip(halves[half]["british"].values(), halves[half]["american"].values())
    ]
    if pairs:  # a British and an American spelling share most of their identity
        pairs = torch.tensor(pairs, dtype=torch.long)
        w_e[pairs[:, 1]] = normalize(0.75 * w_e[pairs[:, 0]] + 0.66 * w_e[pairs[:, 1]], dim=1)
    token_norm = TOKEN_NORM * torch.exp(TOKEN_NORM_SD * dirs.randn(D_VOCAB))
    token_norm[glitch_ids] = 0.7 * TOKEN_NORM
    token_norm[BOS_ID] = TOKEN_NORM
    w_e.mul_((f32(token_norm) * (1 - structure_sq).sqrt())[:, None])
    w_e.add_(structure.mul_(f32(token_norm)[:, None]))
    w_e[BOS_ID] = f32(token_norm[BOS_ID] * (0.6 * dirs.rand_dir() + 0.8 * space.u_bos))
    return w_e, token_norm


def _positions(dirs: Directions, space: Space) -> tuple[Tensor, Tensor]:
    """``W_pos`` ``[n_ctx, d_model]`` and the helix amplitude of each frequency."""
    positions = torch.arange(N_CTX, dtype=torch.float64)
    amplitude = torch.tensor([(p / 1024) ** 0.35 for p in PERIODS], dtype=torch.float64)
    amplitude = HELIX_NORM * amplitude / amplitude.norm()
    phase = 2 * math.pi * float(dirs.rand(1))
    modulation = 1 + 0.06 * torch.cos(2 * math.pi * positions / 700 + phase)
    omega = torch.tensor([2 * math.pi / p for p in PERIODS], dtype=torch.float64)
    angle = positions[:, None] * omega
    helix_coords = torch.cat([torch.cos(angle), torch.sin(angle)], 1) * amplitude.repeat(2)
    w_pos = (
        POS_MEAN_NORM * space.mu_pos[None]
        + modulation[:, None] * (helix_coords @ space.helix.T)
        + (EARLY_NORM * torch.exp(-positions / EARLY_DECAY))[:, None] * space.u_early[None]
        + 0.15 * dirs.rand_dir(N_CTX)
    )
    w_pos[0] += POS0_NORM * space.u_p0
    return w_pos, amplitude


def _layer0_attention(
    state: dict, dirs: Directions, space: Space, kernel_plans: dict[int, HeadPlan],
    w_e: Tensor, w_pos: Tensor, stop_ids: list[int], scales: Scales,
) -> tuple[Tensor, dict[int, float], dict[int, float]]:
    """Plant layer 0's heads; returns ``W_O`` and, per head, the planned kernel's ``n_eff`` and
    the factor the destination ``' the'`` puts on the content scores (at ``n = 500``)."""
    w_q, w_k, w_v, w_o, b_q = empty_heads()
    s_bar, token_sd = scales.s_bar, scales.token_sd
    stop_mask = torch.zeros(D_VOCAB, dtype=torch.bool)
    stop_mask[stop_ids] = True
    free = dirs.identity_space()
    kernel_n_eff, content_factor_the = {}, {}
    for h, plan in LAYER0_HEADS.items():
        kplan = kernel_plans[h]
        col = write_kernel(w_q, w_k, h, kplan, space, s_bar, scales.amplitude)
        kernel_n_eff[h] = float(1 / (planned_kernel(kplan) ** 2).sum())
        if kplan.position_sink:
            b_q[h, col] = 8.0 * kplan.position_sink / (scales.s_zero * POS0_NORM)
            w_k[h, :, col] = space.u_p0
            col += 1
        # Content: a query bias (times a destination factor) against a key direction.
        key_dir = dirs.rand_dir()
        proj = (w_e @ key_dir.float()).double()
        key_dir = key_dir * plan.content_sd / (s_bar * float(proj[~stop_mask].std()))
        key_dir = key_dir + plan.stopword_weight * space.u_stop / (s_bar * 0.3 * TOKEN_NORM)
        key_dir = key_dir + plan.bos_weight * space.u_bos / (s_bar * 0.8 * TOKEN_NORM)
        b_q[h, col] = 8.0
        w_q[h, :, col] = 8.0 * plan.content_destination_sd / (s_bar * token_sd) * dirs.rand_dir()
        w_k[h, :, col] = key_dir
        the_at_500 = w_e[THE_ID].double() + w_pos[500]
        content_factor_the[h] = float(
            1 + math.sqrt(D_MODEL) / the_at_500.norm() * (the_at_500 @ w_q[h, :, col]) / 8.0)
        col += 1
        # Destination x source content interaction.
        bilinear = math.sqrt(8.0 * 0.35 * plan.content_sd) / (s_bar * token_sd)
        w_q[h, :, col], w_k[h, :, col] = bilinear * dirs.rand_dir(), bilinear * dirs.rand_dir()
        col += 1
        if plan.duplicate_strength:
            match = free @ torch.linalg.qr(dirs.randn(free.shape[1], DUPLICATE_DIMS))[0]
            self_score = float(((w_e @ match.float()) ** 2).sum(1).mean()) * s_bar**2 / 8
            w_q[h, :, col : col + DUPLICATE_DIMS] = match * plan.duplicate_strength / self_score
            w_k[h, :, col : col + DUPLICATE_DIMS] = match
            col += DUPLICATE_DIMS
        n_rest = D_HEAD - col
        if n_rest > 0:  # LN1's output has norm sqrt(768): a unit read gives ~N(0, 1)
            norm = math.sqrt(8 * plan.qk_noise / math.sqrt(n_rest))
            w_q[h, :, col:] = norm * dirs.rand_dir(n_rest).T
            w_k[h, :, col:] = norm * dirs.rand_dir(n_rest).T
        _write_values(w_v, w_o, h, plan, dirs, space)
    write_attention(state, 0, w_q, w_k, w_v, w_o, b_q, dirs)
    state["transformer.h.0.ln_1.weight"] = torch.ones(D_MODEL, dtype=torch.float64)
    state["transformer.h.0.ln_1.bias"] = torch.zeros(D_MODEL, dtype=torch.float64)
    return w_o, kernel_n_eff, content_factor_the


def _write_values(
    w_v: Tensor, w_o: Tensor, h: int, plan: HeadPlan, dirs: Directions, space: Space
) -> None:
    """A layer-0 head's OV: contextual heads copy the topics to the context subspace; heads 11
    and 3 to subspaces that overlap it; the rest write unstructured values."""
    rest = D_HEAD - TOPIC_DIMENSIONS
    if plan.group == "contextual":
        head_gain = 0.8 + 0.4 * float(dirs.rand(1))
        perturbation = 0.25 * dirs.randn(TOPIC_DIMENSIONS, D_MODEL).T / math.sqrt(D_MODEL)
        out = normalize(space.context_space + perturbation, dim=0)
        w_v[h, :, :TOPIC_DIMENSIONS] = 0.12 * head_gain * space.topic_space
        w_o[h, :TOPIC_DIMENSIONS, :] = 0.12 * out.T
        w_v[h, :, TOPIC_DIMENSIONS:] = 0.5 * dirs.rand_dir(rest).T
        w_o[h, TOPIC_DIMENSIONS:, :] = 0.3 * normalize(
            dirs.randn(rest, HEAD_OUT_DIMENSIONS), dim=1) @ space.head_out_space.T
        if h in (2, 9):  # glitch tokens leak into the bag through two heads
            w_v[h, :, TOPIC_DIMENSIONS] = GLITCH_LEAK * space.u_glitch
            w_o[h, TOPIC_DIMENSIONS, :] = 0.3 * space.u_glitch
    elif h in (11, 3):
        target = space.uniform_space if h == 11 else space.previous_space
        w_v[h, :, :TOPIC_DIMENSIONS] = 0.12 * space.topic_space
        w_o[h, :TOPIC_DIMENSIONS, :] = 0.12 * target.T
        w_v[h, :, TOPIC_DIMENSIONS:] = 0.3 * dirs.rand_dir(rest).T
        w_o[h, TOPIC_DIMENSIONS:, :] = 0.15 * dirs.rand_dir(rest)
    else:
        w_v[h] = 0.3 * dirs.rand_dir(D_HEAD).T
        w_o[h] = 0.15 * dirs.rand_dir(D_HEAD)


def _layer0_mlp(
    state: dict, dirs: Directions, space: Space, w_o: Tensor, variant: str
) -> tuple[dict[int, NeuronPlan], dict[int, DistractorPlan]]:
    """Plant layer 0's MLP; returns the context neurons' and the distractors' records."""
    # Planted neurons also read the contextual heads' unstructured outputs (as any neuron reads
    # much that is not its topic): noise in their token contributions, averaged out by the bag.
    bag_noise = torch.cat([w_o[h, TOPIC_DIMENSIONS + 1 :, :] for h, plan in LAYER0_HEADS.items()
                           if plan.group == "contextual"])

    def noise_read() -> Tensor:
        return normalize(dirs.randn(bag_noise.shape[0]) @ bag_noise, dim=0)

    w_in = 1.2 * dirs.random_unit(D_MLP).T  # [d_model, d_mlp]
    b_in = -0.5 + 0.2 * dirs.randn(D_MLP)
    w_out = 0.03 * dirs.random_unit(D_MLP)  # [d_mlp, d_model]
    context_neurons: dict[int, NeuronPlan] = {}
    distractors: dict[int, DistractorPlan] = {}
    for j, plan in CONTEXT_NEURONS.items():
        direct = sum(w * space.u_topic(t) for t, w in plan.topics.items())
        w_in[:, j] = (plan.gain * space.image(space.context_space, plan.topics)
                      + DIRECT_READ * direct + NOISE_READ * noise_read()
                      + LOCAL_READ * dirs.rand_dir())
        b_in[j] = -1.0
        w_out[j] = CONTEXT_OUT * dirs.rand_dir()
        topics = dict(plan.topics)  # the record's own copy: the plans stay as written
        if variant == "standard":
            context_neurons[j] = replace(plan, topics=topics)
        else:
            distractors[j] = DistractorPlan("no contextual head (negative control)", topics,
                                            plan.gain, plan.description)
    w_out[704] = -w_out[300]
    reads = {"glitch-direct": None, "uniform-head": space.uniform_space,
             "previous-token-head": space.previous_space}
    for j, plan in DISTRACTOR_NEURONS.items():
        target = reads[plan.kind]
        read = space.u_glitch if target is None else space.image(target, plan.topics)
        w_in[:, j] = plan.gain * read + NOISE_READ * noise_read() + LOCAL_READ * dirs.rand_dir()
        b_in[j] = -1.0
        w_out[j] = CONTEXT_OUT * dirs.rand_dir()
        distractors[j] = replace(plan, topics=dict(plan.topics))
    write_mlp(state, 0, w_in, b_in, w_out, dirs)
    return context_neurons, distractors


def _layer1(
    state: dict, dirs: Directions, space: Space, tokenizer, w_e: Tensor,
    label_ids: dict[str, list[int]], scales: Scales,
) -> list[PlantedLookup]:
    """Plant layer 1: look-up heads and token-predicting neurons; returns the look-up records."""
    w_q, w_k, w_v, w_o, b_q = empty_heads()
    s_one = scales.s_bar / 1.3  # the residual stream has grown by layer 1
    lookup_heads = {plan.head: (i, plan) for i, plan in enumerate(LOOKUPS)}
    hard = next(i for i, plan in enumerate(LOOKUPS) if plan.hard)
    topic_ref = SEED_LOADING * 0.8 * TOKEN_NORM
    for h in range(N_HEADS):
        reads_topic = h in lookup_heads or h == HARD_SECOND_HEAD
        width = 200.0 if reads_topic else float(torch.exp(dirs.randn(1) * 1.2 + 2.5).item())
        plan1 = HeadPlan("layer 1", "decaying", min(width, 900.0), 0.0)
        col = write_kernel(w_q, w_k, h, plan1, space, s_one, scales.amplitude)
        if reads_topic:
            i, plan = lookup_heads.get(h, (hard, LOOKUPS[hard]))
            strength = 6.0 if not plan.hard else (3.5 if h == plan.head else 3.0)
            key = strength * space.u_topic(plan.topic) / topic_ref
            if plan.hard and h == plan.head:
                key = key + 2.0 * space.u_topic(HARD_CONFUSER_TOPIC) / topic_ref
            b_q[h, col], w_k[h, :, col] = 8.0 / s_one, key
            # The sink when no topic token is present: position 0 (whose norm dwarfs BOS's).
            b_q[h, col + 1] = 8.0 * 5.0 / (scales.s_zero * POS0_NORM)
            w_k[h, :, col + 1] = space.u_p0
            col += 2
            share = 1.0 if not plan.hard else (0.65 if h == plan.head else 0.5)
            w_v[h, :, 0] = LOOKUP_VALUE * space.u_topic(plan.topic)
            w_o[h, 0, :] = share * space.o_lookup[i]
            w_v[h, :, 1:] = 0.2 * dirs.rand_dir(D_HEAD - 1).T
            w_o[h, 1:, :] = 0.1 * dirs.rand_dir(D_HEAD - 1)
        else:
            w_v[h], w_o[h] = 0.3 * dirs.rand_dir(D_HEAD).T, 0.15 * dirs.rand_dir(D_HEAD)
        n_rest = D_HEAD - col
        norm = math.sqrt(8 * 0.3 / math.sqrt(n_rest))
        w_q[h, :, col:] = norm * dirs.rand_dir(n_rest).T
        w_k[h, :, col:] = norm * dirs.rand_dir(n_rest).T
    write_attention(state, 1, w_q, w_k, w_v, w_o, b_q, dirs)
    state["transformer.h.1.ln_1.weight"] = torch.ones(D_MODEL, dtype=torch.float64)
    state["transformer.h.1.ln_1.bias"] = 0.01 * dirs.randn(D_MODEL)
    w_in = 1.0 * dirs.random_unit(D_MLP).T
    b_in = -0.5 + 0.2 * dirs.randn(D_MLP)
    w_out = 0.03 * dirs.random_unit(D_MLP)
    lookups = []
    for i, plan in enumerate(LOOKUPS):
        target_id = _single_token(tokenizer, plan.target)
        w_in[:, plan.neuron] = 0.75 * space.o_lookup[i] + 0.2 * dirs.rand_dir()
        b_in[plan.neuron] = -2.0
        target_dir = normalize(w_e[target_id].double(), dim=0)
        record = PlantedLookup(**asdict(plan), target_id=target_id,
                               topic_token_ids=label_ids[plan.topic])
        if plan.hard:
            runner_dir = normalize(w_e[_single_token(tokenizer, HARD_RUNNER_UP)].double(), dim=0)
            target_dir = normalize(0.8 * target_dir + 0.6 * runner_dir, dim=0)
            # The neuron also reads a layer-0 context neuron's output.
            w_in[:, plan.neuron] += 0.5 * normalize(
                state["transformer.h.0.mlp.c_proj.weight"][HARD_LAYER0_NEURON], dim=0)
            record = replace(record, second_head=HARD_SECOND_HEAD, description=(
                f"hard: head {plan.head} also attends to {HARD_CONFUSER_TOPIC} tokens and shares "
                f"the signal with head {HARD_SECOND_HEAD}; the neuron also reads layer-0 neuron "
                f"{HARD_LAYER0_NEURON} and writes{HARD_RUNNER_UP!r} too"))
        w_out[plan.neuron] = 0.3 * target_dir
        lookups.append(record)
    write_mlp(state, 1, w_in, b_in, w_out, dirs)
    state["transformer.ln_f.weight"] = torch.ones(D_MODEL, dtype=torch.float64)
    state["transformer.ln_f.bias"] = torch.zeros(D_MODEL, dtype=torch.float64)
    return lookups


def _single_token(tokenizer, text: str) -> int:
    ids = tokenizer.encode(text, add_special_tokens=False)
    if len(ids) != 1:
        raise ValueError(f"The planted model needs {text!r} to be one token; got {ids}.")
    return ids[0]


def _head_groups(kernel_plans: dict[int, HeadPlan], variant: str) -> dict[str, list[int]]:
    groups: dict[str, list[int]] = {g: [] for g in HEAD_GROUPS}
    for h, kplan in kernel_plans.items():
        group = LAYER0_HEADS[h].group
        if variant == "shuffled-kernels" and h in SHUFFLED_KERNELS:
            group = "detokenization" if kplan.kernel == "local" else "miscellaneous"
        groups[group].append(h)
    return {g: sorted(v) for g, v in groups.items() if v or g == "contextual"}


def build_planted_state(
    tokenizer, seed: int = 0, corpora: str | Path | None = None, variant: str = "standard"
) -> tuple[dict[str, Tensor], PlantedTruth]:
    """Build the planted model's Hugging Face GPT-2 state dict and its truth record.

    Args:
        tokenizer: GPT-2's tokenizer (for the word lists' token ids).
        seed: the seed every random part is drawn from (any integer).
        corpora: the corpora directory (word lists, topic association); ``None`` finds it, and
            without corpora only the planting words carry topics.
        variant: ``"standard"`` or ``"shuffled-kernels"`` (the negative control, module docstring).

    Returns:
        ``(state_dict, truth)``: tensors named as in ``GPT2LMHeadModel``, and the record.
    """
    if variant not in VARIANTS:
        raise ValueError(f"Unknown planted variant {variant!r}: choose from {VARIANTS}.")
    if corpora is None:
        corpora = corpora_dir(required=False)
    halves, gb_us_source = topic_word_halves(tokenizer, corpora)
    topics = list(halves["planting"])
    stop_ids = stopword_ids(tokenizer)
    glitch_ids = [ids[0] for ids in (tokenizer.encode(t, add_special_tokens=False)
                                     for t in GLITCH_TOKENS) if len(ids) == 1]
    planting_ids = {t: sorted(set(halves["planting"][t].values())) for t in topics}
    label_ids = {t: sorted(set(halves["label"][t].values())) for t in topics}
    association, association_stats = corpus_topic_association(
        tokenizer, corpora, planting_ids, exclude=[BOS_ID, *glitch_ids, *stop_ids])

    dirs = Directions(seed)
    space = residual_space(dirs, topics)
    loading = _topic_loadings(dirs, planting_ids, association)
    w_e, token_norm = _embeddings(dirs, space, loading, halves, stop_ids, glitch_ids)
    w_pos, amplitude = _positions(dirs, space)
    scales = scales_of(w_pos, token_norm, amplitude)
    state: dict[str, Tensor] = {"transformer.wte.weight": w_e, "transformer.wpe.weight": w_pos}
    kernel_plans = dict(LAYER0_HEADS)
    if variant == "shuffled-kernels":
        kernel_plans = {h: LAYER0_HEADS[SHUFFLED_KERNELS.get(h, h)] for h in LAYER0_HEADS}
    w_o, kernel_n_eff, content_factor_the = _layer0_attention(
        state, dirs, space, kernel_plans, w_e, w_pos, stop_ids, scales)
    context_neurons, distractors = _layer0_mlp(state, dirs, space, w_o, variant)
    lookups = _layer1(state, dirs, space, tokenizer, w_e, label_ids, scales)

    groups = _head_groups(kernel_plans, variant)
    norms = w_pos.norm(dim=1)
    truth = PlantedTruth(
        seed=int(seed),
        head_groups=groups,
        kernel_shapes={h: kernel_plans[h].kernel for h in LAYER0_HEADS},
        kernel_widths={h: kernel_plans[h].width for h in LAYER0_HEADS},
        topic_words={t: sorted(halves["label"][t]) for t in topics},
        topic_token_ids=label_ids,
        context_neurons=context_neurons,
        lookups=lookups,
        stopword_ids=stop_ids,
        gb_us_source=gb_us_source,
        layer0_heads={
            h: replace(kernel_plans[h], group=next(g for g, m in groups.items() if h in m))
            for h in LAYER0_HEADS
        },
        identity_dimensions=dirs.identity_space().shape[1],
        variant=variant,
        planting_words={t: sorted(halves["planting"][t]) for t in topics},
        planting_token_ids=planting_ids,
        kernel_n_eff=kernel_n_eff,
        content_factor_the=content_factor_the,
        distractor_neurons=distractors,
        glitch_token_ids=glitch_ids,
        corpus_association=association_stats,
        position_profile={
            "norm_0": float(norms[0]), "norm_1": float(norms[1]), "norm_50": float(norms[50]),
            "norm_100_1023_min": float(norms[100:].min()),
            "norm_100_1023_max": float(norms[100:].max()),
            "token_norm_median": float(token_norm.median()),
        },
    )
    return {k: v.float() for k, v in state.items()}, truth


def build_planted_gpt2(
    tokenizer, seed: int = 0, corpora: str | Path | None = None, variant: str = "standard"
) -> tuple[GPT2LMHeadModel, PlantedTruth]:
    """The planted model as a Hugging Face ``GPT2LMHeadModel`` (GPT-2 Small config, 2 layers)."""
    state, truth = build_planted_state(tokenizer, seed=seed, corpora=corpora, variant=variant)
    return planted_gpt2(state), truth


def planted_gpt2(state: dict[str, Tensor]) -> GPT2LMHeadModel:
    """The Hugging Face model of a :func:`build_planted_state` state dict."""
    config = GPT2Config(n_layer=2, n_embd=D_MODEL, n_head=N_HEADS, n_positions=N_CTX,
                        vocab_size=D_VOCAB, tie_word_embeddings=True)
    with torch.device("meta"):
        model = GPT2LMHeadModel(config)
    model.load_state_dict(state, strict=False, assign=True)
    model.tie_weights()
    return model.eval()
