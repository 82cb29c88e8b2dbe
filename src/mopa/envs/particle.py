"""Two-team competitive particle games around a goal landmark: ``push`` and
``adversary``.

Both games are those of JaxMARL's ``MPE_simple_push_v3`` and
``MPE_simple_adversary_v3`` (the multi-agent particle environments of MADDPG),
checked step by step against them in ``tests/envs/test_particle_parity.py``, on
the pursuit games' physics (:func:`mopa.envs.pursuit.integrate_bodies`). Team 0 is
the adversaries, team 1 the good agents. At reset one landmark is drawn as the
goal; the good agents know which, the adversaries do not.

* ``push``: good agents are paid for being near the goal; each adversary is paid
  for keeping itself nearer the goal than the good agent closest to it. Agents
  collide with each other (radius 0.05), never with landmarks.
* ``adversary``: the adversary is paid for being near the goal; the good agents
  are paid together for one of them being near the goal and for the adversaries
  being far from it (the adversary must guess the goal from the good agents'
  moves). Nothing collides.

Actions: continuous by default (``continuous_actions=True``, the action type of
MADDPG's and LeMOL's particle-game experiments), a ``Box(0, 1, (5,))`` vector ``a``
giving the force ``accel * (a[2] - a[1], a[4] - a[3])`` (``a[0]`` is unused;
values outside ``[0, 1]`` are used as given, as in MPE); or, with
``continuous_actions=False``, ``Discrete(5)`` (0 no-op, 1 -x, 2 +x, 3 -y, 4 +y).
Force is ``accel`` (5) times the direction; there is no speed limit.

Observations (``N`` agents, ``L`` landmarks, the other agents in index order):

* ``push`` adversary: own velocity (2), landmarks relative (2L), other agents
  relative (2(N-1)); good agent: own velocity (2), goal relative (2), its colour
  (3: 0.25 everywhere but 0.75 in channel ``goal + 1``), landmarks relative (2L),
  landmark colours (3L: 0.1 everywhere but 0.9 in channel ``i + 1``), other agents
  relative (2(N-1)). The colour inputs are MPE's, kept for parity: they tell the
  good agent which landmark is the goal a second time.
* ``adversary`` adversary: landmarks relative (2L), other agents relative
  (2(N-1)); good agent: goal relative (2), then the same. No velocities.

Deliberate differences from JaxMARL, as for ``tag``: an episode is ``max_steps``
= 25 transitions (JaxMARL's ``done`` comes on the 26th), and ``step`` never
resets.
"""

from __future__ import annotations

import abc
import dataclasses
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from mopa.core.checks import bounded, check_bounds
from mopa.envs.base import Env, StepOutput, TeamArrays
from mopa.envs.pursuit import (
    NUM_ACTIONS,
    PhysicsParams,
    action_directions,
    integrate_bodies,
    others_relative,
    per_agent,
)
from mopa.envs.spaces import Box, Discrete
from mopa.errors import InvalidParameterError

ADVERSARY, GOOD = 0, 1
"""Team indices of the particle games."""


@struct.dataclass
class ParticleParams(PhysicsParams):
    """Every number of a particle game (the physics numbers come from
    :class:`PhysicsParams`). Scalars; all may be vmapped."""

    adversary_radius: float = bounded(0.05, low=0.0)
    """Body radius of an adversary (it matters only where agents collide)."""
    good_radius: float = bounded(0.05, low=0.0)
    """Body radius of a good agent."""
    adversary_accel: float = bounded(5.0, low=0.0)
    """Force of an adversary's move action."""
    good_accel: float = bounded(5.0, low=0.0)
    """Force of a good agent's move action."""
    max_steps: int = bounded(25, low=1)
    """Transitions per episode; ``truncated`` is true on the last."""
    spawn_range: float = bounded(1.0, low=0.0)
    """Agents and landmarks start uniform in ``[-spawn_range, spawn_range]^2``."""


@struct.dataclass
class ParticleState:
    """State of one particle game. Agents: adversaries first, then good agents."""

    pos: jax.Array  # [N, 2]
    vel: jax.Array  # [N, 2]
    landmark_pos: jax.Array  # [L, 2]
    goal: jax.Array  # [] int32: index of the goal landmark
    step: jax.Array  # [] int32: transitions taken so far


