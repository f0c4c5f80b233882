"""Explainers. This module writes and scores explanations of when an attention head is active
(chapter 7; ``book/notation.md``, section 7, step 4).

Neo, Cohen and Barez (2024) asked GPT-4 to explain, from prompts where a head drives a neuron and
prompts where it does not, when the head is active, and then used GPT-4 again as a zero-shot
classifier: given only the explanation, is the head active on this held-out prompt? The accuracy
of that classifier scores the explanation.

Two explainers share one interface (:class:`Explainer`: ``explain(active, inactive)`` then
``predict(explanation, examples)``):

* :class:`OfflineExplainer` needs no service. Its explanation is a short list of words that mark
  the active prompts: candidates over-represented in active prompts (log-odds ratio of the
  fraction of prompts containing the word, add-``alpha`` smoothed), chosen greedily to cover the
  active prompts and not the inactive ones. Its classifier applies the rule "active when the
  prompt contains one of these words" literally. It is the default and what the book's stored
  outputs use.
* :class:`LLMExplainer` calls an OpenAI-compatible chat-completions endpoint through ``urllib``
  (standard library only). It is used only when the reader sets ``CONTEXT_NEURONS_LLM_API_KEY``
  (plus optionally ``CONTEXT_NEURONS_LLM_BASE_URL`` and ``CONTEXT_NEURONS_LLM_MODEL``); without a
  key nothing in this module opens a network connection.
"""

from __future__ import annotations

import functools
import http.client
import json
import math
import re
import urllib.error
import urllib.request
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Callable, Protocol, Sequence, runtime_checkable

from context_neurons import config
from context_neurons.checks import InputError

API_KEY_ENV = config.LLM_API_KEY.name
BASE_URL_ENV = config.LLM_BASE_URL.name
MODEL_ENV = config.LLM_MODEL.name
DEFAULT_BASE_URL = config.DEFAULT_LLM_BASE_URL
DEFAULT_LLM_MODEL = config.DEFAULT_LLM_MODEL


class ExplainerError(RuntimeError):
    """An explainer could not be built or used; the message says what to do."""


class NoExplanation(ExplainerError, ValueError):
    """The prompts admit no explanation (e.g. none is active, or no word tells them apart)."""


@dataclass(frozen=True)
class Example:
    """One prompt as both explainers see it: token ids (offline) and text (LLM).

    ``group`` names the text the prompt was cut from: prompts of one window share their tokens, so
    the offline explainer counts a token's support in distinct groups.
    """

    token_ids: tuple[int, ...]
    text: str
    group: str = ""


@dataclass
class Explanation:
    """An explanation of when a head is active.

    ``text`` is what a reader (or an LLM classifier) reads; ``tokens`` are the tokens it names
    (the offline explainer's rule, or tokens quoted by an LLM), for comparison with a planted topic.
    """

    text: str
    tokens: list[str] = field(default_factory=list)
    explainer: str = ""
    rule: dict[str, Any] = field(default_factory=dict)


@runtime_checkable
class Explainer(Protocol):
    """Writes an explanation from labelled prompts and classifies prompts with it."""

    name: str

    def explain(self, active: Sequence[Example], inactive: Sequence[Example]) -> Explanation: ...

    def predict(self, explanation: Explanation, examples: Sequence[Example]) -> list[bool]: ...


def examples_from_prompts(prompts, tokenizer, max_tokens: int | None = None) -> list[Example]:
    """Examples from :class:`~context_neurons.lookups.prompts.Prompt` objects (BOS dropped).

    ``max_tokens`` keeps only the last tokens of each prompt (for the LLM's context window).
    """
    out = []
    for prompt in prompts:
        ids = [int(t) for t in prompt.tokens[1:].tolist()]
        if max_tokens is not None:
            ids = ids[-max_tokens:]
        group = prompt.source or str(prompt.window)
        out.append(Example(tuple(ids), tokenizer.decode(ids), group))
    return out


def _interleave(queues: Sequence[Sequence[int]]) -> list[int]:
    """``q0[0], q1[0], ..., q0[1], q1[1], ...``: round-robin until every queue is empty."""
    longest = max((len(q) for q in queues), default=0)
    return [q[i] for i in range(longest) for q in queues if i < len(q)]


def spread_sample(examples: Sequence[Example], k: int) -> list[Example]:
    """``k`` examples spread over domains and texts, deterministically.

    An example's text is its ``group`` (a window label ``domain|corpus:id``) and its domain the
    part before ``|``. The order is round-robin over domains; within a domain, round-robin over its
    texts; within a text, the order given. So 20 examples come from up to 20 texts of as many
    domains as there are, not from the first few texts of the pool.
    """
    if k < 1:
        raise ValueError(f"Sample at least one example, got k = {k}.")
    by_domain: dict[str, dict[str, list[int]]] = {}
    for i, example in enumerate(examples):
        domain = example.group.split("|", 1)[0] if "|" in example.group else ""
        by_domain.setdefault(domain, {}).setdefault(example.group, []).append(i)
    per_domain = [_interleave(list(texts.values())) for texts in by_domain.values()]
    return [examples[i] for i in _interleave(per_domain)[:k]]


