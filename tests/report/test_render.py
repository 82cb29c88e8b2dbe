"""Frames, episodes and GIFs of the pursuit games: colours where the bodies are,
the intent star in its corner, GIFs that round-trip and are written atomically."""

import imageio.v3 as iio
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mopa.envs
from mopa.envs import AutoReset, EpisodeStats, PursuitEnv, make, random_policy
from mopa.envs.pursuit import INTENT_CORNERS, VARIANTS
from mopa.errors import InvalidParameterError
from mopa.report import render
from mopa.report.render import (
    VELOCITY_SECONDS,
    VIEW_LIMIT,
    episode_gif,
    render_episode,
    render_state,
    save_gif,
)

SIZE = 400


def to_pixel(xy, size=SIZE):
    """(row, col) of world point ``xy``: the canvas shows [-VIEW_LIMIT, VIEW_LIMIT]^2
    with y up."""
    x, y = float(xy[0]), float(xy[1])
    col = (x + VIEW_LIMIT) / (2 * VIEW_LIMIT) * size
    row = (VIEW_LIMIT - y) / (2 * VIEW_LIMIT) * size
    return row, col


def disc_pixels(frame, xy, radius_px):
    """``[M, 3]`` pixels whose centres lie within ``radius_px`` of world ``xy``."""
    row, col = to_pixel(xy, frame.shape[0])
    rows, cols = np.mgrid[: frame.shape[0], : frame.shape[1]]
    mask = (rows + 0.5 - row) ** 2 + (cols + 0.5 - col) ** 2 <= radius_px**2
    assert mask.sum() > 0
    return frame[mask].astype(float)


def world_to_px(length, size=SIZE):
    return length / (2 * VIEW_LIMIT) * size


def is_red(rgb):
    return (rgb[..., 0] > 170) & (rgb[..., 1] < 90) & (rgb[..., 2] < 90)


def is_green(rgb):
    return (rgb[..., 1] > 130) & (rgb[..., 0] < 90) & (rgb[..., 2] < 90)


def is_gold(rgb):
    # INTENT_COLOUR is (242, 183, 5); the faint circle around it is nearly white.
    r, g, b = rgb[..., 0], rgb[..., 1], rgb[..., 2]
    return (r > 200) & (g > 140) & (g < 215) & (b < 90)


def is_blue(rgb):
    return (rgb[..., 2] > 150) & (rgb[..., 0] < 80)


def is_white(rgb):
    return np.all(rgb > 245, axis=-1)


def reset_state(env, params, seed=0):
    return env.reset(jax.random.key(seed), params)[1]


def placed_state(env, params):
    """A state with every body at a known spot, well apart, and at rest."""
    P, Y, L = env.num_predators, env.num_prey, env.num_obstacles
    predators = [(-0.6, 0.4), (-0.2, 0.75), (0.6, -0.3)][:P]
    prey = [(0.05, -0.4), (-0.55, -0.05)][:Y]
    obstacles = [(0.45, 0.35), (-0.35, -0.55), (0.35, -0.75)][:L]
    state = reset_state(env, params)
    return state.replace(
        pos=jnp.array(predators + prey),
        vel=jnp.zeros((P + Y, 2)),
        obstacle_pos=jnp.array(obstacles).reshape(L, 2),
    )


@pytest.mark.parametrize("size", [64, 150, 333, 400])
def test_frame_shape_and_dtype(size):
    env, params = make("tag")
    frame = render_state(env, reset_state(env, params), params, size=size)
    assert frame.shape == (size, size, 3)
    assert frame.dtype == np.uint8


