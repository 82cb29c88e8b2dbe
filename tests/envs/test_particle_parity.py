"""mopa's ``push`` and ``adversary`` against JaxMARL's ``MPE_simple_push_v3`` and
``MPE_simple_adversary_v3`` ``step_env``, transition by transition, from the same
injected states and actions (discrete and continuous)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from mopa.envs import make
from mopa.envs.particle import ADVERSARY, GOOD, ParticleState

jaxmarl = pytest.importorskip("jaxmarl")
from jaxmarl.environments.mpe.simple import State  # noqa: E402

NUM_STATES = 800
TOL = 1e-5
JAXMARL_NAMES = {"push": "MPE_simple_push_v3", "adversary": "MPE_simple_adversary_v3"}


def make_reference(env):
    """JaxMARL's version of ``env`` with the same team and landmark counts."""
    counts = {
        "num_good_agents": env.num_good,
        "num_adversaries": env.num_adversaries,
    }
    if env.name == "push":
        counts["num_landmarks"] = env.num_landmarks
    else:
        counts["num_obs"] = env.num_landmarks
    return jaxmarl.make(
        JAXMARL_NAMES[env.name],
        action_type="Continuous" if env.continuous_actions else "Discrete",
        max_steps=25,
        **counts,
    )


def agent_names(env):
    return [f"adversary_{i}" for i in range(env.num_adversaries)] + [
        f"agent_{j}" for j in range(env.num_good)
    ]


def to_reference_state(env, state):
    return State(
        p_pos=jnp.concatenate([state.pos, state.landmark_pos]),
        p_vel=jnp.concatenate([state.vel, jnp.zeros((env.num_landmarks, 2))]),
        c=jnp.zeros((env.num_agents, 2)),
        done=jnp.zeros((), bool),
        step=state.step,
        goal=state.goal,
    )


def random_states(env, seed, num):
    """Agents over and beyond the arena with velocities up to 2 (there is no speed
    limit); half of them dropped within 0.02-0.15 of another agent, so bodies of
    radius 0.05 often overlap; any landmark may be the goal. (NumPy draws: nothing
    to compile.)"""
    N, L = env.num_agents, env.num_landmarks
    rng = np.random.default_rng(seed)
    pos = rng.uniform(-1.3, 1.3, (num, N, 2))
    partner = (np.arange(N)[None] + rng.integers(1, N, (num, N))) % N
    angle = rng.uniform(0, 2 * np.pi, (num, N))
    gap = rng.uniform(0.02, 0.15, (num, N))
    near = np.take_along_axis(pos, partner[..., None], axis=1) + gap[
        ..., None
    ] * np.stack([np.cos(angle), np.sin(angle)], -1)
    pos = np.where(rng.uniform(size=(num, N, 1)) < 0.5, near, pos)
    return ParticleState(
        pos=jnp.asarray(pos, jnp.float32),
        vel=jnp.asarray(rng.uniform(-1.4, 1.4, (num, N, 2)), jnp.float32),
        landmark_pos=jnp.asarray(rng.uniform(-1.0, 1.0, (num, L, 2)), jnp.float32),
        goal=jnp.asarray(rng.integers(0, L, num), jnp.int32),
        step=jnp.zeros((num,), jnp.int32),
    )


def random_actions(env, seed, num):
    """Uniform actions for ``num`` games, drawn with NumPy."""
    rng = np.random.default_rng(seed)
    if env.continuous_actions:
        draw = lambda n: rng.uniform(size=(num, n, 5)).astype(np.float32)  # noqa: E731
    else:
        draw = lambda n: rng.integers(0, 5, (num, n)).astype(np.int32)  # noqa: E731
    return tuple(jnp.asarray(draw(n)) for n in env.team_sizes)


def step_both(env, params, states, actions):
    reference = make_reference(env)
    names = agent_names(env)

    def one(state, team_actions):
        obs, next_state, rewards, _, _, _ = env.step(
            jax.random.key(0), state, team_actions, params
        )
        flat = jnp.concatenate(team_actions)
        ref_obs, ref_state, ref_rew, _, _ = reference.step_env(
            jax.random.PRNGKey(0),
            to_reference_state(env, state),
            {name: flat[i] for i, name in enumerate(names)},
        )
        return (obs, next_state, rewards), (ref_obs, ref_state, ref_rew)

    return jax.jit(jax.vmap(one))(states, actions)


def assert_matches_reference(env, params, seed, num=NUM_STATES):
    states = random_states(env, seed, num)
    actions = random_actions(env, seed + 1, num)
    (obs, next_state, rewards), (ref_obs, ref_state, ref_rew) = jax.device_get(
        step_both(env, params, states, actions)
    )
    N, A = env.num_agents, env.num_adversaries
    np.testing.assert_allclose(next_state.pos, ref_state.p_pos[:, :N], atol=TOL)
    np.testing.assert_allclose(next_state.vel, ref_state.p_vel[:, :N], atol=TOL)
    names = agent_names(env)
    for i, name in enumerate(names):
        team, j = (ADVERSARY, i) if i < A else (GOOD, i - A)
        assert obs[team].shape[2:] == env.observation_space(team).shape
        assert obs[team][:, j].shape == ref_obs[name].shape, name
        np.testing.assert_allclose(obs[team][:, j], ref_obs[name], atol=TOL)
        np.testing.assert_allclose(rewards[team][:, j], ref_rew[name], atol=TOL)
    return states, actions, next_state


def free_force(env, params, actions):
    """``[B, N, 2]`` action forces of a batch of actions, as NumPy."""
    force = jax.vmap(lambda a, g: env.action_force((a, g), params))
    return np.asarray(jax.jit(force)(*actions))


