"""Protocol discovery-verdict-gpt2's result for one model, typed (:class:`GPT2Evaluation`).

The shared part is v3's typed result (:class:`~.v3_result.V3Evaluation`: data, context set,
truth, primary comparison, secondary verdicts, controls, sensitivities, runtime); this protocol
adds the paper's claim (:class:`~.paper_claim.PaperClaim`), the comparison of the context set
with the paper's six heads (:class:`PaperHeads`), ``top[j]``'s score summary (chapter 5's
:class:`~context_neurons.discovery.ScoreSummary`: its Gaussian null, median, and whether the
typical neuron scores above theta), the model's identity (:class:`ModelIdentity`: a registered
GPT-2 model, or a plumbing check) and, for a replication, whether it replicates gpt2's labels.
The planted control (v3's, timed apart) is in ``core.controls.apart["planted"]``; when it fails,
every verdict of the result is void (:attr:`GPT2Evaluation.void`) and the sentences say so.
``to_json`` and ``from_json`` are inverse.

A model's identity comes from the name the loader was asked for, never from its shape: a model
outside the protocol's list, or ``gpt2`` loaded from a local directory
(``$CONTEXT_NEURONS_GPT2``, as the 12-layer stand-in is), is a plumbing check, never reported as
a GPT-2 result (``models.stand_ins``): nothing here can tell that a directory holds GPT-2's
weights.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace

from context_neurons import config as settings
from context_neurons.discovery import ScoreSummary
from context_neurons.verdict.gpt2_protocol import ProtocolGPT2
from context_neurons.verdict.paper_claim import PaperClaim, SetPrecision
from context_neurons.verdict.v3_result import V3Evaluation, jsonable

PRIMARY, REPLICATION, PLUMBING = "primary", "replication", "plumbing check"


@dataclass(frozen=True)
class ModelIdentity:
    """Which model a result is about.

    Attributes:
        requested: the name the loader was asked for (``gpt2``, ``gpt2-medium``, ...).
        source: where its weights came from, in the loader's words.
        role: ``primary``, ``replication`` or ``plumbing check``.
        why: for a plumbing check, why it is not a GPT-2 result.
    """

    requested: str
    source: str
    role: str
    why: str = ""

    @property
    def is_gpt2_result(self) -> bool:
        return self.role != PLUMBING

    @property
    def label(self) -> str:
        """The model's name in every report (a plumbing check says so)."""
        return self.requested if self.is_gpt2_result else f"{self.requested} ({PLUMBING}: {self.why})"


def model_identity(requested: str, source: str, protocol: ProtocolGPT2) -> ModelIdentity:
    """The identity of the model the loader was asked for by ``requested`` (module docstring)."""
    if requested not in protocol.models:
        return ModelIdentity(requested, source, PLUMBING,
                             "not a model of discovery-verdict-gpt2; never a GPT-2 result")
    if requested == "gpt2" and settings.gpt2_weights() is not None:
        return ModelIdentity(requested, source, PLUMBING,
                             f"weights from {settings.GPT2_WEIGHTS.name} "
                             f"({settings.gpt2_weights()}), which may be a stand-in; never "
                             "reported as GPT-2's result")
    return ModelIdentity(requested, source,
                         PRIMARY if requested == protocol.primary_model else REPLICATION)


@dataclass(frozen=True)
class PaperHeads:
    """The context set against the paper's six heads (``context_set.paper_heads``), and, for
    gpt2, ``top[j]`` on the paper's heads' circuit at theta (a sensitivity: no label).

    Attributes:
        paper: the paper's heads; ``equal``: whether the context set is exactly them.
        only_context_set, only_paper: the differences.
        top_with_paper_heads: the found set's precision on the paper heads' circuit, or None.
    """

    paper: tuple[int, ...]
    equal: bool
    only_context_set: tuple[int, ...]
    only_paper: tuple[int, ...]
    top_with_paper_heads: SetPrecision | None = None

    def words(self) -> str:
        if self.equal:
            return f"the context set equals the paper's six heads {list(self.paper)}"
        return (f"the context set differs from the paper's heads {list(self.paper)}: only in the "
                f"context set {list(self.only_context_set)}, only in the paper's "
                f"{list(self.only_paper)}")

    def to_json(self) -> dict:
        out = asdict(self)
        out["top_with_paper_heads"] = (self.top_with_paper_heads.to_json()
                                       if self.top_with_paper_heads else None)
        return out

    @classmethod
    def from_json(cls, data: dict) -> "PaperHeads":
        top = data["top_with_paper_heads"]
        return cls(tuple(data["paper"]), data["equal"], tuple(data["only_context_set"]),
                   tuple(data["only_paper"]), SetPrecision.from_json(top) if top else None)