@pytest.mark.parametrize(
    "overrides",
    [{}, {"num_predators": 2, "num_prey": 2, "num_obstacles": 3}],
    ids=["3v1", "2v2"],
)
def test_bodies_drawn_in_their_colours_where_they_are(overrides):
    env, params = make("tag", **overrides)
    state = placed_state(env, params)
    frame = render_state(env, state, params)
    P = env.num_predators
    for i, xy in enumerate(np.asarray(state.pos)):
        radius = params.predator_radius if i < P else params.prey_radius
        pixels = disc_pixels(frame, xy, 0.7 * world_to_px(float(radius)))
        colour = is_red if i < P else is_green
        assert colour(pixels).mean() > 0.9, (i, pixels.mean(0))
    for xy in np.asarray(state.obstacle_pos):
        pixels = disc_pixels(
            frame, xy, 0.7 * world_to_px(float(params.obstacle_radius))
        )
        # OBSTACLE_COLOUR is (140, 140, 140).
        np.testing.assert_allclose(pixels.mean(0), [140, 140, 140], atol=4)
    # Open floor inside the boundary band stays white.
    assert is_white(disc_pixels(frame, (-0.2, 0.1), 4)).all()
    assert is_white(disc_pixels(frame, (0.25, 0.0), 4)).all()


def test_velocity_arrow_points_along_the_velocity():
    env, params = make("tag")
    state = placed_state(env, params)
    prey = env.num_predators
    still = render_state(env, state, params)
    moving_state = state.replace(vel=state.vel.at[prey].set(jnp.array([0.0, 1.0])))
    moving = render_state(env, moving_state, params)
    # Halfway between the prey's edge and the arrow's tip, straight up from the prey.
    probe = np.asarray(state.pos[prey]) + [0.0, 0.5 * VELOCITY_SECONDS + 0.03]
    assert is_white(disc_pixels(still, probe, 2)).all()
    assert disc_pixels(moving, probe, 2).min() < 120
    # The same distance straight down has no arrow.
    below = np.asarray(state.pos[prey]) - [0.0, 0.5 * VELOCITY_SECONDS + 0.03]
    assert is_white(disc_pixels(moving, below, 2)).all()


@pytest.mark.parametrize("intent", range(len(INTENT_CORNERS)))
def test_intent_star_in_its_corner(intent):
    env, params = make("tag_intent")
    state = placed_state(env, params).replace(intent=jnp.int32(intent))
    frame = render_state(env, state, params)
    corners = INTENT_CORNERS * float(params.intent_corner)
    star_px = 0.4 * 18 * 100 / 72 / 2  # well inside the star of 18 points
    gold = [is_gold(disc_pixels(frame, c, star_px)).mean() for c in corners]
    assert gold[intent] > 0.8
    opposite = (intent + 2) % 4
    assert gold[opposite] == 0.0
    assert max(g for k, g in enumerate(gold) if k != intent) == 0.0
    # The faint circle of radius intent_radius tints the floor near the corner
    # (halfway to its edge, towards the centre) but not near the opposite one.
    towards = -np.sign(corners[intent]) * 0.5 * float(params.intent_radius) / np.sqrt(2)
    tinted = disc_pixels(frame, corners[intent] + towards, 3).mean(0)
    untinted = disc_pixels(frame, corners[opposite] - towards, 3).mean(0)
    assert tinted[2] < 245 and tinted[0] > 240  # yellowish
    np.testing.assert_allclose(untinted, 255, atol=1)


def test_games_without_intents_draw_no_star():
    env, params = make("tag_static")
    frame = render_state(env, placed_state(env, params), params)
    assert not is_gold(frame).any()


def test_resources_are_diamonds_hollow_once_collected():
    env, params = make("tag_resources", resource_placement="circle")
    state = placed_state(env, params)
    state = state.replace(
        pos=state.pos.at[env.num_predators].set(jnp.array([0.0, 0.0])),
        collected=jnp.array([True, False, False, False]),
    )
    frame = render_state(env, state, params)
    resources = np.asarray(state.resource_pos)
    assert is_white(disc_pixels(frame, resources[0], 2)).all()
    for xy in resources[1:]:
        assert is_blue(disc_pixels(frame, xy, 2)).all()
    # A hollow diamond keeps its outline.
    assert is_blue(disc_pixels(frame, resources[0], 9)).any()


