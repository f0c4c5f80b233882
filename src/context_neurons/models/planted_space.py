"""The planted model's residual stream: seeded draws, the structured directions and the helpers
that write head and MLP weights into GPT-2's layout (:mod:`.planted` builds the model with them).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from jaxtyping import Float
from torch import Tensor
from torch.nn.functional import normalize

from context_neurons.models.planted_plan import (
    BOS_ID,
    D_HEAD,
    D_MODEL,
    HEAD_OUT_DIMENSIONS,
    LOOKUPS,
    N_BACKGROUND,
    N_HEADS,
    PERIODS,
    PREVIOUS_OVERLAP,
    TOPIC_DIMENSIONS,
    UNIFORM_OVERLAP,
    HeadPlan,
    fit_kernel,
)


class Directions:
    """Seeded draws, and orthonormal mean-free directions handed out in order.

    The directions handed out by :meth:`take` hold the structure; random directions
    (:meth:`rand_dir`) lie in the rest, the identity subspace.
    """

    def __init__(self, seed: int):
        self.gen = torch.Generator().manual_seed(int(seed))
        matrix = self.randn(D_MODEL, D_MODEL)
        matrix[:, 0] = 1.0
        self.basis = torch.linalg.qr(matrix)[0][:, 1:]  # [768, 767], orthogonal to ones
        self.used = 0
        self._pool: Tensor | None = None
        self._next = 0

    def randn(self, *shape: int) -> Tensor:
        return torch.randn(*shape, generator=self.gen, dtype=torch.float64)

    def rand(self, *shape: int) -> Tensor:
        return torch.rand(*shape, generator=self.gen, dtype=torch.float64)

    def take(self, n: int | None = None) -> Tensor:
        """The next structured direction ``[768]``, or the next ``n`` as columns ``[768, n]``."""
        k = 1 if n is None else n
        out = self.basis[:, self.used : self.used + k]
        self.used += k
        return out[:, 0] if n is None else out

    def identity_space(self) -> Float[Tensor, "d_model d_free"]:
        return self.basis[:, self.used :]

    def _fresh(self, n: int, dtype=torch.float64) -> Float[Tensor, "n d_model"]:
        removed = torch.cat(
            [torch.full((D_MODEL, 1), D_MODEL**-0.5, dtype=torch.float64),
             self.basis[:, : self.used]], dim=1).to(dtype)
        x = torch.randn(n, D_MODEL, generator=self.gen, dtype=dtype)
        return normalize(x - (x @ removed) @ removed.T, dim=-1)

    def rand_dir(self, *lead: int, dtype=torch.float64) -> Tensor:
        """Unit random directions in the identity subspace, ``[n, 768]`` (or ``[768]``).

        Call it only once every structured direction is taken. Small requests come from a pool
        drawn in one go (one product instead of hundreds).
        """
        n = lead[0] if lead else 1
        if n > 256 or dtype != torch.float64:
            return self._fresh(n, dtype)
        if self._pool is None or self._next + n > len(self._pool):
            self._pool, self._next = self._fresh(2048), 0
        out = self._pool[self._next : self._next + n]
        self._next += n
        return out if lead else out[0]

    def random_unit(self, n: int) -> Float[Tensor, "n d_model"]:
        """``n`` unit random directions anywhere (reads and writes of unstructured neurons)."""
        return normalize(self.randn(n, D_MODEL), dim=-1)


@dataclass
class Space:
    """The residual stream's planted directions and the topics' coordinates."""

    mu_pos: Tensor
    u_early: Tensor
    u_p0: Tensor
    helix: Float[Tensor, "d_model two_freq"]  # cosine columns, then sine columns
    u_bos: Tensor
    u_stop: Tensor
    u_glitch: Tensor
    topic_space: Float[Tensor, "d_model topic_dims"]
    context_space: Float[Tensor, "d_model topic_dims"]  # where the contextual heads write
    uniform_space: Float[Tensor, "d_model topic_dims"]  # head 11's, overlapping the context's
    previous_space: Float[Tensor, "d_model topic_dims"]  # head 3's, overlapping the context's
    head_out_space: Float[Tensor, "d_model head_out_dims"]
    o_lookup: list[Tensor]
    coords: Float[Tensor, "n_all topic_dims"]  # named topics, then background features
    index: dict[str, int]

    def u_topic(self, topic: str) -> Float[Tensor, " d_model"]:
        return self.topic_space @ self.coords[self.index[topic]]

    def image(self, space: Tensor, mix: dict[str, float]) -> Float[Tensor, " d_model"]:
        """The image in ``space`` of a signed mix of topic directions."""
        return space @ sum(w * self.coords[self.index[t]] for t, w in mix.items())


@dataclass(frozen=True)
class Scales:
    """Typical LayerNorm scales (late position, position 0) and a token's typical projection."""

    s_bar: float
    s_zero: float
    token_sd: float
    amplitude: Float[Tensor, " n_freq"]  # helix amplitude per frequency


