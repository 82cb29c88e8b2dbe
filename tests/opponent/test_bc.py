"""Latent-conditioned behaviour cloning: it learns a toy mapping that needs z, its
latent changes the action, the vanilla clone cannot, the clone works as the Bayes
belief's opponent model, and the steering test reads ~1 when z steers the route
and exactly 0.5 (chance) when z is ignored, over one episode or a chain of
consecutive ones; route separability checked by hand."""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import struct

from mopa.envs.base import Env
from mopa.envs.rollout import rollout
from mopa.envs.spaces import Box, Discrete
from mopa.envs.wrappers import AutoReset
from mopa.errors import InvalidParameterError
from mopa.opponent import bc
from mopa.opponent.beliefs import bayes_beliefs
from mopa.policy import make_act_fn

CONFIG = bc.BCConfig(
    num_actions=4, hidden=(32,), lr=3e-3, num_epochs=15, batch_size=128
)


@pytest.fixture(scope="module")
def toy():
    """Action = 2 * specialist + [obs_0 > 0]: the observation picks one of two
    actions, the specialist (z, a one-hot of 2) the pair. Without z the best
    possible match is 1/2."""
    rng = np.random.default_rng(0)
    obs = rng.standard_normal((2048, 4)).astype(np.float32)
    specialist = rng.integers(0, 2, 2048)
    actions = 2 * specialist + (obs[:, 0] > 0)
    z = np.eye(2, dtype=np.float32)[specialist]
    return jnp.asarray(obs), jnp.asarray(actions), jnp.asarray(z)


@pytest.fixture(scope="module")
def train():
    return jax.jit(bc.make_train(CONFIG))


@pytest.fixture(scope="module")
def clones(toy, train):
    obs, actions, z = toy
    latent = train(jax.random.key(0), obs, actions, z)
    vanilla = train(jax.random.key(0), obs, actions, None)
    return latent, vanilla


def test_latent_clone_learns_and_its_latent_changes_the_action(toy, clones):
    obs, actions, z = toy
    (latent_params, metrics), (vanilla_params, _) = clones
    # 15 epochs of 2048 // 128 = 16 minibatches.
    assert metrics.loss.shape == (240,) and metrics.accuracy.shape == (240,)
    assert float(metrics.loss[-10:].mean()) < 0.5 * float(metrics.loss[:10].mean())
    assert float(bc.action_match(CONFIG, latent_params, obs, actions, z)) > 0.95
    vanilla = float(bc.action_match(CONFIG, vanilla_params, obs, actions))
    assert 0.4 < vanilla < 0.6  # the best a clone without z can do is 1/2
    # Swapping z alone changes the greedy action (2 * k + s -> 2 * (1 - k) + s).
    swapped = bc.bc_logits(CONFIG, latent_params, obs, 1.0 - z)
    assert float(jnp.mean(jnp.argmax(swapped, -1) == actions)) < 0.05
    # Majority baseline: four roughly equally common actions.
    assert 0.24 < float(bc.majority_match(actions, 4)) < 0.27


def test_training_is_deterministic_and_the_clone_is_a_mopa_policy(toy, clones, train):
    obs, actions, z = toy
    (latent_params, _), _ = clones
    again, _ = train(jax.random.key(0), obs, actions, z)
    chex_equal = jax.tree.map(lambda a, b: np.array_equal(a, b), latent_params, again)
    assert all(jax.tree.leaves(chex_equal))
    # The same weights run as an actor policy on [obs, z].
    spec = bc.bc_policy_spec(CONFIG, obs_size=4, latent_size=2)
    inputs = jnp.concatenate([obs[:8], z[:8]], -1)[:, None]  # [8, A = 1, 6]
    act = jax.vmap(
        lambda x: make_act_fn(spec)(
            latent_params, jax.random.key(0), x, jnp.zeros((1, 0)), jnp.ones(1, bool)
        )[0]
    )
    greedy = jnp.argmax(bc.bc_logits(CONFIG, latent_params, obs[:8], z[:8]), -1)
    np.testing.assert_array_equal(act(inputs)[:, 0], greedy)


