"""Plotting. This subpackage holds the thin matplotlib wrappers behind the book's figures.

One module per technique module (:mod:`.decomposition`, :mod:`.taxonomy`, :mod:`.stability`,
:mod:`.circuit`, :mod:`.discovery`, :mod:`.evaluation`, :mod:`.lookups`), and :mod:`.style` for
what they share (matplotlib's settings, one colour per head, group and sign). Each function takes
tensors or tables computed elsewhere, draws one figure and returns it; chapters add the caption,
which names the model that produced the figure (every figure title does too, through ``model=``).
Nothing of the package's mathematics imports this subpackage.
"""

from context_neurons.plotting import style  # noqa: F401  (applies the figure settings)
