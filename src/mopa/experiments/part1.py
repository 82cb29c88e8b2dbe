"""Pieces the Part 1 experiments (``exp2``, ``exp4``, ``exp5``) share: training
the specialists as resumable stages, playing labelled trajectory datasets from
their checkpoints, occupancy features over windows of a chain, VAE sweeps scored
with scikit-learn metrics, and small plotting helpers.

Host-side drivers around the jitted library code (:mod:`mopa.algos`,
:mod:`mopa.opponent`); nothing here is jitted itself.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import jax
import numpy as np

from mopa.algos.config import TrainConfig
from mopa.algos.driver import run_training
from mopa.algos.presets import recipe_preset
from mopa.envs import make
from mopa.errors import InvalidParameterError
from mopa.experiments.stages import Stages
from mopa.opponent import data as trajectory_data
from mopa.opponent.encoders import VAEConfig, make_train, vae_encode
from mopa.opponent.metrics import cluster_scores, probe_accuracy_split
from mopa.opponent.representations import occupancy
from mopa.players import PolicyPlayer
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


# -- datasets --------------------------------------------------------------------------
def play_dataset(
    env_name: str,
    env_overrides: dict[str, Any],
    teams: dict[str, tuple[Any, Any]],
    key: jax.Array,
    *,
    num_seeds: int,
    num_chains: int,
    episodes_per_chain: int,
    policy_id: int,
    policy_names: tuple[str, ...],
) -> trajectory_data.TrajectoryDataset:
    """Chains of every seed of one co-trained run, each seed against itself.

    Seed ``s``'s predators play seed ``s``'s prey (co-trained pairs); chains of
    all seeds are pooled, ``seed_index`` telling them apart.
    """
    env, params = make(env_name, **env_overrides)
    players, stacks = [], []
    for team in env.team_names:
        if team not in teams:
            raise InvalidParameterError(f"the run has no policy for team {team!r}")
        spec, stack = teams[team]
        players.append(PolicyPlayer(spec))
        stacks.append(stack)
    parts = []
    for seed in range(num_seeds):
        parts.append(
            trajectory_data.generate(
                env,
                params,
                tuple(players),
                tuple(seed_params(s, seed) for s in stacks),
                jax.random.fold_in(key, seed),
                num_chains=num_chains,
                episodes_per_chain=episodes_per_chain,
                policy_id=policy_id,
                seed_index=seed,
                policy_names=policy_names,
            )
        )
    return trajectory_data.concatenate(parts)


def window_occupancy(
    positions: np.ndarray, start: int, stop: int, grid_size: int
) -> np.ndarray:
    """``[C, G x G]`` occupancy of steps ``[start, stop)`` of every chain.

    Args:
        positions: ``[C, S, 2]`` one agent's positions over each chain.
    """
    hist = jax.vmap(lambda p: occupancy(p, grid_size, start, stop))(positions)
    return np.asarray(hist).reshape(positions.shape[0], -1)


# -- VAE sweeps ---------------------------------------------------------------------
@functools.lru_cache(maxsize=16)
def _vae_train(config: VAEConfig):
    """One jitted trainer per config, so a sweep compiles once per data shape."""
    return jax.jit(make_train(config))


def fit_vae(config: VAEConfig, features: np.ndarray, seed: int) -> Any:
    """VAE parameters trained on ``features [N, D]`` with encoder seed ``seed``."""
    params, _ = _vae_train(config)(
        jax.random.key(seed), np.asarray(features, np.float32)
    )
    return params


def latent_means(config: VAEConfig, params: Any, features: np.ndarray) -> np.ndarray:
    """``[N, Z]`` posterior means of ``features [N, D]``."""
    mean, _ = vae_encode(config, params, np.asarray(features, np.float32))
    return np.asarray(mean)


def score_latents(
    train_z: np.ndarray,
    train_labels: np.ndarray,
    test_z: np.ndarray,
    test_labels: np.ndarray,
    num_clusters: int,
    seed: int,
) -> dict[str, float]:
    """ARI / NMI of k-means on the held-out latents, and a linear probe fit on the
    training latents and scored on the held-out ones."""
    clusters = cluster_scores(test_z, test_labels, num_clusters, "kmeans", seed)
    probe = probe_accuracy_split(train_z, train_labels, test_z, test_labels, seed)
    return {"ari": clusters.ari, "nmi": clusters.nmi, "probe": probe}


def mean_std(values: list[float]) -> dict[str, float]:
    """``{"mean", "std"}`` over encoder seeds."""
    array = np.asarray(values, np.float64)
    return {"mean": float(array.mean()), "std": float(array.std())}


# -- plotting ------------------------------------------------------------------------
