"""The pursuit game family: predators chase prey around obstacles (``tag`` and its
research variants ``tag_static``, ``tag_resources``, ``tag_balanced``,
``tag_intent``).

The physics, observations and rewards are those of JaxMARL's ``MPE_simple_tag_v3``
(see ``tests/envs/test_parity.py``), written for speed and with every number in
:class:`PursuitParams`. Team 0 is the predators, team 1 the prey. Deliberate
differences from JaxMARL:

* an episode is ``max_steps`` = 25 transitions (JaxMARL's ``done`` check before the
  step-counter increment gives 26); ``truncated`` is true on the 25th step;
* with several prey, each prey is penalised for its own captures, and predators see
  every prey's velocity (JaxMARL indexes a single prey and shows only the last
  agent's velocity); the declared observation spaces follow the real sizes;
* ``step`` never resets: the observation it returns on the last step is the true
  final observation.

Variant mechanics (all knobs in :class:`PursuitParams`):

* **static obstacles** (``fixed_obstacles``): obstacles at ``obstacle_pos`` at every
  reset instead of uniform in ``[-1, 1]^2``.
* **directional shaping** (``shape_coef``): each step the prey gets
  ``shape_coef * shape_dir * sign(v_prev x v_new) * 1[r_in <= |v_new| <= r_out]``
  where ``v_prev``/``v_new`` are the prey's positions before/after the step relative
  to the obstacle nearest its position before the step (``x`` is the 2-D cross
  product; positive is counter-clockwise).
* **resources** (``num_resources`` > 0): collectables seen by the prey only. A prey
  within ``collect_radius`` of an uncollected resource collects it for
  ``collect_reward``; it stays collected until the episode ends. Placement 0 is a
  ring of radius ``resource_ring_radius`` at 0, 90, 180 and 270 degrees (a diamond),
  1 the corners ``(+-resource_corner, +-resource_corner)``, 2 a fair coin flip
  between the two at each reset. The prey's observation gains, per resource, its
  relative position and its collected flag.
* **hidden intent** (``num_intents`` = 4): at reset the prey is secretly assigned a
  corner ``INTENT_CORNERS[k] * intent_corner``. Each step its distance to that corner
  is below ``intent_radius`` it gets ``intent_reward`` (on top of its usual reward).
  The prey's observation ends with the intent one-hot. Predators never see the
  intent unless ``predator_intent_obs`` is set, in which case their observation
  ends with a belief vector ``alpha * onehot + (1 - alpha) / K``, ``alpha`` drawn
  uniformly in ``[belief_alpha_low, belief_alpha_high]`` at reset (1, 1 gives the
  oracle's one-hot). The intent is in ``state.intent`` and ``info["intent"]``; an
  evaluator can put any belief into ``state.belief`` and call :meth:`observe`.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from mopa.core.checks import Bounds, bounded, check_bounds
from mopa.envs.base import Env, StepOutput, TeamArrays
from mopa.envs.spaces import Box, Discrete
from mopa.errors import InvalidParameterError

PREDATOR, PREY = 0, 1
"""Team indices of the pursuit games."""

NUM_ACTIONS = 5
ACTION_DIRECTIONS = np.array(
    [[0.0, 0.0], [-1.0, 0.0], [1.0, 0.0], [0.0, -1.0], [0.0, 1.0]], np.float32
)
"""Unit force direction of each action: 0 no-op, 1 -x, 2 +x, 3 -y, 4 +y."""

INTENT_CORNERS = np.array(
    [[1.0, 1.0], [-1.0, 1.0], [-1.0, -1.0], [1.0, -1.0]], np.float32
)
"""Corner of each intent, in units of ``intent_corner``: quadrants I, II, III, IV."""

PLACEMENT_RING, PLACEMENT_CORNERS, PLACEMENT_RANDOM = 0, 1, 2
PLACEMENTS = {
    "circle": PLACEMENT_RING,
    "corners": PLACEMENT_CORNERS,
    "random": PLACEMENT_RANDOM,
}


EDGE_KNOTS = (0.3, 0.6, 0.9)
"""Distances from the centre on an axis (a third, two thirds and all of the way to
the edge, 0.9, where the prey's boundary penalty starts) at which
:meth:`PursuitEnv.prey_threat_features`'s edge ramps start."""


def default_obstacle_positions(num_obstacles: int) -> np.ndarray:
    """Pinned obstacle positions: ``num_obstacles`` points on a circle of radius
    ``sqrt(0.5)`` starting at 45 degrees, i.e. (0.5, 0.5) and (-0.5, -0.5) for two."""
    angles = np.pi / 4 + 2 * np.pi * np.arange(num_obstacles) / max(num_obstacles, 1)
    return (np.sqrt(0.5) * np.stack([np.cos(angles), np.sin(angles)], -1)).astype(
        np.float32
    )


@struct.dataclass
class PhysicsParams:
    """The numbers of MPE's physics (:func:`integrate_bodies`), shared by the
    particle games' parameters."""

    dt: float = bounded(0.1, low=0.0, open_low=True)
    """Integration time step."""
    damping: float = bounded(0.25, low=0.0, high=1.0)
    """Fraction of velocity lost each step."""
    contact_force: float = bounded(100.0, low=0.0)
    """Stiffness of the soft contact between overlapping bodies."""
    contact_margin: float = bounded(1e-3, low=0.0, open_low=True)
    """Softness of the contact (softplus scale of the penetration)."""


@struct.dataclass
class PursuitParams(PhysicsParams):
    """Every number of a pursuit game. Scalars unless noted; all may be vmapped."""

    predator_radius: float = bounded(0.075, low=0.0)
    """Body radius of a predator."""
    prey_radius: float = bounded(0.05, low=0.0)
    """Body radius of a prey."""
    obstacle_radius: float = bounded(0.2, low=0.0)
    """Body radius of an obstacle."""
    predator_accel: float = bounded(3.0, low=0.0)
    """Force of a predator's move action."""
    prey_accel: float = bounded(4.0, low=0.0)
    """Force of a prey's move action."""
    predator_max_speed: float = bounded(1.0, low=0.0)
    """Speed limit of a predator."""
    prey_max_speed: float = bounded(1.3, low=0.0)
    """Speed limit of a prey."""
    capture_reward: float = bounded(10.0, low=0.0)
    """Paid to every predator (and taken from the prey) per predator-prey overlap."""
    boundary_penalty: float = bounded(1.0, low=0.0)
    """Scale of the prey's penalty for leaving the [-0.9, 0.9]^2 arena (1 = MPE)."""
    max_steps: int = bounded(25, low=1)
    """Transitions per episode; ``truncated`` is true on the last."""
    spawn_range: float = bounded(1.0, low=0.0)
    """Agents start uniform in ``[-spawn_range, spawn_range]^2``."""
    obstacle_spawn_range: float = bounded(1.0, low=0.0)
    """Random obstacles start uniform in ``[-obstacle_spawn_range, ...]^2``."""
    fixed_obstacles: bool = False
    """Place obstacles at ``obstacle_pos`` at every reset instead of at random."""
    obstacle_pos: jax.Array = bounded(None)
    """``[num_obstacles, 2]`` pinned obstacle positions."""
    shape_coef: float = bounded(0.0, low=0.0)
    """Scale of the prey's directional bonus around obstacles (0 = off)."""
    shape_r_in: float = bounded(0.25, low=0.0)
    """Inner radius of the annulus where the directional bonus is paid."""
    shape_r_out: float = bounded(0.6, low=0.0)
    """Outer radius of the annulus where the directional bonus is paid."""
    shape_dir: float = bounded(0.0, choices=(-1.0, 0.0, 1.0))
    """+1 rewards counter-clockwise motion, -1 clockwise, 0 none."""
    collect_reward: float = bounded(5.0, low=0.0)
    """Paid to a prey per resource it collects."""
    collect_radius: float = bounded(0.1, low=0.0)
    """A prey this close to a resource collects it."""
    resource_placement: int = bounded(PLACEMENT_RANDOM, choices=(0, 1, 2))
    """0 ring (circle), 1 corners, 2 a fair coin flip between them at each reset."""
    resource_ring_radius: float = bounded(0.6, low=0.0)
    """Radius of the ring placement."""
    resource_corner: float = bounded(0.8, low=0.0)
    """Offset of the corner placement: resources at ``(+-c, +-c)``."""
    intent_reward: float = bounded(4.0, low=0.0)
    """Paid to the prey each step it is within ``intent_radius`` of its corner."""
    intent_radius: float = bounded(0.35, low=0.0)
    """Radius around the intent corner where the prey is paid."""
    intent_corner: float = bounded(0.8, low=0.0)
    """Offset of the intent corners ``(+-c, +-c)``."""
    belief_alpha_low: float = bounded(1.0, low=0.0, high=1.0)
    """Lower end of the belief sharpness drawn at reset (predator intent input)."""
    belief_alpha_high: float = bounded(1.0, low=0.0, high=1.0)
    """Upper end of the belief sharpness drawn at reset (predator intent input)."""


@struct.dataclass
class PursuitState:
    """State of one pursuit game. Agents: predators first, then prey."""

    pos: jax.Array  # [N, 2]
    vel: jax.Array  # [N, 2]
    obstacle_pos: jax.Array  # [L, 2]
    resource_pos: jax.Array  # [R, 2]
    collected: jax.Array  # [R] bool
    placement: (
        jax.Array
    )  # [] int32: the resource layout drawn at reset (0 ring, 1 corners)
    intent: jax.Array  # [] int32: the prey's hidden corner (0 when the game has none)
    belief: jax.Array  # [K] float32: the belief handed to predators (if any)
    step: jax.Array  # [] int32: transitions taken so far


@dataclasses.dataclass(frozen=True)
class PursuitEnv(Env):
    """A pursuit game: ``num_predators`` predators vs ``num_prey`` prey.

    Only shape-determining structure is here; every number is in
    :class:`PursuitParams`. Observation sizes (``L`` obstacles, ``P`` predators,
    ``Y`` prey, ``R`` resources, ``K`` intents):

    * predator: own velocity (2), own position (2), obstacles relative (2L), other
      predators relative (2(P-1)), prey relative (2Y), prey velocities (2Y), and the
      belief (K) if ``predator_intent_obs``;
    * prey: own velocity (2), own position (2), obstacles relative (2L), predators
      relative (2P), other prey relative (2(Y-1)), per resource its relative
      position and collected flag (3R), and its intent one-hot (K).
    """

    name: str = "tag"
    num_predators: int = bounded(3, low=1)
    num_prey: int = bounded(1, low=1)
    num_obstacles: int = bounded(2, low=0)
    num_resources: int = bounded(0, low=0)
    num_intents: int = bounded(0, choices=(0, len(INTENT_CORNERS)))
    predator_intent_obs: bool = False
    base_params: PursuitParams = dataclasses.field(
        default_factory=PursuitParams, compare=False, hash=False
    )

    team_names = ("predator", "prey")

    def __post_init__(self):
        check_bounds(self.name, self, extra=VARIANT_BOUNDS.get(self.name))
        if self.predator_intent_obs and self.num_intents == 0:
            raise InvalidParameterError("predator_intent_obs needs num_intents > 0")

    # -- structure ---------------------------------------------------------------
    @property
    def team_sizes(self) -> tuple[int, int]:
        return (self.num_predators, self.num_prey)

    @property
    def predator_obs_size(self) -> int:
        P, Y, L = self.num_predators, self.num_prey, self.num_obstacles
        K = self.num_intents if self.predator_intent_obs else 0
        return 4 + 2 * L + 2 * (P - 1) + 4 * Y + K

    @property
    def prey_obs_size(self) -> int:
        P, Y, L = self.num_predators, self.num_prey, self.num_obstacles
        return (
            4 + 2 * L + 2 * P + 2 * (Y - 1) + 3 * self.num_resources + self.num_intents
        )

    @property
    def global_state_size(self) -> int:
        N, L, R = self.num_agents, self.num_obstacles, self.num_resources
        return 4 * N + 2 * L + 3 * R + 1

    def observation_space(self, team: int) -> Box:
        size = (self.predator_obs_size, self.prey_obs_size)[team]
        return Box(-np.inf, np.inf, (size,))

    def action_space(self, team: int) -> Discrete:
        return Discrete(NUM_ACTIONS)

    @property
    def default_params(self) -> PursuitParams:
        params = self.base_params
        if params.obstacle_pos is None:
            params = params.replace(
                obstacle_pos=default_obstacle_positions(self.num_obstacles)
            )
        return jax.tree.map(jnp.asarray, params)

    def validate_params(self, params: PursuitParams) -> None:
        """Raise :class:`InvalidParameterError` naming the first invalid field
        (each field's bounds, then the rules between fields)."""
        check_bounds(self.name, params, "parameter ")
        if np.any(np.asarray(params.shape_r_in) > np.asarray(params.shape_r_out)):
            raise InvalidParameterError(
                f"{self.name}: parameter shape_r_in "
                f"({np.asarray(params.shape_r_in).tolist()}) must not exceed "
                f"shape_r_out ({np.asarray(params.shape_r_out).tolist()})"
            )
        low, high = (
            np.asarray(params.belief_alpha_low),
            np.asarray(params.belief_alpha_high),
        )
        if np.any(low > high):
            raise InvalidParameterError(
                f"{self.name}: parameters belief_alpha_low/high must satisfy "
                f"0 <= low <= high <= 1, got {low.tolist()}, {high.tolist()}"
            )
        obstacle_shape = np.shape(params.obstacle_pos)
        if obstacle_shape[-2:] != (self.num_obstacles, 2):
            raise InvalidParameterError(
                f"{self.name}: parameter obstacle_pos must have shape "
                f"({self.num_obstacles}, 2), got {obstacle_shape}"
            )

    # -- helpers -----------------------------------------------------------------
    def _agent_vector(self, predator_value, prey_value) -> jax.Array:
        """``[N]`` per-agent values: predators then prey."""
        return per_agent((predator_value, prey_value), self.team_sizes)

    def _resource_layout(
        self, placement: jax.Array, params: PursuitParams
    ) -> jax.Array:
        """``[R, 2]`` resource positions of layout ``placement`` (0 ring, 1 corners)."""
        R = self.num_resources
        angles = 2 * np.pi * np.arange(R) / max(R, 1)
        ring = params.resource_ring_radius * jnp.asarray(
            np.stack([np.cos(angles), np.sin(angles)], -1), jnp.float32
        )
        corner_signs = jnp.asarray(INTENT_CORNERS[np.arange(R) % len(INTENT_CORNERS)])
        corners = params.resource_corner * corner_signs
        return jnp.where(placement == PLACEMENT_RING, ring, corners)

    # -- dynamics ----------------------------------------------------------------
    def _reset(
        self, key: jax.Array, params: PursuitParams
    ) -> tuple[TeamArrays, PursuitState]:
        key_agents, key_obstacles, key_layout, key_intent, key_alpha = jax.random.split(
            key, 5
        )
        N, L, K = self.num_agents, self.num_obstacles, self.num_intents
        pos = jax.random.uniform(
            key_agents, (N, 2), minval=-params.spawn_range, maxval=params.spawn_range
        )
        random_obstacles = jax.random.uniform(
            key_obstacles,
            (L, 2),
            minval=-params.obstacle_spawn_range,
            maxval=params.obstacle_spawn_range,
        )
        obstacle_pos = jnp.where(
            params.fixed_obstacles,
            params.obstacle_pos.astype(jnp.float32),
            random_obstacles,
        )
        coin = jax.random.bernoulli(key_layout).astype(jnp.int32)
        placement = jnp.where(
            params.resource_placement == PLACEMENT_RANDOM,
            coin,
            params.resource_placement,
        ).astype(jnp.int32)
        if K:
            intent = jax.random.randint(key_intent, (), 0, K)
            alpha = jax.random.uniform(
                key_alpha,
                minval=params.belief_alpha_low,
                maxval=params.belief_alpha_high,
            )
            belief = alpha * jax.nn.one_hot(intent, K) + (1.0 - alpha) / K
        else:
            intent = jnp.zeros((), jnp.int32)
            belief = jnp.zeros((0,), jnp.float32)
        state = PursuitState(
            pos=pos,
            vel=jnp.zeros((N, 2)),
            obstacle_pos=obstacle_pos,
            resource_pos=self._resource_layout(placement, params),
            collected=jnp.zeros((self.num_resources,), bool),
            placement=placement,
            intent=intent,
            belief=belief,
            step=jnp.zeros((), jnp.int32),
        )
        return self.observe(state, params), state

    def _integrate(
        self,
        pos: jax.Array,
        vel: jax.Array,
        obstacle_pos: jax.Array,
        force: jax.Array,
        params: PursuitParams,
    ) -> tuple[jax.Array, jax.Array]:
        """One physics step of the agents (``[N, 2]`` each); see
        :func:`integrate_bodies`. Obstacles never move."""
        return integrate_bodies(
            pos,
            vel,
            force,
            self._agent_vector(params.predator_radius, params.prey_radius),
            self._agent_vector(params.predator_max_speed, params.prey_max_speed),
            obstacle_pos,
            jnp.broadcast_to(params.obstacle_radius, (self.num_obstacles,)),
            params,
        )

    def _step(
        self,
        key: jax.Array,
        state: PursuitState,
        actions: TeamArrays,
        params: PursuitParams,
    ) -> StepOutput:
        del key  # the pursuit games are deterministic
        action = jnp.concatenate([a.astype(jnp.int32) for a in actions])  # [N]
        accel = self._agent_vector(params.predator_accel, params.prey_accel)
        force = action_directions(action) * accel[:, None]
        pos, vel = self._integrate(
            state.pos, state.vel, state.obstacle_pos, force, params
        )
        return self.outcome(state, pos, vel, params)

    def outcome(
        self,
        state: PursuitState,
        pos: jax.Array,
        vel: jax.Array,
        params: PursuitParams,
    ) -> StepOutput:
        """The rest of a step once the physics gave the agents' new ``pos`` and
        ``vel`` (``[N, 2]`` each) from ``state``: captures, every reward term, the
        next state, its observations and ``info``. :meth:`step` is the physics
        followed by this; a learned world model (:mod:`mopa.worldmodel`) supplies
        its own ``pos`` and ``vel`` and keeps the game's rules."""
        P, Y = self.num_predators, self.num_prey
        # Captures: predator-prey overlaps on the post-step state. [P, Y]
        gap = pos[:P, None, :] - pos[None, P:, :]
        overlap = (
            jnp.sum(gap * gap, -1) < (params.predator_radius + params.prey_radius) ** 2
        )
        captures_per_prey = jnp.sum(overlap, axis=0).astype(jnp.float32)  # [Y]
        captures = jnp.sum(captures_per_prey)

        prey_pos = pos[P:]
        boundary = params.boundary_penalty * jnp.sum(
            _boundary_penalty(jnp.abs(prey_pos)), -1
        )
        shaping = self._shaping_bonus(
            state.pos[P:], prey_pos, state.obstacle_pos, params
        )
        collected_now, collect = self._collect(prey_pos, state, params)
        if self.num_intents:
            corner = jnp.asarray(INTENT_CORNERS)[state.intent] * params.intent_corner
            near = jnp.sum((prey_pos - corner) ** 2, -1) < params.intent_radius**2
            intent_bonus = params.intent_reward * near.astype(jnp.float32)
        else:
            intent_bonus = jnp.zeros((Y,))
        prey_reward = (
            -params.capture_reward * captures_per_prey
            - boundary
            + shaping
            + collect
            + intent_bonus
        )
        predator_reward = jnp.full((P,), params.capture_reward * captures)

        step = state.step + 1
        state = state.replace(
            pos=pos, vel=vel, collected=state.collected | collected_now, step=step
        )
        info = {
            "captures": captures,
            "intent": state.intent,
            "prey_capture": -params.capture_reward * captures_per_prey,
            "prey_boundary": -boundary,
            "prey_shaping": shaping,
            "prey_collect": collect,
            "prey_intent": intent_bonus,
        }
        return (
            self.observe(state, params),
            state,
            (predator_reward, prey_reward),
            jnp.zeros((), bool),
            step >= params.max_steps,
            info,
        )

    def _shaping_bonus(
        self,
        prey_before: jax.Array,
        prey_after: jax.Array,
        obstacle_pos: jax.Array,
        params: PursuitParams,
    ) -> jax.Array:
        """``[Y]`` directional bonus around the obstacle nearest each prey."""
        if self.num_obstacles == 0:
            return jnp.zeros((self.num_prey,))
        # Relative to every obstacle [Y, L], then keep the nearest (no gather).
        v_prev = prey_before[:, None, :] - obstacle_pos[None]
        v_new = prey_after[:, None, :] - obstacle_pos[None]
        to_obstacles = jnp.sum(v_prev * v_prev, -1)
        nearest = jax.nn.one_hot(jnp.argmin(to_obstacles, axis=1), self.num_obstacles)
        cross = v_prev[..., 0] * v_new[..., 1] - v_prev[..., 1] * v_new[..., 0]
        radius = jnp.sqrt(jnp.sum(v_new * v_new, -1))
        in_annulus = (radius >= params.shape_r_in) & (radius <= params.shape_r_out)
        bonus = jnp.sign(cross) * in_annulus
        return params.shape_coef * params.shape_dir * jnp.sum(nearest * bonus, axis=1)

    def _collect(
        self, prey_pos: jax.Array, state: PursuitState, params: PursuitParams
    ) -> tuple[jax.Array, jax.Array]:
        """Resources collected this step ``[R]`` and each prey's reward ``[Y]``."""
        if self.num_resources == 0:
            return state.collected, jnp.zeros((self.num_prey,))
        gap = prey_pos[:, None, :] - state.resource_pos[None]
        touching = (
            jnp.sum(gap * gap, -1) < params.collect_radius**2
        ) & ~state.collected
        reward = params.collect_reward * jnp.sum(touching, axis=1).astype(jnp.float32)
        return jnp.any(touching, axis=0), reward

    def observe(self, state: PursuitState, params: PursuitParams) -> TeamArrays:
        """``(predator_obs [P, Dp], prey_obs [Y, Dy])``, laid out as the class says."""
        P, Y, N = self.num_predators, self.num_prey, self.num_agents
        other_rel = others_relative(state.pos)  # [N, N-1, 2]
        obstacle_rel = state.obstacle_pos[None] - state.pos[:, None]  # [N, L, 2]
        own = jnp.concatenate(
            [
                state.vel,
                state.pos,
                obstacle_rel.reshape(N, -1),
                other_rel.reshape(N, -1),
            ],
            -1,
        )
        prey_vel = jnp.broadcast_to(state.vel[P:].reshape(1, 2 * Y), (P, 2 * Y))
        predator_parts = [own[:P], prey_vel]
        if self.predator_intent_obs:
            predator_parts.append(jnp.broadcast_to(state.belief, (P, self.num_intents)))
        prey_parts = [own[P:]]
        if self.num_resources:
            resource_rel = state.resource_pos[None] - state.pos[P:, None]  # [Y, R, 2]
            flags = jnp.broadcast_to(
                state.collected.astype(jnp.float32)[None, :, None],
                (Y, self.num_resources, 1),
            )
            prey_parts.append(jnp.concatenate([resource_rel, flags], -1).reshape(Y, -1))
        if self.num_intents:
            onehot = jax.nn.one_hot(state.intent, self.num_intents)
            prey_parts.append(jnp.broadcast_to(onehot, (Y, self.num_intents)))
        return (
            jnp.concatenate(predator_parts, -1),
            jnp.concatenate(prey_parts, -1),
        )

    def prey_predators_relative(self, obs: jax.Array) -> jax.Array:
        """``[P, 2]`` each predator's position less the prey's, read from one prey's
        observation ``[D]`` (its trailing entries may be cut off: only those up to
        the predators are read)."""
        L, P = self.num_obstacles, self.num_predators
        if obs.ndim != 1 or obs.shape[0] < 4 + 2 * L + 2 * P:
            raise InvalidParameterError(
                f"a prey's observation must have at least {4 + 2 * L + 2 * P} "
                f"entries (one prey's, up to the predators), got shape {obs.shape}"
            )
        return obs[4 + 2 * L : 4 + 2 * L + 2 * P].reshape(P, 2)

    def prey_threat_features(self, obs: jax.Array) -> jax.Array:
        """One prey's observation ``[D]`` (its trailing intent may be cut off: only
        the entries up to the predators are read) with threat and edge features
        appended, ``[D + 5 + 2 * len(EDGE_KNOTS)]``: the unit direction away from
        the nearest predator (2) and its distance (1); the sum over predators of
        the unit direction away from each, divided by its distance plus 0.1 (2);
        and per axis, for each knot ``c`` of :data:`EDGE_KNOTS`, ``sign(x) max(0,
        |x| - c) / (1 - c)``, a linear spline of the distance to the arena's edge.

        The features a rule for fleeing may be linear in, where the raw
        observation's relative positions are not (e.g. for
        :class:`~mopa.opponent.online.OnlineResidualConfig`'s ``features_fn``)."""
        pos = obs[2:4]
        away = -self.prey_predators_relative(obs)  # [P, 2] predator -> prey
        distance = jnp.sqrt(jnp.sum(away * away, -1) + 1e-12)  # [P]
        unit = away / distance[:, None]
        nearest = jnp.argmin(distance)
        pressure = jnp.sum(unit / (distance[:, None] + 0.1), 0)
        knots = jnp.asarray(EDGE_KNOTS, obs.dtype)
        edges = (
            jnp.sign(pos)[None]
            * jnp.maximum(jnp.abs(pos)[None] - knots[:, None], 0.0)
            / (1.0 - knots[:, None])
        )  # [knots, 2]
        return jnp.concatenate(
            [obs, unit[nearest], distance[nearest][None], pressure, edges.reshape(-1)]
        )

    def global_state(self, state: PursuitState, params: PursuitParams) -> jax.Array:
        """``[global_state_size]`` vector for centralised critics: every agent's
        position and velocity, obstacles, resources with flags and the elapsed
        fraction of the episode. The hidden intent is deliberately left out."""
        parts = [
            state.pos.reshape(-1),
            state.vel.reshape(-1),
            state.obstacle_pos.reshape(-1),
            state.resource_pos.reshape(-1),
            state.collected.astype(jnp.float32),
            (state.step / params.max_steps)[None].astype(jnp.float32),
        ]
        return jnp.concatenate(parts)


def per_agent(values: tuple[Any, ...], sizes: tuple[int, ...]) -> jax.Array:
    """``[sum(sizes)]`` float32: team ``t``'s value ``values[t]`` for each of its
    ``sizes[t]`` agents, teams in order."""
    return jnp.concatenate(
        [
            jnp.broadcast_to(jnp.asarray(value, jnp.float32), (size,))
            for value, size in zip(values, sizes, strict=True)
        ]
    )


def others_relative(pos: jax.Array) -> jax.Array:
    """``[N, N-1, 2]``: for each agent ``i`` of ``pos`` ``[N, 2]``, every other
    agent's position minus its own, in index order."""
    rel = pos[None, :, :] - pos[:, None, :]  # [N, N, 2]: j relative to i
    # By static slices (a gather is slower).
    return jnp.stack(
        [jnp.concatenate([rel[i, :i], rel[i, i + 1 :]]) for i in range(len(pos))]
    )


def action_directions(action: jax.Array) -> jax.Array:
    """``[N, 2]`` unit force directions of discrete ``action`` ``[N]`` (see
    :data:`ACTION_DIRECTIONS`)."""
    # ACTION_DIRECTIONS unrolled into selects: a table lookup (gather) is slow on CPU.
    direction = jnp.zeros((action.shape[0], 2))
    for a, unit in enumerate(ACTION_DIRECTIONS):
        if unit.any():
            direction = jnp.where((action == a)[:, None], unit, direction)
    return direction


def integrate_bodies(
    pos: jax.Array,
    vel: jax.Array,
    force: jax.Array,
    radius: jax.Array,
    max_speed: jax.Array | None,
    obstacle_pos: jax.Array,
    obstacle_radius: jax.Array,
    params: PhysicsParams,
    collide: bool = True,
) -> tuple[jax.Array, jax.Array]:
    """One MPE physics step of ``N`` moving bodies among ``L`` fixed ones.

    Contact (if ``collide``): every pair of bodies pushes apart with
    ``contact_force * delta / |delta| * m * softplus(-(|delta| - r_i - r_j) / m)``
    (``m`` the contact margin). Then (semi-implicit, as MPE):
    ``pos += vel dt``; ``vel = vel (1 - damping) + force dt``; clip speed.
    Coordinates are handled as separate x and y arrays: with a trailing axis of
    two, XLA's CPU code runs about 2.5 times slower.

    Args:
        pos: ``[N, 2]`` positions of the moving bodies.
        vel: ``[N, 2]`` their velocities.
        force: ``[N, 2]`` their action forces (mass 1).
        radius: ``[N]`` their radii.
        max_speed: ``[N]`` their speed limits, or ``None`` for no limit.
        obstacle_pos: ``[L, 2]`` fixed bodies they collide with (``L`` may be 0).
        obstacle_radius: ``[L]`` radii of the fixed bodies.
        params: the physics numbers (any subclass of :class:`PhysicsParams`).
        collide: whether bodies touch at all (static); ``False`` skips contacts.

    Returns:
        ``(pos, vel)``, each ``[N, 2]``, after the step.
    """
    x, y = pos[:, 0], pos[:, 1]
    fx, fy = force[:, 0], force[:, 1]
    if collide:
        N, L = pos.shape[0], obstacle_pos.shape[0]
        body_radius = jnp.concatenate([radius, obstacle_radius])
        dx = x[:, None] - jnp.concatenate([x, obstacle_pos[:, 0]])[None, :]  # [N, E]
        dy = y[:, None] - jnp.concatenate([y, obstacle_pos[:, 1]])[None, :]
        dist = jnp.sqrt(dx * dx + dy * dy)
        not_self = jnp.asarray(~np.eye(N, N + L, dtype=bool))
        margin = params.contact_margin
        z = -(dist - (radius[:, None] + body_radius[None, :])) / margin
        penetration = margin * (jnp.maximum(z, 0.0) + jnp.log1p(jnp.exp(-jnp.abs(z))))
        magnitude = jnp.where(
            not_self,
            params.contact_force * penetration / jnp.where(not_self, dist, 1.0),
            0.0,
        )
        fx = fx + jnp.sum(dx * magnitude, axis=1)
        fy = fy + jnp.sum(dy * magnitude, axis=1)

    new_x, new_y = x + vel[:, 0] * params.dt, y + vel[:, 1] * params.dt
    keep = 1.0 - params.damping
    vx = vel[:, 0] * keep + fx * params.dt
    vy = vel[:, 1] * keep + fy * params.dt
    if max_speed is None:
        return jnp.stack([new_x, new_y], -1), jnp.stack([vx, vy], -1)
    speed = jnp.sqrt(vx * vx + vy * vy)
    scale = jnp.where(
        speed > max_speed, max_speed / jnp.where(speed > 0, speed, 1.0), 1.0
    )
    return jnp.stack([new_x, new_y], -1), jnp.stack([vx * scale, vy * scale], -1)


def _boundary_penalty(x: jax.Array) -> jax.Array:
    """MPE's penalty for a coordinate magnitude ``x`` near or past the arena edge."""
    return jnp.where(
        x < 0.9,
        0.0,
        jnp.where(x < 1.0, 10.0 * (x - 0.9), jnp.minimum(jnp.exp(2.0 * x - 2.0), 10.0)),
    )


VARIANTS: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {
    "tag": ({}, {}),
    "tag_static": ({}, {"fixed_obstacles": True, "shape_coef": 0.1}),
    "tag_resources": ({"num_resources": 4}, {"fixed_obstacles": True}),
    "tag_balanced": (
        {"num_resources": 4},
        {
            "fixed_obstacles": True,
            "predator_max_speed": 0.6,
            "predator_accel": 1.5,
            "collect_reward": 10.0,
        },
    ),
    "tag_intent": (
        {"num_intents": 4},
        {"fixed_obstacles": True, "predator_max_speed": 0.75, "predator_accel": 2.0},
    ),
}
"""Registered pursuit games: (structure, parameter) defaults on top of ``tag``'s.

``tag_static`` (Exp 2) pins the obstacles and enables the directional bonus with
``shape_coef`` 0.1; choose the direction with ``shape_dir`` (+1 CCW, -1 CW; the
default 0 is the research's static baseline). ``tag_resources`` (Exp 4) adds four
prey-only resources with pinned obstacles. ``tag_balanced`` (Exp 5) slows the
predators and raises the collect reward. ``tag_intent`` (Exp 6) adds the hidden
corner intent, with the predators slowed as in the research's configs.
"""


VARIANT_BOUNDS: dict[str, dict[str, Bounds]] = {
    "tag_intent": {"num_intents": Bounds(low=1)},
}
"""Structure bounds a registered game adds to :class:`PursuitEnv`'s own: the intent
game needs its intents."""


def make_pursuit(name: str, **overrides: Any) -> tuple[PursuitEnv, PursuitParams]:
    """Build the registered pursuit game ``name`` with ``overrides``.

    Overrides may name :class:`PursuitEnv` structure fields (``num_predators``,
    ``num_prey``, ``num_obstacles``, ``num_resources``, ``num_intents``,
    ``predator_intent_obs``) or :class:`PursuitParams` fields; ``resource_placement``
    also accepts ``"circle"``, ``"corners"`` or ``"random"``.

    Returns:
        ``(env, params)``; ``env.default_params`` equals ``params``.
    """
    from mopa.envs.registry import split_overrides

    structure_defaults, param_defaults = VARIANTS[name]
    placement = overrides.get("resource_placement")
    if isinstance(placement, str):
        if placement not in PLACEMENTS:
            raise InvalidParameterError(
                f"{name}: parameter resource_placement must be one of "
                f"{sorted(PLACEMENTS)}, got {placement!r}"
            )
        overrides = {**overrides, "resource_placement": PLACEMENTS[placement]}
    structure, params = split_overrides(
        name,
        PursuitEnv,
        PursuitParams,
        {**structure_defaults, **param_defaults, **overrides},
    )
    if "obstacle_pos" in params:
        params["obstacle_pos"] = np.asarray(params["obstacle_pos"], np.float32)
    try:
        base = PursuitParams(**params)
    except TypeError as error:  # pragma: no cover - split_overrides names fields first
        raise InvalidParameterError(f"{name}: {error}") from None
    env = PursuitEnv(name=name, **structure, base_params=base)
    params = env.default_params
    env.validate_params(params)
    return env, params