@dataclasses.dataclass(frozen=True)
class ParticleEnv(Env):
    """Shared structure, reset, step and physics of the particle games.

    Subclasses set ``collide`` and implement ``observe``, ``_rewards`` and the
    observation sizes.
    """

    name: str = "push"
    num_adversaries: int = bounded(1, low=1)
    num_good: int = bounded(1, low=1)
    num_landmarks: int = bounded(2, low=1)
    continuous_actions: bool = True
    """``Box(0, 1, (5,))`` force vectors (default) or ``Discrete(5)`` moves."""
    base_params: ParticleParams = dataclasses.field(
        default_factory=ParticleParams, compare=False, hash=False
    )

    team_names = ("adversary", "good")
    collide = False
    """Whether agents push each other apart (landmarks never collide)."""

    def __post_init__(self):
        check_bounds(self.name, self)

    # -- structure ---------------------------------------------------------------
    @property
    def team_sizes(self) -> tuple[int, int]:
        return (self.num_adversaries, self.num_good)

    @property
    @abc.abstractmethod
    def obs_sizes(self) -> tuple[int, int]:
        """Observation size of an adversary and of a good agent."""

    @property
    def global_state_size(self) -> int:
        N, L = self.num_agents, self.num_landmarks
        return 4 * N + 3 * L + 1

    def observation_space(self, team: int) -> Box:
        return Box(-np.inf, np.inf, (self.obs_sizes[team],))

    def action_space(self, team: int) -> Discrete | Box:
        if self.continuous_actions:
            return Box(0.0, 1.0, (NUM_ACTIONS,))
        return Discrete(NUM_ACTIONS)

    @property
    def default_params(self) -> ParticleParams:
        return jax.tree.map(jnp.asarray, self.base_params)

    def validate_params(self, params: ParticleParams) -> None:
        """Raise :class:`InvalidParameterError` naming the first invalid field."""
        check_bounds(self.name, params, "parameter ")

    def _agent_vector(self, adversary_value, good_value) -> jax.Array:
        """``[N]`` per-agent values: adversaries then good agents."""
        return per_agent((adversary_value, good_value), self.team_sizes)

    # -- dynamics ----------------------------------------------------------------
    def _reset(
        self, key: jax.Array, params: ParticleParams
    ) -> tuple[TeamArrays, ParticleState]:
        key_agents, key_landmarks, key_goal = jax.random.split(key, 3)
        N, L = self.num_agents, self.num_landmarks
        spread = params.spawn_range
        state = ParticleState(
            pos=jax.random.uniform(key_agents, (N, 2), minval=-spread, maxval=spread),
            vel=jnp.zeros((N, 2)),
            landmark_pos=jax.random.uniform(
                key_landmarks, (L, 2), minval=-spread, maxval=spread
            ),
            goal=jax.random.randint(key_goal, (), 0, L),
            step=jnp.zeros((), jnp.int32),
        )
        return self.observe(state, params), state

    def action_force(self, actions: TeamArrays, params: ParticleParams) -> jax.Array:
        """``[N, 2]`` force of every agent's action (adversaries first)."""
        accel = self._agent_vector(params.adversary_accel, params.good_accel)
        if self.continuous_actions:
            a = jnp.concatenate([x.astype(jnp.float32) for x in actions])  # [N, 5]
            direction = jnp.stack([a[:, 2] - a[:, 1], a[:, 4] - a[:, 3]], -1)
        else:
            direction = action_directions(
                jnp.concatenate([x.astype(jnp.int32) for x in actions])
            )
        return direction * accel[:, None]

    def _step(
        self,
        key: jax.Array,
        state: ParticleState,
        actions: TeamArrays,
        params: ParticleParams,
    ) -> StepOutput:
        pos, vel = integrate_bodies(
            state.pos,
            state.vel,
            self.action_force(actions, params),
            self._agent_vector(params.adversary_radius, params.good_radius),
            None,
            jnp.zeros((0, 2)),
            jnp.zeros((0,)),
            params,
            collide=self.collide,
        )
        step = state.step + 1
        state = state.replace(pos=pos, vel=vel, step=step)
        goal_dist = self.goal_distances(state)
        A = self.num_adversaries
        info = {
            "adversary_goal_dist": jnp.min(goal_dist[:A]),
            "good_goal_dist": jnp.min(goal_dist[A:]),
        }
        return (
            self.observe(state, params),
            state,
            self._rewards(goal_dist),
            jnp.zeros((), bool),
            step >= params.max_steps,
            info,
        )

    def goal_distances(self, state: ParticleState) -> jax.Array:
        """``[N]`` distance of every agent to the goal landmark."""
        gap = state.pos - state.landmark_pos[state.goal]
        return jnp.sqrt(jnp.sum(gap * gap, -1))

    @abc.abstractmethod
    def _rewards(self, goal_dist: jax.Array) -> TeamArrays:
        """``(adversary [A], good [G])`` rewards from each agent's goal distance."""

    def _relative(self, state: ParticleState) -> tuple[jax.Array, jax.Array]:
        """Landmarks ``[N, 2L]`` and other agents ``[N, 2(N-1)]`` (index order)
        relative to each agent."""
        N = self.num_agents
        others = others_relative(state.pos)  # [N, N-1, 2]
        landmarks = state.landmark_pos[None] - state.pos[:, None]  # [N, L, 2]
        return landmarks.reshape(N, -1), others.reshape(N, -1)

    def _goal_relative(self, state: ParticleState) -> jax.Array:
        """``[G, 2]`` goal position relative to each good agent."""
        return state.landmark_pos[state.goal] - state.pos[self.num_adversaries :]

    def global_state(self, state: ParticleState, params: ParticleParams) -> jax.Array:
        """``[global_state_size]`` vector for centralised critics: every agent's
        position and velocity, the landmarks, the goal one-hot and the elapsed
        fraction of the episode."""
        return jnp.concatenate(
            [
                state.pos.reshape(-1),
                state.vel.reshape(-1),
                state.landmark_pos.reshape(-1),
                jax.nn.one_hot(state.goal, self.num_landmarks),
                (state.step / params.max_steps)[None].astype(jnp.float32),
            ]
        )


