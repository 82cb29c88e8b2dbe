"""The iterated prisoner's dilemma: the sampled game ``ipd``, its exact discounted
value, and the scripted opponents ALLD, ALLC and TFT.

Actions are 0 = defect and 1 = cooperate. Payoffs come from a contribution factor
``cf`` (``1 < cf < 2`` is a social dilemma): each player's contribution is pooled,
multiplied by ``cf`` and shared, and contributing costs 1. So both cooperating pay
``cf - 1`` each, both defecting pay 0, and a defector facing a cooperator gets
``cf / 2`` while the cooperator gets ``cf / 2 - 1`` (at ``cf = 1.33``: CC 0.33,
DD 0, DC 0.665, CD -0.335).

Joint states are indexed agent 1 first, as in the POLA paper: 0 = DD, 1 = DC
(agent 1 defected, agent 2 cooperated), 2 = CD, 3 = CC, and 4 = the start. A
memory-one policy is a ``[5]`` vector of cooperation probabilities over these
states, seen by both agents in the same order (no egocentric swap); the mirror
image of a policy for the other seat is :data:`MIRROR_STATES` applied to it.

The sampled game ``ipd`` observes the same 6-vector for both players: the one-hot
of agent 1's last action over (D, C, start) followed by agent 2's.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from mopa.core.checks import bounded, check_bounds
from mopa.envs.base import Env, StepOutput, TeamArrays
from mopa.envs.spaces import Box, Discrete

DEFECT, COOPERATE, START = 0, 1, 2
"""Action codes, and the code of the start in the observation."""

NUM_STATES = 5
"""Memory-one states: DD, DC, CD, CC (agent 1's action first) and the start."""

MIRROR_STATES = np.array([0, 2, 1, 3, 4])
"""Permutation of the 5 states that swaps the two agents' seats (DC <-> CD)."""

OTHER_DEFECTED = (np.array([0, 2]), np.array([0, 1]))
"""Per agent, the states in which the other agent defected last."""


def payoffs(contrib_factor: jax.Array) -> jax.Array:
    """``[2, 4]`` reward of each agent in the joint states DD, DC, CD, CC."""
    cf = jnp.asarray(contrib_factor, jnp.float32)
    a1 = jnp.array([0.0, 0.0, 1.0, 1.0])
    a2 = jnp.array([0.0, 1.0, 0.0, 1.0])
    pool = cf / 2 * (a1 + a2)
    return jnp.stack([pool - a1, pool - a2])


def step_rewards(
    action_1: jax.Array, action_2: jax.Array, contrib_factor: jax.Array
) -> jax.Array:
    """``[2]`` rewards of one round with actions ``action_1``, ``action_2``."""
    a = jnp.stack([action_1, action_2]).astype(jnp.float32)
    return contrib_factor / 2 * a.sum() - a


def state_distribution(
    coop_1: jax.Array, coop_2: jax.Array, gamma: float, horizon: int | None = None
) -> jax.Array:
    """Discounted visitation ``p0 sum_t (gamma P)^t`` of the joint states DD..CC.

    Args:
        coop_1: ``[5]`` agent 1's probability of cooperating in each state.
        coop_2: ``[5]`` agent 2's, indexed the same way (agent 1's action first).
        gamma: discount factor.
        horizon: ``None`` for the infinite sum ``p0 (I - gamma P)^-1``, else the
            number of rounds ``T`` of a finite game (``sum_{t < T}``).

    Returns:
        ``[4]`` discounted expected number of visits of DD, DC, CD, CC.
    """

    def joint(p1: jax.Array, p2: jax.Array) -> jax.Array:
        # [..., 4]: probability of DD, DC, CD, CC for cooperation probs p1, p2.
        q1, q2 = 1 - p1, 1 - p2
        return jnp.stack([q1 * q2, q1 * p2, p1 * q2, p1 * p2], -1)

    p0 = joint(coop_1[4], coop_2[4])
    transitions = joint(coop_1[:4], coop_2[:4])  # [4 from, 4 to]
    if horizon is None:
        return jnp.linalg.solve((jnp.eye(4) - gamma * transitions).T, p0)

    def body(dist, _):
        return gamma * dist @ transitions, dist

    _, dists = jax.lax.scan(body, p0, None, length=horizon)
    return dists.sum(0)


def exact_values(
    coop_1: jax.Array,
    coop_2: jax.Array,
    contrib_factor: jax.Array,
    gamma: float = 0.96,
    horizon: int | None = None,
) -> jax.Array:
    """Exact discounted values ``V = p0 (I - gamma P)^-1 r`` of both agents.

    Args:
        coop_1: ``[5]`` agent 1's cooperation probability in DD, DC, CD, CC, start.
        coop_2: ``[5]`` agent 2's, same state order.
        contrib_factor: the contribution factor ``cf``.
        gamma: discount factor (0.96 in the paper).
        horizon: ``None`` for the infinite game, else a ``T``-round game.

    Returns:
        ``[2]`` discounted return of agent 1 and agent 2.
    """
    visits = state_distribution(coop_1, coop_2, gamma, horizon)
    return payoffs(contrib_factor) @ visits


# -- scripted opponents ------------------------------------------------------------
SCRIPTED = ("alld", "allc", "tft")
"""Names of the scripted IPD opponents."""


def scripted_action(name: str, obs: jax.Array, agent: int) -> jax.Array:
    """Action of a scripted IPD player in seat ``agent`` (0 or 1) seeing ``obs``.

    ALLD always defects, ALLC always cooperates, TFT repeats the other agent's last
    action and cooperates at the start.

    Args:
        name: one of :data:`SCRIPTED`.
        obs: ``[6]`` the shared observation.
        agent: the seat played (static).

    Returns:
        ``[]`` int32 action.
    """
    if name == "alld":
        return jnp.int32(DEFECT)
    if name == "allc":
        return jnp.int32(COOPERATE)
    other = obs[3 * (1 - agent) : 3 * (1 - agent) + 3]
    return jnp.where(other[DEFECT] > 0.5, DEFECT, COOPERATE).astype(jnp.int32)


# -- the sampled game --------------------------------------------------------------
@struct.dataclass
class IPDParams:
    """Numbers of the sampled IPD; all may be vmapped."""

    contrib_factor: float = bounded(
        1.33, low=1.0, high=2.0, open_low=True, open_high=True
    )
    """Contribution factor ``cf``: CC pays ``cf - 1``, a lone defector ``cf / 2``
    (a social dilemma only for ``1 < cf < 2``)."""
    max_steps: int = bounded(50, low=1)
    """Rounds per episode; ``truncated`` is true on the last."""


@struct.dataclass
class IPDState:
    """State of one IPD game."""

    last_actions: jax.Array  # [2] int32: each agent's last action, START at reset
    step: jax.Array  # [] int32: rounds played so far


@dataclasses.dataclass(frozen=True)
class IPDEnv(Env):
    """The sampled iterated prisoner's dilemma with full history: two teams of one
    player each; both observe the shared ``[6]`` one-hot of the last joint action."""

    name: str = "ipd"
    base_params: IPDParams = dataclasses.field(
        default_factory=IPDParams, compare=False, hash=False
    )

    team_names = ("player_1", "player_2")
    team_sizes = (1, 1)

    def observation_space(self, team: int) -> Box:
        return Box(0.0, 1.0, (6,))

    def action_space(self, team: int) -> Discrete:
        return Discrete(2)

    @property
    def default_params(self) -> IPDParams:
        return jax.tree.map(jnp.asarray, self.base_params)

    def validate_params(self, params: IPDParams) -> None:
        """Raise :class:`InvalidParameterError` naming the first invalid field."""
        check_bounds(self.name, params, "parameter ")

    def observe(self, state: IPDState, params: IPDParams) -> TeamArrays:
        obs = jax.nn.one_hot(state.last_actions, 3, dtype=jnp.float32).reshape(6)
        return (obs[None], obs[None])

    def _reset(self, key: jax.Array, params: IPDParams) -> tuple[TeamArrays, Any]:
        state = IPDState(
            last_actions=jnp.full((2,), START, jnp.int32),
            step=jnp.zeros((), jnp.int32),
        )
        return self.observe(state, params), state

    def _step(
        self, key: jax.Array, state: IPDState, actions: TeamArrays, params: IPDParams
    ) -> StepOutput:
        a1, a2 = actions[0][0].astype(jnp.int32), actions[1][0].astype(jnp.int32)
        rewards = step_rewards(a1, a2, params.contrib_factor)
        step = state.step + 1
        next_state = IPDState(last_actions=jnp.stack([a1, a2]), step=step)
        truncated = step >= params.max_steps
        info = {"cooperated": jnp.stack([a1, a2]) == COOPERATE}
        return (
            self.observe(next_state, params),
            next_state,
            (rewards[:1], rewards[1:]),
            jnp.zeros((), bool),
            truncated,
            info,
        )


def make_ipd(name: str, **overrides: Any) -> tuple[IPDEnv, IPDParams]:
    """Build the registered game ``ipd`` with parameter ``overrides``
    (``contrib_factor``, ``max_steps``)."""
    from mopa.envs.registry import split_overrides

    _, params = split_overrides(name, IPDEnv, IPDParams, overrides)
    env = IPDEnv(name=name, base_params=IPDParams(**params))
    params = env.default_params
    env.validate_params(params)
    return env, params
