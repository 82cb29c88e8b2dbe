"""Views of the battalion games and their makers: discrete actions for the
Q-learning algorithms (``discrete=True``, :func:`make_battalion`) and a scripted
Red embedded in the game (``battalion_vs_red``, ``multi_battalion_vs_red``).

Design: the battalion games keep both teams playable (self-play, league play),
and a scripted opponent is a pure function of the state
(:mod:`mopa.envs.scripted_red`). :class:`ScriptedRed` wraps a game so that Red is
played by a script and only Blue is exposed: one team, ``("blue",)``. The script
is drawn per episode from ``params.red_probs`` (a distribution over
:data:`~mopa.envs.scripted_red.RED_TYPES`, so it can be vmapped and changed
without recompiling) among the types the wrapper was built with (static: only
their scripts are compiled). The drawn type is in ``state.red_type`` and
``info["red_type"]``, never in Blue's observation::

    env, params = make("battalion_vs_red", red="mixed")  # the six strategies
    env, params = make("battalion_vs_red", red="L3", discrete=True)

:class:`TerrainFeatures` (``terrain_obs=True``; off by default) appends to Blue's
observation what the terrain grid says about cover around it, so that a policy
can find cover it does not stand on.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from mopa.envs.base import Env, StepOutput, TeamArrays
from mopa.envs.battalion import (
    BLUE,
    NUM_RED_TYPES,
    BattalionEnv,
    BattalionParams,
    BattalionState,
    build_battalion,
    cell_index,
    lookup,
)
from mopa.envs.scripted_red import (
    LADDER,
    RED_TYPE_INDEX,
    RED_TYPES,
    STRATEGIES,
    hold_goals,
    red_actions,
)
from mopa.envs.spaces import Box, Discrete
from mopa.envs.wrappers import Wrapper
from mopa.errors import InvalidParameterError, UnknownNameError

RED_GROUPS = {"mixed": STRATEGIES, "ladder": LADDER}
"""Named groups of Red types accepted by ``red=``: ``mixed`` is the strategy
family, ``ladder`` L1-L5."""

BATTALION_ACTIONS = np.array(
    [
        [move, rotate, fire]
        for move in (-1.0, 0.0, 1.0)
        for rotate in (-1.0, 0.0, 1.0)
        for fire in (0.0, 1.0)
    ],
    np.float32,
)
"""The 18 discrete actions: move (back, stay, forward) x rotate (right, none,
left) x fire (no, full); action ``k`` is row ``k``."""


def parse_red(name: str, red: Any) -> tuple[str, ...]:
    """Red types named by ``red``: a type, a group of :data:`RED_GROUPS`, or a
    sequence (or comma-separated string) of types.

    Raises:
        UnknownNameError: an unknown type or group, naming the known ones.
    """
    items = red.split(",") if isinstance(red, str) else list(red)
    types: list[str] = []
    for item in items:
        item = str(item).strip()
        found = RED_GROUPS.get(item, (item,))
        for red_type in found:
            if red_type not in RED_TYPE_INDEX:
                raise UnknownNameError(
                    f"{name}: unknown Red type {item!r}; choose from "
                    f"{', '.join(RED_TYPES)} or {', '.join(RED_GROUPS)}"
                )
            if red_type not in types:
                types.append(red_type)
    if not types:
        raise UnknownNameError(f"{name}: red names no Red type")
    return tuple(types)


class ScriptedRed(Wrapper):
    """A battalion game with Red played by scripts; only Blue is exposed.

    Args:
        env: a :class:`~mopa.envs.battalion.BattalionEnv`.
        red_types: the scripted types this wrapper can play (static); the type of
            each episode is drawn from ``params.red_probs``, which must put all its
            mass on them.
    """

    def __init__(self, env: BattalionEnv, red_types: tuple[str, ...]):
        super().__init__(env)
        self.red_types = tuple(red_types)
        self.team_names = ("blue",)

    @property
    def team_sizes(self) -> tuple[int, ...]:
        return (self.env.num_blue,)

    def observation_space(self, team: int):
        return self.env.observation_space(BLUE)

    def action_space(self, team: int):
        return self.env.action_space(BLUE)

    def check_actions(self, actions: Any) -> TeamArrays:
        return Env.check_actions(self, actions)

    def validate_params(self, params: BattalionParams) -> None:
        self.env.validate_params(params)
        probs = np.asarray(params.red_probs)
        bad = [
            red_type
            for i, red_type in enumerate(RED_TYPES)
            if red_type not in self.red_types and np.any(probs[..., i] > 0)
        ]
        if bad:
            raise InvalidParameterError(
                f"{self.name}: parameter red_probs gives probability to Red types "
                f"{bad} outside this game's {list(self.red_types)}"
            )

    def _reset(
        self, key: jax.Array, params: BattalionParams
    ) -> tuple[TeamArrays, BattalionState]:
        key_game, key_type = jax.random.split(key)
        obs, state = self.env.reset(key_game, params)
        red_type = jax.random.categorical(key_type, jnp.log(params.red_probs))
        state = state.replace(
            red_type=red_type.astype(jnp.int32),
            red_goal=hold_goals(
                state, params, self.env.num_blue, self.env.terrain_size
            ),
        )
        return (obs[BLUE],), state

    def _step(
        self,
        key: jax.Array,
        state: BattalionState,
        actions: TeamArrays,
        params: BattalionParams,
    ) -> StepOutput:
        key_step, key_red = jax.random.split(key)

        def red_fn(mid_state):
            return red_actions(
                self.red_types, key_red, mid_state, params, self.env.num_blue
            )

        obs, state, rewards, terminated, truncated, info = self.env.step_with_red(
            key_step, state, actions[BLUE], red_fn, params
        )
        return (obs[BLUE],), state, (rewards[BLUE],), terminated, truncated, info

    def observe(self, state: BattalionState, params: BattalionParams) -> TeamArrays:
        return (self.env.observe(state, params)[BLUE],)

    # -- Red's strategy, as a Blue that models it reads it
    # (mopa.envs.base.IntentGame) ---------------------------------------------
    belief_team = BLUE
    """Blue may keep a belief over Red's type (Red is no team of this game)."""
    observes_belief = False
    """Blue's observation holds no belief (:class:`~mopa.opponent.
    soft_belief_game.SoftBeliefGame` adds one)."""

    @property
    def num_intents(self) -> int:
        """``K``: the Red types this game draws among."""
        return len(self.red_types)

    def true_intent(self, state: BattalionState) -> jax.Array:
        """``[]`` int32: the index of this episode's Red type in ``red_types``."""
        index = np.full(len(RED_TYPES), -1, np.int32)
        for i, name in enumerate(self.red_types):
            index[RED_TYPE_INDEX[name]] = i
        return jnp.asarray(index)[state.red_type]

    def opponent_position(
        self, state: BattalionState, params: BattalionParams
    ) -> jax.Array:
        """``[2]`` the first Red unit's position on the map, scaled to ``[-1,
        1]``."""
        red = self.env.num_blue
        return jnp.stack(
            [
                2.0 * state.x[red] / params.map_width - 1.0,
                2.0 * state.y[red] / params.map_height - 1.0,
            ]
        )

    def __hash__(self) -> int:
        return hash((type(self), self.env, self.red_types))

    def __eq__(self, other: object) -> bool:
        return (
            type(self) is type(other)
            and self.env == other.env
            and self.red_types == other.red_types
        )