def test_clone_as_opponent_model_for_bayes(toy, clones):
    obs, actions, z = toy
    (latent_params, _), _ = clones
    # Observations carry a trailing K = 2 strategy one-hot that the model drops.
    with_onehot = jnp.concatenate([obs, z], -1)
    log_probs_fn = bc.bc_log_probs_fn(CONFIG, latent_params, 2)
    table = jax.jit(log_probs_fn)(with_onehot[0])
    expected = jax.nn.log_softmax(
        bc.bc_logits(CONFIG, latent_params, jnp.stack([obs[0], obs[0]]), jnp.eye(2))
    )
    np.testing.assert_allclose(table, expected, rtol=1e-5, atol=1e-6)
    # Ten steps of specialist 1's actions: the belief ends on strategy 1.
    steps = np.nonzero(np.asarray(z[:, 1]) == 1)[0][:10]
    beliefs = jax.jit(lambda o, a: bayes_beliefs(log_probs_fn, o, a, 2, epsilon=0.01))(
        with_onehot[steps], actions[steps]
    )
    assert float(beliefs[-1, 1]) > 0.99
    with pytest.raises(InvalidParameterError, match="num_strategies"):
        bc.bc_log_probs_fn(CONFIG, latent_params, 0)


# -- steering on a tiny test-only game ---------------------------------------------
DIRECTIONS = jnp.array([[0.0, 0.0], [-1.0, 0.0], [1.0, 0.0], [0.0, -1.0], [0.0, 1.0]])


@struct.dataclass
class WalkState:
    pos: jax.Array  # [2] the walker's position
    wind: jax.Array  # [2] the last push of the wind
    step: jax.Array  # [] int32


@dataclasses.dataclass(frozen=True)
class WalkGame(Env):
    """A walker (team 0) moves 0.1 per step in one of the 5 pursuit directions; the
    wind (team 1, the fixed opponent) pushes it 0.05 the same way. Both observe the
    step fraction and the last push, never the position, so a clone can only learn
    the route from z. Start positions uniform in [-1, 1]^2; 10 steps."""

    name: str = "walk"
    team_names = ("walker", "wind")
    team_sizes = (1, 1)

    def observation_space(self, team):
        return Box(-1.0, 1.0, (3,))

    def action_space(self, team):
        return Discrete(5)

    @property
    def default_params(self):
        return ()

    def _reset(self, key, params):
        pos = jax.random.uniform(key, (2,), minval=-1.0, maxval=1.0)
        state = WalkState(pos, jnp.zeros(2), jnp.zeros((), jnp.int32))
        return self.observe(state, params), state

    def _step(self, key, state, actions, params):
        wind = 0.05 * DIRECTIONS[actions[1][0]]
        pos = state.pos + 0.1 * DIRECTIONS[actions[0][0]] + wind
        state = WalkState(pos, wind, state.step + 1)
        zero = (jnp.zeros(1), jnp.zeros(1))
        done = state.step >= 10
        return self.observe(state, params), state, zero, jnp.array(False), done, {}

    def observe(self, state, params):
        obs = jnp.concatenate([state.step[None] / 10.0, 20.0 * state.wind])[None]
        return obs, obs


@dataclasses.dataclass(frozen=True)
class Scripted:
    """The wind pushes at random; the walker always plays ``action`` (2: +x, 1: -x)."""

    action: int

    def __call__(self, key, obs, state):
        return jnp.full((1,), self.action), jax.random.randint(key, (1,), 0, 5)


def displacement(trajectory):
    """Route feature: the walker's mean displacement from its start ``[2]``."""
    pos = trajectory.state.pos
    return jnp.mean(pos - pos[:1], 0)


