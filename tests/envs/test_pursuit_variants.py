"""Smoke tests that assert values for each pursuit variant's mechanics."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from mopa.envs import PREDATOR, PREY, AutoReset, make
from mopa.envs.pursuit import INTENT_CORNERS
from mopa.errors import InvalidParameterError

NOOP = (jnp.zeros(3, jnp.int32), jnp.zeros(1, jnp.int32))
FAR_PREDATORS = jnp.array([[-0.8, -0.9], [-0.6, -0.9], [-0.4, -0.9]])


def with_bodies(
    env, params, predators=FAR_PREDATORS, prey=(0.0, 0.0), prey_vel=(0.0, 0.0), key=0
):
    """A fresh state with the given predator and prey positions (velocities zero
    except the prey's)."""
    _, state = env.reset(jax.random.key(key), params)
    pos = jnp.concatenate([jnp.asarray(predators), jnp.asarray([prey])]).astype(
        jnp.float32
    )
    vel = jnp.zeros_like(pos).at[-1].set(jnp.asarray(prey_vel, jnp.float32))
    return state.replace(pos=pos, vel=vel)


def step(env, state, params, actions=NOOP):
    return jax.jit(env.step)(jax.random.key(0), state, actions, params)


# -- tag_static (Exp 2) ------------------------------------------------------------


@pytest.mark.parametrize(
    ("shape_dir", "prey_vel", "expected"),
    [
        (+1.0, (0.0, 1.0), +0.1),  # CCW move around (0.5, 0.5), CCW shaping
        (+1.0, (0.0, -1.0), -0.1),  # CW move, CCW shaping
        (-1.0, (0.0, -1.0), +0.1),  # CW move, CW shaping
        (-1.0, (0.0, 1.0), -0.1),  # CCW move, CW shaping
        (0.0, (0.0, 1.0), 0.0),  # no shaping
    ],
)
def test_static_bonus_sign_matches_direction(shape_dir, prey_vel, expected):
    env, params = make("tag_static", shape_dir=shape_dir)
    # Prey 0.35 to the right of the obstacle at (0.5, 0.5): inside the annulus.
    state = with_bodies(env, params, prey=(0.85, 0.5), prey_vel=prey_vel)
    _, _, rewards, _, _, info = step(env, state, params)
    np.testing.assert_allclose(info["prey_shaping"], [expected], atol=1e-7)
    np.testing.assert_allclose(
        rewards[PREY], [expected], atol=1e-7
    )  # nothing else is paid


@pytest.mark.parametrize(
    ("prey", "r_in", "r_out"),
    [
        ((0.85, 0.5), 0.4, 0.6),  # radius 0.35 < r_in
        ((0.85, 0.5), 0.1, 0.3),  # radius 0.35 > r_out
        ((0.0, 0.0), 0.25, 0.6),  # radius 0.71 from both obstacles: outside r_out
    ],
)
def test_static_bonus_zero_outside_annulus(prey, r_in, r_out):
    env, params = make("tag_static", shape_dir=1.0, shape_r_in=r_in, shape_r_out=r_out)
    state = with_bodies(env, params, prey=prey, prey_vel=(0.0, 1.0))
    info = step(env, state, params)[5]
    assert float(info["prey_shaping"][0]) == 0.0


def test_static_bonus_zero_for_stationary_prey():
    env, params = make("tag_static", shape_dir=1.0)
    state = with_bodies(env, params, prey=(0.85, 0.5))
    info = step(env, state, params)[5]
    assert float(info["prey_shaping"][0]) == 0.0


def test_static_bonus_zero_for_stationary_prey_anywhere_in_the_annulus():
    # At rest, the prey does not move on its next step whatever it does (positions
    # advance by the old velocity), so it turns by no angle: the bonus is 0. Its
    # sign must not come from rounding (the cross product of two equal vectors,
    # computed with fused multiply-adds, is a rounding error, not zero).
    env, params = make("tag_static", shape_dir=1.0)
    keys = jax.random.split(jax.random.key(0), 3)
    radius = jax.random.uniform(keys[0], (512,), minval=0.3, maxval=0.55)
    angle = jax.random.uniform(keys[1], (512,), maxval=2 * jnp.pi)
    prey = jnp.asarray([0.5, 0.5]) + radius[:, None] * jnp.stack(
        [jnp.cos(angle), jnp.sin(angle)], -1
    )
    actions = jax.random.randint(keys[2], (512, 4), 0, 5)
    state = with_bodies(env, params)
    states = jax.vmap(lambda p: state.replace(pos=state.pos.at[-1].set(p)))(prey)

    def shaping(state, action):
        info = env.step(jax.random.key(0), state, (action[:3], action[3:]), params)[5]
        return info["prey_shaping"][0]

    np.testing.assert_array_equal(jax.jit(jax.vmap(shaping))(states, actions), 0.0)


def test_static_predator_rewards_untouched():
    env_static, params_static = make("tag_static", shape_dir=1.0)
    env_tag, params_tag = make("tag", fixed_obstacles=True)
    # A capture happens: a predator sits on the prey, which orbits the obstacle.
    predators = jnp.array([[0.85, 0.6], [-0.6, -0.9], [-0.4, -0.9]])
    state = with_bodies(
        env_static,
        params_static,
        predators=predators,
        prey=(0.85, 0.5),
        prey_vel=(0.0, 1.0),
    )
    _, _, rew_static, _, _, info = step(env_static, state, params_static)
    _, _, rew_tag, _, _, _ = step(env_tag, state, params_tag)
    np.testing.assert_array_equal(rew_static[PREDATOR], rew_tag[PREDATOR])
    assert float(rew_static[PREDATOR][0]) == 10.0
    np.testing.assert_allclose(
        rew_static[PREY] - rew_tag[PREY], info["prey_shaping"], atol=1e-6
    )


MIRROR_X = jnp.array([-1.0, 1.0])
MIRROR_ACTIONS = jnp.array([0, 2, 1, 3, 4])  # no-op, -x <-> +x, -y, +y


def test_static_game_is_mirror_symmetric():
    """Reflecting a state in x and swapping the left and right actions reflects
    the next state and keeps every reward, with the shaping direction reversed: the
    game itself prefers no direction of rotation."""
    env, params = make("tag_static", shape_dir=1.0)
    _, mirrored_params = make("tag_static", shape_dir=-1.0)
    step_fn = jax.jit(env.step)

    def mirror(state):
        return state.replace(
            pos=state.pos * MIRROR_X,
            vel=state.vel * MIRROR_X,
            obstacle_pos=state.obstacle_pos * MIRROR_X,
        )

    shaped = 0
    for i in range(64):
        key = jax.random.key(i)
        _, state = env.reset(key, params)
        state = state.replace(
            pos=jax.random.uniform(jax.random.fold_in(key, 1), (4, 2), minval=-1.0),
            vel=0.5 * jax.random.normal(jax.random.fold_in(key, 2), (4, 2)),
        )
        actions = (
            jax.random.randint(jax.random.fold_in(key, 3), (3,), 0, 5),
            jax.random.randint(jax.random.fold_in(key, 4), (1,), 0, 5),
        )
        _, after, rewards, _, _, info = step_fn(key, state, actions, params)
        _, mirrored, mirrored_rewards, _, _, mirrored_info = step_fn(
            key,
            mirror(state),
            tuple(MIRROR_ACTIONS[a] for a in actions),
            mirrored_params,
        )
        np.testing.assert_allclose(mirrored.pos, after.pos * MIRROR_X, atol=1e-6)
        np.testing.assert_allclose(mirrored.vel, after.vel * MIRROR_X, atol=1e-6)
        for team in (PREDATOR, PREY):
            np.testing.assert_allclose(mirrored_rewards[team], rewards[team], atol=1e-5)
        np.testing.assert_array_equal(
            mirrored_info["prey_shaping"], info["prey_shaping"]
        )
        shaped += int(info["prey_shaping"][0] != 0.0)
    assert shaped > 0  # some states paid the bonus, so its sign was checked


def test_static_obstacles_pinned_across_resets_and_auto_resets():
    env, params = make("tag_static")
    wrapped = AutoReset(env)
    pinned = np.array([[0.5, 0.5], [-0.5, -0.5]])
    for seed in range(5):
        _, state = wrapped.reset(jax.random.key(seed), params)
        np.testing.assert_allclose(state.obstacle_pos, pinned, atol=1e-7)
    step_fn = jax.jit(wrapped.step)
    for _ in range(30):  # crosses an automatic reset at step 25
        _, state, *_ = step_fn(jax.random.key(1), state, NOOP, params)
        np.testing.assert_allclose(state.obstacle_pos, pinned, atol=1e-7)
    other, other_params = make("tag_static", obstacle_pos=[[0.1, 0.2], [0.3, -0.4]])
    _, state = other.reset(jax.random.key(0), other_params)
    np.testing.assert_allclose(state.obstacle_pos, [[0.1, 0.2], [0.3, -0.4]], atol=1e-7)


def test_tag_obstacles_random_across_resets():
    env, params = make("tag")
    a = env.reset(jax.random.key(0), params)[1].obstacle_pos
    b = env.reset(jax.random.key(1), params)[1].obstacle_pos
    assert not np.allclose(a, b)


# -- tag_resources (Exp 4) -----------------------------------------------------------


def test_resource_placement_geometry():
    env, params = make("tag_resources", resource_placement="circle")
    state = env.reset(jax.random.key(0), params)[1]
    np.testing.assert_allclose(
        np.linalg.norm(state.resource_pos, axis=1), 0.6, atol=1e-6
    )
    np.testing.assert_allclose(
        state.resource_pos, [[0.6, 0], [0, 0.6], [-0.6, 0], [0, -0.6]], atol=1e-6
    )
    env, params = make("tag_resources", resource_placement="corners")
    state = env.reset(jax.random.key(0), params)[1]
    np.testing.assert_allclose(np.abs(state.resource_pos), 0.8, atol=1e-7)
    assert len({tuple(np.sign(p)) for p in np.asarray(state.resource_pos)}) == 4


def test_resource_random_placement_is_a_fair_coin():
    env, params = make("tag_resources")
    states = jax.vmap(lambda k: env.reset(k, params)[1])(
        jax.random.split(jax.random.key(0), 2000)
    )
    corners = np.asarray(states.placement)
    assert 0.45 < corners.mean() < 0.55
    ring = np.isclose(np.linalg.norm(states.resource_pos, axis=-1), 0.6).all(-1)
    np.testing.assert_array_equal(ring, corners == 0)


def test_resource_observation_shapes_and_predator_equivalence():
    env, params = make("tag_resources")
    tag, tag_params = make("tag", fixed_obstacles=True)
    obs, state = env.reset(jax.random.key(3), params)
    assert obs[PREDATOR].shape == (3, 16) and obs[PREY].shape == (1, 26)
    _, tag_state = tag.reset(jax.random.key(3), tag_params)
    tag_state = tag_state.replace(
        pos=state.pos, vel=state.vel, obstacle_pos=state.obstacle_pos
    )
    np.testing.assert_array_equal(
        obs[PREDATOR], tag.observe(tag_state, tag_params)[PREDATOR]
    )
    np.testing.assert_array_equal(
        obs[PREY][:, :14], tag.observe(tag_state, tag_params)[PREY]
    )
    # Resource block: relative position then collected flag, per resource.
    block = np.asarray(obs[PREY][0, 14:]).reshape(4, 3)
    np.testing.assert_allclose(
        block[:, :2], state.resource_pos - state.pos[3], atol=1e-6
    )
    np.testing.assert_array_equal(block[:, 2], 0.0)


def test_resource_collection_and_reward_accounting():
    env, params = make("tag_resources", resource_placement="circle")
    state = with_bodies(env, params, prey=(0.6, 0.02))
    obs, state, rewards, _, _, info = step(env, state, params)
    np.testing.assert_array_equal(state.collected, [True, False, False, False])
    np.testing.assert_allclose(info["prey_collect"], [5.0])
    np.testing.assert_allclose(rewards[PREY], [5.0])
    assert float(obs[PREY][0, 14 + 2]) == 1.0  # collected flag seen by the prey
    # Staying on a collected resource pays nothing more.
    _, state, rewards, _, _, info = step(env, state, params)
    np.testing.assert_allclose(info["prey_collect"], [0.0])
    # Captures, boundary and collection add up: prey at the edge on a resource.
    env, params = make(
        "tag_resources",
        resource_placement="corners",
        resource_corner=0.95,
        collect_reward=20.0,
    )
    predators = jnp.array([[0.95, 0.9], [-0.6, -0.9], [-0.4, -0.9]])
    state = with_bodies(env, params, predators=predators, prey=(0.95, 0.95))
    _, state, rewards, _, _, info = step(env, state, params)
    boundary = 10 * (np.asarray(state.pos[3]) - 0.9)
    np.testing.assert_allclose(info["prey_boundary"], -boundary.sum(), rtol=1e-5)
    np.testing.assert_allclose(info["prey_capture"], [-10.0])
    np.testing.assert_allclose(rewards[PREY], -10.0 - boundary.sum() + 20.0, rtol=1e-5)
    np.testing.assert_allclose(rewards[PREDATOR], [10.0] * 3)


def test_resource_flags_cleared_on_auto_reset_obstacles_preserved():
    env, params = make("tag_resources", max_steps=2, resource_placement="circle")
    wrapped = AutoReset(env)
    state = with_bodies(env, params, prey=(0.6, 0.02))
    _, state, *_ = jax.jit(wrapped.step)(jax.random.key(0), state, NOOP, params)
    assert bool(state.collected[0])
    obstacles = np.asarray(state.obstacle_pos)
    _, state, _, _, truncated, info = jax.jit(wrapped.step)(
        jax.random.key(1), state, NOOP, params
    )
    assert bool(truncated) and not bool(jnp.any(state.collected))
    np.testing.assert_allclose(state.obstacle_pos, obstacles)
    assert (
        float(info["final_obs"][PREY][0, 14 + 2]) == 1.0
    )  # the final obs still shows it


# -- tag_balanced (Exp 5) -------------------------------------------------------------


def test_balanced_predators_slowed_and_collect_reward():
    env, params = make("tag_balanced", resource_placement="corners")
    assert float(params.predator_max_speed) == pytest.approx(0.6)
    assert float(params.predator_accel) == pytest.approx(1.5)
    state = with_bodies(
        env, params, predators=[[-0.5, 0.0], [-0.5, 0.2], [-0.5, -0.2]], prey=(0.8, 0.8)
    )
    push = (jnp.full(3, 2, jnp.int32), jnp.zeros(1, jnp.int32))
    _, state, rewards, _, _, info = step(env, state, params, push)
    np.testing.assert_allclose(info["prey_collect"], [10.0])
    for _ in range(20):
        _, state, *_ = step(env, state, params, push)
    speeds = np.linalg.norm(state.vel[:3], axis=1)
    assert np.all(speeds <= 0.6 + 1e-6) and np.all(speeds > 0.55)


# -- tag_intent (Exp 6) -------------------------------------------------------------


def test_intent_hidden_from_predators():
    env, params = make("tag_intent")
    obs, state = env.reset(jax.random.key(0), params)
    assert obs[PREDATOR].shape == (3, 16) and obs[PREY].shape == (1, 18)
    views = [
        env.observe(state.replace(intent=jnp.asarray(k)), params) for k in range(4)
    ]
    for k, (pred, prey) in enumerate(views):
        np.testing.assert_array_equal(pred, views[0][0])
        np.testing.assert_array_equal(prey[0, -4:], np.eye(4)[k])
    info = step(env, state, params)[5]
    assert int(info["intent"]) == int(state.intent)


def test_intent_bonus_paid_only_at_own_corner():
    env, params = make("tag_intent")
    for k in range(4):
        corner = tuple(INTENT_CORNERS[k] * 0.8 * 0.95)
        for intent in range(4):
            state = with_bodies(env, params, prey=corner).replace(
                intent=jnp.asarray(intent)
            )
            info = step(env, state, params)[5]
            expected = 4.0 if intent == k else 0.0
            np.testing.assert_allclose(info["prey_intent"], [expected])


def test_intents_drawn_uniformly_and_predators_slowed():
    env, params = make("tag_intent")
    intents = jax.vmap(lambda k: env.reset(k, params)[1].intent)(
        jax.random.split(jax.random.key(1), 4000)
    )
    counts = np.bincount(np.asarray(intents), minlength=4)
    assert np.all(np.abs(counts / 4000 - 0.25) < 0.03)
    assert float(params.predator_max_speed) == pytest.approx(0.75)
    assert float(params.predator_accel) == pytest.approx(2.0)
    assert float(params.intent_reward) == pytest.approx(4.0)
    assert float(params.intent_radius) == pytest.approx(0.35)


def test_intent_obstacles_fixed():
    env, params = make("tag_intent")
    a = env.reset(jax.random.key(0), params)[1].obstacle_pos
    b = env.reset(jax.random.key(1), params)[1].obstacle_pos
    np.testing.assert_array_equal(a, b)


@pytest.mark.slow
@pytest.mark.parametrize(("low", "high"), [(1.0, 1.0), (0.0, 0.0), (0.0, 1.0)])
def test_intent_input_for_predators(low, high):
    env, params = make(
        "tag_intent",
        predator_intent_obs=True,
        belief_alpha_low=low,
        belief_alpha_high=high,
    )
    obs, states = jax.vmap(lambda k: env.reset(k, params))(
        jax.random.split(jax.random.key(2), 500)
    )
    assert obs[PREDATOR].shape == (500, 3, 20)
    belief = np.asarray(obs[PREDATOR][:, 0, -4:])
    np.testing.assert_allclose(belief.sum(-1), 1.0, rtol=1e-6)
    np.testing.assert_array_equal(belief, np.asarray(obs[PREDATOR][:, 2, -4:]))
    alpha = (belief[np.arange(500), np.asarray(states.intent)] - 0.25) / 0.75
    assert np.all(alpha >= low - 1e-6) and np.all(alpha <= high + 1e-6)
    if low == high:
        np.testing.assert_allclose(alpha, low, atol=1e-6)
    else:
        assert alpha.std() > 0.2  # sharpness varies per episode
    # An evaluator can hand predators any belief.
    state = jax.tree.map(lambda x: x[0], states).replace(
        belief=jnp.array([0.1, 0.2, 0.3, 0.4])
    )
    np.testing.assert_allclose(
        env.observe(state, params)[PREDATOR][:, -4:], [[0.1, 0.2, 0.3, 0.4]] * 3
    )


def test_prey_threat_features_read_the_predators_and_the_edges():
    env, params = make("tag_intent")
    predators = jnp.array([[0.3, 0.75], [0.75, 0.0], [-0.6, -0.6]])
    state = with_bodies(env, params, predators=predators, prey=(0.75, 0.75))
    obs = env.observe(state, params)[PREY][0]
    features = env.prey_threat_features(obs)
    assert features.shape == (18 + 11,)
    np.testing.assert_array_equal(features[:18], obs)
    # the nearest predator is the first, 0.45 to the prey's left
    np.testing.assert_allclose(features[18:20], [1.0, 0.0], atol=1e-6)
    np.testing.assert_allclose(features[20], 0.45, atol=1e-6)
    gaps = np.array([0.75, 0.75]) - np.asarray(predators)
    distance = np.linalg.norm(gaps, axis=1)
    pressure = (gaps / distance[:, None] / (distance[:, None] + 0.1)).sum(0)
    np.testing.assert_allclose(features[21:23], pressure, rtol=1e-5)
    # knots 0.3, 0.6, 0.9 at |x| = 0.75: ramps 0.45 / 0.7, 0.15 / 0.4, 0
    ramps = np.repeat([0.45 / 0.7, 0.15 / 0.4, 0.0], 2)
    np.testing.assert_allclose(features[23:], ramps, atol=1e-6)
    # mirrored through the centre: the directions and ramps change sign
    mirrored = with_bodies(env, params, predators=-predators, prey=(-0.75, -0.75))
    flipped = env.prey_threat_features(env.observe(mirrored, params)[PREY][0])
    np.testing.assert_allclose(flipped[18:20], -features[18:20], atol=1e-6)
    np.testing.assert_allclose(flipped[23:], -features[23:], atol=1e-6)
    # the intent tail may be cut off; a shorter observation is refused
    np.testing.assert_array_equal(
        env.prey_threat_features(obs[:14])[14:], features[18:]
    )
    with pytest.raises(InvalidParameterError, match="at least 14 entries"):
        env.prey_threat_features(obs[:13])
