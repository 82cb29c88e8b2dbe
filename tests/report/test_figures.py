"""Saved plots hold everything drawn on them: no title or label reaches an edge of
the PNG (where a browser would show it cut off), for the helper and for every plot
of the Exp 6 report."""

import imageio.v3 as iio
import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from mopa.report.calibration import plot_calibration_by_step, plot_reliability_diagram
from mopa.report.figures import PAD_INCHES, save_png
from mopa.report.intent_report import ONLINE_BELIEF, plot_conditions

LONG_TITLE = f"Online belief ({ONLINE_BELIEF}): accuracy and ECE by step"


def border(image: np.ndarray, width: int = 4) -> np.ndarray:
    """``[P, 3]`` the pixels of a band ``width`` wide along the image's edges
    (inside the saved margin of ``PAD_INCHES``, 10 px at 100 dpi; a clipped title's
    letters fall in it)."""
    rgb = image[..., :3]
    bands = (rgb[:width], rgb[-width:], rgb[:, :width], rgb[:, -width:])
    return np.concatenate([band.reshape(-1, 3) for band in bands])


def dark_columns(image: np.ndarray) -> np.ndarray:
    """Indices of the columns holding a dark (text) pixel."""
    return np.flatnonzero((image[..., :3] < 100).all(-1).any(0))


def test_a_title_wider_than_its_figure_is_saved_whole(tmp_path):
    figure = Figure(figsize=(3.0, 2.0), dpi=100, facecolor="white")
    axes = figure.subplots()
    axes.plot([0, 1], [0, 1])
    title = axes.set_title(LONG_TITLE)
    figure.tight_layout()
    # On the figure's own 300 px canvas the title runs past both edges ...
    extent = title.get_window_extent(FigureCanvasAgg(figure).get_renderer())
    assert extent.x0 < 0 and extent.x1 > 300
    # ... saved, the image widens to hold it, with a white margin all round.
    image = iio.imread(save_png(figure, tmp_path / "plot.png"))
    assert image.shape[1] > 300
    assert np.all(border(image) == 255)
    margin = int(PAD_INCHES * 100)
    columns = dark_columns(image)
    assert columns.min() >= margin - 2 and columns.max() <= image.shape[1] - margin + 1


def test_save_png_keeps_the_figure_dpi_unless_given(tmp_path):
    figure = Figure(figsize=(2.0, 2.0), dpi=50, facecolor="white")
    figure.subplots().plot([0, 1], [1, 0])
    small = iio.imread(save_png(figure, tmp_path / "small.png"))
    large = iio.imread(save_png(figure, tmp_path / "large.png", dpi=100))
    assert small.shape[0] < 110 and large.shape[0] > 190  # 2 in at 50 and 100 dpi


def test_every_plot_of_the_intent_report_is_unclipped(tmp_path):
    names = ["unaware", "oracle", "belief_planner", "a_condition_with_a_long_name"]
    row = {"mean": 1.5, "ci95": [1.0, 2.0]}
    results = {
        "conditions": dict.fromkeys(names, row),
        "conditions_common_opponent": dict.fromkeys(names, row),
    }
    paths = [
        plot_conditions(results, {"oracle": 2.0}, tmp_path / "conditions.png"),
        plot_calibration_by_step(
            np.linspace(0.25, 1.0, 25),
            np.linspace(0.1, 0.0, 25),
            tmp_path / "calibration.png",
            title=LONG_TITLE,
        ),
        plot_reliability_diagram(
            [0.3, np.nan, 0.95],
            [0.35, np.nan, 0.9],
            [10, 0, 90],
            tmp_path / "reliability.png",
            title=f"Online belief ({ONLINE_BELIEF}), every step",
        ),
    ]
    for path in paths:
        image = iio.imread(path)
        assert np.all(border(image) == 255), path.name
        assert len(dark_columns(image)) > 0, path.name