@pytest.mark.parametrize(
    "overrides",
    [{"continuous_actions": False}, {"num_adversaries": 2, "num_good": 2}],
)
@pytest.mark.slow
def test_push_matches_jaxmarl_step_env(overrides):
    """Discrete actions with MPE's team sizes; continuous (the default) with
    2 v 2."""
    env, params = make("push", **overrides)
    states, actions, next_state = assert_matches_reference(env, params, seed=1)
    # Contacts happen and matter: without them the velocity update would be
    # vel * (1 - damping) + force * dt. Check that differs in many samples.
    no_contact = np.asarray(states.vel) * 0.75 + free_force(env, params, actions) * 0.1
    pushed = np.max(np.abs(next_state.vel - no_contact), axis=(1, 2)) > 0.1
    assert np.mean(pushed) > 0.1


@pytest.mark.parametrize(
    "overrides",
    [
        {"continuous_actions": False},
        {
            "num_adversaries": 2,
            "num_good": 3,
            "num_landmarks": 3,
        },
    ],
)
@pytest.mark.slow
def test_adversary_matches_jaxmarl_step_env(overrides):
    """Discrete actions with MPE's team sizes; continuous (the default) with 2 v 3
    and three landmarks."""
    env, params = make("adversary", **overrides)
    states, actions, next_state = assert_matches_reference(env, params, seed=3)
    # Nothing collides: the velocity update is exactly the free one.
    free = np.asarray(states.vel) * 0.75 + free_force(env, params, actions) * 0.1
    np.testing.assert_allclose(next_state.vel, free, atol=1e-6)


@pytest.mark.parametrize("name", ["push", "adversary"])
def test_reset_matches_jaxmarl_from_the_same_key(name):
    """Same key, same draws: reset states and observations equal JaxMARL's."""
    env, params = make(name)
    reference = make_reference(env)
    N, A = env.num_agents, env.num_adversaries

    def both(key):
        return env.reset(key, params), reference.reset(jax.random.key_data(key))

    keys = jax.random.split(jax.random.key(0), 64)
    (obs, state), (ref_obs, ref_state) = jax.device_get(jax.jit(jax.vmap(both))(keys))
    np.testing.assert_array_equal(state.pos, ref_state.p_pos[:, :N])
    np.testing.assert_array_equal(state.landmark_pos, ref_state.p_pos[:, N:])
    np.testing.assert_array_equal(state.goal, ref_state.goal)
    assert 0 < state.goal.mean() < 1  # both landmarks are drawn as the goal
    for i, agent in enumerate(agent_names(env)):
        team, j = (ADVERSARY, i) if i < A else (GOOD, i - A)
        np.testing.assert_allclose(obs[team][:, j], ref_obs[agent], atol=TOL)


@pytest.mark.parametrize("name", ["push", "adversary"])
def test_episode_length_differs_from_jaxmarl_as_documented(name):
    """mopa truncates on the 25th transition; JaxMARL's done comes on the 26th."""
    env, params = make(name)
    reference = make_reference(env)
    noop = tuple(jnp.zeros((n, 5)) for n in env.team_sizes)
    ref_noop = {agent: jnp.zeros(5) for agent in agent_names(env)}

    def both(carry, _):
        state, ref_state = carry
        _, state, _, terminated, truncated, _ = env.step(
            jax.random.key(0), state, noop, params
        )
        _, ref_state, _, dones, _ = reference.step_env(
            jax.random.PRNGKey(0), ref_state, ref_noop
        )
        return (state, ref_state), (terminated | truncated, dones["__all__"])

    @jax.jit
    def play():
        start = (
            env.reset(jax.random.key(0), params)[1],
            reference.reset(jax.random.PRNGKey(0))[1],
        )
        return jax.lax.scan(both, start, length=26)[1]

    done, ref_done = play()
    assert np.flatnonzero(done)[0] == 24
    assert np.flatnonzero(ref_done)[0] == 25


def test_layout_spaces_and_global_state():
    """Observation sizes are JaxMARL's (8 and 19 for push, 8 and 10 for
    adversary); actions are continuous unless asked otherwise; the global state
    holds positions, velocities, landmarks, the goal and the elapsed fraction."""
    push, push_params = make("push")
    adversary, _ = make("adversary", continuous_actions=False)
    assert [push.observation_space(t).shape for t in (0, 1)] == [(8,), (19,)]
    assert [adversary.observation_space(t).shape for t in (0, 1)] == [(8,), (10,)]
    assert adversary.team_sizes == (1, 2) and push.team_sizes == (1, 1)
    assert push.continuous_actions and not adversary.continuous_actions
    assert push.action_space(GOOD).shape == (5,)
    assert push.action_space(GOOD).low == 0.0 and push.action_space(GOOD).high == 1.0
    assert adversary.action_space(GOOD).n == 5
    _, state = push.reset(jax.random.key(0), push_params)
    state = state.replace(goal=jnp.asarray(1), step=jnp.asarray(5))
    glob = push.global_state(state, push_params)
    assert glob.shape == (push.global_state_size,) == (4 * 2 + 3 * 2 + 1,)
    np.testing.assert_allclose(glob[-3:], [0.0, 1.0, 0.2])
    np.testing.assert_array_equal(glob[:4], state.pos.reshape(-1))


def test_bad_structure_is_refused_with_the_field_named():
    from mopa.errors import InvalidParameterError

    with pytest.raises(InvalidParameterError, match="num_landmarks must be 2"):
        make("push", num_landmarks=3)
    with pytest.raises(InvalidParameterError, match="num_good must be >= 1"):
        make("adversary", num_good=0)
    with pytest.raises(
        InvalidParameterError, match="continuous_actions must be true or false"
    ):
        make("push", continuous_actions=1)
    with pytest.raises(InvalidParameterError, match="good_accel must be >= 0"):
        make("adversary", good_accel=-1.0)
