"""95% intervals of a mean and of a proportion: the helpers every experiment's
table uses.

Two methods for a mean, for the two kinds of sample mopa's experiments average:

* ``"normal"``: ``mean +- 1.96 s / sqrt(n)``, for many independent episodes (a
  tournament cell, a condition's captures). With ``n`` in the tens or more the
  normal quantile is the Student-t one to within a few percent.
* ``"t"``: ``mean +- t_{0.975, n-1} s / sqrt(n)``, for a few seeds (``n`` of 3 to
  6, where 1.96 would understate the interval by up to a factor 2.2).

``s`` is the sample standard deviation (``ddof=1``). A single value has no spread
to measure: its half-width is 0.

:func:`bootstrap_mean`: the percentile interval of a mean, episodes resampled
within groups (the training seed), for figures whose spread is not normal.

:func:`draws_interval`: the mean of a few independent draws of a whole pipeline
(training included), with an interval that counts the variation between draws as
well as each draw's own (between episodes).

A proportion of wins among ``n`` episodes takes the Wilson score interval
(:func:`wilson_interval`), which stays inside ``[0, 1]``; two independent ones
differ with Newcombe's hybrid interval (:func:`proportion_difference`).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from mopa.errors import InvalidParameterError

Z_95 = 1.96
"""The normal distribution's two-sided 95% quantile."""

METHODS = ("normal", "t")


def half_width(values: Any, *, method: str = "normal", axis: int = 0) -> np.ndarray:
    """Half-width of the 95% interval of the mean of ``values`` along ``axis``.

    Args:
        values: an array; ``axis`` holds the samples.
        method: ``"normal"`` or ``"t"`` (see the module docstring).
        axis: the sample axis.

    Returns:
        An array of ``values``'s shape without ``axis`` (0 where there is one
        sample).
    """
    if method not in METHODS:
        raise InvalidParameterError(f"method must be one of {METHODS}, got {method!r}")
    values = np.asarray(values, np.float64)
    n = values.shape[axis]
    if n < 2:
        return np.zeros(np.delete(values.shape, axis))
    if method == "normal":
        scale = Z_95
    else:
        from scipy import stats  # imported on first use: it is slow to import

        scale = stats.t.ppf(0.975, n - 1)
    return scale * values.std(axis, ddof=1) / np.sqrt(n)


def mean_interval(values: Any, *, method: str = "normal") -> dict[str, Any]:
    """``{"mean", "ci95": [low, high]}`` of ``values`` (any shape, pooled)."""
    values = np.asarray(values, np.float64).reshape(-1)
    mean = float(values.mean())
    half = float(half_width(values, method=method))
    return {"mean": mean, "ci95": [mean - half, mean + half]}


def difference_interval(a: Any, b: Any) -> dict[str, Any]:
    """``{"mean", "ci95": [low, high]}`` of ``mean(a) - mean(b)``, ``a`` and ``b``
    independent samples (any shapes, each pooled): the normal interval with the
    two means' standard errors added in quadrature. For paired samples take
    :func:`mean_interval` of the differences instead."""
    a = np.asarray(a, np.float64).reshape(-1)
    b = np.asarray(b, np.float64).reshape(-1)
    mean = float(a.mean() - b.mean())
    half = float(np.hypot(half_width(a), half_width(b)))
    return {"mean": mean, "ci95": [mean - half, mean + half]}


def wilson_interval(successes: int, n: int) -> tuple[float, float]:
    """95% Wilson score interval of a binomial proportion (Wilson 1927; SciPy's
    ``binomtest(...).proportion_ci(method="wilson")``): it stays inside ``[0, 1]``
    and is not degenerate at 0 or ``n`` successes.

    Raises:
        InvalidParameterError: ``n < 1`` or ``successes`` outside ``[0, n]``.
    """
    if n < 1 or not 0 <= successes <= n:
        raise InvalidParameterError(
            f"need 0 <= successes <= n, n >= 1: {successes}/{n}"
        )
    from scipy.stats import binomtest  # imported on first use: it is slow to import

    interval = binomtest(successes, n).proportion_ci(0.95, method="wilson")
    return float(interval.low), float(interval.high)


def proportion_difference(k1: int, n1: int, k2: int, n2: int) -> dict[str, Any]:
    """Difference of two independent proportions ``k1/n1 - k2/n2`` with
    Newcombe's 95% hybrid score interval (Newcombe 1998, method 10), built from
    the two Wilson intervals.

    Returns:
        ``{"diff", "ci95": [lo, hi]}``.
    """
    p1, p2 = k1 / n1, k2 / n2
    l1, u1 = wilson_interval(k1, n1)
    l2, u2 = wilson_interval(k2, n2)
    diff = p1 - p2
    low = diff - math.sqrt((p1 - l1) ** 2 + (u2 - p2) ** 2)
    high = diff + math.sqrt((u1 - p1) ** 2 + (p2 - l2) ** 2)
    return {"diff": diff, "ci95": [low, high]}


def bootstrap_mean(
    values: np.ndarray, groups: np.ndarray, num_resamples: int, seed: int
) -> list[float]:
    """95% percentile interval of the mean of ``values [N, S]`` (rows are
    episodes), resampling rows with replacement within each group of ``groups
    [N]`` (the training seed)."""
    rng = np.random.default_rng(seed)
    members = [np.flatnonzero(groups == g) for g in np.unique(groups)]
    draws = np.empty(num_resamples)
    for i in range(num_resamples):
        rows = np.concatenate([rng.choice(m, size=len(m)) for m in members])
        draws[i] = values[rows].mean()
    return [float(np.percentile(draws, q)) for q in (2.5, 97.5)]


def draws_interval(means: Any, half_widths: Any) -> dict[str, Any]:
    """``{"mean", "ci95": [low, high]}`` of the mean of ``R`` independent draws of
    a whole pipeline (training included), from each draw's mean and the half-width
    of its own 95% interval (between episodes; 0 where it has none).

    The draws are a random-effects sample: draw ``r``'s mean is the figure plus a
    draw effect (variance ``tau^2``, what another training draw changes) plus its
    episodes' error (variance ``w_r = (h_r / 1.96)^2``). The sample variance ``s^2``
    of the ``R`` means estimates ``tau^2 + mean(w)``; with ``tau^2`` estimated by
    moments and floored at 0, the pooled mean's variance is ``max(s^2, mean(w)) /
    R``, and the quantile is Student's t with ``R - 1`` degrees of freedom (a few
    draws measure their spread poorly: with 3 draws it is 4.30, not 1.96).

    Raises:
        InvalidParameterError: fewer than 2 draws, or the two arrays differ in
            length.
    """
    means = np.asarray(means, np.float64).reshape(-1)
    half_widths = np.asarray(half_widths, np.float64).reshape(-1)
    if means.size < 2 or half_widths.shape != means.shape:
        raise InvalidParameterError(
            f"need the means and half-widths of 2 or more draws, got {means.size} "
            f"means and {half_widths.size} half-widths"
        )
    from scipy import stats  # imported on first use: it is slow to import

    r = means.size
    within = float(np.mean((half_widths / Z_95) ** 2))
    variance = max(float(means.var(ddof=1)), within) / r
    half = float(stats.t.ppf(0.975, r - 1)) * math.sqrt(variance)
    mean = float(means.mean())
    return {"mean": mean, "ci95": [mean - half, mean + half]}