def test_steering_rate():
    env = WalkGame()
    # Specialists: A always +x (action 2), B always -x (action 1), 32 games each.
    data = [
        rollout(env, (), Scripted(a), jax.random.key(a), 10, 32, False) for a in (2, 1)
    ]
    routes = [jnp.mean(jax.vmap(displacement)(d), 0) for d in data]  # [2] each
    # Mean x displacement over steps 0..9: 0.1 * (0 + 1 + ... + 9) / 10 = 0.45 (the
    # wind averages out), negated for B.
    np.testing.assert_allclose(routes[0][0], 0.45, atol=0.03)
    np.testing.assert_allclose(routes[1][0], -0.45, atol=0.03)
    obs = jnp.concatenate([d.obs[0].reshape(-1, 3) for d in data])
    actions = jnp.concatenate([d.actions[0].reshape(-1) for d in data])
    z = jnp.repeat(jnp.eye(2), 32 * 10, 0)
    config = bc.BCConfig(
        num_actions=5, hidden=(16,), lr=1e-2, num_epochs=10, batch_size=64
    )
    latent, _ = jax.jit(bc.make_train(config))(jax.random.key(1), obs, actions, z)
    assert float(bc.action_match(config, latent, obs, actions, z)) == 1.0
    # A clone that ignores z: the latent clone with its first layer's z rows (the
    # last two inputs) zeroed.
    trunk = latent["params"]["Trunk_0"]
    kernel = trunk["Dense_0"]["kernel"].at[-2:].set(0.0)
    trunk = {"Dense_0": {**trunk["Dense_0"], "kernel": kernel}}
    blind = {"params": {**latent["params"], "Trunk_0": trunk}}

    def rate(clone_params, z_a, z_b):
        return bc.steering_rate(
            jax.random.key(2), env, (), config, clone_params, z_a, z_b,
            routes[0], routes[1], displacement, 0, Scripted(0),
            num_episodes=64, num_steps=10,
        )  # fmt: skip

    steered = rate(latent, jnp.eye(2)[0], jnp.eye(2)[1])
    assert float(steered.rate) == 1.0
    assert steered.toward_a.shape == (64,)
    # The blind clone plays identical games under both z: every comparison ties.
    ignored = rate(blind, jnp.eye(2)[0], jnp.eye(2)[1])
    assert float(ignored.rate) == 0.5
    np.testing.assert_array_equal(ignored.toward_a, 0.5)

    # A chain of three consecutive episodes (auto-reset, 30 steps): the step
    # counter wraps at every reset, and z still steers every game while a clone
    # that ignores z still ties every comparison.
    chained = AutoReset(env)
    played = bc.rollout_latent_policy(
        jax.random.key(3), chained, (), config, latent, jnp.eye(2)[0], 0,
        Scripted(0), 30,
    )  # fmt: skip
    np.testing.assert_array_equal(played.state.step, np.tile(np.arange(10), 3))

    def heading(trajectory):
        """Route feature robust to resets: the walker's mean move ``[2]``."""
        return jnp.mean(DIRECTIONS[trajectory.actions[0][:, 0]], 0)

    def chain_rate(clone_params):
        return bc.steering_rate(
            jax.random.key(4), chained, (), config, clone_params, jnp.eye(2)[0],
            jnp.eye(2)[1], jnp.array([1.0, 0.0]), jnp.array([-1.0, 0.0]), heading,
            0, Scripted(0), num_episodes=16, num_steps=30,
        )  # fmt: skip

    assert float(chain_rate(latent).rate) == 1.0
    assert float(chain_rate(blind).rate) == 0.5


def test_route_separability_by_hand():
    route_a, route_b = jnp.array([1.0, 0.0]), jnp.array([0.0, 1.0])
    features_a = jnp.array([[1.0, 0.0], [0.5, 0.5]])
    # Every pair told apart: (a0, b0) and (a1, b0) both have the A route closer to
    # m_A (0 and 0.5 < 2) and the B route closer to m_B (0 < 2 and 0 < 0.5).
    assert float(bc.route_separability(features_a, jnp.array([[0.0, 1.0]]),
                                       route_a, route_b)) == 1.0  # fmt: skip
    # A B route identical to m_A adds a tie (a0, b1: 0.5 both ways) and a miss
    # (a1, b1: 0.5 > 0 and 2 > 0.5): toward_a = toward_b = (1 + 1 + 0.5 + 0) / 4.
    features_b = jnp.array([[0.0, 1.0], [1.0, 0.0]])
    rate = bc.route_separability(features_a, features_b, route_a, route_b)
    np.testing.assert_allclose(float(rate), 0.625)
    # Two identical sets of routes cannot be told apart: exactly 0.5.
    same = jax.random.uniform(jax.random.key(0), (7, 2))
    np.testing.assert_allclose(
        float(bc.route_separability(same, same, route_a, route_b)), 0.5
    )
    with pytest.raises(InvalidParameterError, match="features_a"):
        bc.route_separability(jnp.zeros((3, 2)), jnp.zeros((3, 4)), route_a, route_b)


