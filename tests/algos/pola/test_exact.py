"""Exact-IPD learning rules: mirrored updates, LOLA variants against each other and
against finite differences, the POLA fixed point, and the Fig. 3 criterion."""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from mopa.algos.pola import exact
from mopa.envs.ipd import MIRROR_STATES
from mopa.errors import InvalidParameterError

SETTINGS = {
    "naive": dict(lr_outer=0.5),
    "lola": dict(lr_inner=1.0, lr_outer=0.5, inner_steps=2),
    "lola_taylor": dict(lr_inner=1.0, lr_outer=0.5),
    "pola": dict(lr_inner=1.0, lr_outer=0.03, outer_beta=0.5, prox_max_iters=100),
}


def initial_pair(config, seed=0):
    key_1, key_2 = jax.random.split(jax.random.key(seed))
    scale = 5.0 if config.policy != "mlp" else 1.0  # away from the symmetric point
    return tuple(
        jax.tree.map(lambda x: scale * x, exact.init_policy(k, config))
        for k in (key_1, key_2)
    )


@pytest.mark.parametrize(
    "method, policy",
    [(m, "tabular") for m in exact.METHODS]
    + [(m, p) for m in ("lola", "pola") for p in ("mlp", "precond")],
)
@pytest.mark.slow
def test_swapping_the_agents_mirrors_the_updates(method, policy):
    config = exact.ExactConfig(method=method, policy=policy, **SETTINGS[method])
    theta_1, theta_2 = initial_pair(config)
    update = jax.jit(exact.joint_update, static_argnums=1)
    (new_1, new_2), _ = update((theta_1, theta_2), config)
    mirror = lambda p: exact.mirror_params(p, policy)  # noqa: E731
    (swap_1, swap_2), _ = update((mirror(theta_2), mirror(theta_1)), config)
    probs = lambda p, i: np.asarray(exact.coop_probs(p, policy, i))  # noqa: E731
    # Seat 1 after the swap plays what seat 0 played, in mirrored states.
    np.testing.assert_allclose(
        probs(swap_2, 1)[MIRROR_STATES], probs(new_1, 0), atol=2e-5
    )
    np.testing.assert_allclose(
        probs(swap_1, 0)[MIRROR_STATES], probs(new_2, 1), atol=2e-5
    )
    # And the update did something.
    assert np.max(np.abs(probs(new_1, 0) - probs(theta_1, 0))) > 1e-3


@pytest.mark.parametrize("policy", exact.POLICY_CLASSES)
def test_mirror_params_plays_the_other_seat(policy):
    config = exact.ExactConfig(policy=policy)
    theta = initial_pair(config)[0]
    mirrored = exact.mirror_params(theta, policy)
    np.testing.assert_allclose(
        exact.coop_probs(mirrored, policy, 1)[MIRROR_STATES],
        exact.coop_probs(theta, policy, 0),
        rtol=1e-6,
    )


@pytest.mark.slow
def test_lola_gradient_matches_finite_differences_through_the_opponent_step():
    config = exact.ExactConfig(method="lola", lr_inner=2.0)
    theta_1 = jnp.array([0.3, -0.5, 0.8, 1.0, 0.2])
    theta_2 = jnp.array([-0.2, 0.6, -0.4, 0.9, 0.5])

    def after_step(t1):
        step = jax.grad(exact.loss, argnums=1)(1, theta_2, t1, config)
        return exact.loss(0, t1, theta_2 - 2.0 * step, config)

    grad = jax.jit(jax.grad(exact.lola_loss, argnums=1), static_argnums=(0, 3))(
        0, theta_1, theta_2, config
    )
    eps = 1e-3
    shifts = eps * jnp.eye(5)
    numeric = jax.jit(
        jax.vmap(
            lambda d: (after_step(theta_1 + d) - after_step(theta_1 - d)) / (2 * eps)
        )
    )(shifts)
    np.testing.assert_allclose(grad, numeric, rtol=2e-2, atol=2e-3)
    naive = jax.grad(exact.loss, argnums=1)(0, theta_1, theta_2, config)
    assert np.max(np.abs(grad - naive)) > 0.1


def test_taylor_lola_agrees_with_actual_update_to_first_order():
    theta_1 = jnp.array([0.3, -0.5, 0.8, 1.0, 0.2])
    theta_2 = jnp.array([-0.2, 0.6, -0.4, 0.9, 0.5])
    gaps = []
    lola_grad = jax.jit(jax.grad(exact.lola_loss, argnums=1), static_argnums=(0, 3))
    taylor_grad = jax.jit(exact.taylor_grad, static_argnums=(0, 3))
    for eta in (0.1, 0.05):
        config = exact.ExactConfig(lr_inner=eta)
        actual = lola_grad(0, theta_1, theta_2, config)
        taylor = taylor_grad(0, theta_1, theta_2, config)
        naive = jax.grad(exact.loss, argnums=1)(0, theta_1, theta_2, config)
        gaps.append(float(jnp.max(jnp.abs(actual - taylor))))
        # The shaping terms are first order in eta and agree...
        assert gaps[-1] < 0.2 * float(jnp.max(jnp.abs(actual - naive)))
    # ...and the remaining gap is second order: halving eta quarters it.
    assert gaps[1] / gaps[0] == pytest.approx(0.25, abs=0.06)