class DiscreteActions(Wrapper):
    """Discrete actions for every team: action ``k`` plays row ``k`` of ``table``.

    Args:
        env: a game with ``Box`` actions of shape ``[D]`` (every team).
        table: ``[K, D]`` the continuous action of each discrete action
            (default :data:`BATTALION_ACTIONS`).
    """

    def __init__(self, env: Env, table: np.ndarray = BATTALION_ACTIONS):
        super().__init__(env)
        self.table = np.asarray(table, np.float32)

    def action_space(self, team: int) -> Discrete:
        return Discrete(len(self.table))

    def check_actions(self, actions: Any) -> TeamArrays:
        return Env.check_actions(self, actions)

    def _reset(self, key: jax.Array, params: Any) -> tuple[TeamArrays, Any]:
        return self.env.reset(key, params)

    def _step(
        self, key: jax.Array, state: Any, actions: TeamArrays, params: Any
    ) -> StepOutput:
        table = jnp.asarray(self.table)
        return self.env.step(key, state, tuple(table[a] for a in actions), params)

    def observe(self, state: Any, params: Any) -> TeamArrays:
        return self.env.observe(state, params)

    def __hash__(self) -> int:
        return hash((type(self), self.env, self.table.tobytes()))

    def __eq__(self, other: object) -> bool:
        return (
            type(self) is type(other)
            and self.env == other.env
            and np.array_equal(self.table, other.table)
        )


