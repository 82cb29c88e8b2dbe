"""Sampled estimators against exact values on the IPD: the DiCE policy gradient
against ``jax.grad`` of the exact finite-horizon value, and LOLA-DiCE's
second-order update against the exact LOLA update."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from mopa.algos.pola import exact
from mopa.algos.pola.dice import gae, loaded_dice_objective, value_loss
from mopa.algos.pola.sampled import Learner, SampledConfig
from mopa.envs.ipd import MIRROR_STATES

T, CF, REPLICATES, BATCH = 50, 1.33, 8, 4000
THETA_1 = jnp.array([0.3, -0.5, 0.8, 1.0, 0.2])
THETA_2 = jnp.array([-0.2, 0.6, -0.4, 0.9, 0.5])


def sampled_learner(lr_in=1.0):
    return Learner(
        SampledConfig(
            env="ipd",
            tabular=True,
            use_baseline=False,
            inner_steps=1,
            outer_steps=1,
            inner_beta=0.0,
            outer_beta=0.0,
            lr_in=lr_in,
            batch_size=BATCH,
            rollout_len=T,
            contrib_factor=CF,
        )
    )


def exact_config(lr_inner=1.0):
    return exact.ExactConfig(
        method="lola", policy="tabular", lr_inner=lr_inner, horizon=T, contrib_factor=CF
    )


def assert_within_sampling_error(samples, target):
    """Mean of ``[R, 5]`` independent estimates within 4 standard errors (plus a
    small floor) of ``target``; the standard error itself must be small."""
    samples = np.asarray(samples)
    mean = samples.mean(0)
    se = samples.std(0, ddof=1) / np.sqrt(len(samples))
    assert np.all(se < 0.1), se
    np.testing.assert_array_less(np.abs(mean - np.asarray(target)), 4 * se + 0.02)


@pytest.mark.slow
@pytest.mark.parametrize("seat", [0, 1])
def test_dice_gradient_matches_exact_gradient(seat):
    learner = sampled_learner()
    mine, other = (THETA_1, THETA_2) if seat == 0 else (THETA_2, THETA_1)

    def estimate(key):
        batch = learner.play(key, (THETA_1, THETA_2))
        return jax.grad(learner.dice_loss, argnums=1)(seat, mine, None, other, batch)

    keys = jax.random.split(jax.random.key(seat), REPLICATES)
    samples = jax.jit(jax.vmap(estimate))(keys)
    target = jax.grad(exact.loss, argnums=1)(seat, mine, other, exact_config())
    assert np.max(np.abs(target)) > 0.3  # a gradient worth matching
    assert_within_sampling_error(samples, target)


@pytest.mark.slow
def test_lola_dice_second_order_update_matches_exact_lola():
    learner = sampled_learner(lr_in=1.0)
    config = exact_config(lr_inner=1.0)

    def estimate(key):
        grads, _ = learner.outer_gradient(key, 0, THETA_1, THETA_1, None, THETA_2, None)
        return grads

    samples = jax.jit(jax.vmap(estimate))(
        jax.random.split(jax.random.key(3), REPLICATES)
    )
    lola = jax.grad(exact.lola_loss, argnums=1)(0, THETA_1, THETA_2, config)
    naive = jax.grad(exact.loss, argnums=1)(0, THETA_1, THETA_2, config)
    # The shaping term is large here, so matching LOLA rules out the naive gradient.
    assert np.max(np.abs(lola - naive)) > 0.5
    assert_within_sampling_error(samples, lola)
    assert np.max(np.abs(np.asarray(samples).mean(0) - np.asarray(naive))) > 0.3


def test_gae_hand_worked():
    # rewards 1, 2; values 0.5, 1.0, bootstrap 2.0; gamma 0.5, lambda 1:
    # delta_1 = 2 + 0.5 * 2 - 1 = 2; delta_0 = 1 + 0.5 * 1 - 0.5 = 1;
    # A_1 = 2; A_0 = 1 + 0.5 * 2 = 2.
    rewards = jnp.array([[1.0], [2.0]])
    values = jnp.array([[0.5], [1.0], [2.0]])
    np.testing.assert_allclose(gae(rewards, values, 0.5, 1.0)[:, 0], [2.0, 2.0])
    # lambda 0: A_t = delta_t.
    np.testing.assert_allclose(gae(rewards, values, 0.5, 0.0)[:, 0], [1.0, 2.0])
    # Value targets are A + V: 2.5 and 3.0; loss = ((0.5-2.5)^2 + (1-3)^2) / 2 = 4.
    assert float(value_loss(values, rewards, 0.5, 1.0)) == pytest.approx(4.0)


def test_loaded_dice_first_order_gradient_is_the_policy_gradient():
    # One step, one sample: d/dtheta of the loaded DiCE objective is
    # A_0 * d log pi(a_0) / d theta with A_0 = r_0 + gamma V_1 - V_0 = 1 + 0.9*2 - 1.
    def objective(theta):
        logp = jnp.log(jax.nn.sigmoid(theta)).reshape(1, 1)
        return loaded_dice_objective(
            logp,
            jnp.zeros((1, 1)),
            jnp.ones((1, 1)),
            jnp.array([[1.0], [2.0]]),
            0.9,
            1.0,
        )

    theta = 0.3
    expected = 1.8 * (1 - jax.nn.sigmoid(theta))
    assert float(jax.grad(objective)(theta)) == pytest.approx(float(expected), rel=1e-5)
    assert float(objective(theta)) == 0.0


@pytest.mark.slow
def test_lola_dice_updates_are_mirrored_when_the_agents_swap_seats():
    learner = sampled_learner(lr_in=1.0)
    mirror = jnp.asarray(MIRROR_STATES)

    def seat_0(key):
        return learner.outer_gradient(key, 0, THETA_1, THETA_1, None, THETA_2, None)[0]

    def seat_1(key):
        # The same two players with their seats swapped: each plays the mirror image
        # of its policy.
        mine, other = THETA_1[mirror], THETA_2[mirror]
        return learner.outer_gradient(key, 1, mine, mine, None, other, None)[0]

    keys = jax.random.split(jax.random.key(5), REPLICATES)
    samples_0 = np.asarray(jax.jit(jax.vmap(seat_0))(keys))
    samples_1 = np.asarray(jax.jit(jax.vmap(seat_1))(keys))[:, MIRROR_STATES]
    assert_within_sampling_error(samples_1 - samples_0, np.zeros(5))


@pytest.mark.slow
def test_both_critics_and_policies_learn_in_a_joint_update():
    # The reference lost agent 2's critic gradient and used agent 2's stale
    # parameters after its first lookahead step; both must move here.
    learner = Learner(
        SampledConfig(
            env="ipd", inner_steps=2, outer_steps=2, batch_size=8, rollout_len=5,
            hidden_size=4,
        )
    )  # fmt: skip
    agents = learner.init(jax.random.key(0))
    new, _ = jax.jit(learner.joint_update)(jax.random.key(1), agents)
    for seat in (0, 1):
        for part in ("policy", "value"):
            before = jax.tree.leaves(getattr(agents[seat], part))
            after = jax.tree.leaves(getattr(new[seat], part))
            assert any(
                not np.allclose(a, b) for a, b in zip(before, after, strict=True)
            )
