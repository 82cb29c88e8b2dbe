"""Battalion mechanics with hand-worked numbers: damage, morale, movement, the fire
arc, episode ends and team elimination."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from mopa.envs import make
from mopa.envs.battalion import UNKNOWN, cell_index, cos_sin, heading_angle
from mopa.errors import InvalidActionError, InvalidParameterError

KEY = jax.random.key(0)


def placed(base, x, y, theta, **fields):
    """``base`` with units at ``x``, ``y`` facing ``theta`` (and other fields)."""
    fields = {k: jnp.asarray(v) for k, v in fields.items()}
    as_f32 = lambda v: jnp.asarray(v, jnp.float32)  # noqa: E731
    return base.replace(
        x=as_f32(x),
        y=as_f32(y),
        heading_x=as_f32(np.cos(theta)),
        heading_y=as_f32(np.sin(theta)),
        **fields,
    )


def game(name, **overrides):
    """``(env, params, jitted step, a reset state)`` of a game on flat ground."""
    env, params = make(name, flat_terrain=True, **overrides)
    return env, params, jax.jit(env.step), jax.jit(env.reset)(KEY, params)[1]


def act(*rows):
    """One team's actions ``[A, 3]`` from ``(move, rotate, fire)`` rows."""
    return jnp.asarray(rows, jnp.float32)


@pytest.fixture(scope="module")
def duel():
    return game("battalion")


def with_cover(state, params, x, y, value):
    cell = int(cell_index(jnp.float32(x), jnp.float32(y), params, 20))
    return state.replace(cover=state.cover.at[cell].set(value))


@pytest.mark.parametrize(
    ("red_facing", "aspect"),
    [(np.pi, 1.0), (np.pi / 2, 1.5), (0.0, 2.0)],
    ids=["front", "flank", "rear"],
)
def test_damage_at_range_angle_and_cover(duel, red_facing, aspect):
    env, params, step, base = duel
    # Blue at (400, 500) faces east; Red 100 m east of it in a cell with cover 0.4.
    state = placed(base, [400.0, 500.0], [500.0, 500.0], [0.0, red_facing])
    state = with_cover(state, params, 500.0, 500.0, 0.4)
    _, next_state, rewards, terminated, _, info = step(
        KEY, state, (act([0, 0, 1]), act([0, 0, 0])), params
    )
    # Shot arrives from the west: Red facing west is hit in front (x1), facing
    # north in the flank (x1.5), facing east in the rear (x2).
    # damage = 0.05 x 1 (intensity) x (1 - 100/200) x aspect x 1 (strength)
    #          x (1 - 0.4) = 0.015 x aspect
    damage = 0.015 * aspect
    np.testing.assert_allclose(info["blue_dealt"], [damage], rtol=1e-5)
    np.testing.assert_allclose(info["red_received"], [damage], rtol=1e-5)
    np.testing.assert_allclose(next_state.strength, [1.0, 1.0 - damage], rtol=1e-6)
    # Morale drops 1.5 x damage for Red; Blue, untouched, stays capped at 1.
    np.testing.assert_allclose(next_state.morale, [1.0, 1.0 - 1.5 * damage], rtol=1e-6)
    # Reward: 5 x dealt - 0.01 for Blue, -5 x received - 0.01 for Red.
    np.testing.assert_allclose(rewards[0], [5 * damage - 0.01], rtol=1e-5)
    np.testing.assert_allclose(rewards[1], [-5 * damage - 0.01], rtol=1e-5)
    np.testing.assert_allclose(info["blue_reward_dealt"], [5 * damage], rtol=1e-5)
    np.testing.assert_allclose(info["red_reward_received"], [-5 * damage], rtol=1e-5)
    assert not bool(terminated)


def test_damage_scales_with_range_intensity_and_shooter_strength(duel):
    env, params, step, base = duel
    # Red 150 m east, facing Blue; Blue at strength 0.5 fires at intensity 0.8.
    state = placed(
        base, [400.0, 550.0], [500.0, 500.0], [0.0, np.pi], strength=[0.5, 1.0]
    )
    *_, info = step(KEY, state, (act([0, 0, 0.8]), act([0, 0, 0])), params)
    # 0.05 x 0.8 x (1 - 150/200) x 1 (front) x 0.5 x 1 (no cover) = 0.005
    np.testing.assert_allclose(info["blue_dealt"], [0.005], rtol=1e-5)


