"""Representations of one agent's trajectory that encoders read: raw position
sequences, 2-D occupancy histograms over the arena, and windows over the last
``L`` steps (every prefix, for online use).

Every function takes one trajectory (``positions [T, 2]``) and is pure ``jnp``, so
``vmap`` it over episodes or chains. The research's Exp 5 found occupancy the
representation that exposes a strategy (where the agent goes) where raw
evasion-dominated sequences do not (Exp 4).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from mopa.errors import InvalidParameterError

ARENA_BOUNDS = (-1.0, 1.0)
"""Default extent of the histogram grid on both axes (the pursuit spawn area)."""


def raw_sequence(positions: jax.Array, length: int, start: int = 0) -> jax.Array:
    """The ``length`` positions from step ``start``, flattened.

    Args:
        positions: ``[T, 2]`` one agent's positions.
        length: number of steps ``L`` (static; ``start + L <= T``).
        start: first step (static).

    Returns:
        ``[2L]``: ``x_start, y_start, x_start+1, ...``.
    """
    if start < 0 or start + length > positions.shape[0]:
        raise ValueError(
            f"raw_sequence: steps [{start}, {start + length}) are outside a "
            f"trajectory of {positions.shape[0]} steps"
        )
    return positions[start : start + length].reshape(-1)


def _cells(
    positions: jax.Array, grid_size: int, bounds: tuple[float, float]
) -> jax.Array:
    """``[T, G x G]`` one-hot of each step's cell, row ``x`` bin, column ``y`` bin
    (``np.histogram2d``'s layout). Positions outside ``bounds`` count in the edge
    cell they are beyond, so no step is lost."""
    low, high = bounds
    scaled = (positions - low) / (high - low) * grid_size
    index = jnp.clip(jnp.floor(scaled).astype(jnp.int32), 0, grid_size - 1)  # [T, 2]
    flat = index[:, 0] * grid_size + index[:, 1]
    return jax.nn.one_hot(flat, grid_size * grid_size)


def occupancy(
    positions: jax.Array,
    grid_size: int,
    start: int | jax.Array = 0,
    stop: int | jax.Array | None = None,
    bounds: tuple[float, float] = ARENA_BOUNDS,
) -> jax.Array:
    """Normalised 2-D histogram of the positions at steps ``[start, stop)``.

    Equals ``np.histogram2d(x, y, grid_size, [bounds, bounds])`` divided by its
    total for positions inside ``bounds``; positions outside are clipped into the
    edge cells.

    Args:
        positions: ``[T, 2]`` one agent's positions.
        grid_size: cells per axis ``G`` (static).
        start: first step counted (may be traced).
        stop: one past the last step counted (may be traced; default ``T``).
        bounds: ``(low, high)`` extent of the grid on both axes (static).

    Returns:
        ``[G, G]`` (x bin, y bin) summing to 1, or all zeros if no step is counted.
    """
    steps = jnp.arange(positions.shape[0])
    stop = positions.shape[0] if stop is None else stop
    mask = ((steps >= start) & (steps < stop)).astype(jnp.float32)
    counts = mask @ _cells(positions, grid_size, bounds)
    total = jnp.sum(mask)
    histogram = counts / jnp.maximum(total, 1.0)
    return histogram.reshape(grid_size, grid_size)


def prefix_occupancies(
    positions: jax.Array,
    grid_size: int,
    window: int | None = None,
    bounds: tuple[float, float] = ARENA_BOUNDS,
) -> jax.Array:
    """Occupancy after every step: entry ``t`` is :func:`occupancy` of steps
    ``[max(0, t + 1 - window), t + 1)`` (all steps so far if ``window`` is None).

    One cumulative sum over the trajectory, so the ``T`` prefixes cost little more
    than one histogram.

    Args:
        positions: ``[T, 2]`` one agent's positions.
        grid_size: cells per axis ``G`` (static).
        window: look back at most this many steps (static), or ``None``.
        bounds: ``(low, high)`` extent of the grid (static).

    Returns:
        ``[T, G, G]``, each ``[G, G]`` summing to 1.
    """
    cumulative = jnp.cumsum(_cells(positions, grid_size, bounds), axis=0)  # [T, G*G]
    steps = jnp.arange(1, positions.shape[0] + 1, dtype=jnp.float32)
    if window is not None:
        if window < 1:
            raise ValueError(f"prefix_occupancies: window must be >= 1, got {window}")
        earlier = jnp.pad(cumulative, ((window, 0), (0, 0)))[: positions.shape[0]]
        cumulative = cumulative - earlier
        steps = jnp.minimum(steps, window)
    histograms = cumulative / steps[:, None]
    return histograms.reshape(positions.shape[0], grid_size, grid_size)


def last_window(
    positions: jax.Array, end: int | jax.Array, length: int
) -> tuple[jax.Array, jax.Array]:
    """The ``length`` steps before ``end``: steps ``[end - L, end)``, padded in front
    with zeros (mask false) when ``end < L``.

    Args:
        positions: ``[T, 2]`` one agent's positions.
        end: one past the window's last step, ``0 <= end <= T`` (may be traced).
        length: window length ``L`` (static).

    Returns:
        ``(window [L, 2], mask [L] bool)``; the latest step is last.
    """
    index = end - length + jnp.arange(length)
    mask = index >= 0
    window = positions[jnp.clip(index, 0, positions.shape[0] - 1)]
    return jnp.where(mask[:, None], window, 0.0), mask


def prefix_windows(positions: jax.Array, length: int) -> tuple[jax.Array, jax.Array]:
    """:func:`last_window` after every step (``end = 1 .. T``), for online use.

    Args:
        positions: ``[T, 2]`` one agent's positions.
        length: window length ``L`` (static).

    Returns:
        ``(windows [T, L, 2], masks [T, L])``.
    """
    ends = jnp.arange(1, positions.shape[0] + 1)
    return jax.vmap(last_window, in_axes=(None, 0, None))(positions, ends, length)


def recent_positions(
    positions: jax.Array, end: int | jax.Array, count: int
) -> jax.Array:
    """The ``count`` positions before ``end`` (steps ``[end - count, end)``),
    flattened; steps before the first repeat the first position.

    Beside an occupancy histogram (where the agent has been) they say where it
    is and which way it is moving, which the histogram's cells blur.

    Args:
        positions: ``[T, 2]`` one agent's positions.
        end: one past the last step, ``1 <= end <= T`` (may be traced).
        count: positions ``n`` (static, ``>= 1``).

    Returns:
        ``[2n]``: ``x_end-n, y_end-n, ..., x_end-1, y_end-1``.
    """
    if count < 1:
        raise ValueError(f"recent_positions: count must be >= 1, got {count}")
    index = jnp.clip(end - count + jnp.arange(count), 0, positions.shape[0] - 1)
    return positions[index].reshape(-1)


def window_occupancy(
    positions: np.ndarray, start: int, stop: int, grid_size: int
) -> np.ndarray:
    """``[C, G x G]`` occupancy of steps ``[start, stop)`` of every chain.

    Args:
        positions: ``[C, S, 2]`` one agent's positions over each chain.
    """
    hist = jax.vmap(lambda p: occupancy(p, grid_size, start, stop))(positions)
    return np.asarray(hist).reshape(positions.shape[0], -1)


def angular_steps(positions: jax.Array, centres: jax.Array) -> jax.Array:
    """Signed angle (rad) turned at each step around the centre nearest the agent
    before the step.

    For the step ``p_t -> p_{t+1}`` with ``c`` the centre nearest ``p_t``,
    ``v_prev = p_t - c`` and ``v_new = p_{t+1} - c``, the step is
    ``atan2(v_prev x v_new, v_prev . v_new)`` in ``(-pi, pi]``: positive
    counter-clockwise, as the ``tag_static`` shaping's ``sign(v_prev x v_new)``.
    On a circle around ``c`` at angular speed ``w`` (below ``pi``) every step is
    exactly ``w``.

    Args:
        positions: ``[T, 2]`` one agent's positions.
        centres: ``[M, 2]`` candidate centres (the obstacles, or the origin).

    Returns:
        ``[T - 1]`` angular steps.
    """
    v_prev = positions[:-1, None, :] - centres[None]  # [T-1, M, 2]
    v_new = positions[1:, None, :] - centres[None]
    nearest = jnp.argmin(jnp.sum(v_prev * v_prev, -1), axis=1)  # [T-1]
    cross = v_prev[..., 0] * v_new[..., 1] - v_prev[..., 1] * v_new[..., 0]
    dot = jnp.sum(v_prev * v_new, -1)
    angle = jnp.arctan2(cross, dot)  # [T-1, M]
    return jnp.take_along_axis(angle, nearest[:, None], axis=1)[:, 0]


def episode_angular_steps(positions: np.ndarray, centres: np.ndarray) -> np.ndarray:
    """``[N, T - 1]`` angular steps of every episode ``positions [N, T, 2]`` around
    its own nearest centre of ``centres [N, M, 2]``."""
    steps = jax.jit(jax.vmap(angular_steps))(
        jnp.asarray(positions, jnp.float32), jnp.asarray(centres, jnp.float32)
    )
    return np.asarray(steps, np.float64)


SQUARE_SYMMETRIES = np.array(
    [
        [[c, -s], [s, c]] @ np.diag([1, flip])
        for c, s in ((1, 0), (0, 1), (-1, 0), (0, -1))
        for flip in (1, -1)
    ]
)
"""``[8, 2, 2]``: the rotations of the square by 0, 90, 180 and 270 degrees, each
without and with a reflection in the x axis."""


def symmetrise(positions: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """``positions`` (``[N, T, 2]``, about the arena's centre) with each of the N
    trajectories mapped by one of ``SQUARE_SYMMETRIES`` drawn uniformly."""
    positions = np.asarray(positions)
    if positions.ndim != 3 or positions.shape[-1] != 2:
        raise InvalidParameterError(
            f"positions must have shape [N, T, 2], got {positions.shape}"
        )
    maps = SQUARE_SYMMETRIES[rng.integers(0, len(SQUARE_SYMMETRIES), len(positions))]
    return np.einsum("nij,ntj->nti", maps, positions)
