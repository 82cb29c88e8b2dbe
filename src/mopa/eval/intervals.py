"""95% intervals of a mean: the one helper every experiment's table uses.

Two methods, for the two kinds of sample mopa's experiments average:

* ``"normal"``: ``mean +- 1.96 s / sqrt(n)``, for many independent episodes (a
  tournament cell, a condition's captures). With ``n`` in the tens or more the
  normal quantile is the Student-t one to within a few percent.
* ``"t"``: ``mean +- t_{0.975, n-1} s / sqrt(n)``, for a few seeds (``n`` of 3 to
  6, where 1.96 would understate the interval by up to a factor 2.2).

``s`` is the sample standard deviation (``ddof=1``). A single value has no spread
to measure: its half-width is 0.
"""

from __future__ import annotations

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