TERRAIN_RADIUS = 250.0
"""Metres within which :class:`TerrainFeatures` looks for the best cover."""
TERRAIN_RING = 50.0
"""Metres from a unit of the eight cover samples of :class:`TerrainFeatures`."""
TERRAIN_HOLD = 160.0
"""Metres towards Red of :class:`TerrainFeatures`' last sample (where the ladder's
L3-L5 stop closing, 80% of the default ``fire_range``)."""
NUM_TERRAIN_FEATURES = 12
"""Values :class:`TerrainFeatures` appends per Blue unit."""


def terrain_features(
    state: BattalionState, params: BattalionParams, num_blue: int, size: int
) -> jax.Array:
    """``[B, 12]`` cover around each Blue unit, from the terrain grid (world frame,
    every value in ``[-1, 1]``).

    Per unit: the offset ``(dx, dy) / TERRAIN_RADIUS`` to the centre of the cell
    with the most cover within ``TERRAIN_RADIUS`` metres (nearer cells win ties)
    and that cover; the cover ``TERRAIN_RING`` metres away towards east,
    north-east, ..., south-east (counter-clockwise); and the cover
    ``TERRAIN_HOLD`` metres towards the nearest Red unit.

    Args:
        state: one game's state.
        params: the game's parameters.
        num_blue: Blue units (static).
        size: the terrain grid's side (static).
    """
    B = num_blue
    col = jnp.arange(size * size) % size
    row = jnp.arange(size * size) // size
    cx = (col + 0.5) * params.map_width / size  # [G * G]
    cy = (row + 0.5) * params.map_height / size
    bx, by = state.x[:B], state.y[:B]  # [B]
    dx, dy = cx[None] - bx[:, None], cy[None] - by[:, None]  # [B, G * G]
    dist = jnp.sqrt(dx * dx + dy * dy)
    score = jnp.where(dist <= TERRAIN_RADIUS, state.cover[None] - 1e-4 * dist, -jnp.inf)
    best = jnp.argmax(score, axis=1)  # [B]
    found = jnp.any(jnp.isfinite(score), axis=1)
    pick = jax.vmap(lambda row, i: row[i])
    best_dx = jnp.where(found, pick(dx, best), 0.0) / TERRAIN_RADIUS
    best_dy = jnp.where(found, pick(dy, best), 0.0) / TERRAIN_RADIUS
    best_cover = jnp.where(
        found, state.cover[best], lookup(state.cover, cell_index(bx, by, params, size))
    )
    angles = jnp.arange(8) * (jnp.pi / 4)
    ring_x = bx[:, None] + TERRAIN_RING * jnp.cos(angles)[None]  # [B, 8]
    ring_y = by[:, None] + TERRAIN_RING * jnp.sin(angles)[None]
    ring = lookup(state.cover, cell_index(ring_x, ring_y, params, size))
    alive = ~state.routed[B:] & (state.strength[B:] > params.destroyed_threshold)
    rdx = state.x[None, B:] - bx[:, None]  # [B, R]
    rdy = state.y[None, B:] - by[:, None]
    rdist = jnp.sqrt(rdx * rdx + rdy * rdy)
    nearest = jnp.argmin(jnp.where(alive[None], rdist, jnp.inf), axis=1)  # [B]
    to_x, to_y, to_d = pick(rdx, nearest), pick(rdy, nearest), pick(rdist, nearest)
    inv = jnp.where(to_d > 0, 1.0 / jnp.where(to_d > 0, to_d, 1.0), 0.0)
    reach = jnp.minimum(to_d, TERRAIN_HOLD)
    hold = lookup(
        state.cover,
        cell_index(bx + to_x * inv * reach, by + to_y * inv * reach, params, size),
    )
    return jnp.concatenate(
        [
            jnp.stack([best_dx, best_dy, best_cover], -1),
            ring,
            hold[:, None],
        ],
        -1,
    ).astype(jnp.float32)


