"""The main job: ``python -m context_neurons reproduce``. The pipeline (:mod:`.pipeline`), the
typed result it returns (:mod:`.results`), its table (:mod:`.table`) and the one table of the
paper's numbers (:mod:`.paper`). The top layer: it imports the technique modules, none of which
imports it."""

from context_neurons.reproduce.pipeline import reproduce  # noqa: F401
from context_neurons.reproduce.results import HeldOutTruth, Results, Row  # noqa: F401
from context_neurons.reproduce.table import explain_table, format_table, number_rows  # noqa: F401
