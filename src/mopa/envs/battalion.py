"""The battalion wargame: ``battalion`` (1v1) and ``multi_battalion`` (n_blue vs
n_red), with procedural terrain.

Blue and Red battalions move, turn, fire, lose strength and morale, and rout on a
1 km square map. Team 0 is Blue, team 1 Red; agents of a team are the leading
array axis. The mechanics follow the reference wargame (``BattalionEnv`` of seed
001), with every number in :class:`BattalionParams`:

* **actions** ``[move, rotate, fire]`` (``Box(-1, 1, (3,))``): values are clipped
  to ``[-1, 1]`` and fire intensity to ``[0, 1]`` (a negative fire is no fire).
  Each step a unit first turns by ``rotate * max_turn`` radians, then moves
  ``move * max_speed * dt`` metres along its new heading (negative moves it
  backwards; there is no strafing), slowed by the terrain: the speed factor falls
  linearly from 1 on flat ground to ``hill_speed_factor`` on the highest cell,
  read at the cell the unit starts the step in. Positions are clipped to the map.
* **fire**: a unit hits an enemy within ``fire_range`` (inclusive) whose direction
  is strictly inside its frontal arc (``|angle| < fire_arc``). Damage per step is
  ``base_damage * intensity * (1 - dist / fire_range) * aspect * strength_shooter
  * (1 - cover_target)``, with ``aspect`` 1 when the shot arrives within 45 degrees
  of the target's facing, ``flank_mult`` between 45 and 135 degrees and
  ``rear_mult`` beyond. Every shot of the step is computed from the positions after
  both sides moved and the strengths before the step, then summed per target and
  applied at once (simultaneous resolution); a target loses at most its remaining
  strength and each shooter is credited its share of what was applied.
* **morale** drops by ``morale_loss * damage`` and recovers ``morale_recovery`` on a
  step without damage (clipped to ``[0, 1]``). Below ``rout_threshold`` a unit
  routs with probability ``1 - morale / rout_threshold`` each step (one uniform
  draw per unit from the step's key). A unit is out when it has routed or its
  strength is at most ``destroyed_threshold``; out units neither move, fire nor
  take fire.
* **end**: the episode terminates on the step a team is entirely out. Blue wins if
  only Red is out, Red wins if only Blue is out; both out on the same step is a
  draw, and so is reaching ``max_steps`` (``truncated``). ``info`` holds
  ``blue_win``, ``red_win`` and ``draw`` (true on the final step only).
* **rewards** per agent: ``reward_dealt * damage dealt - reward_received * damage
  received - reward_step`` (the step penalty for units in play at the start of
  the step), plus ``reward_win`` to every agent of a winning team and minus
  ``reward_loss`` to every agent of a losing one. Each component is in ``info``
  as ``{team}_reward_{dealt,received,step,terminal}`` (``[A_team]``), next to the
  raw ``{team}_dealt`` and ``{team}_received`` damage.
* **terrain**: a ``terrain_size`` square grid over the map; elevation is a sum of
  ``num_hills`` Gaussian hills normalised to a maximum of 1, cover a sum of
  ``num_forests`` Gaussian forests (peak ``forest_cover`` times U(0.5, 1)) clipped
  to ``[0, 1]``; both are regenerated at every reset (``flat_terrain`` gives open
  flat ground). Positions read the cell that contains them.

Observations (all within ``[-1, 1]``). Red's observations are taken in the frame
turned 180 degrees about the map centre, so Red sees itself exactly as Blue sees
itself at the start (west, facing east) and a Blue policy can drive Red unchanged.

* ``battalion``: 17 values: own x/width, y/height, cos and sin of own heading, own
  strength, morale; distance to the enemy / map diagonal, cos and sin of the
  bearing to it; enemy strength, morale; step / max_steps; own elevation, own
  cover, enemy elevation, enemy cover; line of sight (1 when no cell on the line
  between the two units, sampled at ``los_samples`` points, rises above the
  straight line joining their elevations). The enemy's facing is not observed.
* ``multi_battalion``: ``6 + 5 (N - 1) + 1`` values per agent (``N`` units in
  all): own x, y, cos, sin, strength, morale; for every other unit, allies first
  then enemies in index order, its distance / diagonal, cos and sin of the
  bearing, strength and morale; step / max_steps. An enemy beyond ``fog_range``
  reads as the fixed :data:`UNKNOWN` vector and a unit that is out as zeros.
  :meth:`BattalionEnv.global_state` gives every unit's x, y, cos, sin, strength
  and morale plus the step fraction, for centralised critics.

Scripted Red opponents (the L1-L5 ladder, ``random`` and the hidden strategy
family) live in :mod:`mopa.envs.scripted_red`; the game keeps both teams playable
and :class:`mopa.envs.battalion_wrappers.ScriptedRed` embeds a scripted Red and
exposes only Blue. The scripted Red's type is drawn per episode into
``state.red_type`` (``-1`` when Red is a player) and never enters an observation.

Deliberate differences from the reference: team win detection uses the step's own
end signals (the reference's never fires); a unit exactly on top of its target
(distance 0) is treated as out of its arc; headings are stored as unit vectors
(``heading_x``, ``heading_y``; :func:`heading_angle` gives radians) and turned by a
rotation matrix, which needs ``max_turn`` of at most 1 radian per step (the
reference's is 0.1).

Speed: the step has no trigonometry. XLA's CPU code recomputes a fused producer
inside each of its consumers; with the heading stored as an angle, its cosine and
sine were recomputed about ten times per step and took a third of the time.
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
from mopa.envs.spaces import Box
from mopa.errors import InvalidParameterError

BLUE, RED = 0, 1
"""Team indices of the battalion games."""

NUM_RED_TYPES = 12
"""Number of scripted Red types (see :data:`mopa.envs.scripted_red.RED_TYPES`)."""

FRONT_ARC = np.pi / 4
"""A shot arriving within this angle of the target's facing is frontal."""
REAR_ARC = 3 * np.pi / 4
"""A shot arriving beyond this angle of the target's facing hits the rear."""

