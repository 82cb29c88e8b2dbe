"""Scripted Red opponents of the battalion games, and a scripted Blue baseline.

Every Red script is a pure function ``(key, state, params, num_blue) -> [R, 3]``
of the full game state (Red's script may see what Blue cannot, such as Blue's
facing). Each Red unit acts against the nearest Blue unit still in play. The
types, by index into :data:`RED_TYPES`:

* the reference's difficulty ladder, exactly as it behaves: ``L1`` stands still
  and never fires; ``L2`` turns towards Blue by at most ``max_turn`` per step;
  ``L3`` turns and moves at full speed along its new heading while Blue is more
  than 80% of ``fire_range`` (160 m) away, and never fires; ``L4`` and ``L5`` are
  ``L3`` firing at intensity 0.5 and 1 every step;
* ``random``: uniform actions (move and rotate in ``[-1, 1]``, fire in
  ``[0, 1]``);
* the strategy family: qualitatively different plans, each of which gives
  itself away in its opening moves and each with its own weakness, so that the
  best Blue plan depends on the type. Every unit turns towards Blue while it
  fights and fires at full intensity except where said (the game only lets a
  shot land inside the arc and range):

  - ``rush`` stands where it starts and fights (firing whenever Blue is in its
    arc and range) until :data:`RUSH_STEP`, then charges head on to
    ``rush_range``, holding its fire until Blue is within
    :data:`RUSH_FIRE_RANGE`: a Blue that attacks it early fights it on equal
    terms, a Blue that waits gets free volleys at the charge;
  - ``flank_left`` / ``flank_right`` swing wide, out of range, to a waypoint
    :data:`FLANK_WIDE` x ``flank_offset`` metres off Blue's own left / right
    side (it circles as Blue turns, its flank to Blue) until :data:`FLANK_STEP`,
    then charge in head on, firing, to ``rush_range``: a Blue that attacks them
    while they swing shoots them in the flank;
  - ``standoff`` advances at :data:`STANDOFF_SPEED` of full speed to
    ``standoff_range`` and keeps it, backing away (still facing Blue) when Blue
    closes: it only loses to a Blue that chases it into a map edge, and a Blue
    that waits draws;
  - ``hold`` marches to the best cover within ``hold_radius`` of its start and
    fights from it without advancing (a Blue that attacks it there fights at a
    disadvantage); from :data:`HOLD_WITHDRAW_STEP` it turns its back on Blue and
    marches away without firing, so a Blue that waited and then chases it
    shoots it in the rear;
  - ``feint`` first turns its back on Blue and withdraws without firing (a Blue
    that chases it at once catches it against a map edge and shoots it in the
    rear); from ``feint_withdraw_step`` it turns to face Blue and closes to
    ``feint_range``, and from ``feint_rush_step`` it charges, firing, to
    ``rush_range``: a Blue that waits meets the charge head on.

  Each opening differs (stand, swing left or right, advance slowly, march to
  cover, turn away), so Blue can tell the types apart from what it sees early,
  while the best plan differs by type: attack at once (``flank_*``,
  ``standoff``, ``feint``) or wait and then attack (``rush``, ``hold``).

Red's scripts read the state after Blue has moved in the same step, as the
reference's do (see :meth:`mopa.envs.battalion.BattalionEnv.step_with_red`).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from mopa.envs.battalion import BattalionParams, BattalionState, heading_angle

RED_TYPES = (
    "L1", "L2", "L3", "L4", "L5", "random",
    "rush", "flank_left", "flank_right", "standoff", "hold", "feint",
)  # fmt: skip
"""Every scripted Red type; ``state.red_type`` indexes this tuple."""
LADDER = RED_TYPES[:5]
"""The reference's difficulty ladder L1-L5."""
STRATEGIES = RED_TYPES[6:]
"""The hidden strategy family (qualitatively different plans)."""
RED_TYPE_INDEX = {name: i for i, name in enumerate(RED_TYPES)}

_LADDER_FIRE = {"L1": 0.0, "L2": 0.0, "L3": 0.0, "L4": 0.5, "L5": 1.0}

RUSH_STEP = 150
"""``rush`` stands and fights where it starts until this step, then charges."""
RUSH_FIRE_RANGE = 100.0
"""A charging ``rush`` holds its fire while Blue is farther than this (metres)."""
FLANK_STEP = 150
"""``flank_*`` swing wide until this step, then close in to fight."""
FLANK_WIDE = 2.0
"""``flank_*`` swing wide to this multiple of ``flank_offset`` from Blue."""
STANDOFF_SPEED = 0.5
"""``standoff`` advances at this fraction of full speed."""
HOLD_WITHDRAW_STEP = 200
"""``hold`` leaves its cover and marches away from Blue from this step."""


def _wrap(angle: jax.Array) -> jax.Array:
    return (angle + jnp.pi) % (2 * jnp.pi) - jnp.pi