@pytest.mark.slow
def test_pola_reaches_a_fixed_point_of_the_proximal_objective():
    config = exact.ExactConfig(
        method="pola", lr_inner=1.0, lr_outer=0.1, outer_beta=1.0
    )
    theta_1 = jnp.array([0.3, -0.5, 0.8, 1.0, 0.2])
    theta_2 = jnp.array([-0.2, 0.6, -0.4, 0.9, 0.5])
    pola_step = jax.jit(exact.pola_step, static_argnums=(0, 3))
    new, iters = pola_step(0, theta_1, theta_2, config)
    assert 1 < int(iters) < config.prox_max_iters
    start = exact.coop_probs(theta_1, "tabular", 0)

    def objective(theta):
        probs = exact.coop_probs(theta, "tabular", 0)
        prox = exact.bernoulli_kl(start, probs)
        return exact.lola_loss(0, theta, theta_2, config) + config.outer_beta * prox

    # At the fixed point the objective's gradient vanishes (stationarity), while
    # at the start it does not.
    assert float(jnp.max(jnp.abs(jax.grad(objective)(new)))) < 2e-2
    assert float(jnp.max(jnp.abs(jax.grad(objective)(theta_1)))) > 0.1
    # A stronger proximal term keeps the policy closer to where it started.
    strong = dataclasses.replace(config, outer_beta=10.0)
    new_strong, _ = pola_step(0, theta_1, theta_2, strong)
    kl = lambda t: float(exact.bernoulli_kl(start, exact.coop_probs(t, "tabular", 0)))  # noqa: E731
    assert kl(new_strong) < kl(new)


def test_pola_stops_at_max_iters():
    config = exact.ExactConfig(
        method="pola", lr_inner=1.0, lr_outer=0.1, outer_beta=1.0, prox_max_iters=7
    )
    _, iters = exact.pola_step(0, jnp.zeros(5) + 1.0, jnp.zeros(5), config)
    assert int(iters) == 7


def test_tft_criterion():
    config = exact.ExactConfig(contrib_factor=1.33)
    tft = jnp.array([[0.01, 0.99, 0.01, 0.99, 0.99], [0.01, 0.01, 0.99, 0.99, 0.99]])
    good = jnp.full((2,), 0.33 / 0.04)
    assert bool(exact.is_tft(tft, good, config))
    # Return below 0.8 x (cf - 1) / (1 - gamma) = 6.6:
    assert not bool(exact.is_tft(tft, jnp.full((2,), 6.5), config))
    # Agent 2 forgives agent 1's defection (state DC):
    forgiving = tft.at[1, 1].set(0.7)
    assert not bool(exact.is_tft(forgiving, good, config))
    # Agent 1 forgiving in DC (agent 2 cooperated) is not retaliation, so fine:
    assert bool(exact.is_tft(tft.at[0, 1].set(0.5), good, config))


@pytest.mark.slow
def test_lola_tabular_finds_tft_and_naive_learning_does_not():
    keys = jax.random.split(jax.random.key(0), 4)
    lola = exact.ExactConfig(method="lola", lr_inner=3.0, lr_outer=25.0, num_epochs=20)
    p_lola, out = exact.p_tft(lola, keys)
    naive = dataclasses.replace(lola, method="naive", lr_outer=1.0, num_epochs=60)
    p_naive, out_naive = exact.p_tft(naive, keys)
    assert p_lola == 1.0 and p_naive == 0.0
    # Naive learners end up defecting: values near mutual defection's 0.
    assert float(jnp.max(jnp.abs(out_naive.values[:, -1]))) < 0.5


def test_vmap_over_seeds_equals_single_runs():
    config = exact.ExactConfig(method="naive", num_epochs=3)
    keys = jax.random.split(jax.random.key(1), 3)
    batched = jax.vmap(exact.make_train(config))(keys)
    single = exact.make_train(config)(keys[1])
    np.testing.assert_allclose(batched.probs[1], single.probs, atol=1e-6)


@pytest.mark.parametrize(
    "field, value",
    [("method", "sos"), ("policy", "cnn"), ("gamma", 1.0), ("lr_outer", -1.0),
     ("inner_steps", 0), ("horizon", 0)],
)  # fmt: skip
def test_config_names_the_bad_field(field, value):
    with pytest.raises(InvalidParameterError, match=field):
        exact.ExactConfig(**{field: value})
