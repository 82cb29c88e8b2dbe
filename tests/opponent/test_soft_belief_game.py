"""The game in which a team observes a soft belief over its opponent's hidden
intent (:class:`~mopa.opponent.soft_belief_game.SoftBeliefGame`), on the
battalion against Red's strategy family: the observation's layout, the belief
kept for the episode, the critic's true type, the flat slot at sharpness 0, and
the refusals."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from mopa.envs import make
from mopa.errors import InvalidParameterError
from mopa.opponent.soft_belief_game import soft_belief_game

NUM_TYPES = 6


def test_soft_belief_game_observation_layout():
    env, params = make("battalion_vs_red", red="mixed", discrete=True)
    game, game_params = soft_belief_game(env, 0.3, 0.3)
    reset, step = jax.jit(game.reset), jax.jit(game.step)
    obs, state = reset(jax.random.key(4), game_params)
    (inner,) = env.observe(state.game, params)
    label = int(env.true_intent(state.game))
    expected = 0.3 * np.eye(NUM_TYPES)[label] + 0.7 / NUM_TYPES
    assert obs[0].shape == (1, 17 + NUM_TYPES)
    assert game.observation_space(0).shape == (17 + NUM_TYPES,)
    np.testing.assert_allclose(obs[0][0, :17], inner[0], atol=1e-6)
    np.testing.assert_allclose(obs[0][0, 17:], expected, atol=1e-6)
    # The belief is kept for the episode; the critic reads the true type.
    obs, state, *_ = step(jax.random.key(5), state, (jnp.zeros(1, int),), game_params)
    np.testing.assert_allclose(obs[0][0, 17:], expected, atol=1e-6)
    np.testing.assert_array_equal(
        game.global_state(state, game_params)[-NUM_TYPES:], np.eye(NUM_TYPES)[label]
    )
    # With sharpness 0 the belief slot is the flat 1/K, whatever the type.
    blind_params = game_params.replace(
        alpha_low=jnp.asarray(0.0, jnp.float32), alpha_high=jnp.asarray(0.0)
    )
    for seed in range(3):
        obs, state = reset(jax.random.key(seed), blind_params)
        np.testing.assert_allclose(obs[0][0, 17:], 1.0 / NUM_TYPES, atol=1e-7)
    with pytest.raises(InvalidParameterError, match="alpha_low/high"):
        game.validate_params(game_params.replace(alpha_low=jnp.asarray(0.9)))


def test_a_game_without_a_hidden_intent_is_refused():
    env, _ = make("battalion")
    with pytest.raises(InvalidParameterError, match="names no hidden intent"):
        soft_belief_game(env)