def test_belief_strip_and_prediction_marker():
    env, params = make("tag_intent")
    state = placed_state(env, params).replace(intent=jnp.int32(1))
    plain = render_state(env, state, params)
    sure = render_state(env, state, params, belief=[0.0, 1.0, 0.0, 0.0])
    wrong = render_state(env, state, params, belief=[0.0, 0.0, 0.0, 1.0])
    band = slice(int(SIZE * (1 - (VIEW_LIMIT - 1) / (2 * VIEW_LIMIT))) + 1, SIZE)
    # Nothing above the bottom margin changes; the strip appears inside it.
    np.testing.assert_array_equal(sure[: band.start], plain[: band.start])
    assert (np.abs(sure[band].astype(int) - plain[band]).sum(-1) > 0).sum() > 100
    # A bar on the true corner is gold; a bar elsewhere is not.
    assert is_gold(sure[band]).sum() > 50
    assert is_gold(wrong[band]).sum() == 0

    predicted = np.array([0.3, 0.1])
    marked = render_state(env, state, params, predicted=predicted)
    # PREDICTION_COLOUR is (123, 44, 191).
    centre = disc_pixels(marked, predicted, 2).mean(0)
    np.testing.assert_allclose(centre, [123, 44, 191], atol=25)
    assert is_white(disc_pixels(plain, predicted, 2)).all()


def test_title_band_is_the_only_change_between_steps():
    env, params = make("tag")
    state = placed_state(env, params)
    first = render_state(env, state, params)
    later = render_state(env, state.replace(step=jnp.int32(7)), params)
    top = int(SIZE * (VIEW_LIMIT - 1) / (2 * VIEW_LIMIT))
    np.testing.assert_array_equal(first[top:], later[top:])
    assert (first[:top] != later[:top]).any()
    assert (first[:top] < 100).any()  # dark text


def test_wrapped_env_and_state_render_like_the_game():
    env, params = make("tag_intent")
    wrapped = EpisodeStats(AutoReset(env))
    _, log_state = wrapped.reset(jax.random.key(3), params)
    direct = render_state(env, log_state.env_state, params, size=200)
    via_wrapper = render_state(wrapped, log_state, params, size=200)
    np.testing.assert_array_equal(direct, via_wrapper)


def test_bad_inputs_raise_clear_errors():
    env, params = make("tag")
    state = reset_state(env, params)
    batched = jax.tree.map(lambda leaf: jnp.stack([leaf, leaf]), state)
    with pytest.raises(InvalidParameterError, match=r"\[N, 2\]"):
        render_state(env, batched, params)
    with pytest.raises(InvalidParameterError, match="size"):
        render_state(env, state, params, size=10)
    with pytest.raises(InvalidParameterError, match="belief"):
        render_state(env, state, params, belief=np.ones((2, 2)))
    with pytest.raises(InvalidParameterError, match="predicted"):
        render_state(env, state, params, predicted=[0.0, 0.0, 0.0])
    with pytest.raises(InvalidParameterError, match="time axis"):
        render_episode(env, state, params)
    states = jax.tree.map(lambda leaf: jnp.stack([leaf] * 3), state)
    with pytest.raises(InvalidParameterError, match="beliefs"):
        render_episode(env, states, params, beliefs=np.ones((2, 4)) / 4)


def test_all_registered_pursuit_games_render():
    names = [
        name
        for name in mopa.envs.registered_envs()
        if isinstance(make(name)[0], PursuitEnv)
    ]
    assert set(VARIANTS) <= set(names)
    for name in names:
        env, params = make(name)
        state = reset_state(env, params, seed=5)
        frame = render_state(env, state, params, size=240)
        assert frame.shape == (240, 240, 3) and frame.dtype == np.uint8, name
        assert is_red(frame).sum() > 20, name
        assert is_green(frame).sum() > 10, name
        assert (is_gold(frame).sum() > 20) == (env.num_intents > 0), name
        assert (is_blue(frame).sum() > 5) == (env.num_resources > 0), name