UNKNOWN = np.array([1.0, 0.0, 0.0, -1.0, -1.0], np.float32)
"""What ``multi_battalion`` shows for an enemy beyond ``fog_range``: distance 1,
no bearing, strength and morale -1."""


def _default_red_probs() -> np.ndarray:
    probs = np.zeros(NUM_RED_TYPES, np.float32)
    probs[4] = 1.0  # L5, the reference's default opponent
    return probs


@struct.dataclass
class BattalionParams:
    """Every number of a battalion game. Scalars unless noted; all may be vmapped."""

    map_width: float = bounded(1000.0, low=0.0, open_low=True)
    """Map width in metres."""
    map_height: float = bounded(1000.0, low=0.0, open_low=True)
    """Map height in metres."""
    max_steps: int = bounded(500, low=1)
    """Steps per episode; ``truncated`` is true on the last."""
    dt: float = bounded(0.1, low=0.0, open_low=True)
    """Seconds per step."""
    max_speed: float = bounded(50.0, low=0.0, open_low=True)
    """Speed at ``move`` 1 on flat ground, metres per second (5 m per step)."""
    max_turn: float = bounded(0.1, low=0.0, high=1.0)
    """Turn at ``rotate`` 1, radians per step (at most 1)."""
    fire_range: float = bounded(200.0, low=0.0, open_low=True)
    """Range of fire in metres; damage falls linearly to 0 there."""
    fire_arc: float = bounded(float(np.pi / 4), low=0.0, open_low=True)
    """Half-width of the frontal fire arc in radians."""
    base_damage: float = bounded(0.05, low=0.0)
    """Strength lost per step at contact range, full intensity and strength."""
    flank_mult: float = bounded(1.5, low=0.0)
    """Damage multiplier of a shot arriving 45 to 135 degrees off the facing."""
    rear_mult: float = bounded(2.0, low=0.0)
    """Damage multiplier of a shot arriving more than 135 degrees off the facing."""
    morale_loss: float = bounded(1.5, low=0.0)
    """Morale lost per unit of strength lost."""
    morale_recovery: float = bounded(0.01, low=0.0)
    """Morale regained on a step without damage."""
    rout_threshold: float = bounded(0.25, low=0.0, open_low=True)
    """Below this morale a unit may rout, with probability 1 - morale / threshold."""
    destroyed_threshold: float = bounded(0.01, low=0.0)
    """A unit with at most this strength is destroyed."""
    hill_speed_factor: float = bounded(0.5, low=0.0, high=1.0, open_low=True)
    """Speed factor on the highest cell (1 = hills do not slow)."""
    flat_terrain: bool = False
    """Open flat ground (no hills, no forests) instead of procedural terrain."""
    hill_sigma_low: float = bounded(0.05, low=0.0, open_low=True)
    """Lower end of a hill's width, in map units (the map is 1 wide)."""
    hill_sigma_high: float = bounded(0.2, low=0.0, open_low=True)
    """Upper end of a hill's width, in map units."""
    forest_sigma_low: float = bounded(0.05, low=0.0, open_low=True)
    """Lower end of a forest's width, in map units."""
    forest_sigma_high: float = bounded(0.2, low=0.0, open_low=True)
    """Upper end of a forest's width, in map units."""
    forest_cover: float = bounded(0.5, low=0.0, high=1.0)
    """Peak cover of a forest (times U(0.5, 1)); cover c scales damage by 1 - c."""
    blue_x_low: float = bounded(0.1, low=0.0, high=1.0)
    """Blue starts with x uniform in [blue_x_low, blue_x_high] x map width."""
    blue_x_high: float = bounded(0.4, low=0.0, high=1.0)
    """See ``blue_x_low``."""
    red_x_low: float = bounded(0.6, low=0.0, high=1.0)
    """Red starts with x uniform in [red_x_low, red_x_high] x map width."""
    red_x_high: float = bounded(0.9, low=0.0, high=1.0)
    """See ``red_x_low``."""
    y_low: float = bounded(0.1, low=0.0, high=1.0)
    """Both start with y uniform in [y_low, y_high] x map height."""
    y_high: float = bounded(0.9, low=0.0, high=1.0)
    """See ``y_low``."""
    facing_spread: float = bounded(float(np.pi / 4), low=0.0)
    """Start facing: east (Blue) or west (Red) plus U(-spread, spread)."""
    fog_range: float = bounded(1e9, low=0.0, open_low=True)
    """Enemies farther than this are hidden in ``multi_battalion`` (600 there)."""
    reward_dealt: float = bounded(5.0, low=0.0)
    """Reward per unit of damage dealt."""
    reward_received: float = bounded(5.0, low=0.0)
    """Penalty per unit of damage received."""
    reward_win: float = bounded(10.0, low=0.0)
    """Paid to every agent of the winning team."""
    reward_loss: float = bounded(10.0, low=0.0)
    """Taken from every agent of the losing team."""
    reward_step: float = bounded(0.01, low=0.0)
    """Taken from every unit in play at the start of a step."""
    red_probs: jax.Array = bounded(
        default_factory=_default_red_probs, low=0.0, high=1.0
    )
    """``[NUM_RED_TYPES]`` distribution of the scripted Red type drawn per episode
    by :class:`~mopa.envs.battalion_wrappers.ScriptedRed` (ignored otherwise)."""
    rush_range: float = bounded(50.0, low=0.0)
    """Scripted ``rush``: distance it closes to."""
    flank_offset: float = bounded(150.0, low=0.0)
    """Scripted ``flank_*``: its waypoint beside Blue is ``FLANK_WIDE`` times this
    away (out of range) until it charges at ``FLANK_STEP``
    (:mod:`mopa.envs.scripted_red`)."""
    flank_reach: float = bounded(30.0, low=0.0)
    """Scripted ``flank_*``: within this of the waypoint it turns to fight."""
    standoff_range: float = bounded(190.0, low=0.0)
    """Scripted ``standoff``: the distance it keeps (within +-7.5 m)."""
    hold_radius: float = bounded(300.0, low=0.0)
    """Scripted ``hold``: it picks the best cell within this of its start."""
    feint_range: float = bounded(300.0, low=0.0)
    """Scripted ``feint``: distance it closes to after withdrawing."""
    feint_withdraw_step: int = bounded(120, low=0)
    """Scripted ``feint``: step at which it stops withdrawing and turns to close."""
    feint_rush_step: int = bounded(200, low=0)
    """Scripted ``feint``: step at which it charges."""


