"""The evaluation protocol's statistics, checked by hand: a row's paired and
independent differences, the win difference and the Wilson interval, outcome
counts, pooled tables, tournament cells, matches and seed gaps."""

import numpy as np
import pytest

from mopa.errors import InvalidParameterError
from mopa.eval.intervals import wilson_interval
from mopa.eval.protocol import (
    cell_stats,
    count_outcomes,
    familiarity_drop,
    match_stats,
    opponent_means,
    outcome_stats,
    outcome_summary,
    pooled_outcomes,
    pooled_table,
    row_difference,
    row_stats,
    seed_gap,
    seed_interval,
    win_difference,
)
from mopa.eval.tournament import TournamentResult


def test_the_paired_difference_is_the_mean_of_the_per_episode_differences():
    rng = np.random.default_rng(0)
    start = rng.poisson(2.0, (2, 50)).astype(float)  # shared by both rows
    a = start + rng.integers(0, 2, (2, 50))
    b = start + rng.integers(0, 2, (2, 50))
    paired = row_difference(a, b, paired=True)
    independent = row_difference(a, b, paired=False)
    d = (a - b).ravel()
    half = 1.96 * d.std(ddof=1) / np.sqrt(d.size)
    assert paired["mean"] == pytest.approx(a.mean() - b.mean())
    assert paired["ci95"] == pytest.approx([d.mean() - half, d.mean() + half])
    assert (paired["paired"], paired["n"]) == (True, 100)
    # The shared starts cancel in the paired interval, not in the independent one.
    assert independent["mean"] == pytest.approx(paired["mean"])
    assert independent["paired"] is False
    width = lambda r: r["ci95"][1] - r["ci95"][0]  # noqa: E731
    assert width(paired) < 0.6 * width(independent)
    with pytest.raises(InvalidParameterError, match="one shape"):
        row_difference(a, b[:, :10], paired=True)


def test_wilson_interval_and_the_paired_win_difference_by_hand():
    # 5 of 10, z = 1.959964 (the 97.5% normal quantile): centre 0.5; half-width
    # z sqrt(0.025 + z^2 / 400) / (1 + z^2 / 10) = z x 0.1860206 / 1.3841459
    # = 0.263407.
    np.testing.assert_allclose(wilson_interval(5, 10), [0.236593, 0.763407], atol=1e-6)
    lo, hi = wilson_interval(0, 20)
    assert lo == 0.0 and 0.0 < hi < 0.2
    with pytest.raises(InvalidParameterError):
        wilson_interval(0, 0)
    first = np.array([[1, 1, 0, -1]])
    second = np.array([[1, 0, 0, 1]])
    diff = win_difference(first, second)  # wins 1,1,0,0 vs 1,0,0,1: 0,1,0,-1
    assert diff["mean"] == 0.0 and diff["n_pairs"] == 4
    half = 1.96 * np.std([0, 1, 0, -1], ddof=1) / 2
    np.testing.assert_allclose(diff["ci95"], [-half, half])


def test_outcome_counts_and_their_rates():
    outcomes = np.array([[1, 1, 0, -1], [1, -1, -1, -1]])
    stats = outcome_stats(outcomes)
    assert (stats["wins"], stats["draws"], stats["losses"]) == (3, 1, 4)
    assert stats["n_episodes"] == 8 and stats["win_rate"] == 3 / 8
    assert stats["seed_win_rates"] == [0.5, 0.25]
    assert stats["win_rate_ci95"] == pytest.approx(list(wilson_interval(3, 8)))
    assert count_outcomes(outcomes).score == (3 + 0.5) / 8
    with pytest.raises(RuntimeError, match="did not end"):
        count_outcomes(np.array([1, -2]))


def test_an_evaluations_summary_and_several_pooled():
    summary = outcome_summary(5, 3, 2)
    assert (summary["n"], summary["win_rate"], summary["draw_rate"]) == (10, 0.5, 0.3)
    assert summary["loss_rate"] == 0.2
    # Wilson at 5 of 10: (0.5 -+ 1.96 sqrt(0.025 + 0.0096)) / 1.384
    assert summary["win_ci95"] == pytest.approx([0.236593, 0.763407], abs=1e-6)
    assert summary["draw_ci95"] == pytest.approx(list(wilson_interval(3, 10)))
    pooled = pooled_outcomes([summary, outcome_summary(1, 0, 9)])
    assert (pooled["wins"], pooled["draws"], pooled["losses"]) == (6, 3, 11)
    assert pooled["win_rate"] == 6 / 20
    assert pooled["loss_ci95"] == pytest.approx(list(wilson_interval(11, 20)))


def test_the_familiarity_drop_by_hand():
    # Rows a, b against opponents a, b; one seed pair of two episodes per cell.
    scores = {
        ("a", "a"): np.array([[4.0, 4.0]]),
        ("a", "b"): np.array([[1.0, 3.0]]),
        ("b", "a"): np.array([[2.0, 2.0]]),
        ("b", "b"): np.array([[6.0, 6.0]]),
    }
    table = familiarity_drop(scores, ("a", "b"), num_resamples=200, seed=0)
    # familiar (4 + 6) / 2 = 5; unfamiliar (2 + 2) / 2 = 2 (cells b->a, a->b);
    # drop 1 - 2 / 5 = 0.6
    assert table["familiar"] == 5.0 and table["unfamiliar"] == 2.0
    assert table["drop"] == pytest.approx(0.6)
    # Only cell (a, b) varies: its mean is 1, 2 or 3, so the unfamiliar score
    # is 1.5, 2 or 2.5, the drop 0.7, 0.6 or 0.5, the familiar one always 5.
    assert table["familiar_ci95"] == [5.0, 5.0]
    low, high = table["unfamiliar_ci95"]
    assert 1.5 <= low <= 2.0 <= high <= 2.5
    low, high = table["drop_ci95"]
    assert 0.5 - 1e-12 <= low <= 0.6 <= high <= 0.7 + 1e-12
    zero = {k: np.zeros_like(v) for k, v in scores.items()}
    with pytest.warns(RuntimeWarning, match="All-NaN"):  # every draw's drop NaN
        nothing = familiarity_drop(zero, ("a", "b"), 10, 0)
    assert np.isnan(nothing["drop"]) and np.isnan(nothing["drop_ci95"]).all()


