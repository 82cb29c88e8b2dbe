"""MADDPG's actors, centralised critics and losses, and M3DDPG's worst-case
perturbation of the other agents' actions.

Every agent ``i`` has a deterministic actor ``mu_i(o_i, x_i)`` and a critic
``Q_i(o_1..o_N, a_1..a_N, x_i)`` that sees every agent's observation and action
(Lowe et al. 2017, "Multi-Agent Actor-Critic for Mixed Cooperative-Competitive
Environments"). ``x_i`` is an optional extra input (LeMOL's prediction of the
opponent; empty otherwise). Actions are 5-vectors: continuous force vectors in
``[0, 1]^5`` (``sigmoid`` of the actor's output), or, for discrete moves, one-hot
vectors whose differentiable stand-in is a Gumbel-softmax sample of the actor's
logits (Jang et al. 2017), as in MADDPG.

M3DDPG (Li et al. 2019, "Robust Multi-Agent Reinforcement Learning via Minimax
Deep Deterministic Policy Gradient", eq. 9-11) replaces the other agents' actions
inside ``Q_i`` by a one-step approximation of the worst case,
``a_j + eps_j * normalise(-grad_{a_j} Q_i)``, in the critic's target and in the
actor's objective.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import NamedTuple

import flax.linen as nn
import jax
import jax.numpy as jnp

from mopa.models.networks import Trunk

ACTION_SIZE = 5
"""Length of every particle-game action vector."""
ACTOR_REG = 1e-3
"""Weight of MADDPG's penalty on the squared actor outputs."""
L2_FLOOR = 1e-12
"""Floor under the squared norm when normalising a gradient (as ``l2_normalize``)."""


class MLP(nn.Module):
    """Two hidden ReLU layers of ``num_units`` and a linear output of
    ``num_outputs`` (MADDPG's actor and critic), on the last axis."""

    num_outputs: int
    num_units: int = 64

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:  # [..., D] -> [..., num_outputs]
        x = Trunk((self.num_units, self.num_units), "relu")(x)
        return nn.Dense(self.num_outputs)(x)


class Batch(NamedTuple):
    """Replayed transitions; per-agent tuples, leading batch axis ``[B]``."""

    obs: tuple  # per agent [B, D_i]
    actions: tuple  # per agent [B, 5]: force vectors or one-hot moves
    rewards: tuple  # per agent [B]
    next_obs: tuple  # per agent [B, D_i]
    extras: tuple  # per agent [B, X_i] (X_i = 0 without an extra input)
    next_extras: tuple  # per agent [B, X_i]
    terminated: jax.Array  # [B] bool


def policy_action(out: jax.Array, key: jax.Array | None, discrete: bool) -> jax.Array:
    """The differentiable action of actor output ``out`` ``[..., 5]``:
    ``sigmoid(out)`` for continuous actions; for discrete moves a Gumbel-softmax
    sample ``softmax(out + g)``, ``g ~ Gumbel(0, 1)`` (temperature 1)."""
    if not discrete:
        return jax.nn.sigmoid(out)
    return jax.nn.softmax(out + jax.random.gumbel(key, out.shape))


def critic_value(
    critic: MLP,
    params,
    obs: Sequence[jax.Array],
    actions: Sequence[jax.Array],
    extra: jax.Array,
) -> jax.Array:
    """``Q_i`` ``[B]`` of every agent's observation ``[B, D_j]`` and action
    ``[B, 5]`` and the agent's extra input ``[B, X_i]``."""
    x = jnp.concatenate([*obs, *actions, extra], -1)
    return critic.apply(params, x)[..., 0]


def adversarial_actions(
    q_fn: Callable[[tuple], jax.Array],
    actions: Sequence[jax.Array],
    agent: int,
    eps: Sequence[float],
) -> tuple[jax.Array, ...]:
    """M3DDPG's worst-case actions of the agents other than ``agent``.

    Each ``a_j`` (``j != agent``) moves by ``eps[j]`` along the normalised
    gradient of ``-Q`` with respect to ``a_j``, per example: the linearised
    minimising step (Li et al. 2019, eq. 11). The perturbation is a constant
    (no gradient flows through it); ``a_agent`` is returned unchanged.

    Args:
        q_fn: ``actions -> [B]`` values of agent ``agent``'s critic.
        actions: per agent ``[B, 5]``.
        agent: the agent whose critic is attacked.
        eps: per agent perturbation size (``adv_eps`` for competitors,
            ``adv_eps_s`` for collaborators).

    Returns:
        The perturbed actions, per agent ``[B, 5]``.
    """
    actions = tuple(actions)
    grads = jax.grad(lambda a: -jnp.sum(q_fn(a)))(actions)
    out = []
    for j, (a, g) in enumerate(zip(actions, grads, strict=True)):
        if j == agent:
            out.append(a)
            continue
        norm = jnp.sqrt(jnp.maximum(jnp.sum(g * g, -1, keepdims=True), L2_FLOOR))
        out.append(a + eps[j] * jax.lax.stop_gradient(g / norm))
    return tuple(out)


def critic_loss(
    critic: MLP,
    params,
    batch: Batch,
    agent: int,
    target: jax.Array,
) -> tuple[jax.Array, dict]:
    """Mean squared TD error of agent ``agent``'s critic on replayed actions
    against ``target`` ``[B]``. Returns ``(loss, stats)``."""
    q = critic_value(critic, params, batch.obs, batch.actions, batch.extras[agent])
    loss = jnp.mean((q - jax.lax.stop_gradient(target)) ** 2)
    return loss, {"q_loss": loss, "q_mean": q.mean()}


def td_target(
    critic: MLP,
    target_params,
    batch: Batch,
    agent: int,
    next_actions: Sequence[jax.Array],
    gamma: float,
    eps: Sequence[float] | None,
) -> jax.Array:
    """``y = r_i + gamma (1 - terminated) Q'_i(o', a')`` ``[B]``, with the other
    agents' next actions made worst-case when ``eps`` is given (M3DDPG)."""

    def q_fn(actions):
        return critic_value(
            critic, target_params, batch.next_obs, actions, batch.next_extras[agent]
        )

    if eps is not None:
        next_actions = adversarial_actions(q_fn, next_actions, agent, eps)
    not_terminated = 1.0 - batch.terminated.astype(jnp.float32)
    return batch.rewards[agent] + gamma * not_terminated * q_fn(tuple(next_actions))


def actor_loss(
    actor: MLP,
    actor_params,
    critic: MLP,
    critic_params,
    batch: Batch,
    agent: int,
    key: jax.Array | None,
    discrete: bool,
    eps: Sequence[float] | None,
) -> tuple[jax.Array, dict]:
    """Deterministic policy gradient objective ``-Q_i(o, a_i = mu_i(o_i), a_-i)``
    with the other agents' replayed actions (worst-case ones with ``eps``), plus
    ``ACTOR_REG`` times the mean squared actor output. Returns ``(loss, stats)``."""
    out = actor.apply(
        actor_params,
        jnp.concatenate([batch.obs[agent], batch.extras[agent]], -1),
    )
    actions = list(batch.actions)
    actions[agent] = policy_action(out, key, discrete)

    def q_fn(actions):
        return critic_value(
            critic, critic_params, batch.obs, actions, batch.extras[agent]
        )

    if eps is not None:
        actions = adversarial_actions(q_fn, actions, agent, eps)
    q = q_fn(tuple(actions))
    loss = -jnp.mean(q) + ACTOR_REG * jnp.mean(out**2)
    return loss, {"actor_loss": loss}
