"""What the planted model plants: its sizes, head, neuron and look-up plans, kernels, and the
record of the truth (:class:`PlantedTruth`). :mod:`.planted` builds the weights from these plans;
:mod:`.planted_topics` gives the topic loadings.

A planted head's positional kernel is a sum of the position helix's sinusoids, fitted by ridge
regression to a target log-kernel (:func:`fit_kernel`): decaying with a stretched exponent and a
slower tail for the contextual heads (not exponential), peaked at ``i = n - 1`` for the
previous-token heads.
"""

from __future__ import annotations

import functools
import math
from dataclasses import asdict, dataclass, field

import torch

D_MODEL, N_HEADS, D_HEAD, D_MLP, N_CTX, D_VOCAB = 768, 12, 64, 3072, 1024, 50257
BOS_ID = 50256
THE_ID = 262  # ' the', the circuit's destination token
#: ``"standard"``, and the negative control (module docstring of :mod:`.planted`).
VARIANTS = ("standard", "shuffled-kernels")

# ----------------------------------------------------------------------------------------------
# Positions
# ----------------------------------------------------------------------------------------------

#: Helix periods (positions): low frequencies carry the slowly decaying kernels, all of them the
#: previous-token kernels.
LOW_PERIODS: tuple[float, ...] = (4096.0, 2560.0, 1792.0, 1280.0, 896.0, 640.0, 448.0, 320.0, 224.0,
                                  160.0, 112.0, 80.0)
HIGH_PERIODS: tuple[float, ...] = (56.0, 40.0, 28.0, 20.0, 14.0, 10.0, 7.0, 5.0, 4.0, 3.0, 2.4)
PERIODS = LOW_PERIODS + HIGH_PERIODS
#: Norm of the helix part, of the mean position vector, of the early-position bump at i = 0 and of
#: the extra position-0 component (the token norm median is TOKEN_NORM).
HELIX_NORM, POS_MEAN_NORM, EARLY_NORM, EARLY_DECAY, POS0_NORM = 2.6, 1.4, 3.0, 25.0, 8.0
TOKEN_NORM, TOKEN_NORM_SD = 3.4, 0.18  # log-normal token norms
DUPLICATE_DIMS = 32  # identity dimensions a duplicate-token head compares
#: A token's component in the positional subspace (mean and early-position directions, which no
#: kernel reads; norm relative to the token's), and a glitch token's.
POSITION_OVERLAP, GLITCH_POSITION_OVERLAP = 0.04, 0.35

# ----------------------------------------------------------------------------------------------
# Layer-0 heads
# ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class HeadPlan:
    """What one planted layer-0 head does.

    ``width`` is the decay length ``w`` of the target log-kernel ``-(d / w)^stretch``
    (``d = n - i``; with a slower exponential of weight ``tail``) for decaying kernels; for
    previous-token heads it is the peak's distance (1) and ``peak`` gives the target log-kernel
    at distances 0..3 (0 at the peak). The fitted kernel is smoother
    than the target: :func:`planned_kernel` is what was actually planted.
    """

    group: str  # contextual | detokenization | duplicate | miscellaneous
    kernel: str  # slowly decaying | local | uniform
    width: float
    content_sd: float  # standard deviation of the key-side content score (nats)
    stopword_weight: float = 0.0  # added to the score of stop words
    bos_weight: float = 0.0  # added to the score of <|endoftext|>
    duplicate_strength: float = 0.0  # score of a token attending to a copy of itself
    qk_noise: float = 0.1  # standard deviation of a random query-dependent score part
    stretch: float = 1.0  # exponent of the target log-kernel
    tail: float = 0.0  # weight of a second, slower exponential in the target kernel
    tail_width: float = 0.0  # its decay length
    peak: tuple[float, ...] = ()  # previous-token target at d = 0, 1, 2, 3
    content_destination_sd: float = 0.2  # relative change of content scores across destinations
    position_sink: float = 1.0  # score of position 0 (whatever the token)