class TerrainFeatures(Wrapper):
    """Blue's observation followed by :func:`terrain_features`
    (``NUM_TERRAIN_FEATURES`` more values per unit).

    Args:
        env: a :class:`ScriptedRed` game (one team, Blue).
    """

    def __init__(self, env: ScriptedRed):
        super().__init__(env)

    def observation_space(self, team: int) -> Box:
        size = self.env.observation_space(team).shape[0]
        return Box(-1.0, 1.0, (size + NUM_TERRAIN_FEATURES,))

    def check_actions(self, actions: Any) -> TeamArrays:
        return self.env.check_actions(actions)

    def _features(self, obs: TeamArrays, state: BattalionState, params) -> TeamArrays:
        unwrapped = self.unwrapped
        extra = terrain_features(
            state, params, unwrapped.num_blue, unwrapped.terrain_size
        )
        return (jnp.concatenate([obs[BLUE], extra], -1),)

    def _reset(
        self, key: jax.Array, params: BattalionParams
    ) -> tuple[TeamArrays, BattalionState]:
        obs, state = self.env.reset(key, params)
        return self._features(obs, state, params), state

    def _step(
        self,
        key: jax.Array,
        state: BattalionState,
        actions: TeamArrays,
        params: BattalionParams,
    ) -> StepOutput:
        obs, state, rewards, terminated, truncated, info = self.env.step(
            key, state, actions, params
        )
        return (
            self._features(obs, state, params),
            state,
            rewards,
            terminated,
            truncated,
            info,
        )

    def observe(self, state: BattalionState, params: BattalionParams) -> TeamArrays:
        return self._features(self.env.observe(state, params), state, params)


def make_battalion(name: str, **overrides: Any) -> tuple[BattalionEnv, BattalionParams]:
    """Build the registered two-team battalion game ``name`` with ``overrides``.

    Overrides may name :class:`BattalionEnv` structure fields (``num_blue``,
    ``num_red``, ``local_obs``, ``terrain_size``, ``num_hills``, ``num_forests``,
    ``los_samples``) or :class:`BattalionParams` fields, and ``discrete`` (both
    teams play the 18 discrete actions of
    :class:`DiscreteActions`; default False).

    Returns:
        ``(env, params)``; ``env.default_params`` equals ``params``.
    """
    discrete = overrides.pop("discrete", False)
    if not isinstance(discrete, bool):
        raise InvalidParameterError(f"{name}: discrete must be bool, got {discrete!r}")
    env, params = build_battalion(name, name, overrides)
    if discrete:
        return DiscreteActions(env), params
    return env, params


SCRIPTED_VARIANTS = {
    "battalion_vs_red": "battalion",
    "multi_battalion_vs_red": "multi_battalion",
}
"""Registered Blue-only games and the two-team game each embeds."""