def residual_space(dirs: Directions, topics: list[str]) -> Space:
    mu_pos, u_early, u_p0 = dirs.take(), dirs.take(), dirs.take()
    helix = dirs.take(2 * len(PERIODS))
    u_bos, u_stop, u_glitch = dirs.take(), dirs.take(), dirs.take()
    topic_space, context_space = dirs.take(TOPIC_DIMENSIONS), dirs.take(TOPIC_DIMENSIONS)
    other_space, prev_space = dirs.take(TOPIC_DIMENSIONS), dirs.take(TOPIC_DIMENSIONS)
    head_out_space = dirs.take(HEAD_OUT_DIMENSIONS)
    o_lookup = list(dirs.take(len(LOOKUPS)).T)
    coords = normalize(dirs.randn(len(topics) + N_BACKGROUND, TOPIC_DIMENSIONS), dim=1)
    index = {t: k for k, t in enumerate(topics)}
    archaic, religion = index["bible_archaic"], index["religion"]
    coords[archaic] = normalize(0.5 * coords[religion] + 0.87 * coords[archaic], dim=0)

    def overlapping(space: Tensor, cosine: float) -> Tensor:
        return cosine * context_space + math.sqrt(1 - cosine**2) * space

    return Space(
        mu_pos, u_early, u_p0, helix, u_bos, u_stop, u_glitch, topic_space, context_space,
        overlapping(other_space, UNIFORM_OVERLAP), overlapping(prev_space, PREVIOUS_OVERLAP),
        head_out_space, o_lookup, coords, index,
    )


def scales_of(w_pos: Tensor, token_norm: Tensor, amplitude: Tensor) -> Scales:
    mean_token_sq = float((token_norm[:BOS_ID] ** 2).mean())
    return Scales(
        s_bar=math.sqrt(D_MODEL) / math.sqrt(mean_token_sq + float((w_pos[512] ** 2).sum())),
        s_zero=math.sqrt(D_MODEL) / math.sqrt(mean_token_sq + float((w_pos[0] ** 2).sum())),
        token_sd=math.sqrt(mean_token_sq / D_MODEL),
        amplitude=amplitude,
    )


def write_kernel(
    w_q: Tensor, w_k: Tensor, head: int, plan: HeadPlan, space: Space, scale: float,
    amplitude: Tensor,
) -> int:
    """Plant a head's positional kernel (two dimensions per helix frequency it uses).

    Returns the number of head dimensions used.
    """
    periods, coefficients = fit_kernel(plan)
    n_p, col = len(periods), 0
    for j, period in enumerate(periods):
        f = PERIODS.index(period)
        c_f, s_f = space.helix[:, f], space.helix[:, len(PERIODS) + f]
        alpha, beta = float(coefficients[j]), float(coefficients[n_p + j])
        gain = 8.0 / (scale**2 * float(amplitude[f]) ** 2)
        w_q[head, :, col], w_k[head, :, col] = gain * (alpha * c_f + beta * s_f), c_f
        w_q[head, :, col + 1], w_k[head, :, col + 1] = gain * (alpha * s_f - beta * c_f), s_f
        col += 2
    return col


def empty_heads() -> tuple[Tensor, Tensor, Tensor, Tensor, Tensor]:
    w_q = torch.zeros(N_HEADS, D_MODEL, D_HEAD, dtype=torch.float64)
    w_o = torch.zeros(N_HEADS, D_HEAD, D_MODEL, dtype=torch.float64)
    b_q = torch.zeros(N_HEADS, D_HEAD, dtype=torch.float64)
    return w_q, torch.zeros_like(w_q), torch.zeros_like(w_q), w_o, b_q


def write_attention(state, layer, w_q, w_k, w_v, w_o, b_q, dirs: Directions) -> None:
    """Pack per-head matrices into GPT-2's fused ``c_attn`` / ``c_proj`` (Conv1D: x @ W)."""
    pack = lambda w: w.permute(1, 0, 2).reshape(D_MODEL, N_HEADS * D_HEAD)
    prefix = f"transformer.h.{layer}.attn"
    state[f"{prefix}.c_attn.weight"] = torch.cat([pack(w_q), pack(w_k), pack(w_v)], dim=1)
    bias = 0.01 * dirs.randn(3 * D_MODEL)
    bias[:D_MODEL] = b_q.reshape(-1)
    bias[D_MODEL : 2 * D_MODEL] = 0.0  # key biases only shift every score of a query equally
    state[f"{prefix}.c_attn.bias"] = bias
    state[f"{prefix}.c_proj.weight"] = w_o.reshape(N_HEADS * D_HEAD, D_MODEL)
    state[f"{prefix}.c_proj.bias"] = 0.01 * dirs.randn(D_MODEL)


def write_mlp(state, layer, w_in, b_in, w_out, dirs: Directions) -> None:
    prefix = f"transformer.h.{layer}"
    state[f"{prefix}.mlp.c_fc.weight"], state[f"{prefix}.mlp.c_fc.bias"] = w_in, b_in
    state[f"{prefix}.mlp.c_proj.weight"] = w_out
    state[f"{prefix}.mlp.c_proj.bias"] = 0.01 * dirs.randn(D_MODEL)
    state[f"{prefix}.ln_2.weight"] = 1 + 0.05 * dirs.randn(D_MODEL)
    state[f"{prefix}.ln_2.bias"] = 0.01 * dirs.randn(D_MODEL)
