"""ObservedBeliefPlanner: a planner in a BeliefObservation game acts on the belief
at the end of its own observation, exactly as the planner given that belief."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from mopa.errors import InvalidParameterError
from mopa.planning import (
    LookaheadConfig,
    LookaheadParams,
    LookaheadPlayer,
    ObservedBeliefPlanner,
    PopulationModelParams,
    PopulationOpponentModel,
)
from mopa.players import initial_player_carry
from mopa.policy import PolicySpec, init_params
from tests.opponent.test_belief_game import POPULATION, game  # noqa: F401

SPEC = PolicySpec(kind="actor", num_agents=3, obs_size=19, num_actions=5, hidden=(8,))


def _planner(game, **model):  # noqa: F811
    lookahead = LookaheadConfig(num_rollouts=3, horizon=2, leaf_weight=0.0)
    opponent = PopulationOpponentModel(POPULATION, team=1, **model)
    return LookaheadPlayer(game, "predator", lookahead, opponent, SPEC)


def test_it_plans_with_the_belief_it_observes(game):  # noqa: F811
    params = game.default_params
    obs, state = game.reset(jax.random.key(0), params)
    team = obs[0].at[:, -3:-1].set(jnp.asarray([0.2, 0.8]))  # belief over 2 members
    planner = _planner(game)
    observed = ObservedBeliefPlanner(planner, num_members=2)
    np.testing.assert_allclose(observed.belief(team), [[0.2, 0.8]])
    own = init_params(SPEC, jax.random.key(1))

    def plan_params(belief):
        model = PopulationModelParams(params.clones, jnp.asarray(belief))
        return LookaheadParams(params, own, model)

    carry, reset = initial_player_carry(observed), jnp.ones(3, bool)
    key = jax.random.key(2)
    got = observed.act(plan_params([[0.5, 0.5]]), key, state, team, carry, reset)
    want = planner.act(plan_params([[0.2, 0.8]]), key, state, team, carry, reset)
    np.testing.assert_array_equal(got[0], want[0])
    scores = planner.plan_scores(
        plan_params([[0.2, 0.8]]), key, state, team, carry, reset
    )
    other = planner.plan_scores(
        plan_params([[1.0, 0.0]]), key, state, team, carry, reset
    )
    assert not np.allclose(scores, other)  # the belief matters to the plan


def test_it_refuses_what_it_cannot_read(game):  # noqa: F811
    planner = _planner(game)
    with pytest.raises(InvalidParameterError, match="num_members must be >= 1"):
        ObservedBeliefPlanner(planner, num_members=0)
    with pytest.raises(InvalidParameterError, match="too narrow"):
        ObservedBeliefPlanner(planner, num_members=18)
    with_fallback = _planner(game, fallback=PopulationOpponentModel(POPULATION, team=1))
    with pytest.raises(InvalidParameterError, match="without a fallback"):
        ObservedBeliefPlanner(with_fallback, num_members=2)
