"""The IPD: payoffs, the exact value against a step-by-step reference, the sampled
game's dynamics and the scripted players."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from mopa.envs import make
from mopa.envs.ipd import (
    MIRROR_STATES,
    exact_values,
    payoffs,
    scripted_action,
    state_distribution,
)
from mopa.errors import InvalidParameterError


def test_payoffs_at_cf_1_33():
    # DD 0; DC: defector cf/2 = 0.665, cooperator cf/2 - 1 = -0.335; CC cf - 1.
    np.testing.assert_allclose(
        payoffs(1.33),
        [[0.0, 0.665, -0.335, 0.33], [0.0, -0.335, 0.665, 0.33]],
        rtol=1e-6,
    )


def test_exact_values_of_pure_strategies():
    c, d = jnp.ones(5), jnp.zeros(5)
    # Mutual cooperation: 0.33 / (1 - 0.96) = 8.25 each.
    np.testing.assert_allclose(exact_values(c, c, 1.33), [8.25, 8.25], rtol=1e-5)
    # ALLD vs ALLC: 0.665 / 0.04 and -0.335 / 0.04.
    np.testing.assert_allclose(exact_values(d, c, 1.33), [16.625, -8.375], rtol=1e-5)
    # Finite horizon T: (1 - gamma^T) / (1 - gamma) x 0.33.
    np.testing.assert_allclose(
        exact_values(c, c, 1.33, horizon=10),
        [0.33 * (1 - 0.96**10) / 0.04] * 2,
        rtol=1e-5,
    )


def reference_values(p1, p2, cf, gamma, steps):
    """Plain NumPy: propagate the joint-state distribution step by step."""
    r = np.asarray(payoffs(cf))
    joint = lambda a, b: np.array([(1 - a) * (1 - b), (1 - a) * b, a * (1 - b), a * b])  # noqa: E731
    dist = joint(p1[4], p2[4])
    total = np.zeros(2)
    for t in range(steps):
        total += gamma**t * r @ dist
        dist = sum(dist[s] * joint(p1[s], p2[s]) for s in range(4))
    return total


def test_exact_values_match_a_step_by_step_reference():
    rng = np.random.default_rng(0)
    for _ in range(3):
        p1, p2 = rng.uniform(size=5), rng.uniform(size=5)
        np.testing.assert_allclose(
            exact_values(jnp.asarray(p1), jnp.asarray(p2), 1.4, 0.96),
            reference_values(p1, p2, 1.4, 0.96, 1500),
            rtol=1e-4,
        )
        np.testing.assert_allclose(
            exact_values(jnp.asarray(p1), jnp.asarray(p2), 1.4, 0.96, horizon=20),
            reference_values(p1, p2, 1.4, 0.96, 20),
            rtol=1e-4,
        )
    p1 = rng.uniform(size=5)
    assert state_distribution(
        jnp.asarray(p1), jnp.asarray(p1), 0.5
    ).sum() == pytest.approx(2.0)


def test_swapping_seats_swaps_values():
    rng = np.random.default_rng(1)
    p1, p2 = jnp.asarray(rng.uniform(size=5)), jnp.asarray(rng.uniform(size=5))
    v = exact_values(p1, p2, 1.33)
    swapped = exact_values(p2[MIRROR_STATES], p1[MIRROR_STATES], 1.33)
    np.testing.assert_allclose(swapped, v[::-1], rtol=1e-5)


def play(env, params, policy_fn, steps):
    obs, state = env.reset(jax.random.key(0), params)
    history = []
    for _ in range(steps):
        actions = policy_fn(obs)
        obs, state, rewards, terminated, truncated, _ = env.step(
            jax.random.key(1), state, actions, params
        )
        history.append((obs, rewards, terminated, truncated))
    return history


def test_sampled_ipd_dynamics():
    env, params = make("ipd", contrib_factor=1.6, max_steps=3)
    obs, _ = env.reset(jax.random.key(0), params)
    np.testing.assert_array_equal(obs[0][0], [0, 0, 1, 0, 0, 1])
    np.testing.assert_array_equal(obs[0], obs[1])
    # Agent 1 cooperates, agent 2 defects: agent 1 gets 0.8 - 1, agent 2 0.8.
    moves = lambda obs: (jnp.array([1]), jnp.array([0]))  # noqa: E731
    history = play(env, params, moves, 3)
    obs, rewards, terminated, truncated = history[0]
    np.testing.assert_array_equal(obs[0][0], [0, 1, 0, 1, 0, 0])
    np.testing.assert_allclose([rewards[0][0], rewards[1][0]], [-0.2, 0.8], rtol=1e-6)
    assert [bool(h[3]) for h in history] == [False, False, True]
    assert not any(bool(h[2]) for h in history)


def test_scripted_players():
    start = jnp.array([0, 0, 1, 0, 0, 1.0])
    agent_1_defected = jnp.array([1, 0, 0, 0, 1, 0.0])
    assert int(scripted_action("tft", start, 0)) == 1
    assert int(scripted_action("tft", agent_1_defected, 1)) == 0
    assert int(scripted_action("tft", agent_1_defected, 0)) == 1
    assert int(scripted_action("alld", start, 0)) == 0
    assert int(scripted_action("allc", agent_1_defected, 1)) == 1


def test_bad_parameters_are_named():
    with pytest.raises(InvalidParameterError, match="max_steps"):
        make("ipd", max_steps=0)
    with pytest.raises(InvalidParameterError, match="contrib_factr"):
        make("ipd", contrib_factr=1.2)