@dataclasses.dataclass(frozen=True)
class PushEnv(ParticleEnv):
    """``push``: keep the adversaries away from a goal only the good agents know."""

    name: str = "push"
    collide = True

    def __post_init__(self):
        super().__post_init__()
        if self.num_landmarks != 2:
            raise InvalidParameterError(
                f"{self.name}: num_landmarks must be 2 (MPE's colour inputs encode "
                f"two landmarks), got {self.num_landmarks}"
            )

    @property
    def obs_sizes(self) -> tuple[int, int]:
        N, L = self.num_agents, self.num_landmarks
        return (2 + 2 * L + 2 * (N - 1), 7 + 5 * L + 2 * (N - 1))

    def _rewards(self, goal_dist: jax.Array) -> TeamArrays:
        A = self.num_adversaries
        closest_good = jnp.min(goal_dist[A:])
        return closest_good - goal_dist[:A], -goal_dist[A:]

    def observe(self, state: ParticleState, params: ParticleParams) -> TeamArrays:
        """``(adversary_obs [A, Da], good_obs [G, Dg])``, laid out as the module
        docstring says."""
        A, G, L = self.num_adversaries, self.num_good, self.num_landmarks
        landmarks, others = self._relative(state)
        own_colour = jnp.where(jnp.arange(3) == state.goal + 1, 0.75, 0.25)
        landmark_colours = np.where(np.eye(L, 3, 1), 0.9, 0.1).astype(np.float32)
        good = jnp.concatenate(
            [
                state.vel[A:],
                self._goal_relative(state),
                jnp.broadcast_to(own_colour, (G, 3)),
                landmarks[A:],
                jnp.broadcast_to(landmark_colours.reshape(-1), (G, 3 * L)),
                others[A:],
            ],
            -1,
        )
        adversary = jnp.concatenate([state.vel[:A], landmarks[:A], others[:A]], -1)
        return adversary, good


@dataclasses.dataclass(frozen=True)
class AdversaryEnv(ParticleEnv):
    """``adversary``: the adversary must find a goal only the good agents know."""

    name: str = "adversary"
    num_good: int = bounded(2, low=1)

    @property
    def obs_sizes(self) -> tuple[int, int]:
        N, L = self.num_agents, self.num_landmarks
        return (2 * L + 2 * (N - 1), 2 + 2 * L + 2 * (N - 1))

    def _rewards(self, goal_dist: jax.Array) -> TeamArrays:
        A = self.num_adversaries
        good = jnp.sum(goal_dist[:A]) - jnp.min(goal_dist[A:])
        return -goal_dist[:A], jnp.full((self.num_good,), good)

    def observe(self, state: ParticleState, params: ParticleParams) -> TeamArrays:
        """``(adversary_obs [A, Da], good_obs [G, Dg])``, laid out as the module
        docstring says."""
        A = self.num_adversaries
        landmarks, others = self._relative(state)
        good = jnp.concatenate(
            [self._goal_relative(state), landmarks[A:], others[A:]], -1
        )
        return jnp.concatenate([landmarks[:A], others[:A]], -1), good


GAMES: dict[str, tuple[type[ParticleEnv], dict[str, Any]]] = {
    "push": (PushEnv, {}),
    "adversary": (AdversaryEnv, {"adversary_radius": 0.15, "good_radius": 0.15}),
}
"""Registered particle games: class and parameter defaults (MPE's body radii)."""


def make_particle(name: str, **overrides: Any) -> tuple[ParticleEnv, ParticleParams]:
    """Build the registered particle game ``name`` with ``overrides``.

    Overrides may name structure fields (``num_adversaries``, ``num_good``,
    ``num_landmarks``, ``continuous_actions``) or :class:`ParticleParams` fields.

    Returns:
        ``(env, params)``; ``env.default_params`` equals ``params``.
    """
    from mopa.envs.registry import split_overrides

    cls, param_defaults = GAMES[name]
    structure, params = split_overrides(
        name, cls, ParticleParams, {**param_defaults, **overrides}
    )
    env = cls(name=name, **structure, base_params=ParticleParams(**params))
    params = env.default_params
    env.validate_params(params)
    return env, params
