"""Elo (hand-worked values, anchors, per-game updates, concurrency), openskill and
the Bradley-Terry fit."""

import subprocess
import sys

import numpy as np
import pytest

from mopa.league.ratings import (
    ANCHORS,
    DEFAULT_RATING,
    EloRatings,
    OpenSkillRatings,
    TeamEloRatings,
    expected_score,
    fit_bradley_terry,
    k_factor,
)
from mopa.league.store import LeagueStore


def test_expected_score_by_hand():
    # 1 / (1 + 10^((1000 - 1200) / 400)) = 1 / (1 + 10^-0.5) = 1 / 1.316228 = 0.759747
    assert expected_score(1200, 1000) == pytest.approx(0.759747, abs=1e-6)
    assert expected_score(1000, 1000) == 0.5
    assert expected_score(1000, 1200) + expected_score(1200, 1000) == pytest.approx(1)


def test_k_factor_schedule():
    assert [k_factor(g) for g in (0, 29, 30, 99, 100)] == [40, 40, 20, 20, 10]


def test_one_game_moves_both_sides_by_hand():
    elo = EloRatings()
    # Both at 1000: expected 0.5, K 40 -> winner +20, loser -20 (zero-sum).
    delta = elo.update("a", "b", 1.0)
    assert delta == pytest.approx(20.0)
    assert elo.rating("a") == pytest.approx(1020.0)
    assert elo.rating("b") == pytest.approx(980.0)
    assert elo.games("a") == elo.games("b") == 1


def test_anchors_never_move():
    elo = EloRatings()
    for _ in range(20):
        elo.update("agent", "scripted_l3", 1.0)
        elo.update("agent", "random", 1.0)
    assert elo.rating("scripted_l3") == ANCHORS["scripted_l3"] == 800.0
    assert elo.rating("random") == 500.0
    assert elo.games("scripted_l3") == 20
    # Against a lower anchor the agent gains less than 20 per win, but it gains.
    assert elo.rating("agent") > DEFAULT_RATING


def test_per_game_updates_differ_from_one_batched_update():
    # Per game: W then L. Game 1: +20 (1020 vs anchor... here vs a fresh b).
    per_game = EloRatings()
    per_game.update("a", "b", [1.0, 0.0])
    # Game 1: a 1020, b 980. Game 2: a expected 1/(1+10^(-40/400)) = 0.557312,
    # a loses: 1020 - 40 * 0.557312 = 997.7075.
    assert per_game.rating("a") == pytest.approx(997.7075, abs=1e-3)
    # The reference's batch update treats mean 0.5 at expected 0.5 as no change.
    batched = 1000 + 40 * (0.5 - expected_score(1000, 1000))
    assert batched == 1000.0
    assert per_game.rating("a") != pytest.approx(batched)


def test_team_ratings_have_their_own_anchors():
    team = TeamEloRatings()
    team.update("blue_team", "team_scripted_l1", 1.0)
    assert team.rating("team_scripted_l1") == 600.0
    assert team.rating("blue_team") > DEFAULT_RATING


def test_ratings_persist_in_the_store(tmp_path):
    with LeagueStore(tmp_path) as store:
        EloRatings(store).update("a", "scripted_l5", [1.0, 1.0, 0.5], step=7)
    with LeagueStore(tmp_path) as store:
        elo = EloRatings(store)
        # Game 1 vs 1000: +20; game 2 vs 1000 at 1020: expected 0.528751 -> +18.85;
        # game 3 (draw) at 1038.85: expected 0.555754 -> -2.230.
        assert elo.rating("a") == pytest.approx(1036.62, abs=0.01)
        assert elo.rating("scripted_l5") == 1000.0
        assert [m["score"] for m in store.matches()] == [1.0, 1.0, 0.5]
        assert {m["step"] for m in store.matches()} == {7}


WRITER = """
import sys
from mopa.league.ratings import EloRatings
from mopa.league.store import LeagueStore
root, worker, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
with LeagueStore(root) as store:
    elo = EloRatings(store)
    for i in range(count):
        elo.update("w" + worker, "shared", float(i % 2), source=worker)
"""


def test_four_processes_lose_no_rating_update(tmp_path):
    LeagueStore(tmp_path).close()
    writers = [
        subprocess.Popen([sys.executable, "-c", WRITER, str(tmp_path), str(w), "250"])
        for w in range(4)
    ]
    assert [w.wait(timeout=120) for w in writers] == [0] * 4
    with LeagueStore(tmp_path) as store:
        assert len(store.matches()) == 1000
        elo = EloRatings(store)
        assert elo.games("shared") == 1000
        assert [elo.games(f"w{w}") for w in range(4)] == [250] * 4
        # Every game moved both sides: the ratings are the sequential result of
        # 1000 single-game updates, so the total change is zero-sum only up to
        # the K factors; each worker won and lost 125 games.
        assert sum(m["score"] for m in store.matches()) == 500


def test_openskill_draws_and_predictions(tmp_path):
    with LeagueStore(tmp_path) as store:
        skill = OpenSkillRatings(store)
        for _ in range(10):
            skill.record("strong", "weak", 1.0)
        skill.record("x", "y", 0.5)
        strong, weak = skill.rating("strong"), skill.rating("weak")
        assert strong.mu > 25 > weak.mu
        assert strong.sigma < 25 / 3
        p = skill.predict("strong", "weak")
        assert sum(p.values()) == pytest.approx(1.0)
        assert p["win"] > 0.8 > p["loss"]
        # A draw between equals leaves their means equal.
        assert skill.rating("x").mu == pytest.approx(skill.rating("y").mu)
    with LeagueStore(tmp_path) as store:  # persisted
        assert OpenSkillRatings(store).rating("strong").mu == pytest.approx(strong.mu)


def _games(true: dict[str, float], seed: int, count: int = 3000) -> list:
    """``count`` games between random pairs of ``true``'s players, each won with
    the Elo expectation of their true ratings."""
    rng = np.random.default_rng(seed)
    names = list(true)
    games = []
    for _ in range(count):
        i, j = rng.choice(len(names), 2, replace=False)
        p = expected_score(true[names[i]], true[names[j]])
        games.append((names[i], names[j], float(rng.random() < p)))
    return games


def test_bradley_terry_recovers_order_with_intervals():
    true = {"scripted_l1": 600.0, "a": 800.0, "b": 1000.0, "c": 1200.0}
    fit = fit_bradley_terry(_games(true, seed=0))
    ratings = dict(zip(fit.names, fit.ratings, strict=True))
    assert ratings["scripted_l1"] == pytest.approx(600.0)  # the anchor pins the scale
    for name in ("a", "b", "c"):
        lo, hi = fit.ci95[fit.names.index(name)]
        assert lo < true[name] < hi
        assert hi - lo < 120
    assert [row[0] for row in fit.leaderboard()] == ["c", "b", "a", "scripted_l1"]


def test_bradley_terry_without_an_anchor_centres_and_keeps_intervals_tight():
    """With no anchor the ratings are centred on 1000 and each interval is the
    centred rating's own (not the prior's weak hold on the overall level)."""
    true = {"a": 800.0, "b": 1000.0, "c": 1200.0}
    fit = fit_bradley_terry(_games(true, seed=1))
    assert np.mean(fit.ratings) == pytest.approx(1000.0)
    for name in true:
        lo, hi = fit.ci95[fit.names.index(name)]
        assert lo < true[name] < hi
        assert hi - lo < 120