#: The contextual heads' content spread is 0.25 nats: an extended embedding's norm grows with its
#: token's content weight ``exp(c)``, so the tail of ``c`` sets how heavy-tailed a random
#: neuron's contributions are. At 0.3, 13 unplanted neurons of seed 0 scored above theta = 6.
LAYER0_HEADS: dict[int, HeadPlan] = {
    0: HeadPlan("contextual", "slowly decaying", 22.0, 0.25, bos_weight=2.0, tail=0.15,
                tail_width=120.0),
    1: HeadPlan("duplicate", "uniform", 2000.0, 0.3, duplicate_strength=9.0, qk_noise=0.2),
    2: HeadPlan("contextual", "slowly decaying", 40.0, 0.25, bos_weight=2.0, stretch=0.85),
    3: HeadPlan("detokenization", "local", 1.0, 0.8, qk_noise=0.4, peak=(-6.0, 0.0, -5.0, -8.0),
                position_sink=0.0),
    4: HeadPlan("detokenization", "local", 1.0, 0.8, qk_noise=0.4, peak=(-4.0, 0.0, -3.0, -6.0),
                position_sink=0.0),
    5: HeadPlan("duplicate", "local", 10.0, 0.3, duplicate_strength=9.0, qk_noise=0.2),
    6: HeadPlan("contextual", "slowly decaying", 28.0, 0.25, stopword_weight=-0.8, bos_weight=2.0,
                stretch=1.15, tail=0.08, tail_width=150.0),
    7: HeadPlan("detokenization", "local", 1.0, 0.8, qk_noise=0.4, peak=(-3.0, 0.0, -5.0, -8.0),
                position_sink=0.0),
    8: HeadPlan("contextual", "slowly decaying", 30.0, 0.25, stopword_weight=0.8, bos_weight=2.0,
                tail=0.2, tail_width=100.0),
    9: HeadPlan("contextual", "slowly decaying", 42.0, 0.25, bos_weight=2.0, stretch=0.8),
    10: HeadPlan("contextual", "slowly decaying", 22.0, 0.25, bos_weight=2.0, stretch=1.15,
                 tail=0.1, tail_width=90.0),
    11: HeadPlan("miscellaneous", "uniform", 600.0, 0.3, bos_weight=2.0, qk_noise=0.2),
}

#: The negative control: each contextual head takes the kernel of a non-contextual one.
SHUFFLED_KERNELS: dict[int, int] = {0: 3, 2: 11, 6: 7, 8: 1, 9: 4, 10: 5}

# ----------------------------------------------------------------------------------------------
# Layer-0 neurons
# ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class NeuronPlan:
    """A planted layer-0 context neuron: reads a signed mix of topics through the context heads.

    ``gain`` multiplies the neuron's read of the context subspace (pre-activation per unit of
    topic image); gains are spread so that some neurons fall below the discovery threshold.
    """

    topics: dict[str, float]
    gain: float
    description: str


# Named neurons follow the paper's case studies; the rest give discovery a population to find.
CONTEXT_NEURONS: dict[int, NeuronPlan] = {
    300: NeuronPlan({"british": 1.0, "american": -1.0}, 33.0, "British minus American spelling"),
    704: NeuronPlan({"british": 1.0, "american": -1.0}, 21.0,
                    "British context, output opposite 300"),
    1621: NeuronPlan({"war": 1.0, "modern": -0.6}, 11.1, "19th-20th century war (minus modern)"),
    1710: NeuronPlan({"religion": 1.0, "bible_archaic": 0.8}, 13.0, "religious text, Bible"),
    57: NeuronPlan({"medicine": 1.0}, 7.2, "medical studies"),
    2390: NeuronPlan({"medicine": 0.7}, 1.5, "medical (weak)"),
    488: NeuronPlan({"law": 1.0}, 7.2, "legal text"),
    1301: NeuronPlan({"law": 0.8, "medicine": 0.8}, 4.3, "legal or medical (two sub-latents)"),
    912: NeuronPlan({"code": 1.0}, 8.7, "programming"),
    2781: NeuronPlan({"code": -0.8}, 3.0, "not programming"),
    1450: NeuronPlan({"spanish": 1.0}, 12.9, "Spanish"),
    2048: NeuronPlan({"spanish": -0.7}, 1.5, "not Spanish (weak)"),
    640: NeuronPlan({"astronomy": 1.0}, 5.7, "astronomy"),
    2203: NeuronPlan({"astronomy": 0.6, "religion": 0.6}, 5.1, "astronomy or religion"),
    1099: NeuronPlan({"climate": 1.0}, 5.7, "climate change"),
    2870: NeuronPlan({"pokemon": 1.0}, 9.0, "Pokemon"),
    155: NeuronPlan({"war": 0.8}, 2.6, "war (second neuron)"),
    3001: NeuronPlan({"religion": 0.5, "bible_archaic": 1.0}, 10.8, "archaic Bible English"),
    1888: NeuronPlan({"modern": 1.0}, 3.6, "21st century technology"),
    2567: NeuronPlan({"british": 0.8, "american": -0.8, "law": 0.4}, 19.5, "British legal text"),
}