def test_render_episode_one_frame_per_state_with_beliefs():
    env, params = make("tag_intent")
    state = placed_state(env, params)
    steps = jnp.arange(3, dtype=jnp.int32)
    states = jax.vmap(lambda s: state.replace(step=s))(steps)
    beliefs = np.eye(4)[[0, 1, 1]]
    predictions = np.array([[0.3, 0.1], [0.3, 0.1], [-0.3, 0.1]])
    frames = render_episode(
        env, states, params, beliefs=beliefs, predictions=predictions, size=200
    )
    assert len(frames) == 3
    for t, frame in enumerate(frames):
        expected = render_state(
            env,
            state.replace(step=steps[t]),
            params,
            belief=beliefs[t],
            predicted=predictions[t],
            size=200,
        )
        np.testing.assert_array_equal(frame, expected)


@pytest.mark.slow
def test_episode_gif_round_trips(tmp_path):
    env, params = make("tag_intent")
    params = params.replace(max_steps=jnp.int32(5))
    path = episode_gif(
        env, params, random_policy(env), jax.random.key(0), tmp_path / "out" / "ep.gif"
    )
    assert path == tmp_path / "out" / "ep.gif"
    frames = iio.imread(path, index=None)
    assert frames.shape == (5, 400, 400, 3)  # num_steps defaults to max_steps
    meta = iio.immeta(path)
    assert meta["loop"] == 0
    assert meta["duration"] in (120, 130)  # 1000 / 8 ms in GIF's 10 ms steps
    assert is_red(frames[0]).sum() > 100 and is_green(frames[0]).sum() > 50


def synthetic_frames(num, size=32):
    """Frames of flat distinct colours, frame t having red = 40 t."""
    frames = np.zeros((num, size, size, 3), np.uint8)
    frames[..., 0] = (40 * np.arange(num, dtype=np.uint8))[:, None, None]
    frames[..., 1] = 200
    return list(frames)


def test_save_gif_round_trips_frames(tmp_path):
    frames = synthetic_frames(6)
    path = save_gif(tmp_path / "a" / "b" / "clip.gif", frames, fps=4)
    read = iio.imread(path, index=None)
    assert read.shape == (6, 32, 32, 3)
    np.testing.assert_allclose(read, np.stack(frames), atol=3)
    assert iio.immeta(path)["duration"] == 250


@pytest.mark.parametrize("fps", [0, -2, float("nan"), float("inf"), "8"])
def test_save_gif_rejects_bad_fps(tmp_path, fps):
    with pytest.raises(InvalidParameterError, match="fps"):
        save_gif(tmp_path / "x.gif", synthetic_frames(2), fps=fps)
    assert list(tmp_path.iterdir()) == []


def test_save_gif_rejects_bad_frames(tmp_path):
    with pytest.raises(InvalidParameterError, match="at least one frame"):
        save_gif(tmp_path / "x.gif", [])
    with pytest.raises(InvalidParameterError, match="frame 1"):
        save_gif(
            tmp_path / "x.gif",
            [np.zeros((8, 8, 3), np.uint8), np.zeros((8, 9, 3), np.uint8)],
        )
    with pytest.raises(InvalidParameterError, match="uint8"):
        save_gif(tmp_path / "x.gif", [np.zeros((8, 8, 3), np.float32)])
    assert list(tmp_path.iterdir()) == []


def test_save_gif_replaces_atomically(tmp_path, monkeypatch):
    path = tmp_path / "clip.gif"
    save_gif(path, synthetic_frames(3))
    save_gif(path, synthetic_frames(4))
    assert [p.name for p in tmp_path.iterdir()] == ["clip.gif"]
    assert iio.imread(path, index=None).shape[0] == 4
    before = path.read_bytes()

    def half_written(file, *args, **kwargs):
        file.write(b"GIF89a")
        raise OSError("disk full")

    monkeypatch.setattr(render.iio, "imwrite", half_written)
    with pytest.raises(OSError, match="disk full"):
        save_gif(path, synthetic_frames(5))
    assert path.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["clip.gif"]
