"""What the pursuit game names of the prey's hidden intent for a player that
models it (:class:`~mopa.envs.base.IntentGame`): the lead position a path belief
reads, the prey's move recovered from a transition, and the previous state rebuilt
from the memory a player keeps."""

import jax
import jax.numpy as jnp
import numpy as np

from mopa.envs import make
from mopa.envs.pursuit import infer_prey_action, lead_position


def test_lead_position_is_the_position_after_the_next_step():
    """Whatever the actions, the next state puts the prey at its lead position
    (MPE moves a body with its current velocity), so the prefix beliefs read
    nothing the predators could not know."""
    env, params = make("tag_intent", predator_intent_obs=True)
    _, state = env.reset(jax.random.key(6), params)
    predators = jnp.array([0, 1, 2], jnp.int32)
    for t in range(6):  # a few steps, so the velocity is not zero
        _, state, *_ = env.step(
            jax.random.key(t), state, (predators, jnp.array([t % 5])), params
        )
    assert float(jnp.abs(state.vel[-1]).sum()) > 0
    lead = lead_position(state, params, env.num_predators)
    for action in range(5):
        _, after, *_ = env.step(
            jax.random.key(0), state, (predators, jnp.array([action])), params
        )
        np.testing.assert_allclose(after.pos[-1], lead, atol=1e-6)


def test_infer_prey_action_recovers_the_action_taken():
    env, params = make("tag_intent", predator_intent_obs=True)
    _, state = env.reset(jax.random.key(5), params)
    predators = jnp.array([1, 2, 3], jnp.int32)
    for action in range(5):
        _, after, *_ = env.step(
            jax.random.key(0), state, (predators, jnp.array([action])), params
        )
        found = infer_prey_action(env, params, state, predators, after.vel[-1])
        assert int(found) == action


def test_the_previous_state_and_the_move_come_back_from_the_memory():
    """A player keeps ``transition_memory`` of a state; from the next state and
    that memory the game rebuilds the state (every field) and names the prey's
    move, as it does for the intent and the belief slot."""
    env, params = make("tag_intent", predator_intent_obs=True)
    _, state = env.reset(jax.random.key(7), params)
    predators = jnp.array([4, 0, 2], jnp.int32)
    _, state, *_ = env.step(
        jax.random.key(1), state, (predators, jnp.array([1])), params
    )
    memory = env.transition_memory(state)
    _, after, *_ = env.step(
        jax.random.key(2), state, (predators, jnp.array([3])), params
    )
    rebuilt = env.previous_state(after, memory)
    for field in ("pos", "vel", "step", "intent", "belief", "obstacle_pos"):
        np.testing.assert_array_equal(getattr(rebuilt, field), getattr(state, field))
    assert int(env.opponent_move(params, rebuilt, predators, after)) == 3
    assert int(env.true_intent(state)) == int(state.intent)
    belief = jnp.array([0.1, 0.2, 0.3, 0.4])
    obs = env.observe(env.with_belief(state, belief), params)[0]
    np.testing.assert_array_equal(obs[:, -4:], np.broadcast_to(belief, (3, 4)))
    np.testing.assert_allclose(
        env.intent_targets(params),
        np.asarray([[1, 1], [-1, 1], [-1, -1], [1, -1]]) * 0.8,
    )