def paper_heads(context_set: tuple[int, ...], paper: tuple[int, ...]) -> PaperHeads:
    """The comparison of the context set with the paper's heads."""
    return PaperHeads(paper, tuple(context_set) == tuple(paper),
                      tuple(sorted(set(context_set) - set(paper))),
                      tuple(sorted(set(paper) - set(context_set))))


@dataclass(frozen=True)
class GPT2Evaluation:
    """One model's result under discovery-verdict-gpt2 (module docstring).

    ``heads``: the context set against the paper's six heads, for gpt2 only (None for Medium,
    Large and XL, whose heads are not GPT-2 Small's: ``context_set.paper_heads``).
    ``replicates`` (set by :func:`with_replications` on a replication when gpt2's result is
    there): per verdict (``primary``, ``paper_claim``) whether its label equals gpt2's.
    ``score_summary``: ``top[j]`` (the context set's circuit) against the paper's theta."""

    core: V3Evaluation
    identity: ModelIdentity
    heads: PaperHeads | None
    paper_claim: PaperClaim | None = None
    replicates: dict[str, bool] | None = None
    score_summary: ScoreSummary | None = None

    @property
    def planted(self) -> dict | None:
        """The planted control's JSON (:meth:`~.planted.PlantedControl.to_json`), or None when
        it was not run."""
        return self.core.controls.apart.get("planted") if self.core.controls else None

    @property
    def void(self) -> bool:
        """Whether the planted control ran and failed: the protocol's ``controls.planted`` then
        voids every verdict of the run (reported, not hidden)."""
        return self.planted is not None and not self.planted["recovers_what_top_recovers"]

    @property
    def primary_verdict(self) -> str | None:
        return self.core.primary_verdict

    @property
    def claim_answer(self) -> str | None:
        return None if self.paper_claim is None else str(self.paper_claim.answer)

    def to_json(self) -> dict:
        summary = asdict(self.score_summary) if self.score_summary else None
        return jsonable({**self.core.to_json(), "identity": asdict(self.identity),
                         "paper_heads": self.heads.to_json() if self.heads else None,
                         "paper_claim": self.paper_claim.to_json() if self.paper_claim else None,
                         "score_summary": summary, "replicates_gpt2": self.replicates})

    @classmethod
    def from_json(cls, data: dict) -> "GPT2Evaluation":
        claim, summary, heads = data["paper_claim"], data.get("score_summary"), data["paper_heads"]
        if summary is not None:  # JSON keys are strings: the vocabulary sizes back to ints
            summary = ScoreSummary(**{**summary, "other_nulls": {
                int(n): v for n, v in summary["other_nulls"].items()}})
        return cls(V3Evaluation.from_json(data), ModelIdentity(**data["identity"]),
                   PaperHeads.from_json(heads) if heads else None,
                   PaperClaim.from_json(claim) if claim else None, data["replicates_gpt2"],
                   summary)

    def heads_words(self) -> str:
        """The context set, and for gpt2 how it compares with the paper's six heads."""
        if self.heads is not None:
            return self.heads.words()
        return (f"the context set is heads {list(self.core.context_set.heads)} (the paper's six "
                "heads are GPT-2 Small's: compared on gpt2 only)")

    def primary_sentence(self) -> str:
        """The primary comparison's verdict in words (void when the planted control failed)."""
        return (f"{self.identity.label}: primary (discovery-verdict-gpt2): "
                f"{self.core.primary.words()}" + _replicates(self.replicates, "primary")
                + (VOID if self.void else ""))

    def claim_sentence(self) -> str:
        """The paper's claim in words (void when the planted control failed)."""
        return (f"{self.identity.label}: {self.paper_claim.sentence()}"
                + _replicates(self.replicates, "paper_claim") + (VOID if self.void else ""))

    def planted_sentence(self) -> str:
        """The planted control in words, or that it was not run."""
        if self.planted is None:
            return (f"{self.identity.label}: planted control not run (a quick look: "
                    "evaluate_gpt2(apart=False)); the protocol's verdicts need it")
        fa, top = self.planted["frequency_aware"], self.planted["top"]
        verb = "recovers" if not self.void else "does NOT recover"
        return (f"{self.identity.label}: planted control (planted model, label-half domains): "
                f"the frequency-aware score {verb} what top[j] recovers (precision at |T| "
                f"{fa['precision_at_truth_size']:.2f} against {top['precision_at_truth_size']:.2f})"
                + ("; every verdict of this run is VOID (controls.planted)" if self.void else ""))

    def sentences(self) -> list[str]:
        """The verdicts in words, in the protocol's reporting order."""
        name, core = self.identity.label, self.core
        lines = [f"{name}: {self.heads_words()}"]
        if core.stopped:
            return lines + [f"{name}: discovery-verdict-gpt2: {core.stopped}"]
        lines.append(f"{name}: truth: {core.truth.sentence()}")
        lines += [self.primary_sentence(), self.claim_sentence()]
        if self.score_summary is not None:
            lines += [f"{name}: top[j]'s scores: {line}" for line in self.score_summary.findings()]
        if self.heads is not None and self.heads.top_with_paper_heads is not None:
            lines.append(f"{name}: top[j] on the paper's six heads at theta "
                         f"{self.paper_claim.theta:g} (sensitivity, no verdict): "
                         f"{self.heads.top_with_paper_heads.words()}")
        return lines + [self.planted_sentence()]


