"""Differentiable objectives of the sampled POLA family: loaded DiCE with a learned
baseline and GAE, the critic's loss and the KL penalty on rollout states.

DiCE (Foerster et al. 2018) makes any-order gradients of the sampled objective
unbiased: ``magic_box(x) = exp(x - stop_gradient(x))`` is 1 in value and has
gradient ``magic_box(x) * grad x``. The loaded form (Farquhar et al. 2019) weights
each step's advantage by ``magic_box(deps_<=t) - magic_box(deps_<t)``, where
``deps`` are the log-probabilities of both agents' actions so far, so the
first-order gradient is the GAE policy gradient while higher orders still flow
through both agents' log-probabilities.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp


def magic_box(x: jax.Array) -> jax.Array:
    """``exp(x - stop_gradient(x))``: 1 in value, ``grad x`` in derivative."""
    return jnp.exp(x - jax.lax.stop_gradient(x))


def gae(rewards: jax.Array, values: jax.Array, gamma: float, lam: float) -> jax.Array:
    """Generalised advantage estimates.

    Args:
        rewards: ``[T, B]``.
        values: ``[T + 1, B]`` critic values, the last one the bootstrap.
        gamma: discount factor.
        lam: GAE lambda (1.0: Monte-Carlo returns minus the baseline).

    Returns:
        ``[T, B]`` advantages ``A_t = sum_k (gamma lam)^k delta_{t+k}``.
    """
    deltas = rewards + gamma * values[1:] - values[:-1]

    def body(next_adv, delta):
        adv = delta + gamma * lam * next_adv
        return adv, adv

    _, advantages = jax.lax.scan(body, jnp.zeros_like(deltas[0]), deltas, reverse=True)
    return advantages


def loaded_dice_objective(
    logp_self: jax.Array,
    logp_other: jax.Array,
    rewards: jax.Array,
    values: jax.Array,
    gamma: float,
    lam: float,
) -> jax.Array:
    """Loaded DiCE objective (to maximise), averaged over the batch.

    Args:
        logp_self: ``[T, B]`` log-probabilities of the agent's actions.
        logp_other: ``[T, B]`` the other agent's.
        rewards: ``[T, B]`` the agent's rewards.
        values: ``[T + 1, B]`` baseline values (gradients are stopped here).
        gamma: discount factor.
        lam: GAE lambda.

    Returns:
        ``[]`` ``mean_b sum_t gamma^t A_t (magic_box(deps_<=t) - magic_box(deps_<t))``.
        Its value is 0; its gradients of every order are those of the objective.
        With zero values and ``lam = 1`` its gradients equal plain DiCE's,
        ``mean_b sum_t gamma^t r_t magic_box(deps_<=t)``.
    """
    values = jax.lax.stop_gradient(values)
    advantages = gae(rewards, values, gamma, lam)
    discount = gamma ** jnp.arange(rewards.shape[0], dtype=rewards.dtype)[:, None]
    nodes = logp_self + logp_other
    deps = jnp.cumsum(nodes, axis=0)
    weights = magic_box(deps) - magic_box(deps - nodes)
    return jnp.mean(jnp.sum(weights * discount * advantages, axis=0))


def value_loss(
    values: jax.Array, rewards: jax.Array, gamma: float, lam: float
) -> jax.Array:
    """Mean squared error of ``values[:-1]`` to their lambda-returns (targets held
    fixed), ``[T + 1, B]`` values and ``[T, B]`` rewards in, ``[]`` out."""
    fixed = jax.lax.stop_gradient(values)
    targets = gae(rewards, fixed, gamma, lam) + fixed[:-1]
    return jnp.mean((values[:-1] - targets) ** 2)


def categorical_kl(logits_p: jax.Array, logits_q: jax.Array) -> jax.Array:
    """``KL(p || q)`` of categorical distributions over the last axis, averaged over
    every leading axis (the states of a rollout)."""
    logp = jax.nn.log_softmax(logits_p)
    logq = jax.nn.log_softmax(logits_q)
    return jnp.mean(jnp.sum(jnp.exp(logp) * (logp - logq), axis=-1))
