"""Checks of chapter 3's exercises (how stable the softmax denominators are)."""

from __future__ import annotations

import torch

from context_neurons import decomposition as dec
from context_neurons import stability as st
from context_neurons.book.exercise_checks.registry import PROPERTY, VALUE, close, holds, number
from context_neurons.book.exercise_checks.registry import register, tensor
from context_neurons.text.windows import calibration_tokens


@register("ex-ch03-predict-spread", VALUE,
          {"sigma": "sd of c/mu", "sum_sq": "sum of pos^2 over the random positions",
           "cv_predicted": "the predicted CV"},
          "each of the three numbers against the study's weights, kernel and predicted_cv, "
          "to a relative 1e-6")
def predict_spread(ns: dict) -> str:
    study, head = ns["study"], ns["shown"][0]
    values, probs = study.values(head).double(), study.probs.double()
    sigma = (probs * (values - (probs * values).sum()) ** 2).sum().sqrt()
    close("sigma", number("sigma", ns["sigma"]), sigma, rtol=1e-6,
          hint="a standard deviation under study.probs, not over the list of tokens.")
    close("sum_sq", number("sum_sq", ns["sum_sq"]),
          (study.kernel[study.row(head), 1:-1].double() ** 2).sum(), rtol=1e-6,
          hint="which positions of the kernel row are fixed, not random?")
    cv = number("cv_predicted", ns["cv_predicted"])
    close("cv_predicted", cv, study.predicted_cv(head), rtol=1e-6,
          hint="CV = sd of D / mean of D.")
    return f"head {head}: predicted CV {cv:.4f}, as study.predicted_cv."


@register("ex-ch03-variance", VALUE,
          {"draws": "[N, n - 1] token indices", "sums": "one weighted sum per synthetic text"},
          "draws index the study's tokens, sums are their kernel-weighted weights, and their "
          "mean and variance are within 5 standard errors of the model's (for the narrowest "
          "head)")
def variance(ns: dict) -> str:
    study = ns["study"]
    head = min(study.heads, key=study.n_eff)
    kernel = study.kernel[study.row(head), 1:-1].double().cpu()
    values, probs = study.values(head).double().cpu(), study.probs.double().cpu()
    draws = torch.as_tensor(ns["draws"])
    if draws.dim() == 1 and draws.numel() % len(kernel) == 0:  # drawn flat, viewed as [N, n - 1]
        draws = draws.view(-1, len(kernel))
    holds(draws.dim() == 2 and draws.shape[1] == len(kernel) and draws.shape[0] >= 1000,
          f"`draws` has shape {tuple(draws.shape)}; expected [N, {len(kernel)}] with N >= 1000 "
          "(one row per synthetic text, one column per random position 0 < j < n).")
    holds(not draws.is_floating_point() and int(draws.min()) >= 0
          and int(draws.max()) < len(values), "`draws` should be indices into study.values(head).")
    sums = tensor("sums", ns["sums"], (draws.shape[0],))
    reference = values[draws.cpu()] @ kernel
    close("sums", sums, reference, rtol=1e-5, atol=1e-6,
          hint="each sum weighs the drawn tokens' content weights by the kernel.")
    kappa2, _, kappa4 = st.weighted_sum_cumulants(kernel, values, probs)
    mean, expected = float(sums.mean()), float((probs * values).sum() * kernel.sum())
    holds(abs(mean - expected) < 5 * (kappa2 / len(sums)) ** 0.5,
          f"the mean of your sums, {mean:.4g}, is more than 5 standard errors from the "
          f"independent-token model's {expected:.4g}: are the tokens drawn from study.probs?")
    standard_error = ((kappa4 + 2 * kappa2**2) / len(sums)) ** 0.5
    measured = float(sums.var())
    holds(abs(measured - kappa2) < 5 * standard_error,
          f"the variance of your sums, {measured:.4g}, is more than 5 standard errors from the "
          f"formula's {kappa2:.4g}: are the tokens drawn from study.probs, independently?")
    return f"head {head}: variance {measured:.4g}, formula {kappa2:.4g}."


@register("ex-ch03-calibration", PROPERTY,
          {"news_study": "the denominator study with the news text's mean keys",
           "kernel_tv": "TV distance of each head's kernel between the two calibrations"},
          "the content weights are the prose study's exactly, the kernels those of the news "
          "text's mean keys (recomputed), and kernel_tv is the TV between the two studies' "
          "kernels, head by head",
          website="Your verdict (does the change of CV exceed its standard error?) only the "
                  "solution on the website can judge.")
def calibration(ns: dict) -> str:
    study, news, shown = ns["study"], ns["news_study"], ns["shown"]
    rows = [study.row(h) for h in shown]
    holds(list(news.heads) == list(shown), "build the news study for the heads of section 3.1 "
                                           "(`shown`).")
    holds(torch.allclose(news.log_c, study.log_c[rows], rtol=0.0, atol=1e-9),
          "the content weights of your news study differ from the prose study's: only M "
          "should change.")
    model = ns["model"]
    news_tokens = calibration_tokens(model.tokenizer, "news", n_ctx=model.cfg.n_ctx)[1:]
    mean_keys = dec.mean_positional_keys(model, news_tokens.to(model.cfg.device), study.n + 1)
    kernel = st.log_kernels(model, study.n + 1, dec.DEFAULT_DESTINATION, list(shown),
                            mean_keys)[:, study.n].exp()
    close("news_study.kernel", news.kernel, kernel, rtol=0.0, atol=1e-6,
          hint="M is the mean key of the news text's tokens (calibration_tokens(..., 'news')), "
               "passed as mean_keys= to the study.")
    reference = dec.tv_distance(news.kernel, study.kernel[rows])
    close("kernel_tv", ns["kernel_tv"], reference, rtol=1e-4, atol=1e-7)
    return f"largest kernel TV {float(reference.max()):.4f}; the content weights did not move."