# ----------------------------------------------------------------------------------------------
# Offline explainer
# ----------------------------------------------------------------------------------------------


def normalise_word(token: str) -> str:
    """The word a token stands for: stripped, lower-cased, a plural ``s`` dropped (``' Wars'`` ->
    ``'war'``), so that case and number variants count as one feature."""
    word = token.strip().lower()
    if len(word) > 3 and word.endswith("s") and not word.endswith("ss"):
        word = word[:-1]
    return word


@dataclass
class OfflineExplainer:
    """Contrastive token statistics: the words whose presence marks the active prompts.

    Features are words (:func:`normalise_word` of each token, so ``' War'``, ``' war'`` and
    ``' wars'`` are one feature; ``normalise=False`` keeps raw tokens). Candidates are words present
    in at least ``min_support`` of the active prompts, cut from at least ``min_groups`` different
    texts, with a positive log-odds ratio (:meth:`word_log_odds`). The explanation is built
    greedily: each step adds the candidate that most increases the training accuracy of the rule
    "active when the prompt contains at least one explanation word" (ties: higher log-odds); it
    stops at ``n_words`` or when the best gain is below ``min_gain`` of the active prompts. Greedy
    covering keeps one word per group of co-occurring words, so words that merely accompany the
    trigger are not repeated.

    Args:
        tokenizer: decodes token ids into words.
        n_words: the most words in an explanation.
        alpha: add-``alpha`` smoothing of the prompt counts in the log-odds ratio.
        min_support: a candidate occurs in at least this fraction of active prompts.
        min_groups: ... and in active prompts from at least this many texts.
        min_gain: a word must newly explain this fraction of the active prompts (net).
        normalise: merge case and plural variants (else one feature per token).
    """

    tokenizer: Any
    n_words: int = 12
    alpha: float = 1.0
    min_support: float = 0.02
    min_groups: int = 2
    min_gain: float = 0.02
    normalise: bool = True
    name: str = "offline"

    def __post_init__(self) -> None:
        self._words: dict[int, str] = {}

    def word(self, token_id: int) -> str:
        """The feature of one token id."""
        if token_id not in self._words:
            text = self.tokenizer.decode([token_id])
            self._words[token_id] = normalise_word(text) if self.normalise else text
        return self._words[token_id]

    def words(self, example: Example) -> set[str]:
        """The set of features of a prompt (empty strings, e.g. from whitespace, dropped)."""
        return {w for w in (self.word(t) for t in set(example.token_ids)) if w}

    def word_log_odds(
        self, active: Sequence[Example], inactive: Sequence[Example]
    ) -> list[tuple[str, float, int, int]]:
        """``(word, log_odds_ratio, n_active_with, n_inactive_with)``, highest ratio first."""
        if not active or not inactive:
            raise NoExplanation("Explaining needs both active and inactive prompts.")
        sets_a = [self.words(e) for e in active]
        in_active = Counter(w for s in sets_a for w in s)
        in_inactive = Counter(w for e in inactive for w in self.words(e))
        groups: dict[str, set[str]] = {}
        for e, words in zip(active, sets_a):
            for w in words:
                groups.setdefault(w, set()).add(e.group)
        n_a, n_i, a = len(active), len(inactive), self.alpha
        rows = []
        for word, count in in_active.items():
            if count < max(2, self.min_support * n_a) or len(groups[word]) < self.min_groups:
                continue
            other = in_inactive.get(word, 0)
            ratio = math.log((count + a) / (n_a - count + a)) - math.log(
                (other + a) / (n_i - other + a)
            )
            rows.append((word, ratio, count, other))
        rows.sort(key=lambda r: (-r[1], r[0]))
        return rows

    def explain(self, active: Sequence[Example], inactive: Sequence[Example]) -> Explanation:
        candidates = [r for r in self.word_log_odds(active, inactive) if r[1] > 0]
        if not candidates:
            raise NoExplanation("No word is more frequent in active than in inactive prompts.")
        sets_a = [self.words(e) for e in active]
        sets_i = [self.words(e) for e in inactive]
        covered_a, covered_i = [False] * len(active), [False] * len(inactive)
        chosen: list[str] = []
        for _ in range(self.n_words):
            best, best_gain = None, max(0, math.ceil(self.min_gain * len(active)) - 1)
            for word, _ratio, _, _ in candidates:  # log-odds order breaks ties
                if word in chosen:
                    continue
                gain = sum(1 for s, c in zip(sets_a, covered_a) if not c and word in s)
                gain -= sum(1 for s, c in zip(sets_i, covered_i) if not c and word in s)
                if gain > best_gain:
                    best, best_gain = word, gain
            if best is None:
                break
            chosen.append(best)
            covered_a = [c or best in s for s, c in zip(sets_a, covered_a)]
            covered_i = [c or best in s for s, c in zip(sets_i, covered_i)]
        if not chosen:  # no word helps on its own: fall back to the single best ratio
            chosen = [candidates[0][0]]
            covered_a = [chosen[0] in s for s in sets_a]
            covered_i = [chosen[0] in s for s in sets_i]
        correct = sum(covered_a) + sum(1 for c in covered_i if not c)
        text = (
            "The head is active when the prompt contains any of these words: "
            + ", ".join(repr(w) for w in chosen)
            + "."
        )
        return Explanation(
            text,
            chosen,
            self.name,
            {
                "words": chosen,
                "min_count": 1,
                "normalise": self.normalise,
                "train_accuracy": correct / (len(active) + len(inactive)),
            },
        )

    def predict(self, explanation: Explanation, examples: Sequence[Example]) -> list[bool]:
        rule = explanation.rule
        if "words" not in rule or rule.get("normalise") != self.normalise:
            raise ExplainerError(
                "The offline classifier needs an explanation written by an "
                "offline explainer with the same settings (its rule: words and "
                "a minimum count)."
            )
        wanted, need = set(rule["words"]), rule["min_count"]
        return [len(wanted & self.words(e)) >= need for e in examples]


