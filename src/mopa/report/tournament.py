"""Tournament results on disk: JSON and markdown files, and a heatmap of one
metric (rows: side A, columns: side B; each cell annotated ``mean ± CI
half-width``).

Drawing uses matplotlib's Agg canvas directly (never ``pyplot``), so no global
state changes and nothing needs a display.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
from matplotlib.figure import Figure

from mopa.core.files import atomic_write, write_json
from mopa.errors import InvalidParameterError
from mopa.eval.tournament import TournamentResult
from mopa.report.figures import save_png


def save_tournament(result: TournamentResult, path: str | os.PathLike) -> Path:
    """Write ``result.to_json()`` to ``path`` (atomically)."""
    return write_json(path, result.to_json())


def load_tournament(path: str | os.PathLike) -> TournamentResult:
    """Read a tournament written by :func:`save_tournament`.

    Raises:
        InvalidParameterError: the file is missing or not a tournament.
    """
    path = Path(path)
    try:
        return TournamentResult.from_json(json.loads(path.read_text()))
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise InvalidParameterError(
            f"{path} is not a readable tournament ({type(error).__name__})"
        ) from None


def save_tournament_markdown(
    result: TournamentResult, path: str | os.PathLike, metric: str = "captures"
) -> Path:
    """Write ``result.to_markdown(metric)`` to ``path`` (atomically)."""
    text = result.to_markdown(metric)
    return atomic_write(path, lambda file: file.write(text.encode()))


def plot_tournament_heatmap(
    result: TournamentResult,
    path: str | os.PathLike,
    metric: str = "captures",
    digits: int = 2,
    cmap: str = "viridis",
) -> Path:
    """Draw the per-cell mean of ``metric`` as a heatmap and write it as a PNG.

    Args:
        result: the tournament.
        path: the PNG file to write (parent folders are created).
        metric: one of ``result.metric_names``.
        digits: decimals in each cell's ``mean ± half-width`` label.
        cmap: matplotlib colour map name.

    Returns:
        ``path`` as a :class:`~pathlib.Path`.

    Raises:
        InvalidParameterError: an unknown metric.
    """
    stats = result.summary(metric)
    mean = np.asarray(stats["mean"])  # [R, C]
    half = (stats["ci95"][..., 1] - stats["ci95"][..., 0]) / 2
    rows, columns = mean.shape
    figure = Figure(figsize=(2.6 + 1.3 * columns, 1.6 + 0.6 * rows), dpi=100)
    axes = figure.add_subplot()
    image = axes.imshow(mean, cmap=cmap, aspect="auto")
    figure.colorbar(image, ax=axes, label=metric)
    low, high = np.nanmin(mean), np.nanmax(mean)
    middle = (low + high) / 2
    for r in range(rows):
        for c in range(columns):
            # Dark text on the bright end of the map, light text on the dark end.
            colour = "black" if mean[r, c] > middle else "white"
            axes.text(
                c,
                r,
                f"{mean[r, c]:.{digits}f}\n± {half[r, c]:.{digits}f}",
                ha="center",
                va="center",
                color=colour,
                fontsize=8,
            )
    axes.set_xticks(range(columns), result.column_names, rotation=30, ha="right")
    axes.set_yticks(range(rows), result.row_names)
    axes.set_xlabel(f"{result.teams[1]} (side B)")
    axes.set_ylabel(f"{result.teams[0]} (side A)")
    pairs, episodes = result.returns.shape[2:4]
    axes.set_title(
        f"{metric}\nmean ± 95% CI, {pairs} seed pairs x {episodes} episodes",
        fontsize=9,
    )
    figure.tight_layout()
    return save_png(figure, path)
