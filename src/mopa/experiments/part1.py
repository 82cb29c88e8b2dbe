"""Pieces the Part 1 experiments (``exp2``, ``exp4``, ``exp5``) share: training
the specialists as resumable stages, playing labelled trajectory datasets from
their checkpoints, occupancy features over windows of a chain, VAE sweeps scored
with scikit-learn metrics, and small plotting helpers.

Host-side drivers around the jitted library code (:mod:`mopa.algos`,
:mod:`mopa.opponent`); nothing here is jitted itself.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jax

from mopa.algos.config import TrainConfig
from mopa.algos.driver import run_training
from mopa.algos.presets import recipe_preset
from mopa.core.stages import Stages
from mopa.policy import read_policy_file

RUN_FOLDER = "run"
"""Sub-folder of a training stage that holds the ``mopa train`` run."""


# -- training --------------------------------------------------------------------------
def train_config(
    preset_name: str, total_steps: int, num_seeds: int, recipe: str
) -> TrainConfig:
    """Experiment preset ``preset_name`` under ``recipe`` (``research`` or ``mopa``:
    :func:`~mopa.algos.presets.recipe_preset`) with the experiment's budget."""
    config = recipe_preset(preset_name, recipe)
    num_chunks = max(1, min(config.num_chunks, total_steps // config.steps_per_update))
    return config.replace(
        total_steps=total_steps, num_seeds=num_seeds, num_chunks=num_chunks
    )


def train_stage(
    stages: Stages, name: str, config: TrainConfig, progress
) -> dict[str, Any]:
    """Train ``config`` as stage ``name`` (resuming an interrupted run).

    Returns:
        ``{"run": run folder, "summary": final figures}``.
    """

    def train(folder: Path) -> dict[str, Any]:
        out = folder / RUN_FOLDER

        def report(p):
            progress(
                f"[{name}] chunk {p.chunk}/{p.num_chunks} "
                f"{p.env_steps}/{p.total_env_steps} steps "
                f"{p.chunk_steps_per_s:,.0f} steps/s"
            )

        result = run_training(config, out=out, progress=report)
        summary = {
            k: v
            for k, v in result.summary.items()
            if isinstance(v, (int, float, str)) and not isinstance(v, bool)
        }
        return {"run": str(out), "summary": summary}

    return stages.run(name, config.to_dict(), train)


def load_teams(run: str | Path) -> dict[str, tuple[Any, Any]]:
    """``{team: (PolicySpec, params [S, ...])}`` of a training run folder."""
    return read_policy_file(run).teams


def seed_params(params: Any, seed: int) -> Any:
    """One seed's parameters out of a ``[S, ...]`` stack."""
    return jax.tree.map(lambda x: x[seed], params)
