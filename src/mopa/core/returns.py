"""Discounted returns and generalised advantage estimation, as reverse scans."""

from __future__ import annotations

import jax
import jax.numpy as jnp


def compute_gae(
    rewards: jax.Array,
    values: jax.Array,
    next_values: jax.Array,
    terminated: jax.Array,
    done: jax.Array,
    gamma: float,
    lam: float,
) -> tuple[jax.Array, jax.Array]:
    """Generalised advantage estimation (Schulman et al. 2016, eq. 16).

    Time is the leading axis; any trailing axes are batch axes.

    Args:
        rewards: ``[T, ...]`` reward of each step.
        values: ``[T, ...]`` V(s_t).
        next_values: ``[T, ...]`` V of the true next state (the final state at the
            end of an episode, so truncated episodes are bootstrapped).
        terminated: ``[T, ...]`` the game ended at this step (no bootstrap).
        done: ``[T, ...]`` an episode ended at this step (terminated or
            truncated): the advantage recursion does not cross it.
        gamma: discount.
        lam: GAE lambda.

    Returns:
        ``(advantages [T, ...], value targets [T, ...])``.
    """
    not_terminated = 1.0 - terminated.astype(jnp.float32)
    not_done = 1.0 - done.astype(jnp.float32)
    deltas = rewards + gamma * next_values * not_terminated - values

    def backward(carry, inputs):
        delta, keep = inputs
        advantage = delta + gamma * lam * keep * carry
        return advantage, advantage

    _, advantages = jax.lax.scan(
        backward, jnp.zeros_like(deltas[0]), (deltas, not_done), reverse=True
    )
    return advantages, advantages + values
