"""Scripted Red: the L1-L5 ladder as the reference behaves, the hidden strategy
family, the Blue-only and discrete-action wrappers, and a scripted Blue baseline
that must beat the ladder (a check that the mechanics are faithful)."""

from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from mopa.envs import DiscreteActions, make
from mopa.envs.battalion import heading_angle
from mopa.envs.battalion_wrappers import BATTALION_ACTIONS
from mopa.envs.scripted_red import (
    RED_TYPE_INDEX,
    STRATEGIES,
    heuristic_blue,
    hold_goals,
    red_script,
)
from mopa.errors import InvalidActionError, InvalidParameterError, UnknownNameError

KEY = jax.random.key(0)


def start(base, red_type, x, y, theta):
    """``base`` with the units placed and the Red type set."""
    return base.replace(
        x=jnp.asarray(x, jnp.float32),
        y=jnp.asarray(y, jnp.float32),
        heading_x=jnp.asarray(np.cos(theta), jnp.float32),
        heading_y=jnp.asarray(np.sin(theta), jnp.float32),
        red_type=jnp.asarray(RED_TYPE_INDEX[red_type], jnp.int32),
    )


@partial(jax.jit, static_argnums=(0, 3))
def play_still_blue(env, state, params, num_steps):
    """Blue stands still and holds fire; returns the states after each step and
    the infos."""
    still = (jnp.zeros((env.team_sizes[0], 3)),)

    def body(state, key):
        _, state, _, _, _, info = env.step(key, state, still, params)
        return state, (state, info)

    _, (states, infos) = jax.lax.scan(body, state, jax.random.split(KEY, num_steps))
    return states, infos


@pytest.fixture(scope="module")
def ladder():
    env, params = make("battalion_vs_red", red="ladder", flat_terrain=True)
    # Blue at (300, 500) faces east; Red starts 500 m east, 60 m north, facing
    # away from Blue (east).
    base = jax.jit(env.reset)(KEY, params)[1]
    states = [
        start(base, level, [300.0, 800.0], [500.0, 560.0], [0.0, 0.0])
        for level in ("L1", "L2", "L3", "L4", "L5")
    ]
    batch = jax.tree.map(lambda *xs: jnp.stack(xs), *states)
    play = jax.vmap(lambda s: play_still_blue(env, s, params, 150))
    return play(batch)


def distance(states):
    return jnp.hypot(
        states.x[..., 1] - states.x[..., 0], states.y[..., 1] - states.y[..., 0]
    )


def test_l1_stands_still_and_never_fires(ladder):
    states, infos = ladder
    np.testing.assert_allclose(states.x[0, :, 1], 800.0)
    np.testing.assert_allclose(states.y[0, :, 1], 560.0)
    np.testing.assert_allclose(heading_angle(states)[0, :, 1], 0.0)
    np.testing.assert_allclose(infos["red_dealt"][0], 0.0)


def test_l2_turns_at_most_a_tenth_of_a_radian_per_step_and_stays(ladder):
    states, infos = ladder
    theta = np.concatenate([[0.0], np.asarray(heading_angle(states)[1, :, 1])])
    turns = np.abs((np.diff(theta) + np.pi) % (2 * np.pi) - np.pi)
    assert turns.max() <= 0.1 + 1e-5
    # Blue lies at atan2(-60, -500) = pi + 0.1194 (mod 2 pi): a turn of about 3.02
    # rad, so 31 full-rate steps and then it keeps facing Blue.
    np.testing.assert_allclose(turns[:30], 0.1, rtol=1e-4)
    bearing = np.arctan2(-60.0, -500.0) % (2 * np.pi)
    np.testing.assert_allclose(
        heading_angle(states)[1, 40:, 1] % (2 * np.pi), bearing, atol=1e-4
    )
    np.testing.assert_allclose(states.x[1, :, 1], 800.0)
    np.testing.assert_allclose(infos["red_dealt"][1], 0.0)


