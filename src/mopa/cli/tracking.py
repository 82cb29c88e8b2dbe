"""Experiment trackers for ``mopa train``: TensorBoard (tensorboardX) and Weights &
Biases, used only when installed and asked for. Each logs every update's metrics,
averaged over seeds, against environment steps per seed."""

from __future__ import annotations

import importlib
import math
from collections.abc import Callable
from pathlib import Path

import numpy as np

from mopa.errors import MopaError

ChunkLogger = Callable[[int, dict[str, np.ndarray]], None]


TRACKERS = {"tensorboard": "tensorboardX", "wandb": "wandb"}
"""The trackers and the package each needs."""


def require_tracker(name: str):
    """The package of tracker ``name`` (imported), or an error saying what to
    install; called before a run starts, so a missing tracker costs nothing."""
    module = TRACKERS[name]
    try:
        return importlib.import_module(module)
    except ImportError:
        raise MopaError(
            f"{module} is not installed; pip install {module} to use this tracker"
        ) from None


def tensorboard_logger(folder: Path, steps_per_update: int) -> ChunkLogger:
    """Scalars in TensorBoard event files under ``folder``."""
    writer = require_tracker("tensorboard").SummaryWriter(str(folder))

    def log(first_update: int, rows: dict[str, np.ndarray]) -> None:
        for name, values in rows.items():
            means = _seed_means(values)
            for i, value in enumerate(means):
                if math.isfinite(value):
                    step = (first_update + i + 1) * steps_per_update
                    writer.add_scalar(name, value, step)
        writer.flush()

    return log


def wandb_logger(project: str, config: dict, steps_per_update: int) -> ChunkLogger:
    """A Weights & Biases run in ``project``."""
    run = require_tracker("wandb").init(project=project, config=config)

    def log(first_update: int, rows: dict[str, np.ndarray]) -> None:
        count = next(iter(rows.values())).shape[1] if rows else 0
        means = {name: _seed_means(values) for name, values in rows.items()}
        for i in range(count):
            step = (first_update + i + 1) * steps_per_update
            run.log(
                {k: float(v[i]) for k, v in means.items() if math.isfinite(v[i])},
                step=step,
            )

    return log


def _seed_means(values: np.ndarray) -> np.ndarray:
    values = np.asarray(values, np.float64)
    finite = np.isfinite(values)
    total = np.where(finite, values, 0.0).sum(0)
    count = finite.sum(0)
    return np.where(count > 0, total / np.maximum(count, 1), np.nan)
