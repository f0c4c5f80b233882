"""nbval runs the stored chapters on the planted model, whatever the caller's environment says,
and compares their outputs with :func:`context_neurons.book.stored_outputs.output_difference`:
the text exactly, the numbers within the last-digit noise of another CPU (``book/rebuilding.md``)."""

import os
from collections import defaultdict

from nbval.plugin import IPyNbCell, transform_streams_for_comparison

from context_neurons.book.stored_outputs import output_difference

os.environ["CONTEXT_NEURONS_MODEL"] = "planted"
#: A cell's report names (in ``user_properties``) each output type that matched within the
#: tolerance but not character for character: what another CPU changed. tests/conftest.py lists
#: them at the end of the run (it, not this file, is loaded where pytest-xdist reports).
TOLERANCE_PROPERTY = "matched_within_tolerance"
os.environ.setdefault("CONTEXT_NEURONS_THREADS", "2")  # 1 and 2 must print alike


def flattened(cell: IPyNbCell, outputs, skip: tuple[str, ...]) -> dict[str, list]:
    """MIME type or stream name -> its sanitised values in order, as nbval flattens outputs."""
    found = defaultdict(list)
    for output in transform_streams_for_comparison(outputs):
        for key, value in output.items():
            if key in skip:
                continue
            items = value.items() if key == "data" else [(key, value)]
            for name, item in items:
                if name not in skip:
                    found[name].append(cell.sanitize(item))
    return found


def compare_within_tolerance(self: IPyNbCell, test, ref, skip_compare=None) -> bool:
    """nbval's ``compare_outputs`` with :func:`output_difference` in place of ``!=``."""
    skip = skip_compare or self.parent.skip_compare
    stored, fresh = flattened(self, ref, skip), flattened(self, test, skip)
    self.comparison_traceback = []
    if stored.keys() != fresh.keys():
        self.comparison_traceback.append(
            f"output types differ: {sorted(stored)} stored, {sorted(fresh)} now"
        )
        return False
    for key, stored_values in stored.items():
        if len(stored_values) != len(fresh[key]):
            self.comparison_traceback.append(
                f"{len(stored_values)} '{key}' outputs stored, {len(fresh[key])} now"
            )
            return False
        for was, now in zip(stored_values, fresh[key]):
            reason = output_difference(was, now)
            if reason is not None:
                self.comparison_traceback.append(f"'{key}': {reason}")
                self.format_output_compare(key, was, now)
                return False
            if was != now:
                self.user_properties.append((TOLERANCE_PROPERTY, key))
    return True


IPyNbCell.compare_outputs = compare_within_tolerance