def test_l3_advances_until_160_m_and_never_fires(ladder):
    states, infos = ladder
    dist = np.asarray(distance(jax.tree.map(lambda x: x[2], states)))
    # It moves 5 m per step while more than 160 m away, then stops: the distance
    # never grows once turned, and ends in (155, 160].
    assert 155.0 < dist[-1] <= 160.0
    assert np.all(np.diff(dist[40:]) <= 1e-4)
    np.testing.assert_allclose(dist[-20:], dist[-1])
    np.testing.assert_allclose(infos["red_dealt"][2], 0.0)


def test_l4_and_l5_fire_at_half_and_full_intensity(ladder):
    states, infos = ladder
    dealt = np.asarray(infos["red_dealt"][3:, :, 0])  # [2, T]
    dist = np.asarray(distance(jax.tree.map(lambda x: x[3:], states)))
    # Same path as L3; each step it hits Blue (frontal: Blue faces east, Red
    # comes from the east within 45 degrees) for 0.05 x I x (1 - d/200) x 1 x 1.
    firing = dist[1] <= 200.0
    assert firing.sum() > 50
    for row, intensity in ((0, 0.5), (1, 1.0)):
        expected = 0.05 * intensity * (1 - dist[row] / 200.0)
        np.testing.assert_allclose(dealt[row][firing], expected[firing], rtol=1e-4)
    np.testing.assert_allclose(dealt[1][firing], 2 * dealt[0][firing], rtol=1e-4)


@pytest.fixture(scope="module")
def strategies():
    env, params = make(
        "battalion_vs_red", red="mixed", flat_terrain=True, base_damage=0.0
    )
    base = jax.jit(env.reset)(KEY, params)[1]
    states = []
    for name in STRATEGIES:
        state = start(base, name, [300.0, 700.0], [500.0, 500.0], [0.0, np.pi])
        if name == "hold":  # a forest 200 m north of Red's start
            cell = 13 * 20 + 14  # row 13 (y 650-700), column 14 (x 700-750)
            state = state.replace(cover=state.cover.at[cell].set(0.5))
            state = state.replace(red_goal=hold_goals(state, params, 1, 20))
        states.append(state)
    batch = jax.tree.map(lambda *xs: jnp.stack(xs), *states)
    play = jax.vmap(lambda s: play_still_blue(env, s, params, 400))
    states = jax.tree.map(np.asarray, play(batch)[0])
    return {
        name: jax.tree.map(lambda x, i=i: x[i], states)
        for i, name in enumerate(STRATEGIES)
    }


@pytest.mark.slow
def test_strategies_are_qualitatively_different(strategies):
    # Blue stands at (300, 500) facing east; Red starts at (700, 500) facing west
    # (400 m away), no damage. States are after steps 1..400 (index t = step t+1).
    def dist(name):
        return np.asarray(distance(strategies[name]))

    def red(name):
        s = strategies[name]
        return s.x[:, 1], s.y[:, 1]

    # rush stands and fights where it starts until step 150, then charges to 50 m.
    x, y = red("rush")
    np.testing.assert_allclose([x[148], y[148]], [700.0, 500.0])
    assert x[160] < 700.0 - 40.0 and dist("rush")[-1] <= 50.0
    # flank_left swings to 300 m off Blue's left (north), (300, 800), by step 150,
    # flank_right to (300, 200); then both charge in to 50 m.
    for name, wy in (("flank_left", 800.0), ("flank_right", 200.0)):
        x, y = red(name)
        assert np.hypot(x[148] - 300.0, y[148] - wy) <= 30.0, name
        assert dist(name)[-1] <= 50.0, name
    # standoff advances at half speed (2.5 m a step; it starts facing Blue) and
    # holds 190 +- 7.5 m.
    standoff = dist("standoff")
    np.testing.assert_allclose(standoff[39], 400.0 - 40 * 2.5, atol=1e-3)
    assert 182.5 <= standoff[-1] <= 197.5
    # hold marches to the forest cell's centre (725, 675), stays there until step
    # 200, then marches away from Blue.
    x, y = red("hold")
    assert np.hypot(x[198] - 725.0, y[198] - 675.0) <= 10.0
    assert dist("hold")[-1] > dist("hold")[198] + 300.0
    # feint turns its back and withdraws (to the east edge) until step 120, then
    # turns to close to 300 m, and charges to 50 m from step 200.
    feint = dist("feint")
    assert red("feint")[0][118] >= 990.0 and feint[118] > 650.0
    assert feint[198] < feint[118] and feint[198] >= 295.0
    assert feint[-1] <= 50.0
    # The openings differ within 30 steps: rush stands, standoff closes, feint
    # turns away, the flankers go north and south.
    x30 = {name: red(name)[0][29] for name in STRATEGIES}
    y30 = {name: red(name)[1][29] for name in STRATEGIES}
    assert x30["rush"] == 700.0 and standoff[29] < 400.0 - 50.0
    assert feint[29] > 400.0
    assert y30["flank_left"] > 520.0 and y30["flank_right"] < 480.0