def make_battalion_vs_red(name: str, **overrides: Any) -> tuple[Env, BattalionParams]:
    """Build a Blue-only battalion game with a scripted Red.

    Overrides: ``red`` (a type of :data:`~mopa.envs.scripted_red.RED_TYPES`, a
    group of :data:`RED_GROUPS` or a sequence of types, drawn uniformly per
    episode unless ``red_probs`` is given; default ``"L5"``), ``discrete`` (wrap in
    :class:`DiscreteActions`; default False), ``terrain_obs`` (append
    :func:`terrain_features` to Blue's observation, :class:`TerrainFeatures`;
    default False), and any structure or parameter field of the embedded game.

    Returns:
        ``(env, params)``.

    Raises:
        UnknownNameError: an unknown Red type.
        InvalidParameterError: an invalid override.
    """
    red = overrides.pop("red", "L5")
    discrete = overrides.pop("discrete", False)
    terrain_obs = overrides.pop("terrain_obs", False)
    for option, value in (("discrete", discrete), ("terrain_obs", terrain_obs)):
        if not isinstance(value, bool):
            raise InvalidParameterError(f"{name}: {option} must be bool, got {value!r}")
    red_types = parse_red(name, red)
    if "red_probs" not in overrides:
        probs = np.zeros(NUM_RED_TYPES, np.float32)
        probs[[RED_TYPE_INDEX[t] for t in red_types]] = 1.0 / len(red_types)
        overrides["red_probs"] = probs
    game, params = build_battalion(name, SCRIPTED_VARIANTS[name], overrides)
    env: Env = ScriptedRed(game, red_types)
    env.validate_params(params)
    if terrain_obs:
        env = TerrainFeatures(env)
    if discrete:
        env = DiscreteActions(env)
    return env, params


def cover_teacher_action(
    obs: jax.Array, params: Any, hold_until: float, close_range: float
) -> jax.Array:
    """The discrete action (a row of
    :data:`~mopa.envs.battalion_wrappers.BATTALION_ACTIONS`) of a scripted Blue
    that fights from cover, from its own observation alone.

    While Red is out of range (more than ``fire_range`` + 5 m away) and the
    episode is younger than ``hold_until``, it heads for the cell with the most
    cover within :data:`~mopa.envs.battalion_wrappers.TERRAIN_RADIUS` (read from
    the observation's terrain features); there, or once Red is in range, it turns
    to face Red and holds; from ``hold_until`` on, a Red still out of range is
    closed on to ``close_range`` metres. It fires whenever Red is inside its arc,
    and moves only towards goals within 90 degrees of its heading.

    Args:
        obs: ``[17 + NUM_TERRAIN_FEATURES]`` Blue's observation with
            ``terrain_obs``.
        params: the game's parameters.
        hold_until: episode fraction after which a distant Red is closed on.
        close_range: distance to close to, metres.

    Returns:
        ``[]`` int32 action.
    """
    base = obs.shape[-1] - NUM_TERRAIN_FEATURES

    def off_heading(x, y):  # angle of world direction (x, y) off Blue's heading
        return jnp.arctan2(obs[2] * y - obs[3] * x, obs[2] * x + obs[3] * y)

    diagonal = jnp.sqrt(params.map_width**2 + params.map_height**2)
    dist = obs[6] * diagonal
    to_red = off_heading(obs[7], obs[8])
    goal_x, goal_y = obs[base] * TERRAIN_RADIUS, obs[base + 1] * TERRAIN_RADIUS
    to_goal = off_heading(goal_x, goal_y)
    out_of_range = dist > params.fire_range + 5.0
    early = obs[11] < hold_until
    seek = out_of_range & early & (jnp.sqrt(goal_x**2 + goal_y**2) > 15.0)
    close = ~early & (dist > close_range)
    delta = jnp.where(seek, to_goal, to_red)
    rotate = jnp.where(delta > 0.05, 1, jnp.where(delta < -0.05, -1, 0))
    move = jnp.where(seek | close, (jnp.abs(delta) < jnp.pi / 2).astype(jnp.int32), 0)
    fire = (jnp.abs(to_red) < params.fire_arc).astype(jnp.int32)
    return ((move + 1) * 6 + (rotate + 1) * 2 + fire).astype(jnp.int32)
