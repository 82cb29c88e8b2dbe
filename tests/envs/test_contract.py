"""Contract tests every registered game must pass: shapes, dtypes, spaces, JAX
hygiene (jit, vmap, determinism), numerical health and episode boundaries."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from mopa.envs import (
    AutoReset,
    EpisodeStats,
    make,
    random_policy,
    registered_envs,
    rollout,
)

ENVS = registered_envs()


def random_team_actions(env, key):
    return random_policy(env)(key, None, None)


def assert_trees_equal(a, b):
    for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b), strict=True):
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))


def assert_trees_close(a, b, atol=1e-6):
    # rtol: float32 rounding of values far from 1 (battalion positions in metres).
    for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b), strict=True):
        np.testing.assert_allclose(np.asarray(x), np.asarray(y), atol=atol, rtol=1e-6)


@pytest.mark.slow
@pytest.mark.parametrize("name", ENVS)
def test_shapes_dtypes_and_spaces(name):
    env, params = make(name)
    obs, state = env.reset(jax.random.key(0), params)
    assert len(obs) == env.num_teams == len(env.team_names) == len(env.team_sizes)
    actions = random_team_actions(env, jax.random.key(1))
    obs2, state2, rewards, terminated, truncated, info = env.step(
        jax.random.key(2), state, actions, params
    )
    for t in range(env.num_teams):
        space = env.observation_space(t)
        for o in (obs[t], obs2[t]):
            assert o.shape == (env.team_sizes[t], *space.shape)
            assert o.dtype == jnp.float32
            assert space.contains(o)
        assert rewards[t].shape == (env.team_sizes[t],)
        assert rewards[t].dtype == jnp.float32
        assert env.action_space(t).contains(actions[t])
    assert terminated.shape == truncated.shape == ()
    assert terminated.dtype == truncated.dtype == jnp.bool_
    assert jax.tree.structure(state) == jax.tree.structure(state2)
    assert_trees_equal(env.observe(state2, params), obs2)
    assert isinstance(info, dict)
    if name.startswith("tag"):  # the pursuit games report captures; others need not
        assert "captures" in info


TERMINATING = {
    "battalion",
    "battalion_vs_red",
    "multi_battalion",
    "multi_battalion_vs_red",
}
"""Games that can end before the step limit by their own rules."""

WITHOUT_RANDOMNESS = {"ipd"}
"""Games whose start and transitions do not depend on the key (the IPD always
starts from its start state; the actions fix each step)."""


@pytest.mark.slow
@pytest.mark.parametrize("name", ENVS)
def test_jit_equals_no_jit_and_same_key_same_output(name):
    env, params = make(name)
    key_reset, key_act, key_step = jax.random.split(jax.random.key(7), 3)
    actions = random_team_actions(env, key_act)

    def episode_step(key_reset, key_step):
        _, state = env.reset(key_reset, params)
        for _ in range(3):
            out = env.step(key_step, state, actions, params)
            state = out[1]
        return out

    eager = episode_step(key_reset, key_step)
    jitted = jax.jit(episode_step)(key_reset, key_step)
    assert_trees_close(eager, jitted)
    assert_trees_equal(jax.jit(episode_step)(key_reset, key_step), jitted)
    other = jax.jit(episode_step)(jax.random.key(8), key_step)
    if name in WITHOUT_RANDOMNESS:  # the key must not matter at all
        assert_trees_equal(other[0], jitted[0])
    else:  # the key is used
        assert not np.allclose(other[0][0], jitted[0][0])


@pytest.mark.slow
@pytest.mark.parametrize("name", ENVS)
def test_vmap_equals_loop(name):
    # Both sides jitted (a handful of programs per game, not hundreds of eager
    # ones); eager execution is checked against jit above.
    env, params = make(name)
    keys = jax.random.split(jax.random.key(3), 5)
    reset = jax.jit(env.reset)
    batched = jax.jit(jax.vmap(env.reset, (0, None)))(keys, params)
    for i, key in enumerate(keys):
        assert_trees_close(
            jax.tree.map(lambda x, i=i: x[i], batched), reset(key, params)
        )
    states = batched[1]
    actions = jax.jit(jax.vmap(lambda k: random_team_actions(env, k)))(keys)
    stepped = jax.jit(jax.vmap(env.step, (0, 0, 0, None)))(
        keys, states, actions, params
    )
    step = jax.jit(env.step)
    for i, key in enumerate(keys):
        one = step(
            key,
            jax.tree.map(lambda x, i=i: x[i], states),
            jax.tree.map(lambda x, i=i: x[i], actions),
            params,
        )
        assert_trees_close(jax.tree.map(lambda x, i=i: x[i], stepped), one)


@pytest.mark.slow
@pytest.mark.parametrize("name", ENVS)
def test_ten_thousand_random_steps_stay_finite_and_truncate_on_the_last_step(name):
    # 100 games of 100 steps (one compiled rollout per game serves both checks).
    env, params = make(name)
    trajectory = rollout(
        env, params, random_policy(env), jax.random.key(4), 100, batch_size=100
    )
    for leaf in jax.tree.leaves((trajectory.obs, trajectory.rewards, trajectory.state)):
        if jnp.issubdtype(leaf.dtype, jnp.floating):
            assert bool(jnp.all(jnp.isfinite(leaf)))
    assert trajectory.rewards[0].shape[:2] == (100, 100)  # 10,000 steps of every agent
    # Bodies stay near the arena: the boundary penalty and contacts keep them there.
    if name.startswith("tag"):  # other games check their own bounds
        assert float(jnp.max(jnp.abs(trajectory.state.pos))) < 5.0
    # A game is truncated on its last step (episodes chain). Only the battalion
    # games end by their own rules (a side destroyed or routed); the others never
    # terminate, and the pattern is checked on every game that did not end.
    max_steps = int(params.max_steps)
    steps = np.broadcast_to(np.arange(100) % max_steps, (100, 100))
    ended = np.asarray(trajectory.terminated).any(1)
    if name not in TERMINATING:
        assert not ended.any()
    assert (~ended).sum() >= 50
    np.testing.assert_array_equal(
        np.asarray(trajectory.truncated)[~ended], (steps == max_steps - 1)[~ended]
    )
    np.testing.assert_array_equal(
        np.asarray(trajectory.state.step)[~ended], steps[~ended]
    )


@pytest.mark.slow
@pytest.mark.parametrize("name", ENVS)
def test_auto_reset_keeps_true_final_observation(name):
    env, params = make(name, max_steps=3)
    wrapped = AutoReset(env)
    obs, state = wrapped.reset(jax.random.key(0), params)
    actions = random_team_actions(env, jax.random.key(1))
    for _ in range(2):
        obs, state, *_ = wrapped.step(jax.random.key(2), state, actions, params)
    final_obs, final_state, *_ = env.step(jax.random.key(9), state, actions, params)
    obs, next_state, _, _, truncated, info = wrapped.step(
        jax.random.key(2), state, actions, params
    )
    assert bool(truncated) and bool(info["done"])
    key_reset = jax.random.split(jax.random.key(2))[1]
    assert_trees_close(info["final_obs"], final_obs)
    assert_trees_close((obs, next_state), env.reset(key_reset, params))
    assert int(next_state.step) == 0


@pytest.mark.slow
@pytest.mark.parametrize("name", ENVS)
def test_episode_stats_sum_rewards_over_an_episode(name):
    env, params = make(name)
    wrapped = EpisodeStats(AutoReset(env))
    num_steps = 2 * int(params.max_steps)  # two whole episodes
    trajectory = rollout(
        wrapped, params, random_policy(env), jax.random.key(6), num_steps
    )
    done = np.asarray(trajectory.info["done"])
    terminated = np.asarray(trajectory.terminated)
    # Two episodes reach the step limit, unless a game ends some by its own rules.
    assert done.sum() == 2 if not terminated.any() else done.sum() >= 2
    last = np.flatnonzero(done)[0]
    for t in range(env.num_teams):
        expected = np.asarray(trajectory.rewards[t][: last + 1]).sum(0)
        np.testing.assert_allclose(
            trajectory.info["episode_returns"][t][last], expected, rtol=1e-5, atol=1e-4
        )
    assert int(trajectory.info["episode_length"][last]) == last + 1
    assert terminated[last] or last + 1 == int(params.max_steps)


def test_no_recompilation_on_second_call():
    env, params = make("tag")
    step = jax.jit(env.step)
    _, state = env.reset(jax.random.key(0), params)
    actions = random_team_actions(env, jax.random.key(1))
    step(jax.random.key(1), state, actions, params)
    other_params = params.replace(prey_max_speed=jnp.asarray(2.0))
    with jax.log_compiles():
        before = step._cache_size()
        step(jax.random.key(2), state, actions, other_params)
    assert step._cache_size() == before


def test_params_vmap_over_speeds():
    """Parameters are data: one compiled step serves a batch of different speeds."""
    env, params = make("tag")
    speeds = jnp.array([0.5, 1.0, 2.0])
    batch = jax.vmap(lambda s: params.replace(predator_max_speed=s))(speeds)
    _, state = env.reset(jax.random.key(0), params)
    push = (jnp.full((3,), 2, jnp.int32), jnp.zeros((1,), jnp.int32))

    def run(p):
        s = state.replace(
            obstacle_pos=state.obstacle_pos + 10.0,
            pos=jnp.zeros((4, 2)).at[:, 1].set(jnp.arange(4) * 0.5),
        )
        s = jax.lax.fori_loop(
            0, 30, lambda _, s: env.step(jax.random.key(0), s, push, p)[1], s
        )
        return jnp.linalg.norm(s.vel[:3], axis=-1)

    top = jax.jit(jax.vmap(run))(batch)
    np.testing.assert_allclose(
        top,
        np.repeat(np.minimum(speeds, 3.0 * 0.1 / 0.25 * (1 - 0.75**30))[:, None], 3, 1),
        rtol=1e-4,
    )
