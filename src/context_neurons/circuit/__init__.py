"""The contextual circuit. This subpackage implements chapter 4 (``book/notation.md``, section 5).

Gibson's paper, section "The contextual circuit": with the destination token fixed to ``' the'``
(a stop word), the contextual heads of layer 0 together write, at position ``n``,
approximately

    sum_i K[n, i] e(t_i)   +   positional part(n),

an exponentially decaying bag of *extended embeddings* ``e(t)``. One module per question:

* :mod:`.build`: how the circuit is built from the weights and one calibration text (the three
  approximations that lead to the bag, each a choice made explicit there; which heads; the
  cached circuit of each model);
* :mod:`.fit`: how well it stands for the heads: each approximation measured on its own, and the
  circuit's output against the heads' true output, with each approximation removed in turn.
"""

from context_neurons.circuit.build import (  # noqa: F401  (the chapter's namespace: cc.*)
    DENOMINATORS,
    FRAMES,
    N_MIN,
    Calibration,
    CircuitError,
    ContextualCircuit,
    KnownHeads,
    build_circuit,
    calibration_log_denominators,
    contextual_heads,
    get_circuit,
    head_kernels,
    ln2_inverse_scales,
    median_kernel,
    reference_log_denominators,
    token_values,
)
from context_neurons.circuit.fit import (  # noqa: F401
    FIT_VARIANTS,
    CircuitFit,
    circuit_error,
    denominator_table,
    effective_tokens,
    fit_table,
    kernel_spread,
    true_head_output,
    variant_fits,
)
