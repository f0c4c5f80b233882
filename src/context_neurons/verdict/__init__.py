"""The pre-registered evaluation of discovery on a model nobody wrote (chapter 8; issue 22).

The protocol (``assets/protocol/discovery-verdict.json``, v1) was committed before any verdict
was computed: the data (CAL and EVAL halves of the held-out documents), the additive truth, the
statistics with their cluster-bootstrap intervals, the controls and the verdict rule. Protocol v2
(``discovery-verdict-v2.json``) was committed after v1's verdicts and before any of its own
numbers: the truth's spread of single positions, and broad heads as stable as the contextual ones.
:mod:`.data` reads the documents, :mod:`.statistics` holds the pure statistics and the rule,
:mod:`.evaluate` runs it all on a model, :mod:`.planted` is the planted control.

Protocol v3 (``discovery-verdict-v3.json``, registered before any v3 number) is run by
:mod:`.v3` (``python -m context_neurons v3``: :mod:`context_neurons.commands.v3`): CONFIRM data (:mod:`.v3_data`), the context set
(:mod:`.context_set`), the truth (:mod:`.truth`), the score and its baselines
(:mod:`.baselines`), the primary comparison (:mod:`.comparison`), the exploratory label-free arm
(:mod:`.label_free`) and the report (:mod:`.v3_report`).

The design every protocol moves to (issue 51). Done: the registry, the typed constants, the
typed model entries and verdicts, no module importing this package's face. Next, in this order:

- Registry and constants: :mod:`.registry` lists each protocol once (version, file, status,
  result key) for the loader, ``Results``, the main job's table and pipeline; :mod:`.protocol`
  parses each file once into typed fields, values registered only in words included (v3's
  :class:`~.protocol.Seeds`, :class:`~.protocol.RegisteredModels`, windows per unit, the
  sensitivity's thresholds on d, the bag's length, the previous-token threshold; the
  equivalence margin a comparison says and the thresholds the report says), each tested against
  the file; the context set reads its protocol's previous-token threshold (no longer chapter
  2's ``PREVIOUS_TOKEN_MIN``). One base, :class:`~.protocol.Protocol` (name, registered date,
  question, primary score, window means' start, truth thresholds, bootstrap, verdict
  thresholds, the file), which :func:`~.protocols.load` returns and the registry's readers take;
  each protocol's own sections are its adapter's typed fields (:class:`~.protocol.ProtocolV1`
  for v1 and v2; :class:`~.protocol.ConfirmatoryProtocol`, what the shared machinery reads, for
  :class:`~.protocol.ProtocolV3` and :class:`~.gpt2_protocol.ProtocolGPT2`).
- Typed values: :mod:`.entries` (a model's entry, or why it has none),
  :class:`~.statistics.Verdict`, :class:`~.comparison.PrimaryVerdict`, the training record
  read once where its directory is read (:class:`~context_neurons.training.summary.TrainingRun`,
  passed to ``evaluate``, ``evaluate_v3``, ``protocol_data``, ``v3_data``, ``comparability``,
  ``step0_model`` and the main job's rows in place of the dict); how an evaluation runs, one
  value (:class:`~.options.RunOptions`), and what it scored, one value (:class:`~.v3.Scored`,
  read by the verdicts, controls and sensitivities of v3 and the GPT-2 adapter); the primary
  comparison's score named by its protocol (``scores.primary``,
  :attr:`~.protocol.Protocol.primary_score`), not the first key of a dict; each protocol's result a typed field of the main job's
  ``Results`` (:class:`~context_neurons.reproduce.results.ProtocolResults`).
- Core modules named for what they compute, shared by every protocol: ``documents`` (corpora by
  domain, documents grouped into units, CAL/EVAL/CONFIRM windows), ``heads`` (head sets, the
  context set), ``truth``, ``draws`` (units, neurons, the permutation, random read directions),
  ``scores`` (scores, baselines and v2's verdicts, now in ``evaluate``), ``compare``,
  ``controls``, ``stored`` (stored results of any registered model), ``formatting`` (one
  interval formatter). Done: ``Timer`` and the main job's ``Steps`` are one class,
  :class:`context_neurons.progress.Phases`; :mod:`.documents` (a key's hash, corpora by domain,
  units, windows; v1/v2's, v3's and the GPT-2 adapter's data call it), :mod:`.draws` (paired
  draws from three seeds, random read directions), :mod:`.scores` (each score against a truth,
  v2's verdicts, the same-model controls), :mod:`.formatting`; the computations v3 and the
  GPT-2 adapter share, named for what they compute: :mod:`.context_set`, :mod:`.truth`,
  :mod:`.baselines` (the frequency-aware score's weight algebra and its baselines),
  :mod:`.bag_of_tokens`, :mod:`.comparison`, :mod:`.label_free`; v3's
  controls draw their random directions through :func:`~.draws.random_read_directions`, and
  the controls and sensitivities take the one :class:`~.v3.Scored` value.
- Each protocol a thin adapter (``protocols/v1.py``, ``v2.py``, ``v3.py``): its typed
  constants, data source, model list and its pipeline written out in one function; a protocol
  on another model family is a new adapter and a data source. The commands become subcommands
  of ``python -m context_neurons`` through its one error wrapper (module entry points
  delegating). Done: ``v3.py`` and ``development.py`` are library modules only; their commands
  are :mod:`context_neurons.commands.v3` and :mod:`context_neurons.commands.development`.
"""

from context_neurons.verdict.data import protocol_data
from context_neurons.verdict.evaluate import evaluate, head_sets, truth_summary, verdict_sentences
from context_neurons.verdict.protocol import Protocol, ProtocolV1, load_protocol

__all__ = ["Protocol", "ProtocolV1", "evaluate", "head_sets", "load_protocol", "protocol_data",
           "truth_summary", "verdict_sentences"]