# ----------------------------------------------------------------------------------------------
# LLM explainer (OpenAI-compatible HTTP API, standard library only)
# ----------------------------------------------------------------------------------------------


Transport = Callable[[str, dict, dict], dict]


def urllib_transport(url: str, payload: dict, headers: dict, timeout: float = 120) -> dict:
    """POST JSON with ``urllib`` and return the decoded JSON response.

    Raises what ``urllib`` raises (``HTTPError``, ``URLError``, ``TimeoutError``) and
    ``json.JSONDecodeError``; :class:`LLMExplainer` turns them into :class:`ExplainerError`.
    """
    request = urllib.request.Request(
        url, data=json.dumps(payload).encode("utf-8"), headers=headers, method="POST"
    )
    with urllib.request.urlopen(request, timeout=timeout) as response:  # noqa: S310
        return json.loads(response.read().decode("utf-8"))


EXPLAIN_PROMPT = """We study one attention head of a language model. Below are text excerpts. In \
the ACTIVE excerpts the head strongly drives a neuron at the last token; in the INACTIVE ones it \
does not. In one or two sentences, say what the excerpts must contain (words, topic, style) for \
the head to be active. Quote the most telling words in double quotes."""

CLASSIFY_PROMPT = """An attention head of a language model is described as follows:
{explanation}
For each numbered excerpt below, answer 1 if the head would be active at its last token by this \
description, else 0. Reply with a JSON list of {n} integers and nothing else."""


