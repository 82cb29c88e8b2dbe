"""MADDPG and M3DDPG: config checks, M3DDPG's perturbation on a hand-worked
critic, M3DDPG with zero perturbation equal to MADDPG, and MADDPG learning
``push`` past random play on a small budget."""

import dataclasses
import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from mopa.algos.maddpg import (
    MADDPGConfig,
    adversarial_actions,
    make_engine,
    make_train,
)
from mopa.algos.maddpg.losses import MLP, critic_value
from mopa.algos.maddpg.train import perturbation_sizes
from mopa.core import replay
from mopa.errors import InvalidParameterError

SMALL = MADDPGConfig(
    num_episodes=400,
    num_envs=4,
    batch_size=64,
    learning_starts=500,
    polyak=0.01,
    num_units=32,
    replay_buffer_capacity=8000,
)
"""400 episodes of push in 4 games: 2500 updates, learning from the 500th
transition (a second of training; compiling costs more)."""
SEEDS = 1
RANDOM_GOOD_RETURN = -27.2
"""The good agent's mean return in push when both agents play uniformly random
force vectors (``rollout`` of ``random_policy``, 2000 episodes)."""


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"good_policy": "ppo"}, "good_policy must be one of maddpg, m3ddpg"),
        ({"bad_policy": "lemol"}, "bad_policy must be one of"),
        ({"scenario": "tag"}, "scenario must be push or adversary"),
        ({"gamma": 1.5}, r"gamma must be in \[0, 1\], got 1.5"),
        ({"polyak": -0.1}, "polyak must be in"),
        ({"adv_eps": -1e-3}, "adv_eps must be in"),
        ({"batch_size": 0}, "batch_size must be > 0"),
        ({"lr": 0.0}, "lr must be > 0"),
        ({"num_episodes": 10, "num_envs": 4}, "num_episodes .* multiple of num_envs"),
        ({"discrete_actions": 1}, "discrete_actions must be true or false"),
        ({"learning_starts": -1}, "learning_starts must be >= 0"),
    ],
)
def test_bad_configs_name_the_field(fields, message):
    with pytest.raises(InvalidParameterError, match=message):
        MADDPGConfig(**fields)


def test_config_aliases_and_derived_sizes():
    config = MADDPGConfig(
        good_policy="mmmaddpg", num_episodes=8, num_envs=2, agent_update_freq=3
    )
    assert config.team_policies == ("maddpg", "m3ddpg")
    # 8 episodes over 2 games: 4 x 25 = 100 steps per game, one update per 3
    # steps rounded up: 34 updates, 102 steps per game.
    assert (config.updates_per_playout, config.steps_per_playout) == (34, 102)
    assert config.buffer_capacity == 204
    assert config.warmup == 1024 * 25
    assert config.env_overrides == {
        "num_adversaries": 1,
        "continuous_actions": True,
        "max_steps": 25,
    }


def test_perturbation_on_a_linear_critic_by_hand():
    """Q = w0 . a0 + w1 . a1 + w2 . a2 for agent 0. The worst-case step moves
    a_j by eps_j along -w_j / |w_j|: w1 = (3, 4, 0, 0, 0), eps 0.5 moves a1 by
    -(0.3, 0.4, 0, 0, 0) and lowers Q by 0.5 x 5 = 2.5; w2 = (0, 0, 0, 0, 2),
    eps 0.1 moves a2 by -(0, 0, 0, 0, 0.1) and lowers Q by 0.2. Agent 0's own
    action is left as it is."""
    w = [
        jnp.array([1.0, 1.0, 1.0, 1.0, 1.0]),
        jnp.array([3.0, 4.0, 0.0, 0.0, 0.0]),
        jnp.array([0.0, 0.0, 0.0, 0.0, 2.0]),
    ]

    def q_fn(actions):
        return sum(a @ wj for a, wj in zip(actions, w, strict=True))

    actions = tuple(jnp.full((2, 5), 0.5) for _ in range(3))
    out = adversarial_actions(q_fn, actions, 0, (0.7, 0.5, 0.1))
    np.testing.assert_array_equal(out[0], actions[0])
    np.testing.assert_allclose(out[1], 0.5 - np.array([[0.3, 0.4, 0, 0, 0]] * 2))
    np.testing.assert_allclose(out[2], 0.5 - np.array([[0, 0, 0, 0, 0.1]] * 2))
    np.testing.assert_allclose(q_fn(actions) - q_fn(out), [2.7, 2.7], rtol=1e-6)


def test_perturbation_of_a_flat_critic_is_zero_not_nan():
    actions = (jnp.zeros((3, 5)), jnp.ones((3, 5)))
    out = adversarial_actions(lambda a: jnp.zeros(3), actions, 1, (1.0, 1.0))
    for before, after in zip(actions, out, strict=True):
        np.testing.assert_array_equal(after, before)


def test_perturbation_sizes_by_team():
    """adversary game: agent 0 adversary, agents 1 and 2 good. Good agents use
    M3DDPG: competitors get adv_eps, team mates adv_eps_s."""
    sizes = perturbation_sizes((0, 1, 1), ("maddpg", "m3ddpg"), 1e-3, 1e-5)
    assert sizes == (None, (1e-3, 1e-5, 1e-5), (1e-3, 1e-5, 1e-5))