def test_fire_is_simultaneous_from_strengths_before_the_step(duel):
    env, params, step, base = duel
    # Face to face 100 m apart, both fire fully; Red starts at strength 0.4.
    state = placed(
        base, [400.0, 500.0], [500.0, 500.0], [0.0, np.pi], strength=[1.0, 0.4]
    )
    _, next_state, *_ = step(KEY, state, (act([0, 0, 1]), act([0, 0, 1])), params)
    # Blue deals 0.05 x 0.5 x 1 = 0.025; Red deals 0.05 x 0.5 x 0.4 = 0.01 (its
    # strength before the step, not after Blue's volley).
    np.testing.assert_allclose(next_state.strength, [0.99, 0.375], rtol=1e-5)


def test_morale_recovers_without_damage_and_caps_at_one(duel):
    env, params, step, base = duel
    state = placed(
        base, [100.0, 900.0], [500.0, 500.0], [0.0, np.pi], morale=[0.5, 0.995]
    )
    _, next_state, *_ = step(KEY, state, (act([0, 0, 1]), act([0, 0, 1])), params)
    # Out of range: no damage, +0.01 each, capped: 0.5 -> 0.51, 0.995 -> 1.0.
    np.testing.assert_allclose(next_state.morale, [0.51, 1.0], rtol=1e-6)


def test_rotate_then_move_along_the_new_heading(duel):
    env, params, step, base = duel
    state = placed(base, [500.0, 100.0], [500.0, 900.0], [0.0, np.pi])
    _, next_state, *_ = step(KEY, state, (act([1, 1, 0]), act([-0.5, -1, 0])), params)
    # Blue turns +0.1 rad, then moves 50 m/s x 0.1 s = 5 m along 0.1 rad:
    # (500 + 5 cos 0.1, 500 + 5 sin 0.1) = (504.97502, 500.49917).
    # Red turns to pi - 0.1, then backs 2.5 m: (100 - 2.5 cos(pi - 0.1),
    # 900 - 2.5 sin(pi - 0.1)) = (102.48751, 899.75042).
    np.testing.assert_allclose(next_state.x, [504.97502, 102.48751], rtol=1e-6)
    np.testing.assert_allclose(next_state.y, [500.49917, 899.75042], rtol=1e-6)
    np.testing.assert_allclose(heading_angle(next_state), [0.1, np.pi - 0.1], rtol=1e-6)
    np.testing.assert_allclose(
        next_state.heading_x**2 + next_state.heading_y**2, 1.0, rtol=1e-6
    )


def test_hills_slow_movement_and_the_map_edge_clips(duel):
    env, params, step, base = duel
    state = placed(base, [500.0, 998.0], [500.0, 500.0], [np.pi / 2, np.pi])
    cell = int(cell_index(jnp.float32(500.0), jnp.float32(500.0), params, 20))
    state = state.replace(
        elevation=state.elevation.at[cell].set(0.6),
        unit_elevation=jnp.asarray([0.6, 0.0]),
    )
    _, next_state, *_ = step(KEY, state, (act([1, 0, 0]), act([1, 0, 0])), params)
    # Blue at (500, 500) facing north on elevation 0.6: speed factor
    # 1 - 0.6 x (1 - 0.5) = 0.7, so 3.5 m, into the same cell. Red at (998, 500)
    # on flat ground moves the full 5 m west.
    np.testing.assert_allclose(next_state.y[0], 503.5, rtol=1e-6)
    np.testing.assert_allclose(next_state.x[1], 993.0, rtol=1e-6)
    np.testing.assert_allclose(next_state.unit_elevation, [0.6, 0.0])
    # Pushing off the map is clipped at the edge.
    state = placed(base, [2.0, 500.0], [500.0, 500.0], [np.pi, np.pi])
    _, next_state, *_ = step(KEY, state, (act([1, 0, 0]), act([0, 0, 0])), params)
    assert float(next_state.x[0]) == 0.0


@pytest.mark.parametrize(("degrees", "hit"), [(44.0, True), (46.0, False)])
def test_fire_arc_boundary(duel, degrees, hit):
    env, params, step, base = duel
    # Red 100 m from Blue at `degrees` off Blue's heading (east); the arc is +-45.
    angle = np.deg2rad(degrees)
    state = placed(
        base,
        [300.0, 300.0 + 100 * np.cos(angle)],
        [500.0, 500.0 + 100 * np.sin(angle)],
        [0.0, np.pi + angle],
    )
    *_, info = step(KEY, state, (act([0, 0, 1]), act([0, 0, 0])), params)
    # Inside: 0.05 x (1 - 100/200) x 1 (Red faces Blue: front) = 0.025.
    np.testing.assert_allclose(info["blue_dealt"], [0.025 if hit else 0.0], rtol=1e-5)


