"""Stability of denominators. This subpackage implements chapter 3 (``book/notation.md`` §4).

With the decomposition ``A_{n,i} = pos_n(i) c_n(t_i) / D_n``, a head's output is almost a fixed
kernel-weighted bag of tokens *if* the denominator ``D_n = sum_{j<=n} pos_n(j) c_n(t_j)`` hardly
depends on the text. Gibson's argument: model the source tokens as independent draws from a token
distribution whose content weights have mean ``mu`` and variance ``sigma^2``. Because the kernel
sums to one,

    E[D_n] = mu,        Var[D_n] = sigma^2 sum_i pos_n(i)^2 = sigma^2 / n_eff,

so the relative spread of ``D_n`` is ``(sigma / mu) / sqrt(n_eff)``: a head that averages over many
tokens (a contextual head, ``n_eff ~ 50-100``) has a nearly constant denominator; a head that looks
at one or two tokens (a detokenization head) does not. Two tail bounds make this quantitative:

    Hoeffding (c in [a, b]):  P(|D_n - mu| >= t) <= 2 exp(-2 t^2 / ((b - a)^2 sum_i pos_n(i)^2)),
    Chebyshev:                P(|D_n - mu| >= t) <= sigma^2 sum_i pos_n(i)^2 / t^2.

Conventions (stated in the chapter):

* the destination token is ``' the'`` at every position ``n`` (the text's own token at ``n`` is
  replaced), so ``D_n`` measures the *context*, not the current token;
* the token distribution of the model is the pooled unigram distribution of the texts studied
  (without ``<|endoftext|>``); the BOS at position 0 and the destination at ``n`` are fixed tokens,
  so exactly, ``E[D_n] = pos_n(0) c(BOS) + mu sum_{0<i<n} pos_n(i) + pos_n(n) c(dest)`` and the
  variance and bounds use ``sum_{0<i<n} pos_n(i)^2``, so that the coefficient of variation is
  ``rho (sigma / mu) / sqrt(n_eff_random)`` (see :class:`DenominatorStudy`). These corrections are
  small for the contextual heads at ``n = 512`` but dominate for local heads, whose destination
  position carries most of the kernel;
* all denominators are reported in units of ``mu`` (``D / mu``): content weights are handled as
  logarithms, because ``c`` itself can overflow.
"""

from context_neurons.stability.bounds import (  # noqa: F401  (the chapter's namespace: st.*)
    bootstrap_standard_error,
    chebyshev_bound,
    chebyshev_deviation,
    coefficient_of_variation,
    correlation,
    cv_standard_error,
    hoeffding_bound,
    hoeffding_deviation,
    iid_moments,
    simulate_weighted_sums,
    sum_of_squares,
    tail_probability,
    weighted_sum_cumulants,
    weighted_sum_variance,
)
from context_neurons.stability.denominators import (  # noqa: F401
    DestinationTerms,
    denominators_over_positions,
    destination_queries_double,
    destination_terms,
    log_content_table,
    log_denominators,
    log_kernels,
    relative_denominators,
)
from context_neurons.stability.study import (  # noqa: F401
    DenominatorStudy,
    StopWords,
    denominator_study,
    kernel_weighted_density,
    stop_words,
)
from context_neurons.stability.across_texts import (  # noqa: F401
    DENSITY_COLUMNS,
    ShareSpread,
    density_effect,
    quantile_intervals,
    share_spread,
    signed_formats,
)
from context_neurons.stability.concentration import (  # noqa: F401
    GroupRanges,
    group_ranges,
)
from context_neurons.stability.half_widths import (  # noqa: F401
    HalfWidths,
    interval_half_widths,
)