def _turn_towards(
    theta: jax.Array, angle: jax.Array, params: BattalionParams
) -> tuple[jax.Array, jax.Array]:
    """Rotate action turning ``theta`` towards ``angle`` by at most ``max_turn``,
    and the remaining signed difference."""
    delta = _wrap(angle - theta)
    turn = params.max_turn
    safe = jnp.where(turn > 0, turn, 1.0)
    return jnp.where(turn > 0, jnp.clip(delta / safe, -1.0, 1.0), 0.0), delta


def _nearest_blue(
    state: BattalionState, params: BattalionParams, num_blue: int
) -> tuple[jax.Array, jax.Array, jax.Array, jax.Array]:
    """For each Red unit, the nearest Blue unit in play: ``(x, y, heading,
    distance)``, each ``[R]``."""
    B = num_blue
    dx = state.x[:B, None] - state.x[None, B:]  # [B, R]
    dy = state.y[:B, None] - state.y[None, B:]
    dist = jnp.sqrt(dx * dx + dy * dy)
    blue_out = state.routed[:B] | (state.strength[:B] <= params.destroyed_threshold)
    ranked = jnp.where(blue_out[:, None], jnp.inf, dist)
    pick = jax.nn.one_hot(jnp.argmin(ranked, axis=0), B, axis=0)  # [B, R]
    return (
        jnp.sum(pick * state.x[:B, None], 0),
        jnp.sum(pick * state.y[:B, None], 0),
        jnp.arctan2(
            jnp.sum(pick * state.heading_y[:B, None], 0),
            jnp.sum(pick * state.heading_x[:B, None], 0),
        ),
        jnp.sum(pick * dist, 0),
    )


def _head_for(
    rx: jax.Array,
    ry: jax.Array,
    theta: jax.Array,
    gx: jax.Array,
    gy: jax.Array,
    params: BattalionParams,
) -> tuple[jax.Array, jax.Array, jax.Array]:
    """``(rotate, move, distance)`` that take a unit towards ``(gx, gy)``: full
    speed once the goal is within 90 degrees of the heading, else turn in place."""
    rotate, delta = _turn_towards(theta, jnp.arctan2(gy - ry, gx - rx), params)
    move = jnp.where(jnp.abs(delta) < jnp.pi / 2, 1.0, 0.0)
    return rotate, move, jnp.sqrt((gx - rx) ** 2 + (gy - ry) ** 2)


def red_script(
    name: str,
    key: jax.Array,
    state: BattalionState,
    params: BattalionParams,
    num_blue: int,
) -> jax.Array:
    """Actions ``[R, 3]`` of every Red unit under the scripted type ``name``.

    Args:
        name: a name from :data:`RED_TYPES`.
        key: PRNG key (used by ``random`` only).
        state: one game's state (Blue already moved this step).
        params: the game's parameters.
        num_blue: number of Blue units (static).

    Returns:
        ``[R, 3]`` float32 ``[move, rotate, fire]`` per Red unit.
    """
    B = num_blue
    rx, ry, theta = state.x[B:], state.y[B:], heading_angle(state)[B:]
    R = rx.shape[0]
    bx, by, btheta, dist = _nearest_blue(state, params, B)
    face, _ = _turn_towards(theta, jnp.arctan2(by - ry, bx - rx), params)
    zeros, ones = jnp.zeros((R,)), jnp.ones((R,))

    def act(move, rotate, fire):
        return jnp.stack(
            [jnp.broadcast_to(a, (R,)) for a in (move, rotate, fire)], -1
        ).astype(jnp.float32)

    if name == "L1":
        return act(zeros, zeros, zeros)
    if name == "L2":
        return act(zeros, face, zeros)
    if name in _LADDER_FIRE:
        advance = (dist > 0.8 * params.fire_range).astype(jnp.float32)
        return act(advance, face, _LADDER_FIRE[name] * ones)
    if name == "random":
        sample = jax.random.uniform(key, (R, 3), minval=-1.0, maxval=1.0)
        return sample.at[:, 2].set((sample[:, 2] + 1.0) / 2.0)
    if name == "rush":
        charge = (state.step >= RUSH_STEP) & (dist > params.rush_range)
        fire = (state.step < RUSH_STEP) | (dist <= RUSH_FIRE_RANGE)
        return act(charge.astype(jnp.float32), face, fire.astype(jnp.float32))
    if name in ("flank_left", "flank_right"):
        side = 1.0 if name == "flank_left" else -1.0
        offset = FLANK_WIDE * params.flank_offset
        gx = jnp.clip(
            bx + offset * jnp.cos(btheta + side * jnp.pi / 2), 0.0, params.map_width
        )
        gy = jnp.clip(
            by + offset * jnp.sin(btheta + side * jnp.pi / 2), 0.0, params.map_height
        )
        rotate, move, to_goal = _head_for(rx, ry, theta, gx, gy, params)
        there = to_goal <= params.flank_reach
        swing = act(jnp.where(there, 0.0, move), jnp.where(there, face, rotate), ones)
        charge = act((dist > params.rush_range).astype(jnp.float32), face, ones)
        return jnp.where(state.step < FLANK_STEP, swing, charge)
    # Turning its back on Blue: head for the point mirroring Blue through Red.
    away, away_move, _ = _head_for(rx, ry, theta, 2 * rx - bx, 2 * ry - by, params)
    if name == "standoff":
        move = jnp.where(
            dist > params.standoff_range + 7.5,
            STANDOFF_SPEED,
            jnp.where(dist < params.standoff_range - 7.5, -1.0, 0.0),
        )
        return act(move, face, ones)
    if name == "hold":
        gx, gy = state.red_goal[:, 0], state.red_goal[:, 1]
        rotate, move, to_goal = _head_for(rx, ry, theta, gx, gy, params)
        there = to_goal <= 10.0
        fight = act(jnp.where(there, 0.0, move), jnp.where(there, face, rotate), ones)
        withdraw = act(away_move, away, zeros)
        return jnp.where(state.step < HOLD_WITHDRAW_STEP, fight, withdraw)
    if name == "feint":
        step = state.step
        withdraw = act(away_move, away, zeros)
        # Turning back from the withdrawal: move only once Blue is ahead.
        towards, towards_move, _ = _head_for(rx, ry, theta, bx, by, params)
        close = act(towards_move * (dist > params.feint_range), towards, ones)
        rush = act(towards_move * (dist > params.rush_range), towards, ones)
        return jnp.where(
            step < params.feint_withdraw_step,
            withdraw,
            jnp.where(step < params.feint_rush_step, close, rush),
        )
    raise ValueError(f"unknown Red type {name!r}; known: {', '.join(RED_TYPES)}")