def test_range_boundary(duel):
    env, params, step, base = duel
    for dist, expected in ((199.0, 0.05 * (1 / 200)), (201.0, 0.0)):
        state = placed(base, [300.0, 300.0 + dist], [500.0, 500.0], [0.0, np.pi])
        *_, info = step(KEY, state, (act([0, 0, 1]), act([0, 0, 0])), params)
        np.testing.assert_allclose(info["blue_dealt"], [expected], rtol=1e-4)


def test_simultaneous_break_is_a_draw(duel):
    env, params, step, base = duel
    # Both at morale 0 exchange fire: each takes damage, morale stays 0 and the
    # rout probability 1 - 0/0.25 = 1 breaks both on the same step.
    state = placed(
        base, [400.0, 450.0], [500.0, 500.0], [0.0, np.pi], morale=[0.0, 0.0]
    )
    _, next_state, rewards, terminated, truncated, info = step(
        KEY, state, (act([0, 0, 1]), act([0, 0, 1])), params
    )
    assert bool(terminated) and not bool(truncated)
    assert (
        bool(info["draw"]) and not bool(info["blue_win"]) and not bool(info["red_win"])
    )
    np.testing.assert_array_equal(next_state.routed, [True, True])
    np.testing.assert_allclose(info["blue_reward_terminal"], [0.0])
    np.testing.assert_allclose(info["red_reward_terminal"], [0.0])


def test_one_sided_break_and_destruction_win(duel):
    env, params, step, base = duel
    state = placed(
        base, [400.0, 450.0], [500.0, 500.0], [0.0, np.pi], morale=[1.0, 0.0]
    )
    *_, rewards, terminated, _, info = step(
        KEY, state, (act([0, 0, 1]), act([0, 0, 0])), params
    )
    assert bool(terminated) and bool(info["blue_win"]) and not bool(info["draw"])
    # Blue: 5 x 0.05 x (1 - 50/200) - 0.01 + 10 = 10.1775; Red the opposite.
    np.testing.assert_allclose(rewards[0], [10.1775], rtol=1e-5)
    np.testing.assert_allclose(rewards[1], [-10.1975], rtol=1e-5)
    # Destruction: Red at strength 0.02 takes min(0.0375, 0.02) and is destroyed.
    state = placed(
        base, [400.0, 450.0], [500.0, 500.0], [0.0, np.pi], strength=[1.0, 0.02]
    )
    _, next_state, _, terminated, _, info = step(
        KEY, state, (act([0, 0, 1]), act([0, 0, 0])), params
    )
    assert bool(terminated) and bool(info["blue_win"])
    np.testing.assert_allclose(info["blue_dealt"], [0.02], rtol=1e-5)
    assert float(next_state.strength[1]) == 0.0


def test_rout_is_probabilistic_below_the_threshold(duel):
    env, params, step, base = duel
    # Morale 0.1 after recovering to 0.11: rout probability 1 - 0.11/0.25 = 0.56.
    state = placed(
        base, [100.0, 900.0], [500.0, 500.0], [0.0, np.pi], morale=[1.0, 0.1]
    )
    step = jax.jit(
        jax.vmap(lambda k: env.step(k, state, (act([0, 0, 0]),) * 2, params))
    )
    routed = step(jax.random.split(KEY, 4000))[1].routed[:, 1]
    assert abs(float(jnp.mean(routed)) - 0.56) < 0.03


def test_timeout_is_a_draw(duel):
    env, params, step, state = duel
    params = params.replace(max_steps=jnp.asarray(3))
    still = (act([0, 0, 0]), act([0, 0, 0]))
    for expected in (False, False, True):
        _, state, _, terminated, truncated, info = step(KEY, state, still, params)
        assert bool(truncated) == expected and not bool(terminated)
        assert bool(info["draw"]) == expected
    assert not bool(info["blue_win"]) and not bool(info["red_win"])


@pytest.fixture(scope="module")
def multi():
    return game("multi_battalion")


