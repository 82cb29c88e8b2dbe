"""Calibration plots of a belief: the reliability diagram, and accuracy and expected
calibration error by step.

They take plain arrays (what :mod:`mopa.opponent.calibration` computes, or what a
results file stores), draw on a matplotlib figure without ``pyplot`` and write
PNGs with :func:`mopa.report.figures.save_png`.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
from matplotlib.figure import Figure
from numpy.typing import ArrayLike

from mopa.errors import InvalidParameterError
from mopa.report.figures import save_png


def plot_reliability_diagram(
    confidence: ArrayLike,
    accuracy: ArrayLike,
    count: ArrayLike,
    path: str | os.PathLike,
    title: str = "Reliability diagram",
) -> Path:
    """Accuracy against confidence per bin, beside the diagonal of perfect
    calibration, with the share of predictions in each bin underneath.

    Args:
        confidence: ``[B]`` mean confidence per bin (NaN for empty bins).
        accuracy: ``[B]`` accuracy per bin (NaN for empty bins).
        count: ``[B]`` predictions per bin.
        path: where to write the PNG.
        title: the figure title.

    Returns:
        ``path``.
    """
    confidence, accuracy, count = (
        np.asarray(a, np.float64) for a in (confidence, accuracy, count)
    )
    if not confidence.shape == accuracy.shape == count.shape or confidence.ndim != 1:
        raise InvalidParameterError(
            "confidence, accuracy and count must be 1-D of equal length, got shapes "
            f"{confidence.shape}, {accuracy.shape}, {count.shape}"
        )
    num_bins = confidence.shape[0]
    edges = np.linspace(0.0, 1.0, num_bins + 1)
    centres = (edges[:-1] + edges[1:]) / 2
    width = 1.0 / num_bins
    filled = count > 0

    figure = Figure(figsize=(4.5, 5.5), dpi=100, facecolor="white")
    top, bottom = figure.subplots(
        2, 1, sharex=True, gridspec_kw={"height_ratios": [3, 1]}
    )
    top.plot([0, 1], [0, 1], "--", color="grey", label="perfect calibration")
    top.bar(
        centres[filled],
        accuracy[filled],
        width=width * 0.9,
        color="tab:blue",
        alpha=0.8,
        label="accuracy",
    )
    top.plot(
        confidence[filled], accuracy[filled], "o", color="tab:orange", ms=4,
        label="(confidence, accuracy)",
    )  # fmt: skip
    top.set_ylim(0, 1)
    top.set_ylabel("accuracy")
    top.set_title(title)
    top.legend(loc="upper left", fontsize=8)
    share = count / max(count.sum(), 1.0)
    bottom.bar(centres, share, width=width * 0.9, color="tab:grey")
    bottom.set_xlim(0, 1)
    bottom.set_xlabel("confidence")
    bottom.set_ylabel("share")
    figure.tight_layout()
    return save_png(figure, path)


def plot_calibration_by_step(
    accuracy: ArrayLike,
    ece: ArrayLike,
    path: str | os.PathLike,
    title: str = "Belief accuracy and calibration by step",
) -> Path:
    """Accuracy and expected calibration error ``[T]`` against the step (1-based).

    Returns:
        ``path``.
    """
    accuracy, ece = np.asarray(accuracy, np.float64), np.asarray(ece, np.float64)
    if accuracy.shape != ece.shape or accuracy.ndim != 1:
        raise InvalidParameterError(
            "accuracy and ece must be 1-D of equal length, got shapes "
            f"{accuracy.shape} and {ece.shape}"
        )
    steps = np.arange(1, accuracy.shape[0] + 1)
    figure = Figure(figsize=(5.5, 3.5), dpi=100, facecolor="white")
    axes = figure.subplots()
    axes.plot(steps, accuracy, "-o", ms=3, label="accuracy")
    axes.plot(steps, ece, "-s", ms=3, label="ECE")
    axes.set_ylim(0, 1)
    axes.set_xlabel("steps observed")
    axes.set_title(title)
    axes.legend(fontsize=8)
    axes.grid(alpha=0.3)
    figure.tight_layout()
    return save_png(figure, path)
