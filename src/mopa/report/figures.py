"""Writing the report's plots: every figure of a report or an experiment is saved
here, cropped to what is drawn on it, so a title or a label never runs off the
image's edge (a browser shows the PNG as it is; nothing would bring the cut part
back)."""

from __future__ import annotations

import io
import os
from pathlib import Path

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