@dataclass(frozen=True)
class DistractorPlan:
    """A layer-0 neuron that discovery should not return (its context is not the bag's)."""

    kind: str  # glitch-direct | uniform-head | previous-token-head
    topics: dict[str, float]
    gain: float
    description: str


DISTRACTOR_NEURONS: dict[int, DistractorPlan] = {
    2100: DistractorPlan("glitch-direct", {}, 6.0, "a few glitch tokens, direct path"),
    2222: DistractorPlan("glitch-direct", {}, 5.0, "a few glitch tokens, direct path"),
    2950: DistractorPlan("glitch-direct", {}, 7.0, "a few glitch tokens, direct path"),
    1000: DistractorPlan("uniform-head", {"war": 1.0}, 33.0, "war context through uniform head 11"),
    1500: DistractorPlan("uniform-head", {"medicine": 1.0}, 21.0,
                         "medical context through uniform head 11"),
    2600: DistractorPlan("uniform-head", {"spanish": 1.0}, 12.0,
                         "Spanish context through uniform head 11"),
    450: DistractorPlan("previous-token-head", {"religion": 1.0}, 30.0,
                        "previous token religious, through head 3"),
    1750: DistractorPlan("previous-token-head", {"law": 1.0}, 12.0,
                         "previous token legal, through head 3"),
}

#: How much the output spaces of head 11 (uniform) and head 3 (previous token) overlap the
#: contextual heads' (cosine of corresponding directions), and how strongly two contextual heads
#: read the glitch direction.
UNIFORM_OVERLAP, PREVIOUS_OVERLAP, GLITCH_LEAK = 0.045, 0.03, 0.028
#: Weights of a planted neuron's read of the contextual heads' unstructured outputs, of the
#: current token's topic (direct path) and of a random direction.
NOISE_READ, DIRECT_READ, LOCAL_READ = 0.8, 0.6, 0.4
#: Norm of a planted or distractor neuron's output (its pre-activation reaches ~20).
CONTEXT_OUT = 0.12

#: GPT-2's glitch tokens (single tokens); they share a glitch direction in the embedding.
GLITCH_TOKENS = (" SolidGoldMagikarp", " petertodd", " davidjl", "StreamerBot",
                 " TheNitromeFan", "embedreportprint", " RandomRedditorWithNo", "rawdownload")

# ----------------------------------------------------------------------------------------------
# Layer-1 look-ups
# ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class LookupPlan:
    """A planted context look-up: a layer-1 head attends to a topic, a neuron predicts a token."""

    layer: int
    head: int
    neuron: int
    topic: str
    target: str
    hard: bool = False


@dataclass(frozen=True)
class PlantedLookup:
    """A look-up as planted: its :class:`LookupPlan`, the target's token id, the label half's
    token ids of its topic and, for the hard look-up, what makes it hard (``description``) and
    the second head that writes part of its signal."""

    layer: int
    head: int
    neuron: int
    topic: str
    target: str
    hard: bool
    target_id: int
    topic_token_ids: list[int]
    description: str = ""
    second_head: int | None = None