#: Appended to a verdict the failed planted control voids.
VOID = " (VOID: the planted control failed)"


def _replicates(replicates: dict[str, bool] | None, key: str) -> str:
    if not replicates or key not in replicates:
        return ""
    return " (replicates)" if replicates[key] else " (does not replicate)"


def with_replications(results: dict[str, GPT2Evaluation],
                      primary: str = "gpt2") -> dict[str, GPT2Evaluation]:
    """``results`` with each registered replication's ``replicates`` set against ``primary``'s
    labels, when ``primary``'s result is a GPT-2 result of this protocol (neither word
    otherwise; a plumbing check neither replicates nor is replicated)."""
    base = results.get(primary)
    if base is None or not base.identity.is_gpt2_result or base.core.stopped:
        return results
    out = {}
    for name, result in results.items():
        if name != primary and result.identity.role == REPLICATION and not result.core.stopped:
            result = replace(result, replicates={
                "primary": result.primary_verdict == base.primary_verdict,
                "paper_claim": result.claim_answer == base.claim_answer})
        out[name] = result
    return out


def replication_lines(results: dict[str, GPT2Evaluation], protocol: ProtocolGPT2) -> list[str]:
    """Every registered model's sentences in the protocol's order, each replication with
    "replicates" or "does not replicate" against the protocol's primary model
    (:func:`with_replications`), a model without a result as "<model>: not computed here:
    <why>" (``models.not_run``)."""
    results = with_replications(results, protocol.primary_model)
    out = []
    for model in protocol.models:
        if model in results:
            out += results[model].sentences()
        else:
            out.append(f"{model}: not computed here: no result of it was given (python -m "
                       f"context_neurons reproduce --model {model} --out {model}.json)")
    return out + [f"{result.identity.label}: not a model of the protocol"
                  for name, result in results.items() if name not in protocol.models]


__all__ = ["GPT2Evaluation", "ModelIdentity", "PLUMBING", "PRIMARY", "PaperHeads", "REPLICATION",
           "model_identity", "paper_heads", "replication_lines", "with_replications"]