def test_config_validation():
    with pytest.raises(InvalidParameterError, match="num_actions"):
        bc.BCConfig(num_actions=0)
    with pytest.raises(InvalidParameterError, match="activation"):
        bc.BCConfig(num_actions=2, activation="swish")
    with pytest.raises(InvalidParameterError, match="lr"):
        bc.BCConfig(num_actions=2, lr=0.0)
    with pytest.raises(InvalidParameterError, match="batch_size"):
        bc.make_train(bc.BCConfig(num_actions=2, batch_size=64))(
            jax.random.key(0), jnp.zeros((10, 3)), jnp.zeros(10, jnp.int32)
        )


def test_steering_sweep_is_steering_rate_in_every_cell():
    """The sweep's cell (length, game, seed) is :func:`bc.steering_rate` against
    that seed of that game's first team at that length, with the cell's key; a
    refusal names a missing opponent."""
    from mopa.envs import make
    from mopa.policy import PolicySpec, init_params

    games = [make("tag_balanced", resource_placement=p) for p in ("circle", "corners")]
    env, _ = games[0]
    spec = PolicySpec(
        kind="actor",
        num_agents=env.team_sizes[0],
        obs_size=env.observation_space(0).shape[-1],
        num_actions=int(env.action_space(0).n),
        hidden=(8,),
    )
    stacked = jax.vmap(lambda k: init_params(spec, k))(
        jax.random.split(jax.random.key(0), 3)
    )
    config = bc.BCConfig(num_actions=int(env.action_space(1).n), hidden=(8,))
    obs_size = env.observation_space(1).shape[-1]
    clone = bc.init_bc_params(config, jax.random.key(1), obs_size, 2)
    z_a, z_b = jnp.eye(2)
    route_a, route_b = jnp.array([0.5, 0.0]), jnp.array([-0.5, 0.0])

    def route(trajectory):
        return jnp.mean(trajectory.state.pos[:, -1], 0)

    key = jax.random.key(7)
    sweep = bc.steering_sweep(
        key, games, [(spec, stacked)] * 2, config, clone, z_a, z_b, route_a,
        route_b, route, 4, [3, 6], num_seeds=2,
    )  # fmt: skip
    assert sweep.rates.shape == (2, 2, 2) and sweep.scores.shape == (2, 2, 2, 4)
    for i, steps in enumerate((3, 6)):
        for g, (game, params) in enumerate(games):
            for s in range(2):
                one = bc.steering_rate(
                    jax.random.fold_in(key, 100 * g + s), game, params, config,
                    clone, z_a, z_b, route_a, route_b, route, 1,
                    bc.fixed_team_fn(spec, jax.tree.map(lambda x, s=s: x[s], stacked)),
                    4, steps,
                )  # fmt: skip
                assert sweep.rates[i, g, s] == float(one.rate)
                np.testing.assert_array_equal(
                    sweep.scores[i, g, s], (one.toward_a + one.toward_b) / 2
                )
    np.testing.assert_allclose(sweep.rates, sweep.scores.mean(-1), atol=1e-6)
    with pytest.raises(InvalidParameterError, match="one fixed opponent per game"):
        bc.steering_sweep(
            key, games, [(spec, stacked)], config, clone, z_a, z_b, route_a,
            route_b, route, 4, [3],
        )  # fmt: skip