def test_team_elimination_gives_the_right_winner(multi):
    env, params, step, base = multi
    # Units: blue_0, blue_1, red_0, red_1. red_1 has already routed; red_0 is at
    # morale 0 and under fire from blue_0, so it breaks this step.
    state = placed(
        base,
        [400.0, 100.0, 450.0, 900.0],
        [500.0, 100.0, 500.0, 900.0],
        [0.0, 0.0, np.pi, np.pi],
        morale=[1.0, 1.0, 0.0, 1.0],
        routed=[False, False, False, True],
    )
    fire = act([0, 0, 1], [0, 0, 1])
    _, _, rewards, terminated, truncated, info = step(KEY, state, (fire, fire), params)
    assert bool(terminated) and not bool(truncated)
    assert bool(info["blue_win"]) and not bool(info["red_win"])
    np.testing.assert_allclose(info["blue_reward_terminal"], [10.0, 10.0])
    np.testing.assert_allclose(info["red_reward_terminal"], [-10.0, -10.0])
    # The routed red_1 pays no step penalty and does nothing.
    np.testing.assert_allclose(info["red_reward_step"], [-0.01, 0.0])
    # Mirror: Blue loses when both its units are out.
    state = state.replace(
        morale=jnp.asarray([0.0, 1.0, 1.0, 1.0]),
        routed=jnp.asarray([False, True, False, False]),
    )
    *_, terminated, _, info = step(KEY, state, (fire, fire), params)
    assert bool(terminated) and bool(info["red_win"]) and not bool(info["blue_win"])
    # One unit of each team out: the game goes on.
    state = state.replace(
        morale=jnp.asarray([1.0, 1.0, 1.0, 1.0]),
        routed=jnp.asarray([False, True, False, True]),
    )
    *_, terminated, _, info = step(KEY, state, (fire, fire), params)
    assert not bool(terminated) and not bool(info["draw"])


def test_damage_from_several_shooters_is_summed_and_shared(multi):
    env, params, step, base = multi
    # blue_0 at 100 m and blue_1 at 50 m west of red_0, which faces west.
    state = placed(
        base,
        [400.0, 450.0, 500.0, 900.0],
        [500.0, 500.0, 500.0, 100.0],
        [0.0, 0.0, np.pi, np.pi],
        strength=[1.0, 1.0, 0.05, 1.0],
    )
    fire = act([0, 0, 1], [0, 0, 1])
    _, next_state, _, _, _, info = step(
        KEY, state, (fire, act([0, 0, 0], [0, 0, 0])), params
    )
    # Raw: 0.05 x 0.5 = 0.025 and 0.05 x 0.75 = 0.0375, total 0.0625 > 0.05 left:
    # red_0 loses 0.05, credited 0.05 x 0.025 / 0.0625 = 0.02 and 0.03.
    np.testing.assert_allclose(info["red_received"], [0.05, 0.0], rtol=1e-5)
    np.testing.assert_allclose(info["blue_dealt"], [0.02, 0.03], rtol=1e-5)
    assert float(next_state.strength[2]) == 0.0


def test_fog_of_war_and_dead_units_in_local_observations(multi):
    env, params, step, base = multi
    state = placed(
        base,
        [100.0, 150.0, 800.0, 200.0],
        [100.0, 100.0, 100.0, 100.0],
        [0.0, 0.0, np.pi, np.pi],
        routed=[False, True, False, False],
    )
    blue_obs, red_obs = env.observe(state, params)
    assert blue_obs.shape == (2, 22)
    # blue_0: self (6), ally blue_1 (out: zeros), red_0 at 700 m (fogged),
    # red_1 at 100 m east: distance 100 / 1414.21, bearing (1, 0), strength,
    # morale 1, then the step fraction.
    np.testing.assert_allclose(blue_obs[0, 6:11], np.zeros(5))
    np.testing.assert_allclose(blue_obs[0, 11:16], UNKNOWN)
    np.testing.assert_allclose(
        blue_obs[0, 16:21], [100 / np.sqrt(2e6), 1.0, 0.0, 1.0, 1.0], rtol=1e-5
    )
    # Red sees the map turned 180 degrees: red_1 at (200, 100) is at
    # (800/1000, 900/1000) facing east (cos 1); after its ally red_0, blue_0 lies
    # 100 m to its east (and the routed blue_1 reads as zeros).
    np.testing.assert_allclose(red_obs[1, :4], [0.8, 0.9, 1.0, 0.0], atol=1e-6)
    np.testing.assert_allclose(
        red_obs[1, 11:14], [100 / np.sqrt(2e6), 1.0, 0.0], atol=1e-6
    )
    np.testing.assert_allclose(red_obs[1, 16:21], np.zeros(5))
    assert env.global_state(state, params).shape == (25,)