@struct.dataclass
class BattalionState:
    """State of one battalion game. Units: Blue first, then Red (``N`` in all)."""

    x: jax.Array  # [N] metres
    y: jax.Array  # [N] metres
    heading_x: jax.Array  # [N] cosine of the heading
    heading_y: jax.Array  # [N] sine of the heading
    strength: jax.Array  # [N] in [0, 1]
    morale: jax.Array  # [N] in [0, 1]
    routed: jax.Array  # [N] bool
    elevation: jax.Array  # [G * G] normalised elevation, row-major (row = y)
    cover: jax.Array  # [G * G] cover in [0, 1]
    unit_elevation: jax.Array  # [N] elevation of each unit's cell
    unit_cover: jax.Array  # [N] cover of each unit's cell
    red_type: jax.Array  # [] int32 scripted Red type, -1 when Red is a player
    red_goal: jax.Array  # [R, 2] scripted Red's terrain objective (metres)
    step: jax.Array  # [] int32 steps taken so far


_ORDERED = (
    ("blue_x_low", "blue_x_high"), ("red_x_low", "red_x_high"), ("y_low", "y_high"),
    ("hill_sigma_low", "hill_sigma_high"), ("forest_sigma_low", "forest_sigma_high"),
    ("feint_withdraw_step", "feint_rush_step"),
)  # fmt: skip


def _values(params: BattalionParams, field: str) -> np.ndarray:
    return np.asarray(getattr(params, field), np.float64)


def validate_battalion_params(name: str, params: BattalionParams) -> None:
    """Raise :class:`InvalidParameterError` naming the first invalid field."""

    check_bounds(name, params, "parameter ")
    for low, high in _ORDERED:
        if np.any(_values(params, low) > _values(params, high)):
            raise InvalidParameterError(
                f"{name}: parameter {low} ({_values(params, low).tolist()}) must not "
                f"exceed {high} ({_values(params, high).tolist()})"
            )
    probs = np.asarray(params.red_probs, np.float64)
    if probs.shape[-1:] != (NUM_RED_TYPES,):
        raise InvalidParameterError(
            f"{name}: parameter red_probs must have shape ({NUM_RED_TYPES},), "
            f"got {probs.shape}"
        )
    if np.any(np.abs(probs.sum(-1) - 1) > 1e-4):
        raise InvalidParameterError(
            f"{name}: parameter red_probs must sum to 1, got {probs.tolist()}"
        )


# -- terrain -------------------------------------------------------------------


