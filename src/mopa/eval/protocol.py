"""The evaluation protocol the experiments declare their tables with: rows
against opponents, their statistics, and differences between rows.

A table compares *rows* (:class:`~mopa.eval.tournament.TournamentEntry`: a player
and its seed-stacked params) against *opponents* (entries of the other side):

* :func:`play_rows`: rows against one opponent, ``{row: values [S, N]}`` (``S``
  seed pairs, ``N`` episodes), each cell its own episodes or every row the same
  ones (``paired_episodes``: the same keys, so the same starts and the
  opponent's own draws, which pairs the rows' episodes for a difference);
* :func:`play_pool`: rows against every opponent of a pool in one tournament,
  ``{opponent: {row: values}}``; :func:`cell_stats`: a tournament's cells as
  JSON;
* :func:`row_stats` and :func:`pooled_table`: a row's mean over its episodes with
  the normal 95% interval (:func:`~mopa.eval.intervals.mean_interval`), one
  opponent's or pooled over a set of them; :func:`opponent_means`;
* :func:`row_difference`: one row less another, paired (the mean of per-episode
  differences) or independent (the two means' errors in quadrature); over a few
  seeds, :func:`seed_interval` and :func:`seed_gap` (Student-t);
* :func:`outcome_stats` and :func:`win_difference`: a game's win, draw and loss
  (``1, 0, -1`` per episode) with Wilson intervals, and the paired difference of
  two rows' wins;
* :func:`match_stats`: matches of ``M`` consecutive episodes against one
  opponent (a player that adapts across them): the score by episode index, and
  the late episodes' gain over the first;
* :func:`familiarity_drop`: a cross-play table's rows against the opponents
  they were trained with and against the others, and the relative drop between
  the two, with bootstrap intervals.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

import jax
import numpy as np

from mopa.errors import InvalidParameterError
from mopa.eval.intervals import difference_interval, mean_interval, wilson_interval
from mopa.eval.tournament import TournamentEntry, play_tournament


# -- playing ------------------------------------------------------------------------
def play_rows(
    env: Any,
    params: Any,
    rows: Sequence[TournamentEntry],
    opponent: TournamentEntry,
    key: jax.Array,
    *,
    num_episodes: int,
    pairing: str = "all",
    paired_episodes: bool = False,
    metric: str = "captures",
) -> dict[str, np.ndarray]:
    """Every row against ``opponent`` in one tournament.

    Args:
        env, params: the game and its parameters.
        rows: the rows (side A of the tournament).
        opponent: the opponent (side B).
        key: the tournament's key.
        num_episodes: episodes per seed pair.
        pairing: the tournament's seed pairing (``"all"`` or ``"paired"``).
        paired_episodes: every row plays the same episodes (the tournament's
            ``fold_cells=False``); otherwise each cell its own.
        metric: the per-episode total read (an ``info`` key the game sums).

    Returns:
        ``{row name: values [P, N]}``, ``P`` the seed pairs.
    """
    result = play_tournament(
        env,
        params,
        list(rows),
        [opponent],
        key,
        num_episodes=num_episodes,
        pairing=pairing,
        fold_cells=not paired_episodes,
    )
    values = np.asarray(result.metric(metric))  # [R, 1, P, N]
    return {name: values[r, 0] for r, name in enumerate(result.row_names)}


def play_pool(
    env: Any,
    params: Any,
    rows: Sequence[TournamentEntry],
    opponents: Sequence[TournamentEntry],
    key: jax.Array,
    *,
    num_episodes: int,
    metric: str = "captures",
) -> dict[str, dict[str, np.ndarray]]:
    """Every row against every opponent of a pool, in one tournament (every seed
    of a row against every seed of an opponent).

    Returns:
        ``{opponent name: {row name: values [P, N]}}``.
    """
    result = play_tournament(
        env,
        params,
        list(rows),
        list(opponents),
        key,
        num_episodes=num_episodes,
        pairing="all",
    )
    values = np.asarray(result.metric(metric))  # [R, C, P, N]
    return {
        column: {row: values[r, c] for r, row in enumerate(result.row_names)}
        for c, column in enumerate(result.column_names)
    }


def cell_stats(result: Any, metric: str = "captures") -> dict[str, dict[str, Any]]:
    """A tournament's cells as JSON: ``{row: {column: {"mean", "ci95",
    "seed_means"}}}`` of ``metric`` (:meth:`~mopa.eval.tournament.
    TournamentResult.summary`: every cell's episodes pooled over seed pairs)."""
    stats = result.summary(metric)
    return {
        row: {
            column: {
                "mean": float(stats["mean"][r, c]),
                "ci95": [float(v) for v in stats["ci95"][r, c]],
                "seed_means": [float(v) for v in stats["seed_means"][r, c]],
            }
            for c, column in enumerate(result.column_names)
        }
        for r, row in enumerate(result.row_names)
    }


# -- statistics ---------------------------------------------------------------------
def row_stats(values: Any, num_seeds: int) -> dict[str, Any]:
    """``{"mean", "ci95", "n_episodes", "n_seeds"}`` of a row's ``values`` (any
    shape, every entry an episode): the normal 95% interval over episodes."""
    return {
        **mean_interval(values),
        "n_episodes": int(np.size(values)),
        "n_seeds": int(num_seeds),
    }


def mean_stats(values: Any) -> dict[str, Any]:
    """:func:`~mopa.eval.intervals.mean_interval` with the sample size ``n``."""
    return {**mean_interval(values), "n": int(np.size(values))}


def pooled_table(
    values: Mapping[str, Mapping[str, Any]],
    opponents: Sequence[str],
    rows: Sequence[str],
    num_seeds: int,
) -> dict[str, dict[str, Any]]:
    """:func:`row_stats` of every row of ``rows`` that met every opponent of
    ``opponents``, its values against them pooled (concatenated in that order).

    Args:
        values: ``{opponent: {row: values [P, N]}}`` (:func:`play_rows` per
            opponent, or :func:`play_pool`).
        num_seeds: the rows' seeds (reported beside the counts).
    """
    return {
        row: row_stats(np.concatenate([values[o][row] for o in opponents]), num_seeds)
        for row in rows
        if all(row in values[o] for o in opponents)
    }


def opponent_means(
    values: Mapping[str, Mapping[str, Any]],
) -> dict[str, dict[str, float]]:
    """``{opponent: {row: mean}}`` of ``{opponent: {row: values}}``, each mean in
    the values' own precision (``np.mean``)."""
    return {
        o: {row: float(np.mean(v)) for row, v in by_row.items()}
        for o, by_row in values.items()
    }


def row_difference(a: Any, b: Any, *, paired: bool) -> dict[str, Any]:
    """``{"mean", "ci95", "paired", "n"}``: row ``a``'s values less row ``b``'s.

    Paired (``a`` and ``b`` of the same shape, entry by entry the same episode
    key): the mean of the per-episode differences and its normal interval, which
    the shared starts narrow. Else the difference of the means of independent
    samples (:func:`~mopa.eval.intervals.difference_interval`).
    """
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    if paired:
        if a.shape != b.shape:
            raise InvalidParameterError(
                f"paired values must have one shape, got {a.shape} and {b.shape}"
            )
        return {**mean_interval(a - b), "paired": True, "n": int(a.size)}
    return {**difference_interval(a, b), "paired": False, "n": int(a.size)}


def seed_interval(values: Any) -> tuple[float, list[float] | None]:
    """Mean over the leading (seed) axis and its 95% Student-t interval
    ``mean +/- t_{0.975, n-1} std / sqrt(n)`` (``None`` for one seed).

    Args:
        values: ``[n]`` one value per seed.
    """
    values = np.asarray(values, np.float64)
    if len(values) < 2:
        return float(values.mean()), None
    interval = mean_interval(values, method="t")
    return interval["mean"], interval["ci95"]


def seed_gap(
    first: Any, second: Any, higher_is_better: bool, names: tuple[str, str]
) -> dict[str, Any]:
    """``first`` less ``second``, paired by seed, with its :func:`seed_interval`.

    Args:
        first: ``[seed]`` the first method's values.
        second: ``[seed]`` the second's on the same seeds.
        higher_is_better: the values are scores (accuracy), not losses.
        names: the two methods' names, for the outcome.

    Returns:
        ``{"mean", "ci95", "per_seed", "excludes_zero", "outcome"}``; ``outcome``
        is ``"<name> better"`` for the better one when the interval excludes 0,
        else ``no detectable difference``.
    """
    first, second = np.asarray(first), np.asarray(second)
    mean, ci = seed_interval(first - second)
    if ci is None:
        outcome = "undecided (one seed: no interval)"
    else:
        sign = 1.0 if higher_is_better else -1.0
        low, high = sorted((sign * ci[0], sign * ci[1]))
        outcome = (
            f"{names[0]} better"
            if low > 0
            else f"{names[1]} better"
            if high < 0
            else "no detectable difference"
        )
    return {
        "mean": mean,
        "ci95": ci,
        "per_seed": (first - second).tolist(),
        "excludes_zero": ci is not None and (ci[0] > 0 or ci[1] < 0),
        "outcome": outcome,
    }


# -- win, draw and loss ---------------------------------------------------------------
class EvaluationResult(NamedTuple):
    """Outcome counts of an evaluation (from the evaluated side's view)."""

    wins: int
    draws: int
    losses: int
    n_episodes: int

    @property
    def win_rate(self) -> float:
        return self.wins / self.n_episodes

    @property
    def draw_rate(self) -> float:
        return self.draws / self.n_episodes

    @property
    def loss_rate(self) -> float:
        return self.losses / self.n_episodes

    @property
    def score(self) -> float:
        """Mean Elo score (win 1, draw 0.5, loss 0)."""
        return (self.wins + 0.5 * self.draws) / self.n_episodes

    def as_dict(self) -> dict[str, float]:
        return {
            "wins": self.wins,
            "draws": self.draws,
            "losses": self.losses,
            "n_episodes": self.n_episodes,
            "win_rate": self.win_rate,
            "draw_rate": self.draw_rate,
            "loss_rate": self.loss_rate,
        }


def count_outcomes(outcomes: np.ndarray) -> EvaluationResult:
    """The counts of per-episode ``outcomes`` (1 win, 0 draw, -1 loss; -2, an
    episode that never ended, is refused)."""
    outcomes = np.asarray(outcomes)
    if np.any(outcomes == -2):
        raise RuntimeError("an episode did not end within the horizon")
    return EvaluationResult(
        wins=int(np.sum(outcomes == 1)),
        draws=int(np.sum(outcomes == 0)),
        losses=int(np.sum(outcomes == -1)),
        n_episodes=int(outcomes.size),
    )


def outcome_stats(outcomes: Any) -> dict[str, Any]:
    """Wins, draws, losses and rates of ``outcomes [S, N]`` (1, 0, -1), with the
    Wilson 95% interval of the win rate over all ``S x N`` episodes and the win
    rate of every seed."""
    result = count_outcomes(np.asarray(outcomes).reshape(-1))
    return {
        **result.as_dict(),
        "win_rate_ci95": list(wilson_interval(result.wins, result.n_episodes)),
        "seed_win_rates": [float(np.mean(o == 1)) for o in np.asarray(outcomes)],
    }


def outcome_summary(wins: int, draws: int, losses: int) -> dict[str, Any]:
    """Counts, rates and 95% Wilson intervals of an evaluation's wins, draws and
    losses (``win_rate``, ``win_ci95``, the same for ``draw`` and ``loss``)."""
    n = wins + draws + losses
    summary: dict[str, Any] = {"wins": wins, "draws": draws, "losses": losses, "n": n}
    for name, count in (("win", wins), ("draw", draws), ("loss", losses)):
        summary[f"{name}_rate"] = count / n
        summary[f"{name}_ci95"] = list(wilson_interval(count, n))
    return summary


def pooled_outcomes(summaries: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """One :func:`outcome_summary` of several evaluations' episodes together."""
    return outcome_summary(
        *(sum(s[k] for s in summaries) for k in ("wins", "draws", "losses"))
    )


def win_difference(first: Any, second: Any) -> dict[str, Any]:
    """Mean of ``win(first) - win(second)`` over paired episodes (the same keys)
    ``[S, N]``, with its normal 95% interval."""
    diff = (np.asarray(first) == 1).astype(np.float64) - (np.asarray(second) == 1)
    return {**mean_interval(diff), "n_pairs": diff.size}


# -- matches ------------------------------------------------------------------------
def match_stats(scores: Any, name: str = "captures") -> dict[str, Any]:
    """Statistics of ``C`` matches of ``M`` consecutive episodes, ``scores [C,
    M]`` (a per-episode total called ``name``): ``num_matches``;
    ``<name>_by_episode``, the :func:`mean_stats` of each episode index;
    ``late_minus_first``, the paired gain of the late episodes' mean (the second
    half, ``M // 2 + 1`` to ``M``) over the first episode; and ``late_episodes``,
    that range."""
    scores = np.asarray(scores)
    M = scores.shape[1]
    late = scores[:, M // 2 :].mean(1) if M > 1 else scores[:, 0]
    return {
        "num_matches": int(scores.shape[0]),
        f"{name}_by_episode": [mean_stats(scores[:, e]) for e in range(M)],
        "late_minus_first": mean_stats(late - scores[:, 0]),
        "late_episodes": [M // 2 + 1, M],
    }


def familiarity_drop(
    scores: Mapping[tuple[str, str], Any],
    names: Sequence[str],
    num_resamples: int,
    seed: int,
) -> dict[str, Any]:
    """How much a row scores less against opponents it was not trained with.

    ``scores[(row, opponent)]`` ``[P, N]`` (``P`` seed pairs, ``N`` episodes) for
    every pair of ``names`` (a row and an opponent of the same name were trained
    together). The familiar score is the mean over the diagonal cells' means, the
    unfamiliar one the mean over the other cells' means, and the drop ``1 -
    unfamiliar / familiar`` (NaN when the familiar score is not positive). Each
    95% interval is the percentile interval of ``num_resamples`` bootstrap draws,
    every cell's episodes resampled with replacement within each seed pair (the
    cells in the order of ``scores``; NaN draws left out).

    Returns:
        ``{"familiar", "familiar_ci95", "unfamiliar", "unfamiliar_ci95",
        "drop", "drop_ci95"}``.
    """

    def drop(samples):
        own = np.mean([samples[p, p].mean() for p in names])
        other = np.mean([samples[q, p].mean() for p in names for q in names if q != p])
        return own, other, 1.0 - other / own if own > 0 else float("nan")

    own, other, value = drop(scores)
    rng = np.random.default_rng(seed)
    draws = []
    for _ in range(num_resamples):
        resampled = {
            k: np.take_along_axis(v, rng.integers(0, v.shape[1], size=v.shape), axis=1)
            for k, v in scores.items()
        }
        draws.append(drop(resampled))
    draws = np.asarray(draws)

    def interval(column):
        return [float(np.nanpercentile(draws[:, column], q)) for q in (2.5, 97.5)]

    return {
        "familiar": float(own),
        "familiar_ci95": interval(0),
        "unfamiliar": float(other),
        "unfamiliar_ci95": interval(1),
        "drop": float(value),
        "drop_ci95": interval(2),
    }


def mean_std(values: list[float]) -> dict[str, float]:
    """``{"mean", "std"}`` over encoder seeds."""
    array = np.asarray(values, np.float64)
    return {"mean": float(array.mean()), "std": float(array.std())}


def outcome_tables(
    runs: Mapping[str, Mapping[str, np.ndarray]],
    names: Sequence[str],
    first: str,
    second: str,
    types: Sequence[str],
) -> dict[str, Any]:
    """Outcome tables of the rows ``names`` played on the same episode keys:
    :func:`outcome_stats` and the mean return per row, the same per opponent type
    (``types``, indexed by the runs' ``label``), the paired win difference
    ``first - second`` (:func:`win_difference`), whether ``first`` beat ``second``
    with non-overlapping intervals, and the mean episode length.

    Args:
        runs: ``{row: {"outcome", "return", "label", "length": [S, N]}}``.
    """
    labels = runs[names[0]]["label"]
    for name in names:  # the same keys give the same opponent types
        if not np.array_equal(runs[name]["label"], labels):
            raise RuntimeError(f"{name} met other opponent types than {names[0]}")
    conditions = {
        n: {
            **outcome_stats(runs[n]["outcome"]),
            "return": mean_interval(runs[n]["return"]),
        }
        for n in names
    }
    per_type = {
        n: {
            kind: {
                **outcome_stats(runs[n]["outcome"][labels == k][None]),
                "return": mean_interval(runs[n]["return"][labels == k]),
            }
            for k, kind in enumerate(types)
            if np.any(labels == k)
        }
        for n in names
    }
    return {
        "conditions": conditions,
        "per_type": per_type,
        "difference": win_difference(runs[first]["outcome"], runs[second]["outcome"]),
        "beats": bool(
            conditions[first]["win_rate_ci95"][0]
            > conditions[second]["win_rate_ci95"][1]
        ),
        "mean_episode_length": {n: float(np.mean(runs[n]["length"])) for n in names},
    }
