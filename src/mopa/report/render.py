"""Pictures of pursuit games: one frame per state, episodes as GIFs.

A frame shows the view ``[-VIEW_LIMIT, VIEW_LIMIT]^2`` over the whole square
canvas (x to the right, y up), so world point ``(x, y)`` lands on pixel column
``(x + VIEW_LIMIT) / (2 VIEW_LIMIT) * size`` and row
``(VIEW_LIMIT - y) / (2 VIEW_LIMIT) * size``. Inside it:

* the arena: a light frame at ``+-1`` and the shaded band between ``+-0.9`` and
  ``+-1`` where the prey starts paying the boundary penalty;
* obstacles as grey discs, predators as red discs and prey as green discs, each of
  its body radius, with an arrow from each agent to where its velocity would take
  it in ``VELOCITY_SECONDS``;
* resources (games that have them) as blue diamonds, hollow once collected;
* the prey's hidden intent corner (intent games) as a gold star inside a faint
  circle of radius ``intent_radius``;
* optionally a belief over the intent corners as a bar strip at the bottom (the
  true corner's bar in gold) and a predicted position as a purple ``x``.

Drawing uses matplotlib's Agg canvas directly (never ``pyplot``), so no global
state changes and nothing needs a display; GIFs are written with imageio.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import imageio.v3 as iio
import jax
import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.patches import Circle, FancyArrowPatch, Rectangle
from numpy.typing import ArrayLike

from mopa.core.checks import check_fits_memory
from mopa.core.files import atomic_write
from mopa.envs.base import Env
from mopa.envs.pursuit import INTENT_CORNERS, PursuitEnv
from mopa.envs.rollout import PolicyFn, rollout
from mopa.errors import InvalidParameterError

VIEW_LIMIT = 1.25
"""The canvas shows ``[-VIEW_LIMIT, VIEW_LIMIT]^2`` in world coordinates."""

VELOCITY_SECONDS = 0.3
"""Velocity arrows are ``VELOCITY_SECONDS * velocity`` long (world units)."""

CORNER_LABELS = ("NE", "NW", "SW", "SE")
"""Names of the intent corners, in the order of ``INTENT_CORNERS``."""

MIN_SIZE = 64
"""Smallest frame side in pixels that still leaves room for the text."""

PREDATOR_COLOUR = "#d62728"
PREY_COLOUR = "#2ca02c"
OBSTACLE_COLOUR = "#8c8c8c"
RESOURCE_COLOUR = "#1f77b4"
INTENT_COLOUR = "#f2b705"
PREDICTION_COLOUR = "#7b2cbf"
BELIEF_COLOUR = "#6b8cae"

_DPI = 100
_BASE_SIZE = 400  # frame side at which font and marker sizes are as written


def render_state(
    env: Env,
    state: Any,
    params: Any,
    *,
    size: int = 400,
    belief: ArrayLike | None = None,
    predicted: ArrayLike | None = None,
    title: str | None = None,
) -> np.ndarray:
    """Draw one pursuit game's state.

    Args:
        env: the pursuit game (a wrapper around one is fine).
        state: one game's :class:`~mopa.envs.pursuit.PursuitState` (no batch axis;
            a wrapper state holding it as ``env_state`` is fine). ``pos`` and
            ``vel`` are ``[N, 2]``, predators first, then prey.
        params: the game's parameters (scalar leaves); body radii and intent
            geometry are read from it.
        size: side of the square frame in pixels (at least ``MIN_SIZE``).
        belief: ``[K]`` probabilities over the intent corners to show as a bar
            strip, or ``None``.
        predicted: ``[2]`` world position to mark with an ``x`` (a model's guess,
            say), or ``None``.
        title: text added to the title, which always shows the game and the step.

    Returns:
        ``[size, size, 3]`` uint8 RGB image.

    Raises:
        InvalidParameterError: a batched or non-pursuit state, a bad ``size``, or a
            ``belief``/``predicted`` of the wrong shape.
    """
    size = _check_size(size)
    base = _unwrap_env(env)
    state = _unwrap_state(state)
    name = getattr(env, "name", type(env).__name__)
    pos = np.asarray(state.pos, np.float64)  # [N, 2]
    if pos.ndim != 2 or pos.shape[-1] != 2:
        raise InvalidParameterError(
            f"render_state draws one {name} game: state.pos must be [N, 2], got "
            f"{pos.shape}; index a batched state first"
        )
    vel = np.asarray(state.vel, np.float64)  # [N, 2]
    num_predators = int(base.team_sizes[0])
    if belief is not None:
        belief = np.asarray(belief, np.float64)
        if belief.ndim != 1 or belief.size == 0:
            raise InvalidParameterError(
                f"belief must be [K] probabilities, got shape {belief.shape}"
            )
    if predicted is not None:
        predicted = np.asarray(predicted, np.float64)
        if predicted.shape != (2,):
            raise InvalidParameterError(
                f"predicted must be a [2] position, got shape {predicted.shape}"
            )

    scale = size / _BASE_SIZE
    figure = Figure(figsize=(size / _DPI, size / _DPI), dpi=_DPI, facecolor="white")
    canvas = FigureCanvasAgg(figure)
    ax = figure.add_axes((0.0, 0.0, 1.0, 1.0))
    ax.set_xlim(-VIEW_LIMIT, VIEW_LIMIT)
    ax.set_ylim(-VIEW_LIMIT, VIEW_LIMIT)
    ax.set_axis_off()

    _draw_arena(ax)
    for xy in np.asarray(state.obstacle_pos, np.float64).reshape(-1, 2):
        ax.add_patch(
            Circle(
                tuple(xy),
                float(params.obstacle_radius),
                facecolor=OBSTACLE_COLOUR,
                edgecolor="#5f5f5f",
                linewidth=scale,
                zorder=2,
            )
        )
    _draw_resources(ax, state, scale)
    intent = _draw_intent(ax, base, state, params, scale)
    for i, (xy, v) in enumerate(zip(pos, vel, strict=True)):
        is_predator = i < num_predators
        colour = PREDATOR_COLOUR if is_predator else PREY_COLOUR
        radius = params.predator_radius if is_predator else params.prey_radius
        if np.hypot(*v) > 1e-6:
            # Under the body, so only the part outside the disc shows.
            ax.add_patch(
                FancyArrowPatch(
                    tuple(xy),
                    tuple(xy + VELOCITY_SECONDS * v),
                    arrowstyle="-|>",
                    mutation_scale=9 * scale,
                    shrinkA=0,
                    shrinkB=0,
                    color="#333333",
                    linewidth=1.2 * scale,
                    zorder=4,
                )
            )
        ax.add_patch(
            Circle(
                tuple(xy),
                float(radius),
                facecolor=colour,
                edgecolor="black",
                linewidth=0.8 * scale,
                zorder=5,
            )
        )
    if predicted is not None:
        ax.plot(
            *predicted,
            marker="x",
            markersize=12 * scale,
            markeredgewidth=3 * scale,
            color=PREDICTION_COLOUR,
            zorder=6,
        )
    if belief is not None:
        _draw_belief(figure, belief, intent, scale)

    text = f"{name}   step {int(np.asarray(state.step))}"
    if title:
        text = f"{text}   {title}"
    figure.text(
        0.5,
        1.0 - 0.5 * (VIEW_LIMIT - 1.0) / (2 * VIEW_LIMIT),
        text,
        ha="center",
        va="center",
        fontsize=11 * scale,
    )
    canvas.draw()
    return np.array(canvas.buffer_rgba())[..., :3]


def render_episode(
    env: Env,
    states: Any,
    params: Any,
    *,
    beliefs: ArrayLike | None = None,
    predictions: ArrayLike | None = None,
    **kwargs: Any,
) -> list[np.ndarray]:
    """Draw every state of one game, e.g. ``rollout(...).state`` unbatched.

    Args:
        env: the pursuit game.
        states: state pytree with a leading time axis: ``pos`` is ``[T, N, 2]``.
        params: the game's parameters.
        beliefs: ``[T, K]`` belief shown with each frame, or ``None``.
        predictions: ``[T, 2]`` predicted position shown with each frame, or
            ``None``.
        **kwargs: passed to :func:`render_state` (``size``, ``title``).

    Returns:
        ``T`` frames, each ``[size, size, 3]`` uint8.
    """
    states = jax.device_get(_unwrap_state(states))
    pos_shape = np.shape(states.pos)
    if len(pos_shape) != 3:
        raise InvalidParameterError(
            f"render_episode needs states with a leading time axis (pos [T, N, 2]), "
            f"got pos of shape {pos_shape}"
        )
    num_frames = pos_shape[0]
    beliefs = _per_frame("beliefs", beliefs, num_frames)
    predictions = _per_frame("predictions", predictions, num_frames)
    frames = []
    for t in range(num_frames):
        state_t = jax.tree.map(lambda leaf, t=t: leaf[t], states)
        belief = None if beliefs is None else beliefs[t]
        predicted = None if predictions is None else predictions[t]
        frames.append(
            render_state(
                env, state_t, params, belief=belief, predicted=predicted, **kwargs
            )
        )
    return frames


def save_gif(
    path: str | os.PathLike, frames: Sequence[np.ndarray] | np.ndarray, fps: float = 8
) -> Path:
    """Write frames as a GIF that loops forever, atomically.

    The GIF is written to a temporary file in the same directory and moved over
    ``path`` with ``os.replace``, so an existing file at ``path`` is either left
    as it was or replaced whole. Parent directories are created. GIF stores frame
    times in hundredths of a second, so the delay is ``1 / fps`` rounded to that,
    and consecutive identical frames are stored once with their times added.

    Args:
        path: where to write the GIF.
        frames: ``T`` frames, each ``[H, W, 3]`` uint8 (or one ``[T, H, W, 3]``
            array), all the same shape.
        fps: frames per second, > 0.

    Returns:
        ``path`` as a :class:`~pathlib.Path`.

    Raises:
        InvalidParameterError: no frames, frames of different or wrong shapes or
            a non-uint8 dtype, or ``fps`` not a positive number.
    """
    _check_fps(fps)
    if len(frames) == 0:
        raise InvalidParameterError("save_gif needs at least one frame, got none")
    first = np.shape(frames[0])
    for t, frame in enumerate(frames):
        frame = np.asarray(frame)
        if frame.shape != first:
            raise InvalidParameterError(
                f"save_gif: frame {t} has shape {frame.shape}, frame 0 has {first}"
            )
        if frame.ndim != 3 or frame.shape[-1] != 3 or frame.dtype != np.uint8:
            raise InvalidParameterError(
                f"save_gif: frames must be [H, W, 3] uint8, frame {t} is "
                f"{frame.shape} {frame.dtype}"
            )
    stack = np.stack([np.asarray(frame) for frame in frames])  # [T, H, W, 3]
    return atomic_write(
        path,
        lambda file: iio.imwrite(
            file,
            stack,
            extension=".gif",
            plugin="pillow",
            duration=1000.0 / fps,
            loop=0,
        ),
    )


def episode_gif(
    env: Env,
    params: Any,
    policy_fn: PolicyFn,
    key: jax.Array,
    path: str | os.PathLike,
    num_steps: int | None = None,
    fps: float = 8,
    *,
    size: int = 400,
) -> Path:
    """Play one game with ``policy_fn`` and save it as a GIF.

    Each frame is the state an action was taken in, so the GIF has ``num_steps``
    frames, from the reset state to the state before the last step. With
    ``num_steps`` beyond ``params.max_steps`` the game resets and play goes on.

    Args:
        env: the pursuit game.
        params: its parameters.
        policy_fn: ``(key, obs, state) -> actions`` for one game, as for
            :func:`mopa.envs.rollout`.
        key: PRNG key of the game.
        path: where to write the GIF.
        num_steps: frames to play; defaults to ``params.max_steps``.
        fps: frames per second of the GIF.
        size: side of each frame in pixels.

    Returns:
        ``path`` as a :class:`~pathlib.Path`.
    """
    _check_fps(fps)
    _check_size(size)
    if not isinstance(_unwrap_env(env), PursuitEnv):
        raise InvalidParameterError(
            f"render draws the pursuit games (tag and its variants), not "
            f"{getattr(env, 'name', type(env).__name__)}"
        )
    if num_steps is None:
        num_steps = int(np.asarray(params.max_steps))
    if num_steps < 1:
        raise InvalidParameterError(f"num_steps must be >= 1, got {num_steps}")
    check_fits_memory(  # every frame, then their stack
        "num_steps", 2 * num_steps * size * size * 3, f"{num_steps:,} frames"
    )
    trajectory = rollout(env, params, policy_fn, key, num_steps)
    frames = render_episode(env, trajectory.state, params, size=size)
    return save_gif(path, frames, fps)


# -- pieces ------------------------------------------------------------------------
def _check_size(size: int) -> int:
    if isinstance(size, bool) or not isinstance(size, int | np.integer):
        raise InvalidParameterError(f"size must be an integer, got {size!r}")
    if size < MIN_SIZE:
        raise InvalidParameterError(f"size must be >= {MIN_SIZE} pixels, got {size}")
    return int(size)


def _check_fps(fps: float) -> None:
    if (
        isinstance(fps, bool)
        or not isinstance(fps, int | float | np.integer | np.floating)
        or not math.isfinite(fps)
        or fps <= 0
    ):
        raise InvalidParameterError(f"fps must be a positive number, got {fps!r}")


def _per_frame(name: str, values: ArrayLike | None, num_frames: int) -> Any:
    """``values`` as a ``[T, ...]`` array checked to have one row per frame."""
    if values is None:
        return None
    values = np.asarray(values)
    if values.ndim != 2 or values.shape[0] != num_frames:
        raise InvalidParameterError(
            f"{name} must be [T, ...] with one row per frame (T = {num_frames}), "
            f"got shape {values.shape}"
        )
    return values


def _unwrap_env(env: Env) -> Env:
    return getattr(env, "unwrapped", env)


def _unwrap_state(state: Any) -> Any:
    """The pursuit state inside wrapper states (``env_state``)."""
    while hasattr(state, "env_state"):
        state = state.env_state
    if not hasattr(state, "pos") or not hasattr(state, "vel"):
        raise InvalidParameterError(
            f"render draws pursuit games (states with pos and vel); got "
            f"{type(state).__name__}"
        )
    return state


def _draw_arena(ax: Any) -> None:
    ax.add_patch(
        Rectangle((-1.0, -1.0), 2.0, 2.0, facecolor="#ececec", edgecolor="#9a9a9a")
    )
    ax.add_patch(
        Rectangle(
            (-0.9, -0.9),
            1.8,
            1.8,
            facecolor="white",
            edgecolor="#d2d2d2",
            linestyle="--",
            linewidth=0.8,
        )
    )


def _draw_resources(ax: Any, state: Any, scale: float) -> None:
    resource_pos = np.asarray(state.resource_pos, np.float64).reshape(-1, 2)
    collected = np.asarray(state.collected, bool).reshape(-1)
    for xy, done in zip(resource_pos, collected, strict=True):
        ax.plot(
            *xy,
            marker="D",
            markersize=9 * scale,
            markeredgewidth=1.5 * scale,
            markeredgecolor=RESOURCE_COLOUR,
            markerfacecolor="none" if done else RESOURCE_COLOUR,
            zorder=3,
        )


def _draw_intent(
    ax: Any, env: Env, state: Any, params: Any, scale: float
) -> int | None:
    """Draw the intent corner; returns the intent, or ``None`` without intents."""
    if not getattr(env, "num_intents", 0):
        return None
    intent = int(np.asarray(state.intent))
    corner = INTENT_CORNERS[intent] * float(params.intent_corner)
    ax.add_patch(
        Circle(
            tuple(corner),
            float(params.intent_radius),
            facecolor=INTENT_COLOUR,
            alpha=0.12,
            edgecolor="none",
            zorder=1,
        )
    )
    ax.add_patch(
        Circle(
            tuple(corner),
            float(params.intent_radius),
            facecolor="none",
            edgecolor=INTENT_COLOUR,
            alpha=0.5,
            linestyle="--",
            linewidth=scale,
            zorder=1,
        )
    )
    ax.plot(
        *corner,
        marker="*",
        markersize=18 * scale,
        markerfacecolor=INTENT_COLOUR,
        markeredgecolor="#8a6a00",
        markeredgewidth=0.8 * scale,
        zorder=3,
    )
    return intent


def _draw_belief(
    figure: Figure, belief: np.ndarray, intent: int | None, scale: float
) -> None:
    """A bar strip in the bottom margin: one bar per corner, true one in gold."""
    margin = (VIEW_LIMIT - 1.0) / (2 * VIEW_LIMIT)  # bottom band, figure fraction
    ax = figure.add_axes((0.6, 0.3 * margin, 0.3, 0.62 * margin))
    num = belief.size
    colours = [INTENT_COLOUR if k == intent else BELIEF_COLOUR for k in range(num)]
    ax.bar(np.arange(num), np.clip(belief, 0.0, 1.0), width=0.8, color=colours)
    ax.set_xlim(-0.5, num - 0.5)
    ax.set_ylim(0.0, 1.0)
    labels = CORNER_LABELS if num == len(CORNER_LABELS) else range(num)
    ax.set_xticks(np.arange(num), [str(label) for label in labels])
    ax.set_yticks([])
    ax.tick_params(axis="x", length=0, pad=1, labelsize=7 * scale)
    for side in ("top", "right", "left"):
        ax.spines[side].set_visible(False)
    ax.set_facecolor("none")
    figure.text(
        0.58,
        0.61 * margin,
        "belief",
        ha="right",
        va="center",
        fontsize=8 * scale,
    )


def belief_gif(
    env: Env,
    states: Any,
    params: Any,
    beliefs: np.ndarray,
    targets: np.ndarray,
    path: str | os.PathLike,
    *,
    size: int,
    title: str,
    fps: float = 4,
) -> int:
    """An episode as a GIF with the belief a team acted on at every step:
    ``beliefs [T, K]`` over the intents' ``targets [K, 2]``, drawn with the
    belief-weighted target (where the team thinks the opponent heads). Returns
    the number of frames."""
    frames = render_episode(
        env,
        states,
        params,
        beliefs=beliefs,
        predictions=beliefs @ targets,
        size=size,
        title=title,
    )
    save_gif(path, frames, fps=fps)
    return len(frames)