def test_pooled_tables_concatenate_the_opponents_in_order():
    # Two opponents, two rows; row "b" never met opponent "y".
    values = {
        "x": {"a": np.array([[1.0, 2.0]]), "b": np.array([[0.0, 0.0]])},
        "y": {"a": np.array([[3.0, 6.0]])},
    }
    table = pooled_table(values, ["x", "y"], ["a", "b"], num_seeds=1)
    assert list(table) == ["a"]  # b did not meet y
    # mean 3, sample sd sqrt(((1-3)^2 + (2-3)^2 + 0 + 3^2) / 3) = sqrt(14 / 3)
    half = 1.96 * np.sqrt(14 / 3) / 2
    assert table["a"]["mean"] == 3.0
    assert table["a"]["ci95"] == pytest.approx([3 - half, 3 + half])
    assert (table["a"]["n_episodes"], table["a"]["n_seeds"]) == (4, 1)
    assert pooled_table(values, ["x"], ["a", "b"], 1)["b"] == row_stats([0, 0], 1)
    assert opponent_means(values) == {"x": {"a": 1.5, "b": 0.0}, "y": {"a": 4.5}}


def test_matches_by_episode_and_the_late_gain():
    # Three matches of four episodes: the late episodes are the 3rd and 4th.
    scores = np.array(
        [[1.0, 2.0, 3.0, 5.0], [0.0, 0.0, 2.0, 2.0], [2.0, 1.0, 1.0, 1.0]]
    )
    stats = match_stats(scores)
    assert stats["num_matches"] == 3 and stats["late_episodes"] == [3, 4]
    assert [e["mean"] for e in stats["captures_by_episode"]] == pytest.approx(
        [1.0, 1.0, 2.0, 8 / 3]
    )
    # late means 4, 2, 1 less the first episodes 1, 0, 2: 3, 2, -1 (mean 4/3)
    assert stats["late_minus_first"]["mean"] == pytest.approx(4 / 3)
    assert stats["late_minus_first"]["n"] == 3
    assert "wins_by_episode" in match_stats(scores, name="wins")


def test_seed_interval_by_hand():
    # [1, 2, 3]: mean 2, sample std 1, t(0.975, 2) = 4.3027 -> half 4.3027 / sqrt 3
    # = 2.4841.
    mean, (low, high) = seed_interval(np.array([1.0, 2.0, 3.0]))
    assert mean == 2.0
    assert low == pytest.approx(2.0 - 2.4841, abs=1e-4)
    assert high == pytest.approx(2.0 + 2.4841, abs=1e-4)
    assert seed_interval(np.array([0.5])) == (0.5, None)


NAMES = ("lemol", "bc")


def test_seed_gap_outcomes_by_hand():
    # Differences [0.10, 0.12, 0.14]: mean 0.12, std 0.02, half 4.3027 * 0.02 /
    # sqrt 3 = 0.0497 -> [0.070, 0.170], above 0.
    lemol, bc = np.array([0.5, 0.52, 0.54]), np.array([0.4, 0.4, 0.4])
    gap = seed_gap(lemol, bc, True, NAMES)
    assert gap["mean"] == pytest.approx(0.12)
    assert gap["ci95"][0] == pytest.approx(0.0703, abs=1e-3)
    assert gap["outcome"] == "lemol better" and gap["excludes_zero"]
    # The same numbers as losses: lower is better, so BC is better.
    assert seed_gap(lemol, bc, False, NAMES)["outcome"] == "bc better"
    # Differences [+0.1, -0.1, 0]: the interval straddles 0.
    straddle = seed_gap([0.5, 0.3, 0.4], [0.4, 0.4, 0.4], True, NAMES)
    assert straddle["outcome"] == "no detectable difference"
    assert not straddle["excludes_zero"]


def test_cell_stats_are_each_cells_pooled_episodes():
    # One row, two columns, two seed pairs of two episodes: [R, C, P, N].
    captures = np.array([[[[1.0, 3.0], [2.0, 2.0]], [[0.0, 0.0], [0.0, 4.0]]]])
    result = TournamentResult(
        row_names=("a",),
        column_names=("x", "y"),
        teams=("predator", "prey"),
        pairing="paired",
        seed_pairs=np.array([[0, 0], [1, 1]]),
        returns=np.zeros((1, 2, 2, 2, 2)),
        totals={"captures": captures},
    )
    cells = cell_stats(result)
    # x: episodes 1, 3, 2, 2: mean 2, sample sd sqrt(2 / 3), half 1.96 sd / 2.
    half = 1.96 * np.sqrt(2 / 3) / 2
    assert cells["a"]["x"]["mean"] == 2.0
    assert cells["a"]["x"]["ci95"] == pytest.approx([2 - half, 2 + half])
    assert cells["a"]["x"]["seed_means"] == [2.0, 2.0]
    assert cells["a"]["y"]["seed_means"] == [0.0, 2.0]