def generate_terrain(
    key: jax.Array,
    params: BattalionParams,
    size: int,
    num_hills: int,
    num_forests: int,
) -> tuple[jax.Array, jax.Array]:
    """Procedural terrain: Gaussian hills and forests on a ``size`` square grid.

    Grid coordinates run from 0 to 1 over the map (``linspace``); each hill has its
    centre uniform in ``[0.1, 0.9]^2``, width U(``hill_sigma_low``,
    ``hill_sigma_high``) and height U(0.5, 1); the summed elevation is divided by
    its maximum. Forests are placed the same way with peak cover
    ``forest_cover * U(0.5, 1)``; summed cover is clipped to ``[0, 1]``.

    Returns:
        ``(elevation, cover)``, each ``[size * size]`` row-major (row = y).
    """
    key_hills, key_forests = jax.random.split(key)
    grid = jnp.linspace(0.0, 1.0, size)
    gx, gy = grid[None, :], grid[:, None]  # columns are x, rows are y

    def blobs(key, count, sigma_low, sigma_high, peak_low, peak_high):
        if count == 0:
            return jnp.zeros((size, size))
        k_c, k_s, k_p = jax.random.split(key, 3)
        centre = jax.random.uniform(k_c, (count, 2), minval=0.1, maxval=0.9)
        sigma = jax.random.uniform(k_s, (count,), minval=sigma_low, maxval=sigma_high)
        peak = jax.random.uniform(k_p, (count,), minval=peak_low, maxval=peak_high)
        sq = (gx[None] - centre[:, 0, None, None]) ** 2 + (
            gy[None] - centre[:, 1, None, None]
        ) ** 2
        return jnp.sum(
            peak[:, None, None] * jnp.exp(-sq / (2 * sigma[:, None, None] ** 2)), 0
        )

    elevation = blobs(
        key_hills, num_hills, params.hill_sigma_low, params.hill_sigma_high, 0.5, 1.0
    )
    top = jnp.max(elevation)
    elevation = jnp.where(top > 0, elevation / jnp.where(top > 0, top, 1.0), 0.0)
    cover = jnp.clip(
        blobs(
            key_forests,
            num_forests,
            params.forest_sigma_low,
            params.forest_sigma_high,
            0.5 * params.forest_cover,
            params.forest_cover,
        ),
        0.0,
        1.0,
    )
    flat = jnp.asarray(params.flat_terrain, bool)
    elevation = jnp.where(flat, 0.0, elevation)
    cover = jnp.where(flat, 0.0, cover)
    return elevation.reshape(-1), cover.reshape(-1)


def cell_index(
    x: jax.Array, y: jax.Array, params: BattalionParams, size: int
) -> jax.Array:
    """Row-major index of the terrain cell containing each position (clamped)."""
    col = jnp.clip(jnp.floor(x / params.map_width * size), 0, size - 1)
    row = jnp.clip(jnp.floor(y / params.map_height * size), 0, size - 1)
    return (row * size + col).astype(jnp.int32)


def cos_sin(angle: jax.Array) -> tuple[jax.Array, jax.Array]:
    """``(cos, sin)`` of ``|angle| <= 1`` by their Taylor series to degree 10 and
    9 (error below 3e-8, under float32 rounding): plain multiply-adds that XLA
    can fuse and recompute cheaply."""
    a2 = angle * angle
    cos = 1 - a2 / 2 * (1 - a2 / 12 * (1 - a2 / 30 * (1 - a2 / 56 * (1 - a2 / 90))))
    sin = angle * (1 - a2 / 6 * (1 - a2 / 20 * (1 - a2 / 42 * (1 - a2 / 72))))
    return cos, sin


def heading_angle(state: BattalionState) -> jax.Array:
    """``[N]`` each unit's heading in radians, in ``(-pi, pi]``."""
    return jnp.arctan2(state.heading_y, state.heading_x)


def lookup(grid: jax.Array, cells: jax.Array) -> jax.Array:
    """``grid[cells]`` for indices known to be in range (from :func:`cell_index`),
    without the bounds handling of a general gather."""
    return grid.at[cells].get(mode="promise_in_bounds")