@dataclass
class LLMExplainer:
    """An explainer and zero-shot classifier behind an OpenAI-compatible chat-completions API.

    Build it with :meth:`from_env` (``None`` when no key is set). ``transport`` replaces the HTTP
    call (tests use a fake); by default :func:`urllib_transport` with ``timeout`` seconds.

    Cost: :meth:`explain` is one request with ``max_examples`` active and as many inactive
    examples; :meth:`predict` is one request per ``batch_size`` examples. :meth:`n_requests`
    counts them. Examples are clipped to their last ``max_words_per_example`` words.
    """

    api_key: str
    base_url: str = DEFAULT_BASE_URL
    model: str = DEFAULT_LLM_MODEL
    max_examples: int = 20
    max_words_per_example: int = 64
    batch_size: int = 20
    timeout: float = 120.0
    transport: Transport | None = None
    name: str = "llm"

    def __post_init__(self) -> None:
        if not self.api_key:
            raise ExplainerError(f"The LLM explainer needs an API key: set {API_KEY_ENV}.")

    @classmethod
    def from_env(cls) -> "LLMExplainer | None":
        """The explainer configured by the environment, or ``None`` without a key."""
        key, base_url, model = config.llm_settings()
        return cls(key, base_url, model) if key else None

    def n_requests(self, n_test: int) -> int:
        """Requests for one :meth:`explain` and a :meth:`predict` of ``n_test`` examples."""
        return 1 + math.ceil(n_test / self.batch_size)

    def _chat(self, content: str) -> str:
        payload = {
            "model": self.model,
            "temperature": 0,
            "messages": [{"role": "user", "content": content}],
        }
        headers = {"Authorization": f"Bearer {self.api_key}", "Content-Type": "application/json"}
        send = self.transport or functools.partial(urllib_transport, timeout=self.timeout)
        url = f"{self.base_url}/chat/completions"
        check = f"check {API_KEY_ENV}, {BASE_URL_ENV} and {MODEL_ENV}"
        try:
            reply = send(url, payload, headers)
        except urllib.error.HTTPError as err:  # before OSError: HTTPError is one
            raise ExplainerError(
                f"The LLM service at {url} answered HTTP {err.code} ({err.reason}): {check} "
                f"(401/403: the key; 404: the base URL or the model name)."
            ) from err
        except (OSError, http.client.HTTPException) as err:  # URLError, timeouts, resets
            raise ExplainerError(
                f"Could not reach the LLM service at {url} ({type(err).__name__}: {err}): check "
                f"{BASE_URL_ENV} (currently {self.base_url!r}) and the network."
            ) from err
        except (json.JSONDecodeError, UnicodeDecodeError) as err:
            raise ExplainerError(
                f"The reply from {url} is not JSON ({err}): is {BASE_URL_ENV} an OpenAI-compatible "
                f"API root (ending in /v1)? {check}."
            ) from err
        try:
            return reply["choices"][0]["message"]["content"]
        except (KeyError, IndexError, TypeError) as err:
            raise ExplainerError(
                f"Unexpected reply from {url} (no choices[0].message.content: {err!r}): {check}."
            ) from err

    def _clip(self, example: Example) -> str:
        """The example's last ``max_words_per_example`` words (``...`` marks a cut)."""
        words = example.text.split()
        if len(words) <= self.max_words_per_example:
            return " ".join(words)
        return "... " + " ".join(words[-self.max_words_per_example :])

    def explain(self, active: Sequence[Example], inactive: Sequence[Example]) -> Explanation:
        """One request: up to ``max_examples`` of each kind, spread over domains and texts."""
        if not active or not inactive:
            raise NoExplanation("Explaining needs both active and inactive prompts.")
        lines = [EXPLAIN_PROMPT, "", "ACTIVE:"]
        lines += [f"- {self._clip(e)}" for e in spread_sample(active, self.max_examples)]
        lines += ["", "INACTIVE:"]
        lines += [f"- {self._clip(e)}" for e in spread_sample(inactive, self.max_examples)]
        text = self._chat("\n".join(lines)).strip()
        return Explanation(text, re.findall(r'"([^"]+)"', text), f"{self.name}:{self.model}")

    def predict(self, explanation: Explanation, examples: Sequence[Example]) -> list[bool]:
        """Labels from the explanation alone, ``batch_size`` examples per request."""
        out: list[bool] = []
        for start in range(0, len(examples), self.batch_size):
            chunk = examples[start : start + self.batch_size]
            body = [CLASSIFY_PROMPT.format(explanation=explanation.text, n=len(chunk)), ""]
            body += [f"{i + 1}. {self._clip(e)}" for i, e in enumerate(chunk)]
            out += parse_labels(self._chat("\n".join(body)), len(chunk))
        return out


def parse_labels(reply: str, n: int) -> list[bool]:
    """``n`` booleans from a reply holding a JSON list of 0/1 (or that many 0/1 digits)."""
    match = re.search(r"\[[^\]]*\]", reply)
    values: list = []
    if match:
        try:
            values = json.loads(match.group(0))
        except json.JSONDecodeError:
            values = []
    if len(values) != n:
        values = [int(d) for d in re.findall(r"\b[01]\b", reply)]
    if len(values) != n:
        raise ExplainerError(f"Expected {n} labels in the classifier's reply, got: {reply[:200]!r}")
    return [bool(int(v)) for v in values]


def get_explainer(kind: str = "auto", tokenizer=None) -> Explainer:
    """``"offline"``, ``"llm"`` (needs the key) or ``"auto"`` (LLM with a key, else offline).

    The offline explainer needs the model's tokenizer to read prompts as words.
    """
    if kind not in ("auto", "offline", "llm"):
        raise ExplainerError(f"Unknown explainer {kind!r}: choose 'auto', 'offline' or 'llm'.")
    if kind in ("auto", "llm"):
        llm = LLMExplainer.from_env()
        if llm is not None:
            return llm
        if kind == "llm":
            raise ExplainerError(
                f"No LLM explainer: set {API_KEY_ENV} (and optionally {BASE_URL_ENV}, {MODEL_ENV})."
            )
    if tokenizer is None:
        raise InputError("The offline explainer needs the model's tokenizer: pass tokenizer=...")
    return OfflineExplainer(tokenizer)
