"""The pre-registered evaluation of discovery on a model nobody wrote (chapter 8; issue 22).

The protocol (``assets/protocol/discovery-verdict.json``, v1) was committed before any verdict
was computed: the data (CAL and EVAL halves of the held-out documents), the additive truth, the
statistics with their cluster-bootstrap intervals, the controls and the verdict rule. Protocol v2
(``discovery-verdict-v2.json``) was committed after v1's verdicts and before any of its own
numbers: the truth's spread of single positions, and broad heads as stable as the contextual ones.
:mod:`.data` reads the documents, :mod:`.statistics` holds the pure statistics and the rule,
:mod:`.evaluate` runs it all on a model, :mod:`.planted` is the planted control.

Protocol v3 (``discovery-verdict-v3.json``, registered before any v3 number) is run by
:mod:`.v3` (``python -m context_neurons v3``, or ``python -m context_neurons.verdict.v3``; not
imported here, so that ``-m`` runs it once): CONFIRM data (:mod:`.v3_data`), the context set (:mod:`.v3_heads`), the truth
(:mod:`.v3_truth`), the score and its baselines (:mod:`.v3_scores`), the primary comparison
(:mod:`.v3_compare`), the exploratory label-free arm (:mod:`.v3_label_free`) and the report
(:mod:`.v3_report`).
"""

from context_neurons.verdict.data import protocol_data
from context_neurons.verdict.evaluate import evaluate, head_sets, truth_summary, verdict_sentences
from context_neurons.verdict.protocol import Protocol, load_protocol

__all__ = ["Protocol", "evaluate", "head_sets", "load_protocol", "protocol_data", "truth_summary",
           "verdict_sentences"]