# -- the game ------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class BattalionEnv(Env):
    """``num_blue`` Blue battalions vs ``num_red`` Red ones (``battalion``: 1v1).

    Only shape-determining structure is here; every number is in
    :class:`BattalionParams`. With one unit a side the observation is the 1v1
    17-vector; with more it is the multi-agent local view (see the module
    docstring). The 1v1 view can be forced off with ``local_obs``.
    """

    name: str = "battalion"
    num_blue: int = bounded(1, low=1)
    num_red: int = bounded(1, low=1)
    local_obs: bool = False
    terrain_size: int = bounded(20, low=1)
    num_hills: int = bounded(5, low=0)
    num_forests: int = bounded(3, low=0)
    los_samples: int = bounded(20, low=2)
    base_params: BattalionParams = dataclasses.field(
        default_factory=BattalionParams, compare=False, hash=False
    )

    team_names = ("blue", "red")

    def __post_init__(self):
        check_bounds(self.name, self)

    # -- structure ---------------------------------------------------------------
    @property
    def team_sizes(self) -> tuple[int, int]:
        return (self.num_blue, self.num_red)

    @property
    def duel(self) -> bool:
        """Whether observations are the 1v1 17-vector."""
        return self.num_blue == 1 and self.num_red == 1 and not self.local_obs

    @property
    def obs_size(self) -> int:
        return 17 if self.duel else 6 + 5 * (self.num_agents - 1) + 1

    @property
    def global_state_size(self) -> int:
        return 6 * self.num_agents + 1

    def observation_space(self, team: int) -> Box:
        return Box(-1.0, 1.0, (self.obs_size,))

    def action_space(self, team: int) -> Box:
        return Box(-1.0, 1.0, (3,))

    @property
    def default_params(self) -> BattalionParams:
        return jax.tree.map(jnp.asarray, self.base_params)

    def validate_params(self, params: BattalionParams) -> None:
        validate_battalion_params(self.name, params)

    def out(self, state: BattalionState, params: BattalionParams) -> jax.Array:
        """``[N]`` whether each unit has routed or been destroyed."""
        return state.routed | (state.strength <= params.destroyed_threshold)

    # -- dynamics ----------------------------------------------------------------
    def _reset(
        self, key: jax.Array, params: BattalionParams
    ) -> tuple[TeamArrays, BattalionState]:
        key_terrain, key_blue, key_red = jax.random.split(key, 3)
        elevation, cover = generate_terrain(
            key_terrain, params, self.terrain_size, self.num_hills, self.num_forests
        )

        def spawn(key, count, x_low, x_high, facing):
            k_x, k_y, k_t = jax.random.split(key, 3)
            x = jax.random.uniform(k_x, (count,), minval=x_low, maxval=x_high)
            y = jax.random.uniform(
                k_y, (count,), minval=params.y_low, maxval=params.y_high
            )
            theta = facing + jax.random.uniform(
                k_t, (count,), minval=-params.facing_spread, maxval=params.facing_spread
            )
            return x * params.map_width, y * params.map_height, theta

        bx, by, bt = spawn(
            key_blue, self.num_blue, params.blue_x_low, params.blue_x_high, 0.0
        )
        rx, ry, rt = spawn(
            key_red, self.num_red, params.red_x_low, params.red_x_high, jnp.pi
        )
        x, y = jnp.concatenate([bx, rx]), jnp.concatenate([by, ry])
        cells = cell_index(x, y, params, self.terrain_size)
        N = self.num_agents
        state = BattalionState(
            x=x,
            y=y,
            heading_x=jnp.cos(jnp.concatenate([bt, rt])),
            heading_y=jnp.sin(jnp.concatenate([bt, rt])),
            strength=jnp.ones((N,)),
            morale=jnp.ones((N,)),
            routed=jnp.zeros((N,), bool),
            elevation=elevation,
            cover=cover,
            unit_elevation=lookup(elevation, cells),
            unit_cover=lookup(cover, cells),
            red_type=jnp.full((), -1, jnp.int32),
            red_goal=jnp.stack([rx, ry], -1),
            step=jnp.zeros((), jnp.int32),
        )
        return self.observe(state, params), state

    def _move(
        self,
        state: BattalionState,
        actions: jax.Array,
        units: slice,
        params: BattalionParams,
    ) -> BattalionState:
        """Rotate, then move the ``units`` (a slice of ``[N]``) by ``actions``
        ``[n, 3]``; out units stay put. The slice is static.

        The heading is kept as a unit vector and turned by the rotation matrix of
        the turn (no trigonometry of the heading: XLA's CPU code recomputed it in
        every consumer and it dominated the step)."""
        x, y = state.x[units], state.y[units]
        hx, hy = state.heading_x[units], state.heading_y[units]
        active = ~self.out(state, params)[units]
        move = jnp.clip(actions[:, 0], -1.0, 1.0)
        turn = jnp.where(active, jnp.clip(actions[:, 1], -1.0, 1.0), 0.0)
        c, s = cos_sin(turn * params.max_turn)
        hx, hy = hx * c - hy * s, hx * s + hy * c
        norm = 1.5 - 0.5 * (hx * hx + hy * hy)  # one Newton step back to |h| = 1
        hx, hy = hx * norm, hy * norm
        speed = (
            move
            * params.max_speed
            * (1.0 - state.unit_elevation[units] * (1.0 - params.hill_speed_factor))
        )
        step = jnp.where(active, speed * params.dt, 0.0)
        new_x = jnp.clip(x + hx * step, 0.0, params.map_width)
        new_y = jnp.clip(y + hy * step, 0.0, params.map_height)
        return state.replace(
            x=state.x.at[units].set(new_x),
            y=state.y.at[units].set(new_y),
            heading_x=state.heading_x.at[units].set(hx),
            heading_y=state.heading_y.at[units].set(hy),
        )

    def _step(
        self,
        key: jax.Array,
        state: BattalionState,
        actions: TeamArrays,
        params: BattalionParams,
    ) -> StepOutput:
        both = jnp.concatenate(actions)
        moved = self._move(state, both, slice(None), params)
        return self._resolve(key, state, moved, both[:, 2], params)

    def step_with_red(
        self,
        key: jax.Array,
        state: BattalionState,
        blue_actions: jax.Array,
        red_fn: Any,
        params: BattalionParams,
    ) -> StepOutput:
        """One step in which Red's actions are chosen after Blue has moved.

        Blue rotates and moves first; ``red_fn(mid_state) -> [num_red, 3]`` then
        picks Red's actions from the state with Blue moved (as the reference's
        scripted Red does); Red rotates and moves; fire, morale and the end are
        resolved. Movement of one unit never depends on another, so with a fixed
        ``red_fn`` this is the simultaneous-move step of :meth:`step`.

        Args:
            key: PRNG key of the step (rout draws).
            state: the game state.
            blue_actions: ``[num_blue, 3]`` float actions.
            red_fn: ``mid_state -> [num_red, 3]``.
            params: the game parameters.

        Returns:
            ``(obs, state, rewards, terminated, truncated, info)`` of both teams.
        """
        B = self.num_blue
        mid = self._move(state, blue_actions, slice(0, B), params)
        red_actions = red_fn(mid)
        moved = self._move(mid, red_actions, slice(B, None), params)
        fire = jnp.concatenate([blue_actions[:, 2], red_actions[:, 2]])
        return self._resolve(key, state, moved, fire, params)

    def _resolve(
        self,
        key: jax.Array,
        state: BattalionState,
        moved: BattalionState,
        fire: jax.Array,
        params: BattalionParams,
    ) -> StepOutput:
        """Fire, morale, routs and the end of a step, once every unit has moved
        from ``state`` to ``moved``; ``fire`` is each unit's fire action ``[N]``."""
        B = self.num_blue
        was_out = self.out(state, params)
        fire = jnp.clip(fire, 0.0, 1.0)
        cells = cell_index(moved.x, moved.y, params, self.terrain_size)
        moved = moved.replace(
            unit_elevation=lookup(moved.elevation, cells),
            unit_cover=lookup(moved.cover, cells),
        )
        dealt, received = self._fire(moved, fire, was_out, params)

        strength = moved.strength - received
        morale = jnp.where(
            received > 0,
            jnp.maximum(moved.morale - params.morale_loss * received, 0.0),
            jnp.minimum(moved.morale + params.morale_recovery, 1.0),
        )
        morale = jnp.where(was_out, moved.morale, morale)
        roll = jax.random.uniform(key, (self.num_agents,))
        rout_prob = 1.0 - morale / params.rout_threshold
        routed = moved.routed | (
            ~was_out & (morale < params.rout_threshold) & (roll < rout_prob)
        )
        next_state = moved.replace(
            strength=strength, morale=morale, routed=routed, step=state.step + 1
        )

        out = self.out(next_state, params)
        blue_out, red_out = jnp.all(out[:B]), jnp.all(out[B:])
        terminated = blue_out | red_out
        truncated = ~terminated & (next_state.step >= params.max_steps)
        blue_win = red_out & ~blue_out
        red_win = blue_out & ~red_out
        draw = (blue_out & red_out) | truncated

        in_play = (~was_out).astype(jnp.float32)
        reward_dealt = params.reward_dealt * dealt
        reward_received = -params.reward_received * received
        reward_step = -params.reward_step * in_play
        blue_terminal = params.reward_win * blue_win - params.reward_loss * red_win
        red_terminal = params.reward_win * red_win - params.reward_loss * blue_win
        reward_terminal = jnp.concatenate(
            [
                jnp.broadcast_to(blue_terminal, (B,)),
                jnp.broadcast_to(red_terminal, (self.num_red,)),
            ]
        ).astype(jnp.float32)
        reward = reward_dealt + reward_received + reward_step + reward_terminal

        info = {"blue_win": blue_win, "red_win": red_win, "draw": draw}
        info["red_type"] = state.red_type
        for team, part in (("blue", slice(0, B)), ("red", slice(B, None))):
            info[f"{team}_dealt"] = dealt[part]
            info[f"{team}_received"] = received[part]
            info[f"{team}_reward_dealt"] = reward_dealt[part]
            info[f"{team}_reward_received"] = reward_received[part]
            info[f"{team}_reward_step"] = reward_step[part]
            info[f"{team}_reward_terminal"] = reward_terminal[part]
        return (
            self.observe(next_state, params),
            next_state,
            (reward[:B], reward[B:]),
            terminated,
            truncated,
            info,
        )

    def _fire(
        self,
        state: BattalionState,
        fire: jax.Array,
        was_out: jax.Array,
        params: BattalionParams,
    ) -> tuple[jax.Array, jax.Array]:
        """Damage ``(dealt [N], received [N])`` of one step, every shot at once.

        ``fire`` is each unit's intensity ``[N]`` in ``[0, 1]``. Angles are compared
        through cosines: a direction at angle ``a`` off a heading is inside a
        half-arc ``h`` exactly when ``cos a > cos h``.
        """
        B = self.num_blue
        cos_t, sin_t = state.heading_x, state.heading_y
        dx = state.x[None, B:] - state.x[:B, None]  # [B, R]: Blue i to Red j
        dy = state.y[None, B:] - state.y[:B, None]
        dist = jnp.sqrt(dx * dx + dy * dy)
        inv = jnp.where(dist > 0, 1.0 / jnp.where(dist > 0, dist, 1.0), 0.0)
        # Cosine of the angle between each unit's heading and the other unit.
        blue_cos = (dx * cos_t[:B, None] + dy * sin_t[:B, None]) * inv
        red_cos = -(dx * cos_t[None, B:] + dy * sin_t[None, B:]) * inv
        both_in = (
            (~was_out[:B, None]) & (~was_out[None, B:]) & (dist <= params.fire_range)
        )
        falloff = jnp.maximum(1.0 - dist / params.fire_range, 0.0)
        cos_arc = jnp.cos(params.fire_arc)
        front, rear = np.cos(FRONT_ARC), np.cos(REAR_ARC)

        def aspect(cos_target):
            # A shot from the other unit arrives along the target's own bearing to it.
            return jnp.where(
                cos_target > front,
                1.0,
                jnp.where(cos_target > rear, params.flank_mult, params.rear_mult),
            )

        strength = state.strength
        volley = params.base_damage * fire * strength  # [N]
        blue_hits = jnp.where(
            both_in & (blue_cos > cos_arc),
            volley[:B, None]
            * falloff
            * aspect(red_cos)
            * (1.0 - state.unit_cover[None, B:]),
            0.0,
        )  # [B, R] damage Blue i does to Red j
        red_hits = jnp.where(
            both_in & (red_cos > cos_arc),
            volley[None, B:]
            * falloff
            * aspect(blue_cos)
            * (1.0 - state.unit_cover[:B, None]),
            0.0,
        )  # [B, R] damage Red j does to Blue i
        to_red, to_blue = jnp.sum(blue_hits, 0), jnp.sum(red_hits, 1)
        raw = jnp.concatenate([to_blue, to_red])
        received = jnp.minimum(raw, strength)
        share = jnp.where(raw > 0, received / jnp.where(raw > 0, raw, 1.0), 0.0)
        dealt = jnp.concatenate([blue_hits @ share[B:], red_hits.T @ share[:B]])
        return dealt, received

    # -- observations ------------------------------------------------------------
    def observe(self, state: BattalionState, params: BattalionParams) -> TeamArrays:
        """``(blue_obs [num_blue, D], red_obs [num_red, D])``; see the module
        docstring for the layout."""
        if self.duel:
            return self._observe_duel(state, params)
        return self._observe_local(state, params)

    def _frames(self, state: BattalionState, params: BattalionParams):
        """Positions and headings with Red's turned 180 degrees about the centre."""
        B = self.num_blue
        red = jnp.arange(self.num_agents) >= B
        px = jnp.where(red, params.map_width - state.x, state.x) / params.map_width
        py = jnp.where(red, params.map_height - state.y, state.y) / params.map_height
        sign = jnp.where(red, -1.0, 1.0)
        return px, py, state.heading_x * sign, state.heading_y * sign, sign

    def _observe_duel(
        self, state: BattalionState, params: BattalionParams
    ) -> TeamArrays:
        px, py, c, s, sign = self._frames(state, params)
        dx = (state.x[::-1] - state.x) * sign  # [2]: to the enemy, own frame
        dy = (state.y[::-1] - state.y) * sign
        dist = jnp.sqrt(dx * dx + dy * dy)
        inv = jnp.where(dist > 0, 1.0 / jnp.where(dist > 0, dist, 1.0), 0.0)
        diagonal = jnp.sqrt(params.map_width**2 + params.map_height**2)
        los = self._line_of_sight(state, params)
        frac = jnp.minimum(state.step / params.max_steps, 1.0)
        obs = jnp.stack(
            [
                px,
                py,
                c,
                s,
                state.strength,
                state.morale,
                jnp.minimum(dist / diagonal, 1.0),
                jnp.where(dist > 0, dx * inv, 1.0),
                dy * inv,
                state.strength[::-1],
                state.morale[::-1],
                jnp.broadcast_to(frac, (2,)),
                state.unit_elevation,
                state.unit_cover,
                state.unit_elevation[::-1],
                state.unit_cover[::-1],
                jnp.broadcast_to(los, (2,)),
            ],
            -1,
        ).astype(jnp.float32)
        return obs[:1], obs[1:]

    def _line_of_sight(
        self, state: BattalionState, params: BattalionParams
    ) -> jax.Array:
        """``[]`` 1.0 when no interior sample between the first two units rises
        above the straight line joining their cells' elevations, else 0.0."""
        n = self.los_samples
        t = jnp.arange(1, n - 1) / (n - 1)  # interior samples
        sx = state.x[0] + t * (state.x[1] - state.x[0])
        sy = state.y[0] + t * (state.y[1] - state.y[0])
        ground = lookup(state.elevation, cell_index(sx, sy, params, self.terrain_size))
        line = state.unit_elevation[0] + t * (
            state.unit_elevation[1] - state.unit_elevation[0]
        )
        return jnp.where(jnp.any(ground > line), 0.0, 1.0)

    def _observe_local(
        self, state: BattalionState, params: BattalionParams
    ) -> TeamArrays:
        B, N = self.num_blue, self.num_agents
        px, py, c, s, sign = self._frames(state, params)
        out = self.out(state, params)
        dx = (state.x[None, :] - state.x[:, None]) * sign[:, None]  # [N, N] i to j
        dy = (state.y[None, :] - state.y[:, None]) * sign[:, None]
        dist = jnp.sqrt(dx * dx + dy * dy)
        inv = jnp.where(dist > 0, 1.0 / jnp.where(dist > 0, dist, 1.0), 0.0)
        diagonal = jnp.sqrt(params.map_width**2 + params.map_height**2)
        features = jnp.stack(
            [
                jnp.minimum(dist / diagonal, 1.0),
                dx * inv,
                dy * inv,
                jnp.broadcast_to(state.strength[None, :], (N, N)),
                jnp.broadcast_to(state.morale[None, :], (N, N)),
            ],
            -1,
        )  # [N, N, 5]: unit j as seen by unit i
        team = jnp.arange(N) >= B
        enemy = team[:, None] != team[None, :]
        hidden = enemy & (dist > params.fog_range)
        features = jnp.where(hidden[..., None], jnp.asarray(UNKNOWN), features)
        features = jnp.where(out[None, :, None], 0.0, features)
        order = []  # for each i: allies (own team, not i) then enemies, by index
        for i in range(N):
            own = range(0, B) if i < B else range(B, N)
            other = range(B, N) if i < B else range(0, B)
            order.append([j for j in own if j != i] + list(other))
        others = jnp.stack(
            [jnp.stack([features[i, j] for j in order[i]]) for i in range(N)]
        ).reshape(N, -1)
        frac = jnp.minimum(state.step / params.max_steps, 1.0)
        obs = jnp.concatenate(
            [
                jnp.stack([px, py, c, s, state.strength, state.morale], -1),
                others,
                jnp.broadcast_to(frac, (N, 1)),
            ],
            -1,
        ).astype(jnp.float32)
        return obs[:B], obs[B:]

    def global_state(self, state: BattalionState, params: BattalionParams) -> jax.Array:
        """``[6 N + 1]`` for centralised critics: every unit's x / width,
        y / height, cos and sin of its heading, strength and morale (world frame),
        then the step fraction. The scripted Red's type is left out."""
        units = jnp.stack(
            [
                state.x / params.map_width,
                state.y / params.map_height,
                state.heading_x,
                state.heading_y,
                state.strength,
                state.morale,
            ],
            -1,
        ).reshape(-1)
        frac = jnp.minimum(state.step / params.max_steps, 1.0)
        return jnp.concatenate([units, frac[None]]).astype(jnp.float32)


