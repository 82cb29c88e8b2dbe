"""ObservedBeliefPlanner: a planner in a BeliefObservation game acts on the belief
at the end of its own observation, exactly as the planner given that belief."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from mopa.envs import make
from mopa.errors import InvalidParameterError
from mopa.opponent.belief_game import BeliefObservation
from mopa.opponent.population import joint_belief
from mopa.planning import (
    LookaheadConfig,
    LookaheadParams,
    LookaheadPlayer,
    ObservedBeliefPlanner,
    PopulationModelParams,
    PopulationOpponentModel,
    StateBeliefPlanner,
)
from mopa.players import initial_player_carry
from mopa.policy import PolicySpec, init_params
from tests.opponent.test_belief_game import (  # noqa: F401
    INTENT_POPULATION,
    POPULATION,
    _clones,
    game,
    intent_game,
)

SPEC = PolicySpec(kind="actor", num_agents=3, obs_size=19, num_actions=5, hidden=(8,))


def _planner(game, **model):  # noqa: F811
    lookahead = LookaheadConfig(num_rollouts=3, horizon=2, leaf_weight=0.0)
    opponent = PopulationOpponentModel(POPULATION, team=1, **model)
    return LookaheadPlayer(game, "predator", lookahead, opponent, SPEC)


@pytest.mark.slow
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


def test_it_reads_a_padded_belief():
    env, _ = make("tag")
    padded = BeliefObservation(
        env, "predator", "prey", POPULATION, _clones([1, 2]), max_members=3
    )
    spec = PolicySpec(kind="actor", num_agents=3, obs_size=20, num_actions=5)
    lookahead = LookaheadConfig(num_rollouts=1, horizon=1, leaf_weight=0.0)
    planner = LookaheadPlayer(
        padded, "predator", lookahead, PopulationOpponentModel(POPULATION, team=1), spec
    )
    observed = ObservedBeliefPlanner(planner, num_members=2, padded_members=3)
    obs, _ = padded.reset(jax.random.key(0), padded.default_params)
    team = obs[0].at[:, 16:19].set(jnp.asarray([0.3, 0.7, 0.0]))
    np.testing.assert_allclose(observed.belief(team), [[0.3, 0.7]])
    with pytest.raises(InvalidParameterError, match="padded_members"):
        ObservedBeliefPlanner(planner, num_members=2, padded_members=1)


def test_it_refuses_what_it_cannot_read(game):  # noqa: F811
    planner = _planner(game)
    with pytest.raises(InvalidParameterError, match="num_members must be >= 1"):
        ObservedBeliefPlanner(planner, num_members=0)
    with pytest.raises(InvalidParameterError, match="too narrow"):
        ObservedBeliefPlanner(planner, num_members=18)
    with_fallback = _planner(game, fallback=PopulationOpponentModel(POPULATION, team=1))
    with pytest.raises(InvalidParameterError, match="without a fallback"):
        ObservedBeliefPlanner(with_fallback, num_members=2)


def test_a_state_belief_planner_plans_with_the_belief_in_the_state(intent_game):  # noqa: F811
    params = intent_game.default_params
    obs, state = intent_game.reset(jax.random.key(3), params)
    actions = (jnp.zeros((3,), jnp.int32), jnp.array([3], jnp.int32))
    for t in range(3):
        obs, state, *_ = intent_game.step(jax.random.key(t), state, actions, params)
    spec = PolicySpec(kind="actor", num_agents=3, obs_size=20, num_actions=5)
    lookahead = LookaheadConfig(num_rollouts=3, horizon=2, leaf_weight=0.0)
    model = PopulationOpponentModel(INTENT_POPULATION, team=1)
    planner = LookaheadPlayer(intent_game.env, "predator", lookahead, model, spec)
    in_state = StateBeliefPlanner(planner)
    own = init_params(spec, jax.random.key(1))

    def plan_params(belief):
        model = PopulationModelParams(params.clones, jnp.asarray(belief))
        return LookaheadParams(params.env, own, model)

    carry, reset = initial_player_carry(in_state), jnp.zeros(3, bool)
    key = jax.random.key(2)
    flat = np.full((4, 2), 1 / 8)
    got = in_state.act(plan_params(flat), key, state, obs[0], carry, reset)
    held = joint_belief(state.belief)
    want = planner.act(plan_params(held), key, state.env_state, obs[0], carry, reset)
    np.testing.assert_array_equal(got[0], want[0])
    with pytest.raises(InvalidParameterError, match="without a fallback"):
        StateBeliefPlanner(
            LookaheadPlayer(
                intent_game.env,
                "predator",
                lookahead,
                PopulationOpponentModel(INTENT_POPULATION, team=1, fallback=model),
                spec,
            )
        )
