"""The main job: ``python -m context_neurons reproduce``. The pipeline (:mod:`.pipeline`), its table
(:mod:`.table`) and the one table of the paper's numbers (:mod:`.paper`). The top layer: it imports
the technique modules, none of which imports it."""

from context_neurons.reproduce.pipeline import reproduce  # noqa: F401
from context_neurons.reproduce.table import (  # noqa: F401
    Row,
    explain_table,
    format_table,
    to_json,
)
