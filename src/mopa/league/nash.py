"""Exploitability measures over a population: the seed's spread proxy, and the
meta-game Nash equilibrium and NashConv of an empirical payoff table.

The meta-game treats each policy of a population as a pure strategy of a
two-player zero-sum game whose payoff ``M[i, j]`` is what row policy ``i`` earns
against column policy ``j`` (for example ``win rate - loss rate``). Its Nash
equilibrium comes from the classic linear programme (maximise ``v`` subject to
``x^T M >= v``, ``x`` a distribution) solved with scipy's HiGHS. NashConv of a
mixed strategy pair is the sum of what each player gains by switching to its
best response: 0 exactly at an equilibrium, positive elsewhere.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from mopa.errors import InvalidParameterError


def exploitability_proxy(win_rates: np.ndarray) -> float:
    """Seed 001's ``nash_exploitability_proxy``: ``max_i(1 - wr_i) -
    mean_i(1 - wr_i)`` over a policy's win rates ``wr [K]`` against ``K`` pool
    members.

    It is a *spread* statistic (how much worse the worst match-up is than the
    average), not exploitability: a policy that loses every game to everyone
    scores 0. Use :func:`nash_conv` or a trained best response
    (:func:`mopa.league.exploitability.best_response_exploitability`) for real
    measures.
    """
    losses = 1.0 - np.asarray(win_rates, np.float64)
    if losses.size == 0:
        raise InvalidParameterError("no win rates")
    return float(losses.max() - losses.mean())


class MetaNash(NamedTuple):
    row: np.ndarray
    """``[R]`` the row player's equilibrium mixture."""
    column: np.ndarray
    """``[C]`` the column player's equilibrium mixture."""
    value: float
    """The row player's equilibrium payoff."""


def _maximin(payoff: np.ndarray) -> tuple[np.ndarray, float]:
    from scipy.optimize import linprog

    rows, columns = payoff.shape
    # Variables (x_1..x_R, v); minimise -v.
    cost = np.zeros(rows + 1)
    cost[-1] = -1.0
    # For every column j: v - sum_i x_i M[i, j] <= 0.
    a_ub = np.hstack([-payoff.T, np.ones((columns, 1))])
    b_ub = np.zeros(columns)
    a_eq = np.hstack([np.ones((1, rows)), np.zeros((1, 1))])
    bounds = [(0.0, None)] * rows + [(None, None)]
    result = linprog(
        cost, A_ub=a_ub, b_ub=b_ub, A_eq=a_eq, b_eq=[1.0], bounds=bounds, method="highs"
    )
    if not result.success:  # pragma: no cover - the LP always has a solution
        raise RuntimeError(f"meta-game LP failed: {result.message}")
    x = np.clip(result.x[:rows], 0.0, None)
    return x / x.sum(), float(result.x[-1])


def meta_nash(payoff: np.ndarray) -> MetaNash:
    """Nash equilibrium of the zero-sum meta-game with row payoffs ``payoff
    [R, C]`` (the column player receives ``-payoff``)."""
    payoff = np.asarray(payoff, np.float64)
    if payoff.ndim != 2 or min(payoff.shape) < 1:
        raise InvalidParameterError(f"payoff must be [R, C], got {payoff.shape}")
    row, value = _maximin(payoff)
    column, _ = _maximin(-payoff.T)
    return MetaNash(row, column, value)


def nash_conv(payoff: np.ndarray, row: np.ndarray, column: np.ndarray) -> float:
    """NashConv of the mixtures ``row [R]`` and ``column [C]`` in the zero-sum game
    ``payoff [R, C]``: ``max_i (M y)_i - x^T M y`` (the row player's gain from a
    best response) plus ``x^T M y - min_j (x^T M)_j`` (the column player's)."""
    payoff = np.asarray(payoff, np.float64)
    x = np.asarray(row, np.float64)
    y = np.asarray(column, np.float64)
    for name, mix, size in (
        ("row", x, payoff.shape[0]),
        ("column", y, payoff.shape[1]),
    ):
        if mix.shape != (size,) or np.any(mix < -1e-9) or abs(mix.sum() - 1) > 1e-6:
            raise InvalidParameterError(f"{name} must be a distribution over {size}")
    value = x @ payoff @ y
    return float((payoff @ y).max() - value + value - (x @ payoff).min())


def population_nash_conv(payoff: np.ndarray) -> tuple[MetaNash, float]:
    """The meta-game Nash of ``payoff`` and the NashConv of the uniform mixture
    over the population (how far "play everyone equally" is from equilibrium)."""
    payoff = np.asarray(payoff, np.float64)
    uniform_row = np.full(payoff.shape[0], 1.0 / payoff.shape[0])
    uniform_column = np.full(payoff.shape[1], 1.0 / payoff.shape[1])
    return meta_nash(payoff), nash_conv(payoff, uniform_row, uniform_column)