def red_actions(
    names: tuple[str, ...],
    key: jax.Array,
    state: BattalionState,
    params: BattalionParams,
    num_blue: int,
) -> jax.Array:
    """Actions ``[R, 3]`` of the type ``state.red_type``, chosen among ``names``
    (only those are computed; any other type stands still)."""
    actions = jnp.zeros((state.x.shape[0] - num_blue, 3), jnp.float32)
    for name in names:
        actions = jnp.where(
            state.red_type == RED_TYPE_INDEX[name],
            red_script(name, key, state, params, num_blue),
            actions,
        )
    return actions


def hold_goals(
    state: BattalionState, params: BattalionParams, num_blue: int, size: int
) -> jax.Array:
    """``[R, 2]``: for each Red unit the centre of the cell within ``hold_radius``
    of it with the best ``cover + 0.25 * elevation`` (nearer cells win ties, so
    on flat open ground a unit holds where it stands)."""
    col = jnp.arange(size * size) % size
    row = jnp.arange(size * size) // size
    cx = (col + 0.5) * params.map_width / size
    cy = (row + 0.5) * params.map_height / size
    rx, ry = state.x[num_blue:], state.y[num_blue:]
    dist = jnp.sqrt((cx[None] - rx[:, None]) ** 2 + (cy[None] - ry[:, None]) ** 2)
    score = state.cover + 0.25 * state.elevation - 1e-4 * dist  # [R, G * G]
    score = jnp.where(dist <= params.hold_radius, score, -jnp.inf)
    best = jax.nn.one_hot(jnp.argmax(score, axis=1), size * size)
    found = jnp.any(jnp.isfinite(score), axis=1)
    gx = jnp.where(found, jnp.sum(best * cx, 1), rx)
    gy = jnp.where(found, jnp.sum(best * cy, 1), ry)
    return jnp.stack([gx, gy], -1)


def heuristic_blue(
    obs: jax.Array, params: BattalionParams, close_range: float = 120.0
) -> jax.Array:
    """A scripted Blue for the 1v1 game, from Blue's own observation only.

    It turns to face Red, closes to ``close_range`` metres (moving only while Red
    is within 90 degrees of its heading) and fires whenever Red is inside its
    arc. A sanity baseline: it beats the ladder's L1-L4.

    Args:
        obs: ``[17]`` Blue's observation.
        params: the game's parameters.
        close_range: distance to close to, metres.

    Returns:
        ``[3]`` float32 action.
    """
    c, s, bc, bs = obs[2], obs[3], obs[7], obs[8]
    delta = jnp.arctan2(c * bs - s * bc, c * bc + s * bs)  # bearing off heading
    diagonal = jnp.sqrt(params.map_width**2 + params.map_height**2)
    dist = obs[6] * diagonal
    rotate = jnp.clip(delta / params.max_turn, -1.0, 1.0)
    move = jnp.where((dist > close_range) & (jnp.abs(delta) < jnp.pi / 2), 1.0, 0.0)
    fire = jnp.where(jnp.abs(delta) < params.fire_arc, 1.0, 0.0)
    return jnp.stack([move, rotate, fire]).astype(jnp.float32)
