"""The networks of mopa's team learners: trunks, Q heads, actor and critic.

Every module maps one agent's input vector (the last axis) to its outputs and works
on any leading batch axes, so the same parameters serve every agent of a team
(weights shared inside a team, one network per team). Nothing here knows about
training: checkpoints rebuild these modules from a small spec and nothing else.
"""

from __future__ import annotations

from collections.abc import Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

ACTIVATIONS = {"relu": nn.relu, "tanh": nn.tanh, "gelu": nn.gelu}


def _dense(features: int, scale: float | None) -> nn.Dense:
    """A dense layer; variance-scaling init with gain ``scale`` when given (small
    output layers for policies, He-style hidden layers), Flax's default (LeCun
    normal) otherwise.

    Orthogonal initialisation, common for PPO, is avoided on purpose: it runs a
    LAPACK QR, and a batched QR inside a jitted, vmapped function (seeds vmapped)
    deadlocks jaxlib 0.10's CPU runtime when its thread pool has two threads.
    """
    if scale is None:
        return nn.Dense(features)
    return nn.Dense(
        features,
        kernel_init=nn.initializers.variance_scaling(
            scale**2, "fan_in", "truncated_normal"
        ),
        bias_init=nn.initializers.zeros,
    )


class Trunk(nn.Module):
    """``Dense(h) -> activation`` for each ``h`` in ``hidden``.

    Attributes:
        hidden: layer widths, e.g. ``(128, 128)``.
        activation: ``"relu"``, ``"tanh"`` or ``"gelu"``.
        scaled_init: variance-scaling init with gain sqrt(2) (on-policy practice).
    """

    hidden: Sequence[int] = (128, 128)
    activation: str = "relu"
    scaled_init: bool = False

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:  # [..., D] -> [..., hidden[-1]]
        act = ACTIVATIONS[self.activation]
        for width in self.hidden:
            x = act(_dense(width, np.sqrt(2.0) if self.scaled_init else None)(x))
        return x


class QNetwork(nn.Module):
    """Q-values on an MLP trunk, with an optional opponent-action head.

    The opponent head (OA-IQL) is ``Dense(num_opponents x opponent_actions)`` on the
    shared trunk: logits of each opponent's next action given this agent's
    observation. Greedy play ignores it; planners reuse it as a one-step opponent
    model ``p(opponent actions | obs)``.

    Returns:
        ``(q [..., num_actions], opp_logits [..., num_opponents, opponent_actions])``;
        ``opp_logits`` has a zero-sized opponent axis when there is no head.
    """

    num_actions: int
    hidden: Sequence[int] = (128, 128)
    activation: str = "relu"
    num_opponents: int = 0
    opponent_actions: int = 0

    @nn.compact
    def __call__(self, x: jax.Array) -> tuple[jax.Array, jax.Array]:
        features = Trunk(self.hidden, self.activation)(x)
        return _q_and_opponent_heads(self, features)


class RecurrentQNetwork(nn.Module):
    """Q-values on ``Dense(hidden[0]) -> activation -> GRU(hidden[-1])`` (Exp 1).

    One step per call: ``(carry, x, reset) -> (carry, (q, opp_logits))``. ``reset``
    (bool ``[...]``) zeroes the carry before the step, at episode starts.
    """

    num_actions: int
    hidden: Sequence[int] = (128, 128)
    activation: str = "relu"
    num_opponents: int = 0
    opponent_actions: int = 0

    @nn.compact
    def __call__(
        self, carry: jax.Array, x: jax.Array, reset: jax.Array
    ) -> tuple[jax.Array, tuple[jax.Array, jax.Array]]:
        x = ACTIVATIONS[self.activation](nn.Dense(self.hidden[0])(x))
        carry = jnp.where(reset[..., None], jnp.zeros_like(carry), carry)
        carry, features = nn.GRUCell(self.hidden[-1])(carry, x)
        return carry, _q_and_opponent_heads(self, features)


def initial_carry(batch_shape: tuple[int, ...], hidden: Sequence[int]) -> jax.Array:
    """Zero GRU carry ``[*batch_shape, hidden[-1]]`` for :class:`RecurrentQNetwork`."""
    return jnp.zeros((*batch_shape, hidden[-1]), jnp.float32)


def _q_and_opponent_heads(
    module: QNetwork | RecurrentQNetwork, features: jax.Array
) -> tuple[jax.Array, jax.Array]:
    q = nn.Dense(module.num_actions, name="q_head")(features)
    shape = (*features.shape[:-1], module.num_opponents, module.opponent_actions)
    if module.num_opponents == 0:
        return q, jnp.zeros(shape, features.dtype)
    flat = nn.Dense(module.num_opponents * module.opponent_actions, name="opp_head")(
        features
    )
    return q, flat.reshape(shape)


class Actor(nn.Module):
    """Categorical policy: logits ``[..., num_actions]`` on an MLP trunk."""

    num_actions: int
    hidden: Sequence[int] = (128, 128)
    activation: str = "tanh"

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        features = Trunk(self.hidden, self.activation, scaled_init=True)(x)
        return _dense(self.num_actions, 0.01)(features)


class Critic(nn.Module):
    """State values ``[..., num_values]`` on an MLP trunk (several values from one
    input serve every agent of a team, as a centralised critic does)."""

    hidden: Sequence[int] = (128, 128)
    activation: str = "tanh"
    num_values: int = 1

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        features = Trunk(self.hidden, self.activation, scaled_init=True)(x)
        return _dense(self.num_values, 1.0)(features)