def test_strategies_fire_as_described():
    env, params = make("battalion_vs_red", red="mixed", flat_terrain=True)
    base = jax.jit(env.reset)(KEY, params)[1]

    def fire(name, red_x, step, red_theta=np.pi):
        state = start(base, name, [300.0, red_x], [500.0, 500.0], [0.0, red_theta])
        state = state.replace(step=jnp.asarray(step, jnp.int32))
        return float(red_script(name, KEY, state, params, 1)[0, 2])

    # A charging rush holds its fire beyond 100 m; before its charge it fires.
    assert fire("rush", 450.0, 160) == 0.0 and fire("rush", 390.0, 160) == 1.0
    assert fire("rush", 450.0, 10) == 1.0
    # A withdrawing hold or feint does not fire; they fire when they fight.
    assert fire("hold", 450.0, 250) == 0.0 and fire("hold", 450.0, 50) == 1.0
    assert fire("feint", 450.0, 50) == 0.0 and fire("feint", 450.0, 150) == 1.0


def test_hidden_type_never_in_blues_observation():
    env, params = make("battalion_vs_red", red="mixed")
    reset, observe = jax.jit(env.reset), jax.jit(env.observe)
    obs, state = reset(KEY, params)
    for t in STRATEGIES:
        typed = state.replace(red_type=jnp.int32(RED_TYPE_INDEX[t]))
        np.testing.assert_array_equal(observe(typed, params)[0], obs[0])
        np.testing.assert_array_equal(
            env.global_state(typed, params), env.global_state(state, params)
        )
    # Changing only the type distribution leaves the first observation unchanged.
    one_hot = np.zeros(12, np.float32)
    one_hot[RED_TYPE_INDEX["feint"]] = 1.0
    other, other_state = reset(KEY, params.replace(red_probs=jnp.asarray(one_hot)))
    np.testing.assert_array_equal(other[0], obs[0])
    assert int(other_state.red_type) == RED_TYPE_INDEX["feint"]
    assert env.team_names == ("blue",) and obs[0].shape == (1, 17)


def test_red_type_is_drawn_per_episode_from_red_probs():
    env, params = make("battalion_vs_red", red="mixed")
    types = jax.jit(jax.vmap(lambda k: env.reset(k, params)[1].red_type))(
        jax.random.split(KEY, 1200)
    )
    counts = np.bincount(np.asarray(types), minlength=12)
    np.testing.assert_array_equal(counts[:6], 0)  # the ladder and random: never
    assert np.all(np.abs(counts[6:] / 1200 - 1 / 6) < 0.04)


