"""The terrain features the ladder's Blue observes (``terrain_obs``): hand-placed
cover read back, the plain game unchanged when the option is off, and the
option's validation; the cover-seeking teacher the ladder's Blue is cloned from,
on hand-worked cases."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from mopa.envs import make
from mopa.envs.battalion_wrappers import (
    NUM_TERRAIN_FEATURES,
    TERRAIN_RADIUS,
    cover_teacher_action,
    terrain_features,
)
from mopa.errors import InvalidParameterError

KEY = jax.random.key(0)


def placed_state(env, params):
    """Blue at (500, 500), Red at (800, 500), no cover except four cells.

    The grid is 20 x 20 cells of 50 m; cell (col, row) has centre
    ``(50 col + 25, 50 row + 25)`` and index ``20 row + col``.
    """
    _, state = env.reset(KEY, params)
    cover = jnp.zeros_like(state.cover)
    cover = cover.at[20 * 10 + 12].set(0.4)  # centre (625, 525): the best
    cover = cover.at[20 * 10 + 7].set(0.3)  # centre (375, 525): same distance
    cover = cover.at[20 * 10 + 11].set(0.2)  # (550, 500), 50 m east of Blue
    cover = cover.at[20 * 10 + 13].set(0.1)  # (660, 500), 160 m towards Red
    return state.replace(
        x=jnp.array([500.0, 800.0]), y=jnp.array([500.0, 500.0]), cover=cover
    )


def test_terrain_features_hand_placed_cover():
    env, params = make("battalion_vs_red", red="L5", terrain_obs=True)
    state = placed_state(env, params)
    features = np.asarray(terrain_features(state, params, 1, 20))[0]
    # Best cell (625, 525): offset (125, 25) / 250 m; cover 0.4.
    np.testing.assert_allclose(features[:3], [0.5, 0.1, 0.4], atol=1e-6)
    # Ring at 50 m, east first, counter-clockwise: only east (550, 500) is in
    # the 0.2 cell; north-east (535.4, 535.4) is still in Blue's own cell.
    np.testing.assert_allclose(features[3:11], [0.2, 0, 0, 0, 0, 0, 0, 0], atol=1e-6)
    # 160 m towards Red: (660, 500).
    np.testing.assert_allclose(features[11], 0.1, atol=1e-6)
    obs = np.asarray(env.observe(state, params)[0])
    assert obs.shape == (1, 17 + NUM_TERRAIN_FEATURES)
    np.testing.assert_array_equal(obs[0, 17:], features)


def test_terrain_obs_appends_to_the_plain_observation():
    plain, params = make("battalion_vs_red", red="L5", discrete=True)
    extended, _ = make("battalion_vs_red", red="L5", discrete=True, terrain_obs=True)
    assert plain.observation_space(0).shape == (17,)
    assert extended.observation_space(0).shape == (17 + NUM_TERRAIN_FEATURES,)
    obs_a, state_a = plain.reset(KEY, params)
    obs_b, state_b = extended.reset(KEY, params)
    for _ in range(20):
        action = (jnp.array([15]),)  # forward, no turn, fire
        obs_a, state_a, rew_a, *_ = plain.step(KEY, state_a, action, params)
        obs_b, state_b, rew_b, *_ = extended.step(KEY, state_b, action, params)
        np.testing.assert_array_equal(obs_a[0], obs_b[0][:, :17])
        np.testing.assert_array_equal(rew_a[0], rew_b[0])
        assert np.all(np.abs(np.asarray(obs_b[0])) <= 1.0)


def test_terrain_obs_must_be_bool():
    with pytest.raises(InvalidParameterError, match="terrain_obs"):
        make("battalion_vs_red", terrain_obs=1)


def teacher_obs(heading, red_bearing, red_dist, frac, goal):
    """A ``terrain_obs`` observation with only what the teacher reads set:
    heading and bearing in radians (world frame), distance in metres, the
    episode fraction and the best-cover offset in metres."""
    obs = np.zeros(17 + NUM_TERRAIN_FEATURES, np.float32)
    obs[2:4] = np.cos(heading), np.sin(heading)
    obs[6] = red_dist / np.sqrt(2e6)  # the 1 km map's diagonal
    obs[7:9] = np.cos(red_bearing), np.sin(red_bearing)
    obs[11] = frac
    obs[17:19] = np.asarray(goal) / TERRAIN_RADIUS
    return jnp.asarray(obs)


@pytest.mark.parametrize(
    "case, action",
    [
        # Red 500 m east, early, cover 100 m north-east: turn left towards it
        # (45 degrees, under 90: move), Red dead ahead: fire.
        # (move 1, rotate 1, fire 1) -> 2 * 6 + 2 * 2 + 1 = 17.
        ((0.0, 0.0, 500.0, 0.0, (100.0, 100.0)), 17),
        # Same, but Red in range (150 m): face Red and hold.
        # (move 0, rotate 0, fire 1) -> 1 * 6 + 1 * 2 + 1 = 9.
        ((0.0, 0.0, 150.0, 0.0, (100.0, 100.0)), 9),
        # Late (0.5 of the episode) with Red 500 m away: close on it.
        # (move 1, rotate 0, fire 1) -> 2 * 6 + 1 * 2 + 1 = 15.
        ((0.0, 0.0, 500.0, 0.5, (100.0, 100.0)), 15),
        # Red in range 135 degrees to the right: turn right, hold, no fire.
        # (move 0, rotate -1, fire 0) -> 1 * 6 + 0 * 2 + 0 = 6.
        ((0.0, -0.75 * np.pi, 150.0, 0.0, (0.0, 0.0)), 6),
        # Already on the best cover (offset under 15 m), Red far, early: hold,
        # facing Red (60 degrees left: turn left, outside the arc: no fire).
        # (move 0, rotate 1, fire 0) -> 1 * 6 + 2 * 2 + 0 = 10.
        ((0.0, np.pi / 3, 500.0, 0.1, (10.0, 0.0)), 10),
    ],
)
def test_cover_teacher_hand_cases(case, action):
    _, params = make("battalion_vs_red", red="L5", terrain_obs=True)
    chosen = cover_teacher_action(teacher_obs(*case), params, 0.3, 120.0)
    assert int(chosen) == action