LOOKUPS: tuple[LookupPlan, ...] = (
    LookupPlan(1, 4, 1200, "religion", " Lord"),
    LookupPlan(1, 9, 2400, "war", " troops", hard=True),
    LookupPlan(1, 2, 777, "astronomy", " telescope"),
    LookupPlan(1, 7, 3000, "spanish", " que"),
)
#: The hard look-up's extras: its head also attends to this topic, a second head writes part of
#: its signal, its neuron also reads this layer-0 neuron's output and writes a mix of the target
#: and this runner-up.
HARD_CONFUSER_TOPIC, HARD_SECOND_HEAD, HARD_LAYER0_NEURON, HARD_RUNNER_UP = (
    "modern", 5, 1621, " soldiers")
LOOKUP_VALUE = 0.3  # how much of the topic direction a look-up head's value reads

# ----------------------------------------------------------------------------------------------
# Topics
# ----------------------------------------------------------------------------------------------

TOPIC_DIMENSIONS = 24  # the subspace that holds the named topics and the background features
HEAD_OUT_DIMENSIONS = 96  # where the contextual heads write what is not a topic
N_BACKGROUND = 19
#: Loading (on a unit-norm embedding) of the strongest planting words; corpus-associated tokens
#: reach CORPUS_LOADING at most.
SEED_LOADING, CORPUS_LOADING = 0.5, 0.4
#: Corpus association: characters read per corpus folder, tokens per chunk, and the association
#: ratio where a loading starts and where it is full.
CORPUS_CHARS, CHUNK_TOKENS, RATIO_START, RATIO_FULL = 350_000, 128, 3.0, 25.0


@dataclass
class PlantedTruth:
    """Everything planted in the offline model, for checking what the method recovers.

    ``topic_words`` and ``topic_token_ids`` are the **label half** of each word list (also named
    ``label_words`` / ``label_token_ids``, properties, where the half matters): words never planted
    directly, whose topic loading, if any, comes from the corpora. ``planting_words`` /
    ``planting_token_ids`` were planted.
    """

    seed: int
    head_groups: dict[str, list[int]]
    kernel_shapes: dict[int, str]
    kernel_widths: dict[int, float]
    topic_words: dict[str, list[str]]
    topic_token_ids: dict[str, list[int]]
    context_neurons: dict[int, NeuronPlan]
    lookups: list[PlantedLookup]
    stopword_ids: list[int]
    gb_us_source: str
    #: each head's plan, its group as classified by construction (the shuffled variant's
    #: contextual heads are not contextual)
    layer0_heads: dict[int, HeadPlan] = field(default_factory=dict)
    identity_dimensions: int = 0  # dimension of the subspace of token identities
    variant: str = "standard"
    planting_words: dict[str, list[str]] = field(default_factory=dict)
    planting_token_ids: dict[str, list[int]] = field(default_factory=dict)
    kernel_n_eff: dict[int, float] = field(default_factory=dict)  # planned kernel, n=500
    distractor_neurons: dict[int, DistractorPlan] = field(default_factory=dict)
    glitch_token_ids: list[int] = field(default_factory=list)
    corpus_association: dict[str, dict] = field(default_factory=dict)  # per topic: counts
    position_profile: dict[str, float] = field(default_factory=dict)
    #: per head, the factor the destination ' the' applies to the content scores (planted
    #: stop-word and BOS weights are seen through it), at n = 500
    content_factor_the: dict[int, float] = field(default_factory=dict)

    @property
    def contextual_heads(self) -> list[int]:
        return self.head_groups["contextual"]

    @property
    def label_words(self) -> dict[str, list[str]]:
        """The label half of each word list: :attr:`topic_words` under the name of its half."""
        return self.topic_words

    @property
    def label_token_ids(self) -> dict[str, list[int]]:
        """The label half's token ids: :attr:`topic_token_ids` under the name of its half."""
        return self.topic_token_ids

    def to_dict(self) -> dict:
        """The record as plain values (its plans as dicts): what the cache and ``planted-truth``
        write."""
        return asdict(self)

    @classmethod
    def from_dict(cls, record: dict) -> PlantedTruth:
        """The record :meth:`to_dict` wrote, as the planted model's cache keeps it (integer
        keys, tuples), its plans typed again."""
        return cls(**{
            **record,
            "context_neurons": {j: NeuronPlan(**plan)
                                for j, plan in record["context_neurons"].items()},
            "lookups": [PlantedLookup(**plan) for plan in record["lookups"]],
            "layer0_heads": {h: HeadPlan(**plan) for h, plan in record["layer0_heads"].items()},
            "distractor_neurons": {j: DistractorPlan(**plan)
                                   for j, plan in record["distractor_neurons"].items()},
        })