@pytest.mark.slow
def test_same_key_same_episode():
    env, params = make("battalion_vs_red", red="L5,random,feint")
    blue = (jnp.asarray([[1.0, 0.5, 1.0]]),)

    @jax.jit
    def run(key):
        _, state = env.reset(key, params)
        return env.step(key, state, blue, params)

    first, again = run(jax.random.key(3)), run(jax.random.key(3))
    for a, b in zip(jax.tree.leaves(first), jax.tree.leaves(again), strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    other = run(jax.random.key(4))
    assert not np.allclose(other[0][0], first[0][0])


def episode_outcomes(env, params, keys, num_steps=500):
    """Outcome of one episode of the heuristic Blue per key: 1 win, 0 draw,
    -1 loss."""

    def episode(key):
        key_reset, key_steps = jax.random.split(key)
        obs, state = env.reset(key_reset, params)

        def body(carry, key_t):
            obs, state, finished, result = carry
            action = heuristic_blue(obs[0][0], params)[None]
            obs, state, _, terminated, truncated, info = env.step(
                key_t, state, (action,), params
            )
            now = (terminated | truncated) & ~finished
            code = jnp.where(info["blue_win"], 1, jnp.where(info["red_win"], -1, 0))
            result = jnp.where(now, code, result)
            return (obs, state, finished | now, result), None

        init = (obs, state, jnp.bool_(False), jnp.int32(0))
        (_, _, finished, result), _ = jax.lax.scan(
            body, init, jax.random.split(key_steps, num_steps)
        )
        return jnp.where(finished, result, -2)

    return jax.vmap(episode)(keys)


@pytest.mark.slow
def test_heuristic_blue_beats_the_ladder():
    env, params = make("battalion_vs_red", red="ladder")
    levels = ("L1", "L2", "L3", "L4", "L5")
    probs = np.eye(12, dtype=np.float32)[[RED_TYPE_INDEX[lv] for lv in levels]]
    batch = jax.vmap(lambda p: params.replace(red_probs=p))(jnp.asarray(probs))
    keys = jax.random.split(KEY, 100)
    results = np.asarray(
        jax.jit(jax.vmap(lambda p: episode_outcomes(env, p, keys)))(batch)
    )
    assert np.all(results >= -1)  # every episode ended within 500 steps
    wins = dict(zip(levels, (results == 1).mean(axis=1), strict=True))
    # The reference's heuristic wins every game against L1-L4, about half vs L5.
    for level in levels[:4]:
        assert wins[level] >= 0.95, wins
    assert 0.2 <= wins["L5"] <= 0.8, wins


def test_discrete_actions_play_their_table_row():
    env, params = make("battalion_vs_red", red="L5", discrete=True)
    assert isinstance(env, DiscreteActions)
    assert env.action_space(0).n == len(BATTALION_ACTIONS) == 18
    box, _ = make("battalion_vs_red", red="L5")
    _, state = jax.jit(env.reset)(KEY, params)
    k = 17  # move forward, rotate left, fire
    np.testing.assert_array_equal(BATTALION_ACTIONS[k], [1.0, 1.0, 1.0])
    out = jax.jit(env.step)(KEY, state, (jnp.asarray([k], jnp.int32),), params)
    ref = jax.jit(box.step)(
        KEY, state, (jnp.asarray(BATTALION_ACTIONS[k : k + 1]),), params
    )
    for a, b in zip(jax.tree.leaves(out), jax.tree.leaves(ref), strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    with pytest.raises(InvalidActionError, match="out of range"):
        env.step(KEY, state, (jnp.asarray([18], jnp.int32),), params)
    with pytest.raises(InvalidActionError, match="integers"):
        env.step(KEY, state, (jnp.zeros((1,)),), params)


def test_bad_red_configurations_raise_clear_errors():
    with pytest.raises(UnknownNameError, match="unknown Red type 'L9'"):
        make("battalion_vs_red", red="L9")
    with pytest.raises(InvalidParameterError, match="outside"):
        make("battalion_vs_red", red="L5", red_probs=np.eye(12)[0])
    with pytest.raises(InvalidParameterError, match="discrete"):
        make("battalion_vs_red", discrete="yes")
    env, params = make("multi_battalion_vs_red", red="mixed", num_blue=3)
    assert env.team_sizes == (3,) and env.observation_space(0).shape == (
        27,
    )  # 6 + 5 x 4 + 1