def _train(config):
    keys = jax.random.split(jax.random.key(0), SEEDS)
    return jax.device_get(jax.jit(jax.vmap(make_train(config)))(keys))


@pytest.fixture(scope="module")
def maddpg_run():
    return _train(SMALL)


def _window_means(values, windows=10):
    return np.array([np.nanmean(w, 1) for w in np.array_split(values, windows, 1)]).T


@pytest.mark.slow
def test_maddpg_learns_push_past_random_play(maddpg_run):
    """The good agent's return (minus its summed distance to the goal) over the
    last tenth of the run beats random play by a wide margin (trained runs reach
    about -10, random play -27) and improves on the run's first tenth. (One seed
    here; four seeds of this config all ended between -8.8 and -10.4.)"""
    good = _window_means(np.asarray(maddpg_run.metrics["return/good"]))
    assert np.all(good[:, -1] > RANDOM_GOOD_RETURN + 12), good
    assert np.all(good[:, -1] > good[:, 0] + 10), good
    critic_losses = np.asarray(maddpg_run.metrics["q_loss/good_0"])
    assert np.isnan(critic_losses[:, 0]).all()  # before learning starts
    assert np.isfinite(critic_losses[:, -1]).all()


@pytest.mark.slow
def test_m3ddpg_without_perturbation_is_maddpg(maddpg_run):
    """adv_eps = adv_eps_s = 0: the worst-case step leaves every replayed action
    exactly as it was, and from the trained agents and their replay buffer 20
    gradient steps of M3DDPG (every agent) give MADDPG's weights and losses (to
    float32 rounding: the two programs compute the same numbers in a different
    order of operations, so bit equality depends on how XLA fuses them)."""
    m3 = dataclasses.replace(
        SMALL, good_policy="m3ddpg", bad_policy="m3ddpg", adv_eps=0.0, adv_eps_s=0.0
    )
    learners = jax.tree.map(lambda x: x[0], maddpg_run.carry.learners)
    buffer = jax.tree.map(lambda x: x[0], maddpg_run.carry.buffer)
    batch = replay.sample(buffer, jax.random.key(2), 256)
    critic = MLP(1, SMALL.num_units)
    for agent in (0, 1):

        def q_fn(actions, agent=agent):
            return critic_value(
                critic, learners[agent].critic, batch.obs, actions, batch.extras[agent]
            )

        perturbed = adversarial_actions(q_fn, batch.actions, agent, (0.0, 0.0))
        for a, b in zip(perturbed, batch.actions, strict=True):
            np.testing.assert_array_equal(a, b)

    def steps(config):
        learn = make_engine(config).learn

        @jax.jit
        def run(learners, buffer):
            return jax.lax.scan(
                lambda ls, k: learn(ls, buffer, k),
                learners,
                jax.random.split(jax.random.key(3), 20),
            )

        return jax.device_get(run(learners, buffer))

    (ours, our_stats), (theirs, their_stats) = steps(SMALL), steps(m3)
    assert set(our_stats) == set(their_stats)
    for name, values in our_stats.items():
        np.testing.assert_allclose(
            their_stats[name], values, rtol=1e-5, atol=1e-6, err_msg=name
        )
    for a, b in zip(jax.tree.leaves(ours), jax.tree.leaves(theirs), strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    # The steps did train: the weights moved.
    moved = jax.tree.map(lambda a, b: not np.array_equal(a, b), learners, ours)
    assert any(jax.tree.leaves(moved))


def test_perturbation_lowers_the_trained_critics_values(maddpg_run):
    """On replayed transitions, the worst-case step against the other agent's
    action lowers each trained critic's Q on nearly every example, by about
    eps times the gradient's norm (first order)."""
    learners = jax.tree.map(lambda x: x[0], maddpg_run.carry.learners)
    buffer = jax.tree.map(lambda x: x[0], maddpg_run.carry.buffer)
    batch = replay.sample(buffer, jax.random.key(2), 256)
    critic = MLP(1, SMALL.num_units)

    @functools.partial(jax.jit, static_argnums=1)
    def values(critic_params, agent):
        def q_fn(actions):
            return critic_value(
                critic, critic_params, batch.obs, actions, batch.extras[agent]
            )

        grads = jax.grad(lambda a: q_fn(a).sum())(batch.actions)
        perturbed = adversarial_actions(q_fn, batch.actions, agent, (0.01, 0.01))
        grad_norm = jnp.linalg.norm(grads[1 - agent], axis=-1)
        return q_fn(batch.actions) - q_fn(perturbed), grad_norm

    for agent in (0, 1):
        drop, grad_norm = values(learners[agent].critic, agent)
        assert np.mean(drop > 0) > 0.95
        np.testing.assert_allclose(
            np.median(drop), 0.01 * np.median(grad_norm), rtol=0.2
        )


def test_a_game_whose_actions_do_not_fit_the_config_is_refused():
    from mopa.envs import make

    with pytest.raises(InvalidParameterError, match="needs Discrete"):
        make_engine(MADDPGConfig(discrete_actions=True), game=make("push"))
