"""BeliefObservation: any game, one team observing its belief about the other's
style, updated from the moves inside the game."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from mopa.algos import MAPPOConfig, run_training
from mopa.envs import AutoReset, make
from mopa.errors import InvalidParameterError
from mopa.opponent.bc import BCConfig, init_bc_params
from mopa.opponent.belief_game import (
    BeliefGameParams,
    BeliefObservation,
    IntentBeliefInput,
    belief_features,
)
from mopa.opponent.population import (
    PopulationConfig,
    init_population_belief,
    intent_belief,
    joint_belief,
    observe_opponent,
)

CLONE = BCConfig(num_actions=5, hidden=(4,))
POPULATION = PopulationConfig(clone=CLONE)


def _clones(actions):
    """A library whose member ``m`` takes ``actions[m]`` with probability ~0.9."""

    def one(action):
        params = jax.tree.map(
            jnp.zeros_like, init_bc_params(CLONE, jax.random.key(0), 14, 1)
        )
        bias = jnp.zeros((5,)).at[action].set(3.6)  # e^3.6 / (e^3.6 + 4) ~ 0.92
        params["params"]["Dense_0"]["bias"] = bias
        return params

    return jax.tree.map(lambda *x: jnp.stack(x), *[one(a) for a in actions])


@pytest.fixture(scope="module")
def game():
    env, _ = make("tag")
    return BeliefObservation(env, "predator", "prey", POPULATION, _clones([1, 2]))


def test_the_team_sees_the_prior_at_reset_and_the_others_see_the_game(game):
    params = game.default_params
    obs, state = game.reset(jax.random.key(0), params)
    inner_obs = game.env.observe(state.env_state, params.env)
    assert game.observation_space(0).shape == (16 + 3,)
    assert game.observation_space(1) == game.env.observation_space(1)
    assert obs[0].shape == (3, 19) and obs[1].shape == (1, 14)
    np.testing.assert_array_equal(obs[0][:, :16], inner_obs[0])
    np.testing.assert_array_equal(obs[1], inner_obs[1])
    np.testing.assert_array_equal(state.pos, state.env_state.pos)  # reads through
    with pytest.raises(AttributeError):
        state.nope  # noqa: B018
    # Every predator sees the prior: half on each member, none-fits at its prior.
    np.testing.assert_allclose(obs[0][:, 16:], [[0.5, 0.5, 0.01]] * 3, atol=1e-6)


def test_the_belief_follows_the_opponents_moves_as_offline_bayes(game):
    params = game.default_params
    step = jax.jit(game.step)
    obs, state = game.reset(jax.random.key(1), params)
    offline = init_population_belief(1, 2, fallback_prior=game.fallback_prior)
    for t in range(6):
        seen = game.env.observe(state.env_state, params.env)[1]
        actions = (jnp.zeros((3,), jnp.int32), jnp.array([2], jnp.int32))
        offline = observe_opponent(
            POPULATION, params.clones, offline, seen, actions[1], game.epsilon
        )
        obs, state, *_ = step(jax.random.key(10 + t), state, actions, params)
        np.testing.assert_allclose(
            obs[0][0, 16:], belief_features(offline), rtol=1e-5, atol=1e-6
        )
    # Six moves member 1 makes 9 times in 10 and member 0 rarely: member 1 it is.
    assert obs[0][0, 17] > 0.99 and obs[0][0, 18] < 0.01


def test_the_belief_restarts_with_every_episode(game):
    env = AutoReset(game)
    params = game.default_params
    _, state = env.reset(jax.random.key(2), params)
    actions = (jnp.zeros((3,), jnp.int32), jnp.array([1], jnp.int32))
    step = jax.jit(env.step)
    for t in range(int(params.env.max_steps)):
        obs, state, _, _, _, info = step(jax.random.key(t), state, actions, params)
    assert bool(info["done"])
    np.testing.assert_allclose(obs[0][0, 16:], [0.5, 0.5, 0.01], atol=1e-6)
    final = info["final_obs"][0][0, 16:]
    assert final[0] > 0.99  # the finished episode had found member 0


@pytest.mark.slow
def test_a_team_learns_with_its_belief_in_its_observation(game):
    config = MAPPOConfig(
        env="tag",
        total_steps=4_096,
        num_envs=8,
        num_steps=32,
        num_seeds=1,
        frozen=(("prey", "random"),),
        hidden=(16,),
        num_chunks=1,
    )
    result = run_training(config, game=(game, game.default_params))
    spec, params = result.policies["predator"]
    assert spec.obs_size == 19
    assert result.summary["final"]["episodes"]["mean"] > 0


def test_bad_models_and_params_are_named(game):
    env, env_params = make("tag")
    with pytest.raises(InvalidParameterError, match="must differ"):
        BeliefObservation(env, "prey", "prey", POPULATION, _clones([1]))
    with pytest.raises(InvalidParameterError, match="take 3 actions"):
        BeliefObservation(
            env,
            "predator",
            "prey",
            PopulationConfig(clone=BCConfig(num_actions=3)),
            _clones([1]),
        )
    with pytest.raises(InvalidParameterError, match="fallback_prior"):
        BeliefObservation(
            env, "predator", "prey", POPULATION, _clones([1]), fallback_prior=1.0
        )
    with pytest.raises(InvalidParameterError, match="BeliefGameParams"):
        game.reset(jax.random.key(0), env_params)
    with pytest.raises(InvalidParameterError, match="3 members"):
        game.reset(jax.random.key(0), BeliefGameParams(env_params, _clones([0, 1, 2])))


# -- the belief in the game's own intent input ---------------------------------------
INTENT_POPULATION = PopulationConfig(clone=CLONE, num_intents=4, drop_obs_tail=4)


def _intent_clones(actions):
    """Member ``m`` takes ``actions[m][g]`` under intent ``g`` with probability
    ~0.9: hidden unit ``g`` is relu(intent one-hot ``g``), and it adds 3.6 to
    that action's logit."""

    def one(by_intent):
        params = jax.tree.map(
            jnp.zeros_like, init_bc_params(CLONE, jax.random.key(0), 14, 4)
        )
        trunk, head = np.zeros((18, 4), np.float32), np.zeros((4, 5), np.float32)
        for g, a in enumerate(by_intent):
            trunk[14 + g, g] = 1.0  # the intent one-hot's rows (after the obs)
            head[g, a] = 3.6
        params["params"]["Trunk_0"]["Dense_0"]["kernel"] = jnp.asarray(trunk)
        params["params"]["Dense_0"]["kernel"] = jnp.asarray(head)
        return params

    return jax.tree.map(lambda *x: jnp.stack(x), *[one(a) for a in actions])


