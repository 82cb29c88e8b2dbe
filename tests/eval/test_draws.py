"""Pooling independent draws of a pipeline: the interval that counts the
variation between draws, and the pooled results tree."""

import math

import pytest

from mopa.errors import InvalidParameterError
from mopa.eval.draws import pool_draws
from mopa.eval.intervals import draws_interval

T_2 = 4.302652729911275  # Student's t, 0.975 quantile, 2 degrees of freedom


def test_the_interval_counts_the_spread_between_draws():
    out = draws_interval([1.0, 2.0, 3.0], [0.0, 0.0, 0.0])
    half = T_2 * math.sqrt(1.0 / 3)  # sample variance 1 over 3 draws
    assert out["mean"] == pytest.approx(2.0)
    assert out["ci95"] == pytest.approx([2.0 - half, 2.0 + half])


def test_the_interval_keeps_each_draws_own_when_the_draws_agree():
    # three identical means, each +- 1.96 (standard error 1): the between-draw
    # spread estimates nothing, the episodes' error remains
    out = draws_interval([2.0, 2.0, 2.0], [1.96, 1.96, 1.96])
    half = T_2 * math.sqrt(1.0 / 3)
    assert out["ci95"] == pytest.approx([2.0 - half, 2.0 + half])
    # the larger of the two wins: a wide spread between draws
    wide = draws_interval([0.0, 4.0, 8.0], [1.96, 1.96, 1.96])
    assert wide["ci95"][1] - 4.0 == pytest.approx(T_2 * math.sqrt(16.0 / 3))


def test_the_interval_needs_two_draws_and_matching_lengths():
    with pytest.raises(InvalidParameterError, match="2 or more draws"):
        draws_interval([1.0], [0.1])
    with pytest.raises(InvalidParameterError, match="2 or more draws"):
        draws_interval([1.0, 2.0], [0.1])


def _draw(mean, low, high, n, seed_text, steps):
    return {
        "best": "pooled" if mean < 2 else "belief_s0",
        "profile": "mopa",
        "git_sha": seed_text,
        "table": {"row": {"mean": mean, "ci95": [low, high], "n_episodes": n}},
        "single": {"mean": mean, "ci95": None, "paired": True},
        "accuracy": [0.5, mean],
        "steps": steps,
        "num_prey": 12,
        "ece": mean / 10,
        "flag": mean > 2,
        "only_some": 1,
    }


def test_pooling_keeps_the_shape_of_one_draw():
    trees = [
        _draw(1.0, 0.0, 2.0, 40, "abc", [1, 2]),
        _draw(3.0, 2.0, 4.0, 40, "abc", [1, 2, 3]),
    ]
    del trees[1]["only_some"]
    pooled = pool_draws(trees)
    row = pooled["table"]["row"]
    assert row["mean"] == 2.0 and row["by_draw"] == [1.0, 3.0]
    assert row["n_episodes"] == 80  # counts add up
    # between draws: variance 2 over 2 draws; within: (1 / 1.96)^2, smaller
    t_1 = 12.706204736174707
    assert row["ci95"] == pytest.approx([2.0 - t_1, 2.0 + t_1])
    assert pooled["single"]["by_draw"] == [1.0, 3.0]
    assert pooled["single"]["paired"] is True
    assert pooled["accuracy"] == [0.5, 2.0]  # item by item
    assert pooled["steps"] == [[1, 2], [1, 2, 3]]  # differing lengths: each draw's
    assert pooled["num_prey"] == 12  # an integer the draws share
    assert pooled["ece"] == pytest.approx(0.2)
    assert pooled["flag"] == [False, True]  # disagreeing: each draw's
    assert pooled["profile"] == "mopa" and pooled["git_sha"] == "abc"
    assert pooled["best"] == "pooled / belief_s0"  # differing text: each draw's
    assert "only_some" not in pooled  # not in every draw


def test_pooling_needs_two_draws():
    with pytest.raises(InvalidParameterError, match="2 or more draws"):
        pool_draws([{"a": 1.0}])
