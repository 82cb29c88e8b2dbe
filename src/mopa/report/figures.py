"""Writing the report's plots: every figure of a report or an experiment is saved
here, cropped to what is drawn on it, so a title or a label never runs off the
image's edge (a browser shows the PNG as it is; nothing would bring the cut part
back)."""

from __future__ import annotations

import io
import os
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
from matplotlib.figure import Figure

from mopa.core.files import atomic_write

PAD_INCHES = 0.1
"""White margin kept around the drawn contents."""


def save_png(figure: Figure, path: str | os.PathLike, dpi: float | None = None) -> Path:
    """Write ``figure`` as a PNG at ``path``, atomically.

    The image is the bounding box of everything drawn (``bbox_inches="tight"``)
    plus :data:`PAD_INCHES`: a title wider than the axes widens the image instead
    of being clipped at its edges.

    Args:
        figure: a laid-out figure (``tight_layout`` or constrained layout).
        path: the PNG to write.
        dpi: pixels per inch (default: the figure's own).

    Returns:
        ``path`` as a :class:`~pathlib.Path`.
    """
    buffer = io.BytesIO()
    figure.savefig(
        buffer,
        format="png",
        dpi=figure.dpi if dpi is None else dpi,
        bbox_inches="tight",
        pad_inches=PAD_INCHES,
        facecolor=figure.get_facecolor(),
    )
    return atomic_write(path, lambda file: file.write(buffer.getvalue()))


def plot_interval_bars(
    names: Sequence[str],
    tables: Sequence[tuple[str, str, Mapping[str, Mapping]]],
    path: str | os.PathLike,
    *,
    title: str,
    ylabel: str,
    markers: tuple[str, Mapping[str, float]] | None = None,
) -> Path:
    """Grouped bars with 95% intervals: one group per name, one bar per table.

    Args:
        names: the groups, in order (x axis).
        tables: ``(label, colour, {name: {"mean", "ci95": [lo, hi]}})`` per bar of
            a group; a name missing from a table leaves its bar out.
        path: the PNG to write (:func:`save_png`).
        title, ylabel: the axes' title and y label.
        markers: ``(label, {name: value})`` drawn as a black tick over each group
            that has a value (a reference figure, e.g. the research's).

    Returns:
        ``path`` as a :class:`~pathlib.Path`.
    """
    x = np.arange(len(names))
    width = 0.8 / len(tables)
    figure = Figure(figsize=(9.0, 4.2), dpi=100, facecolor="white")
    ax = figure.subplots()
    for i, (label, colour, table) in enumerate(tables):
        offset = (i - (len(tables) - 1) / 2) * width
        rows = [table.get(name) for name in names]
        means = np.array([np.nan if r is None else r["mean"] for r in rows])
        lo = np.array([np.nan if r is None else r["ci95"][0] for r in rows])
        hi = np.array([np.nan if r is None else r["ci95"][1] for r in rows])
        ax.bar(x + offset, means, width=width, color=colour, alpha=0.85, label=label)
        ax.errorbar(
            x + offset,
            means,
            yerr=[means - lo, hi - means],
            fmt="none",
            ecolor="black",
            capsize=3,
            linewidth=1,
        )
    if markers is not None:
        label, values = markers
        marks = [values.get(name, np.nan) for name in names]
        ax.plot(x, marks, "k_", markersize=22, markeredgewidth=2, label=label)
    ax.set_xticks(x, names, rotation=30, ha="right", fontsize=8)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.legend(fontsize=8)
    ax.grid(axis="y", alpha=0.3)
    figure.tight_layout()
    return save_png(figure, path)


def pyplot():
    """``matplotlib.pyplot`` with the file-only backend."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def save_figure(fig: Figure, path: Path) -> Path:
    """Write ``fig`` as a PNG (:func:`save_png`, at 120 dpi) and close it."""
    save_png(fig, path, dpi=120)
    pyplot().close(fig)
    return path