@pytest.fixture(scope="module")
def intent_game():
    env, _ = make("tag_intent", predator_intent_obs=True)
    clones = _intent_clones([[1, 2, 3, 4], [2, 3, 4, 1]])
    return IntentBeliefInput(env, "predator", "prey", INTENT_POPULATION, clones)


def test_the_intent_input_carries_the_beliefs_intent_marginal(intent_game):
    game = intent_game
    params = game.default_params
    assert game.observation_space(0) == game.env.observation_space(0)  # same width
    obs, state = game.reset(jax.random.key(0), params)
    # At reset: the prior, a quarter on each corner, whatever the game drew.
    np.testing.assert_allclose(obs[0][:, -4:], 0.25, atol=1e-6)
    np.testing.assert_array_equal(
        obs[1], game.env.observe(state.env_state, params.env)[1]
    )
    step = jax.jit(game.step)
    offline = init_population_belief(4, 2, fallback_prior=game.fallback_prior)
    for t in range(5):
        seen = game.env.observe(state.env_state, params.env)[1]
        actions = (jnp.zeros((3,), jnp.int32), jnp.array([3], jnp.int32))
        offline = observe_opponent(
            INTENT_POPULATION, params.clones, offline, seen, actions[1], game.epsilon
        )
        obs, state, *_ = step(jax.random.key(10 + t), state, actions, params)
        np.testing.assert_allclose(
            obs[0][:, -4:], np.tile(intent_belief(offline), (3, 1)), atol=1e-5
        )
        np.testing.assert_allclose(state.env_state.belief, intent_belief(offline))
    # Move 3 is member 0 heading for corner 2 or member 1 for corner 1: both
    # intents share the mass, the others have none.
    np.testing.assert_allclose(obs[0][0, -4:], [0.0, 0.5, 0.5, 0.0], atol=0.01)
    # The joint belief stays in the state for a planner.
    np.testing.assert_allclose(
        joint_belief(state.belief), joint_belief(offline), atol=1e-6
    )


def test_the_intent_input_needs_a_game_that_has_one():
    env, _ = make("tag_intent")  # the predators have no intent input
    with pytest.raises(
        InvalidParameterError, match="does not end with an intent input of 4"
    ):
        IntentBeliefInput(env, "predator", "prey", INTENT_POPULATION, _clones([1]))


def test_a_padded_belief_keeps_the_observation_width():
    env, _ = make("tag")
    game = BeliefObservation(
        env, "predator", "prey", POPULATION, _clones([1, 2]), max_members=4
    )
    assert game.observation_space(0).shape == (16 + 4 + 1,)
    params = game.default_params
    obs, state = game.reset(jax.random.key(0), params)
    np.testing.assert_allclose(obs[0][0, 16:], [0.5, 0.5, 0.0, 0.0, 0.01], atol=1e-6)
    actions = (jnp.zeros((3,), jnp.int32), jnp.array([2], jnp.int32))
    obs, state, *_ = game.step(jax.random.key(1), state, actions, params)
    unpadded = belief_features(state.belief)
    np.testing.assert_allclose(obs[0][0, 16:18], unpadded[:2], atol=1e-6)
    np.testing.assert_allclose(obs[0][0, 18:], [0.0, 0.0, unpadded[2]], atol=1e-6)
    with pytest.raises(InvalidParameterError, match="max_members"):
        BeliefObservation(
            env, "predator", "prey", POPULATION, _clones([1, 2]), max_members=1
        )
