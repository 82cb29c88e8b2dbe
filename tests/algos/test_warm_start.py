"""A warm start: a MAPPO run that learns on from an earlier run's actor and
critic instead of fresh weights."""

from __future__ import annotations

import jax
import numpy as np
import pytest

from mopa.algos import IQLConfig, MAPPOConfig, run_training
from mopa.errors import CheckpointError, InvalidParameterError

TINY = MAPPOConfig(
    env="tag",
    total_steps=1_024,
    num_envs=8,
    num_steps=32,
    num_seeds=2,
    hidden=(16,),
    num_chunks=1,
)


@pytest.fixture(scope="module")
def first():
    return run_training(TINY)


def _leaves(tree):
    return [np.asarray(x) for x in jax.tree.leaves(tree)]


def test_a_run_gives_its_actor_and_critic_per_seed(first):
    assert set(first.learners) == {"predator", "prey"}
    for team, (_, actor) in first.policies.items():
        assert set(first.learners[team]) == {"actor", "critic"}
        for a, b in zip(
            _leaves(actor), _leaves(first.learners[team]["actor"]), strict=True
        ):
            np.testing.assert_array_equal(a, b)
        assert all(x.shape[0] == TINY.num_seeds for x in _leaves(actor))


@pytest.mark.slow
def test_a_warm_run_starts_from_the_given_weights(first):
    # At a vanishing learning rate the weights barely move: the warm run ends
    # where it started, the predators' weights the first run's and the prey's
    # a fresh run's (they were not given).
    still = TINY.replace(lr=1e-12, seed=7)
    warm = run_training(still, start={"predator": first.learners["predator"]})
    cold = run_training(still)
    for a, b in zip(
        _leaves(warm.learners["predator"]),
        _leaves(first.learners["predator"]),
        strict=True,
    ):
        np.testing.assert_allclose(a, b, atol=1e-6)
    for a, b in zip(
        _leaves(warm.learners["prey"]), _leaves(cold.learners["prey"]), strict=True
    ):
        np.testing.assert_allclose(a, b, atol=1e-6)
    gap = max(
        np.abs(a - b).max()
        for a, b in zip(
            _leaves(cold.learners["predator"]),
            _leaves(first.learners["predator"]),
            strict=True,
        )
    )
    assert gap > 1e-3  # a cold start is elsewhere


def test_bad_warm_starts_are_named(first, tmp_path):
    with pytest.raises(InvalidParameterError, match="learning teams are"):
        run_training(TINY, start={"wolf": first.learners["prey"]})
    wider = TINY.replace(hidden=(8,))
    with pytest.raises(InvalidParameterError, match="not this run's networks"):
        run_training(wider, start={"prey": first.learners["prey"]})
    with pytest.raises(CheckpointError, match="cannot be saved"):
        run_training(TINY, out=tmp_path / "run", start=first.learners)
    iql = IQLConfig(env="tag", total_steps=256, num_envs=4, num_steps=8, num_chunks=1)
    with pytest.raises(InvalidParameterError, match="has no warm start"):
        run_training(iql, start={"prey": first.learners["prey"]})