# ----------------------------------------------------------------------------------------------
# Word lists: the planting/label split
# ----------------------------------------------------------------------------------------------


# ----------------------------------------------------------------------------------------------
# Kernels
# ----------------------------------------------------------------------------------------------


def _helix_basis(periods, distances: torch.Tensor) -> torch.Tensor:
    omega = torch.tensor([2 * math.pi / p for p in periods], dtype=torch.float64)
    angle = distances[:, None] * omega
    return torch.cat([torch.cos(angle), torch.sin(angle)], dim=1)


def kernel_target(plan: HeadPlan, distances: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The target log-kernel of a head over distances ``d = n - i`` and the fit's weights."""
    if plan.peak:
        target = -14.0 - distances / 100.0
        for d, value in enumerate(plan.peak):
            target[d] = value
        return target, torch.where(distances < 6, 100.0, 1.0).double()
    target = -((distances / plan.width) ** plan.stretch)
    if plan.tail:
        target = torch.log((1 - plan.tail) * target.exp()
                           + plan.tail * torch.exp(-distances / plan.tail_width))
    return target, torch.exp(-distances / (4 * plan.width)) + 0.05


@functools.lru_cache(maxsize=64)
def fit_kernel(plan: HeadPlan, ridge: float = 1e-3) -> tuple[tuple[float, ...], torch.Tensor]:
    """Coefficients of ``g(d) = sum_f alpha_f cos(w_f d) + beta_f sin(w_f d)`` for a head.

    A ridge-regularised weighted least-squares fit of :func:`kernel_target` over ``d = 0..1023``
    with the low helix frequencies (decaying kernels) or all of them (previous-token kernels).
    The ridge keeps the weights moderate, so the fitted kernel is smoother than the target.

    Returns:
        ``(periods, coefficients)`` with coefficients ``[2 * len(periods)]`` (cosines, then sines).
    """
    periods = PERIODS if plan.peak else LOW_PERIODS
    distances = torch.arange(N_CTX, dtype=torch.float64)
    target, weight = kernel_target(plan, distances)
    # No constant term: the score must be near 0 where the kernel has its mass, else LayerNorm's
    # scale of each key token (which multiplies the whole score) would act as a content weight.
    basis = _helix_basis(periods, distances)
    weight = weight / weight.sum()
    gram = basis.T @ (weight[:, None] * basis)
    penalty = ridge * torch.eye(basis.shape[1], dtype=torch.float64)
    solution = torch.linalg.solve(gram + penalty, basis.T @ (weight * target))
    return periods, solution


def planned_kernel(plan: HeadPlan, n: int = 500) -> torch.Tensor:
    """The log-kernel ``g(d)`` the fit planted (before LayerNorm scales and destination effects),
    as the attention pattern over ``i = 0..n`` (index ``i``)."""
    periods, coefficients = fit_kernel(plan)
    distances = torch.arange(n, -1, -1, dtype=torch.float64)
    score = _helix_basis(periods, distances) @ coefficients
    return torch.softmax(score, dim=0)


# ----------------------------------------------------------------------------------------------
# Building
# ----------------------------------------------------------------------------------------------

