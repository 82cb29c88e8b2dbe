"""mopa's ``tag`` against JaxMARL's ``MPE_simple_tag_v3`` ``step_env``, transition by
transition, from the same injected states and actions."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from mopa.envs import PREDATOR, PREY, make
from mopa.envs.jaxmarl_compat import (
    jaxmarl_agent_names,
    make_jaxmarl_tag,
    to_jaxmarl_actions,
    to_jaxmarl_obs,
    to_jaxmarl_state,
)

jaxmarl = pytest.importorskip("jaxmarl")

NUM_STATES = 1200
TOL = 1e-5


def random_states(env, params, key, num):
    """States with agents spread over and slightly beyond the arena, random
    velocities up to each agent's speed limit, and many bodies in contact: a third
    of the agents are dropped right next to another body."""
    N, L = env.num_agents, env.num_obstacles
    keys = jax.random.split(key, 7)
    pos = jax.random.uniform(keys[0], (num, N, 2), minval=-1.3, maxval=1.3)
    obstacles = jax.random.uniform(keys[1], (num, L, 2), minval=-1.0, maxval=1.0)
    bodies = jnp.concatenate([pos, obstacles], axis=1)
    partner = jax.random.randint(keys[2], (num, N), 0, N + L)
    angle = jax.random.uniform(keys[3], (num, N), maxval=2 * jnp.pi)
    gap = jax.random.uniform(keys[4], (num, N), minval=0.02, maxval=0.35)
    near = jnp.take_along_axis(bodies, partner[..., None], axis=1) + gap[
        ..., None
    ] * jnp.stack([jnp.cos(angle), jnp.sin(angle)], -1)
    in_contact = (jax.random.uniform(keys[5], (num, N)) < 1 / 3) & (
        partner != jnp.arange(N)[None]
    )
    pos = jnp.where(in_contact[..., None], near, pos)
    max_speed = jnp.array(
        [params.predator_max_speed] * env.num_predators
        + [params.prey_max_speed] * env.num_prey
    )
    vel = jax.random.uniform(keys[6], (num, N, 2), minval=-1.0, maxval=1.0)
    vel = vel * max_speed[None, :, None] / jnp.sqrt(2.0)
    _, state = env.reset(jax.random.key(0), params)
    return jax.vmap(lambda p, v, o: state.replace(pos=p, vel=v, obstacle_pos=o))(
        pos, vel, obstacles
    )


def step_both(env, params, states, actions):
    reference = make_jaxmarl_tag(env)

    def one(state, team_actions):
        obs, next_state, rewards, terminated, truncated, _ = env.step(
            jax.random.key(0), state, team_actions, params
        )
        ref_obs, ref_state, ref_rew, _, _ = reference.step_env(
            jax.random.PRNGKey(0),
            to_jaxmarl_state(env, state),
            to_jaxmarl_actions(env, team_actions),
        )
        return (obs, next_state, rewards), (ref_obs, ref_state, ref_rew)

    return jax.jit(jax.vmap(one))(states, actions)


def random_actions(env, key, num):
    key_pred, key_prey = jax.random.split(key)
    return (
        jax.random.randint(key_pred, (num, env.num_predators), 0, 5),
        jax.random.randint(key_prey, (num, env.num_prey), 0, 5),
    )


def test_tag_matches_jaxmarl_step_env():
    env, params = make("tag")
    states = random_states(env, params, jax.random.key(1), NUM_STATES)
    actions = random_actions(env, jax.random.key(2), NUM_STATES)
    (obs, next_state, rewards), (ref_obs, ref_state, ref_rew) = step_both(
        env, params, states, actions
    )
    N = env.num_agents

    # Contacts really happen in this sample (else the test would not test them).
    assert float(jnp.mean(jnp.abs(next_state.vel) > 0.5)) > 0.05
    np.testing.assert_allclose(next_state.pos, ref_state.p_pos[:, :N], atol=TOL)
    np.testing.assert_allclose(next_state.vel, ref_state.p_vel[:, :N], atol=TOL)
    np.testing.assert_allclose(next_state.obstacle_pos, ref_state.p_pos[:, N:], atol=0)

    mapped = jax.vmap(lambda o: to_jaxmarl_obs(env, o))(obs)
    for name in jaxmarl_agent_names(env):
        assert mapped[name].shape == ref_obs[name].shape
        np.testing.assert_allclose(mapped[name], ref_obs[name], atol=TOL, err_msg=name)

    names = jaxmarl_agent_names(env)
    ref_pred = jnp.stack([ref_rew[n] for n in names[: env.num_predators]], -1)
    ref_prey = jnp.stack([ref_rew[n] for n in names[env.num_predators :]], -1)
    np.testing.assert_allclose(rewards[PREDATOR], ref_pred, atol=TOL)
    np.testing.assert_allclose(rewards[PREY], ref_prey, atol=TOL)
    # Captures and the boundary penalty both occur in the sample.
    assert float(jnp.sum(rewards[PREDATOR] > 0)) > 10
    assert float(jnp.sum((rewards[PREY] < 0) & (rewards[PREY] % 10 != 0))) > 10


def test_other_team_sizes_match_jaxmarl_physics_and_observations():
    """Physics and the parts of the observations JaxMARL gets right for 2 predators,
    2 prey and 3 obstacles (JaxMARL's predator sees only the last prey's velocity,
    which to_jaxmarl_obs accounts for; its prey rewards index a single prey)."""
    env, params = make("tag", num_predators=2, num_prey=2, num_obstacles=3)
    states = random_states(env, params, jax.random.key(3), 400)
    actions = random_actions(env, jax.random.key(4), 400)
    (obs, next_state, rewards), (ref_obs, ref_state, ref_rew) = step_both(
        env, params, states, actions
    )
    N = env.num_agents
    np.testing.assert_allclose(next_state.pos, ref_state.p_pos[:, :N], atol=TOL)
    np.testing.assert_allclose(next_state.vel, ref_state.p_vel[:, :N], atol=TOL)
    mapped = jax.vmap(lambda o: to_jaxmarl_obs(env, o))(obs)
    for name in jaxmarl_agent_names(env):
        np.testing.assert_allclose(mapped[name], ref_obs[name], atol=TOL, err_msg=name)
    np.testing.assert_allclose(
        rewards[PREDATOR][:, 0], ref_rew["adversary_0"], atol=TOL
    )
    assert (
        obs[PREDATOR].shape[-1]
        == env.observation_space(PREDATOR).shape[0]
        == 2 + 2 + 6 + 2 + 4 + 4
    )
    assert (
        obs[PREY].shape[-1] == env.observation_space(PREY).shape[0] == 2 + 2 + 6 + 4 + 2
    )


def test_episode_length_differs_from_jaxmarl_as_documented():
    """mopa truncates on the 25th transition; JaxMARL's done comes on the 26th."""
    env, params = make("tag")
    _, state = env.reset(jax.random.key(0), params)
    reference = make_jaxmarl_tag(env)
    _, ref_state = reference.reset(jax.random.PRNGKey(0))
    noop = (jnp.zeros(3, jnp.int32), jnp.zeros(1, jnp.int32))
    ref_noop = to_jaxmarl_actions(env, noop)
    mopa_done, ref_done = [], []
    for _ in range(26):
        _, state, _, terminated, truncated, _ = env.step(
            jax.random.key(0), state, noop, params
        )
        mopa_done.append(bool(terminated | truncated))
        _, ref_state, _, dones, _ = reference.step_env(
            jax.random.PRNGKey(0), ref_state, ref_noop
        )
        ref_done.append(bool(dones["__all__"]))
    assert mopa_done.index(True) == 24
    assert ref_done.index(True) == 25