VARIANTS: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {
    "battalion": ({}, {}),
    "multi_battalion": (
        {"num_blue": 2, "num_red": 2, "local_obs": True},
        {"fog_range": 600.0},
    ),
}
"""Registered two-team battalion games: (structure, parameter) defaults.

``battalion`` is the 1v1 duel; ``multi_battalion`` is 2v2 by default (override
``num_blue`` and ``num_red``) with local observations and fog of war at 600 m.
"""


def build_battalion(
    name: str, base: str, overrides: dict[str, Any]
) -> tuple[BattalionEnv, BattalionParams]:
    """Build the game of variant ``base`` called ``name`` with ``overrides``."""
    from mopa.envs.registry import split_overrides

    structure_defaults, param_defaults = VARIANTS[base]
    structure, params = split_overrides(
        name,
        BattalionEnv,
        BattalionParams,
        {**structure_defaults, **param_defaults, **overrides},
    )
    if "red_probs" in params:
        params["red_probs"] = np.asarray(params["red_probs"], np.float32)
    env = BattalionEnv(name=name, **structure, base_params=BattalionParams(**params))
    params = env.default_params
    env.validate_params(params)
    return env, params


def make_battalion(name: str, **overrides: Any) -> tuple[BattalionEnv, BattalionParams]:
    """Build the registered two-team battalion game ``name`` with ``overrides``.

    Overrides may name :class:`BattalionEnv` structure fields (``num_blue``,
    ``num_red``, ``local_obs``, ``terrain_size``, ``num_hills``, ``num_forests``,
    ``los_samples``) or :class:`BattalionParams` fields, and ``discrete`` (both
    teams play the 18 discrete actions of
    :class:`~mopa.envs.battalion_wrappers.DiscreteActions`; default False).

    Returns:
        ``(env, params)``; ``env.default_params`` equals ``params``.
    """
    discrete = overrides.pop("discrete", False)
    if not isinstance(discrete, bool):
        raise InvalidParameterError(f"{name}: discrete must be bool, got {discrete!r}")
    env, params = build_battalion(name, name, overrides)
    if discrete:
        from mopa.envs.battalion_wrappers import DiscreteActions  # imports us

        return DiscreteActions(env), params
    return env, params