def test_duel_observation_layout(duel):
    env, params, step, base = duel
    state = placed(base, [300.0, 600.0], [400.0, 800.0], [0.0, np.pi])
    blue_obs, red_obs = env.observe(state, params)
    # Red is 500 m away at bearing atan2(400, 300): (0.6, 0.8).
    np.testing.assert_allclose(
        blue_obs[0, :11],
        [0.3, 0.4, 1, 0, 1, 1, 500 / np.sqrt(2e6), 0.6, 0.8, 1, 1],
        atol=1e-6,
    )
    # Red, in the turned frame, is at (0.4, 0.2) facing east, and sees Blue just as
    # Blue sees Red: at bearing (0.6, 0.8).
    np.testing.assert_allclose(red_obs[0, :4], [0.4, 0.2, 1, 0], atol=1e-6)
    np.testing.assert_allclose(red_obs[0, 7:9], [0.6, 0.8], atol=1e-6)
    # Flat open ground: no elevation, no cover, clear line of sight.
    np.testing.assert_allclose(blue_obs[0, 12:], [0, 0, 0, 0, 1])


def test_line_of_sight_blocked_by_a_hill_between(duel):
    env, params, step, base = duel
    state = placed(base, [100.0, 900.0], [500.0, 500.0], [0.0, np.pi])
    cell = int(cell_index(jnp.float32(500.0), jnp.float32(500.0), params, 20))
    blocked = state.replace(elevation=state.elevation.at[cell].set(0.5))
    assert float(env.observe(state, params)[0][0, 16]) == 1.0
    assert float(env.observe(blocked, params)[0][0, 16]) == 0.0


def test_procedural_terrain_ranges():
    env, params = make("battalion", num_forests=1)
    states = jax.jit(jax.vmap(lambda k: env.reset(k, params)[1]))(
        jax.random.split(KEY, 64)
    )
    # Elevation is normalised to a maximum of 1; one forest peaks at
    # 0.5 x U(0.5, 1) at most (less when its centre falls between grid points).
    np.testing.assert_allclose(jnp.max(states.elevation, axis=1), 1.0, rtol=1e-6)
    assert float(jnp.min(states.elevation)) >= 0.0
    peaks = jnp.max(states.cover, axis=1)
    assert float(jnp.max(peaks)) <= 0.5 and float(jnp.min(peaks)) > 0.1
    # Spawn bands: Blue x in [100, 400], Red in [600, 900], y in [100, 900].
    assert bool(jnp.all((states.x[:, 0] >= 100) & (states.x[:, 0] <= 400)))
    assert bool(jnp.all((states.x[:, 1] >= 600) & (states.x[:, 1] <= 900)))
    assert bool(jnp.all((states.y >= 100) & (states.y <= 900)))


def test_bad_parameters_and_actions_raise_clear_errors(duel):
    env, params, step, base = duel
    with pytest.raises(InvalidParameterError, match="hill_speed_factor"):
        make("battalion", hill_speed_factor=0.0)
    with pytest.raises(InvalidParameterError, match="blue_x_low"):
        make("battalion", blue_x_low=0.5, blue_x_high=0.4)
    with pytest.raises(InvalidParameterError, match="num_blue"):
        make("multi_battalion", num_blue=0)
    with pytest.raises(InvalidParameterError, match="red_probs"):
        make("battalion", red_probs=np.ones(12))
    state = base
    with pytest.raises(InvalidActionError, match="shape"):
        env.step(KEY, state, (act([0, 0]), act([0, 0, 0])), params)
    with pytest.raises(InvalidActionError, match="floats"):
        env.step(KEY, state, (jnp.zeros((1, 3), jnp.int32), act([0, 0, 0])), params)


def test_turn_rotation_matches_cos_and_sin():
    angles = jnp.linspace(-1.0, 1.0, 2001)
    c, s = cos_sin(angles)
    np.testing.assert_allclose(c, jnp.cos(angles), atol=2e-7)
    np.testing.assert_allclose(s, jnp.sin(angles), atol=2e-7)
    with pytest.raises(InvalidParameterError, match="max_turn"):
        make("battalion", max_turn=1.5)


def test_bench_harness_plays_continuous_actions():
    from mopa.bench.env_speed import compile_rollout, mopa_harness

    harness = mopa_harness("battalion")
    actions = harness.sample(KEY, 5)
    assert actions.shape == (5, 2, 3) and actions.dtype == jnp.float32
    assert float(actions.min()) >= -1.0 and float(actions.max()) <= 1.0
    total = float(compile_rollout(harness, 2, 20)(KEY))
    assert np.isfinite(total) and total != 0.0
