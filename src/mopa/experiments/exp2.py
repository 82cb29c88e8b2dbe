"""Exp 2 (``mopa experiment exp2``): directional shaping narrows the prey's
strategy, yet a VAE over single trajectories does not tell the policies apart.

On ``tag_static`` (obstacles pinned at ``(+-0.5, +-0.5)``) the prey gets a small
bonus for circling the obstacle nearest it clockwise (``cw``), counter-clockwise
(``ccw``) or none (``baseline``). Stages (each reused when its config is
unchanged):

1. ``train_{variant}``: GRU IQL co-training of each variant (the research's
   recipe, presets ``research_iql_rnn_tag_static_{variant}``, or with profile
   ``mopa`` mopa's, ``exp2_static_{variant}``), ``num_seeds`` seeds each.
2. ``data``: every seed's co-trained pair plays ``episodes_per_seed`` single
   episodes of its own variant; the label of an episode is its variant
   (``policy_id``) and its checkpoint (variant x seed).
3. ``mining`` (behaviour mining): the **prey's** signed angular step around the
   obstacle nearest it before the step (:func:`angular_steps`, positive is
   counter-clockwise: the shaping's own frame), pooled over every step of every
   episode of a variant. ``mean_dangle`` is its mean per variant; the 95%
   interval is a percentile bootstrap over episodes (resampled within each seed),
   and the per-seed means are kept. The same measure around the arena's centre is
   reported beside it (``mean_dangle_centre``). Its sign should match the shaping.
4. ``vae``: an MLP-VAE (KL annealed) over the prey's raw position sequence of one
   episode (25 x 2 numbers, :func:`~mopa.opponent.representations.raw_sequence`),
   fit on a training split of the episodes (stratified by variant) with
   ``encoder_seeds`` seeds. ``vae_ari`` is the adjusted Rand index of k-means
   (k = 3) on the held-out latent means against the variant, averaged over
   encoder seeds; ``vae_ari_checkpoint`` the same with k = variants x seeds
   against the checkpoint. A linear probe on the latents is reported for contrast.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from mopa.algos.presets import check_recipe
from mopa.core.checks import check_fields, check_probability
from mopa.core.stages import file_fingerprint
from mopa.envs import make
from mopa.errors import InvalidParameterError
from mopa.eval.intervals import bootstrap_mean
from mopa.eval.protocol import mean_std
from mopa.experiments import part1
from mopa.opponent import data as trajectory_data
from mopa.opponent.encoders import VAEConfig
from mopa.opponent.metrics import score_vae_seeds
from mopa.opponent.representations import (
    episode_angular_steps,
    raw_sequence,
    window_occupancy,
)
from mopa.report import exp2_report
from mopa.runs.registry import recipe_field, register_experiment

ENV = "tag_static"
VARIANTS = ("baseline", "cw", "ccw")
"""The shaping variants (presets ``exp2_static_{variant}``); an episode's
``policy_id`` is the index of its variant."""

RESEARCH = {
    "mean_dangle": {"baseline": 0.0002, "cw": -0.0108, "ccw": 0.0091},
    "std_dangle": {"baseline": 0.36, "cw": 0.37, "ccw": 0.36},
    "vae_ari_max": 0.03,
    "prey_ari": 0.008,
    "captures_per_episode": {"baseline": 2.2, "cw": 2.8, "ccw": 2.6},
}
"""The research's Exp 2 figures (README): mean and spread of the prey's angular
step (rad/step) per variant; the prey VAE's ARI against the policy (predators' at
most 0.025); the predators' captures per episode."""

HISTOGRAM_RANGE = 0.6
"""Angular-step histograms of the report span ``[-0.6, 0.6]`` rad."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class Exp2Config:
    """Exp 2: shaped prey on tag_static; behaviour mining and a trajectory VAE."""

    total_steps: int = 2_000_000
    """Environment steps per seed of each variant."""
    num_seeds: int = 6
    """Training seeds per variant. Seed ``s`` of every variant starts from the same
    networks and exploration streams, so variants can be compared seed by seed.
    Six, not the research's three: with three, the baseline's chance drift around
    the obstacles (about 0.01 rad/step either way) is as large as the shaping's
    effect (RESULTS.md, Exp 2)."""
    rnn: bool = True
    """Train the presets' GRU trunk (the research's); ``False`` trains an MLP trunk
    instead (the quick profile: it compiles in about half the time)."""
    hidden: tuple[int, ...] | None = None
    """Trunk widths of the trained networks; ``None``: the recipe's (the research's
    ``Dense(64) -> GRU(64)``, mopa's 128-128)."""
    recipe: str = recipe_field()
    """Training recipe: ``research`` (presets ``research_iql_rnn_tag_static_*``:
    width 64, whole-episode replay, RAdam, the research's shaping constants) or
    ``mopa`` (``exp2_static_*``)."""
    episodes_per_seed: int = 100
    """Episodes each seed's co-trained pair plays (the research: 100 per
    checkpoint, 900 in all)."""
    test_fraction: float = 0.25
    """Share of episodes held out of the VAE's training (stratified by variant)."""
    latent_size: int = 8
    """VAE latent size (the research's 8)."""
    vae_hidden: tuple[int, ...] = (128, 128)
    """VAE hidden widths."""
    vae_updates: int = 8000
    """VAE Adam updates (the research's 8k)."""
    kl_warmup: int = 2000
    """Updates over which the KL weight rises to 1."""
    decoder_std: float = 0.1
    """Standard deviation of the VAE's Gaussian likelihood on positions."""
    encoder_seeds: int = 3
    """VAE seeds (``vae_ari`` is their mean)."""
    bootstrap: int = 2000
    """Bootstrap resamples of the angular-step intervals."""
    histogram_bins: int = 48
    """Bins of the angular-step histograms kept for the plots."""
    grid_size: int = 16
    """Cells per axis of the occupancy maps kept for the plots."""
    seed: int = 0
    """Base seed of data, split, encoders and bootstrap."""

    def __post_init__(self):
        check_fields(self)
        check_recipe(self.recipe)
        if self.hidden is not None:
            object.__setattr__(self, "hidden", tuple(self.hidden))
        object.__setattr__(self, "vae_hidden", tuple(self.vae_hidden))
        for name in (
            "total_steps", "num_seeds", "episodes_per_seed", "latent_size",
            "vae_updates", "encoder_seeds", "bootstrap", "histogram_bins",
            "grid_size",
        ):  # fmt: skip
            if getattr(self, name) < 1:
                raise InvalidParameterError(
                    f"{name} must be >= 1, got {getattr(self, name)}"
                )
        if self.kl_warmup < 0:
            raise InvalidParameterError(f"kl_warmup must be >= 0, got {self.kl_warmup}")
        if not self.decoder_std > 0:
            raise InvalidParameterError(
                f"decoder_std must be > 0, got {self.decoder_std}"
            )
        check_probability("test_fraction", self.test_fraction)

    def vae(self, horizon: int) -> VAEConfig:
        """The VAE over raw sequences of ``horizon`` positions."""
        return VAEConfig(
            input_size=2 * horizon,
            hidden=self.vae_hidden,
            latent_size=self.latent_size,
            num_updates=self.vae_updates,
            kl_warmup=self.kl_warmup,
            decoder_std=self.decoder_std,
        )


# -- stages -------------------------------------------------------------------------
def train_config(config: Exp2Config, variant: str, num_seeds: int):
    """The IQL config of shaping variant ``variant`` under ``config``'s recipe."""
    train = part1.train_config(
        f"exp2_static_{variant}", config.total_steps, num_seeds, config.recipe
    )
    hidden = train.hidden if config.hidden is None else config.hidden
    return train.replace(rnn=config.rnn, hidden=hidden)


def _train(config, num_seeds, progress, stages) -> dict[str, dict]:
    runs = {}
    for variant in VARIANTS:
        train = train_config(config, variant, num_seeds)
        runs[variant] = {
            **part1.train_stage(stages, f"train_{variant}", train, progress),
            "env_overrides": dict(train.env_overrides),
        }
    return runs


def _dataset(config, num_seeds, runs, stages) -> str:
    described = {
        "runs": [runs[v] for v in VARIANTS],
        "episodes_per_seed": config.episodes_per_seed,
        "num_seeds": num_seeds,
        "seed": config.seed,
    }

    def build(folder: Path) -> dict[str, Any]:
        parts = []
        for index, variant in enumerate(VARIANTS):
            parts.append(
                trajectory_data.play_dataset(
                    ENV,
                    runs[variant]["env_overrides"],
                    part1.load_teams(runs[variant]["run"]),
                    jax.random.fold_in(jax.random.key(config.seed), index),
                    num_seeds=num_seeds,
                    num_chains=config.episodes_per_seed,
                    episodes_per_chain=1,
                    policy_id=index,
                    policy_names=VARIANTS,
                )
            )
        dataset = trajectory_data.concatenate(parts, VARIANTS)
        path = trajectory_data.save_dataset(folder / "dataset.npz", dataset)
        return {"path": str(path), "num_episodes": dataset.num_episodes}

    return stages.run("data", described, build)["path"]


def _prey_episodes(dataset) -> tuple[np.ndarray, np.ndarray]:
    """The prey's ``[N, T, 2]`` positions and the obstacles ``[N, M, 2]`` of every
    episode."""
    prey = dataset.episodes("pos")[:, :, dataset.agent_index("prey")]
    obstacles = dataset.episode_labels("obstacle_pos")
    return prey, obstacles


def _mine(config, data_path, stages) -> dict[str, Any]:
    described = {
        "data": file_fingerprint(data_path),
        **{
            k: getattr(config, k)
            for k in ("bootstrap", "histogram_bins", "grid_size", "seed")
        },
    }

    def run(folder: Path) -> dict[str, Any]:
        del folder
        dataset = trajectory_data.load_dataset(data_path)
        prey, obstacles = _prey_episodes(dataset)
        variant = dataset.episode_labels("policy_id")
        seed = dataset.episode_labels("seed_index")
        frames = {
            "obstacle": episode_angular_steps(prey, obstacles),
            "centre": episode_angular_steps(prey, np.zeros((len(prey), 1, 2))),
        }
        edges = np.linspace(
            -HISTOGRAM_RANGE, HISTOGRAM_RANGE, config.histogram_bins + 1
        )
        result: dict[str, Any] = {
            "mean_dangle": {},
            "mean_dangle_ci95": {},
            "mean_dangle_by_seed": {},
            "std_dangle": {},
            "mean_dangle_centre": {},
            "mean_dangle_centre_ci95": {},
            "histogram": {"edges": edges.tolist(), "counts": {}},
            "occupancy": {},
        }
        for index, name in enumerate(VARIANTS):
            rows = variant == index
            for frame, key in (
                ("obstacle", "mean_dangle"),
                ("centre", "mean_dangle_centre"),
            ):
                steps = frames[frame][rows]
                result[key][name] = float(steps.mean())
                result[f"{key}_ci95"][name] = bootstrap_mean(
                    steps, seed[rows], config.bootstrap, config.seed + index
                )
            steps = frames["obstacle"][rows]
            result["std_dangle"][name] = float(steps.std())
            result["mean_dangle_by_seed"][name] = [
                float(steps[seed[rows] == s].mean()) for s in np.unique(seed[rows])
            ]
            counts, _ = np.histogram(np.clip(steps, edges[0], edges[-1]), edges)
            result["histogram"]["counts"][name] = counts.tolist()
            occupancy = window_occupancy(
                prey[rows], 0, prey.shape[1], config.grid_size
            ).mean(0)
            result["occupancy"][name] = occupancy.reshape(
                config.grid_size, config.grid_size
            ).tolist()
        result["num_episodes"] = {
            name: int(np.sum(variant == i)) for i, name in enumerate(VARIANTS)
        }
        result["obstacles"] = np.asarray(obstacles[0]).tolist()
        return result

    return stages.run("mining", described, run)


def _encode(config, data_path, stages) -> dict[str, Any]:
    described = {
        "data": file_fingerprint(data_path),
        **{
            k: getattr(config, k)
            for k in (
                "test_fraction", "latent_size", "vae_hidden", "vae_updates",
                "kl_warmup", "decoder_std", "encoder_seeds", "seed",
            )
        },
    }  # fmt: skip

    def run(folder: Path) -> dict[str, Any]:
        del folder
        dataset = trajectory_data.load_dataset(data_path)
        prey, _ = _prey_episodes(dataset)
        horizon = prey.shape[1]
        features = np.asarray(
            jax.vmap(lambda p: raw_sequence(p, horizon))(jnp.asarray(prey))
        )  # [N, 2T]
        variant = dataset.episode_labels("policy_id").astype(np.int64)
        seed = dataset.episode_labels("seed_index").astype(np.int64)
        checkpoint = variant * (int(seed.max()) + 1) + seed
        train, test = trajectory_data.split_indices(
            len(variant), config.test_fraction, config.seed, checkpoint
        )
        num_checkpoints = len(np.unique(checkpoint))
        (by_variant, by_checkpoint), _ = score_vae_seeds(
            config.vae(horizon),
            features,
            train,
            test,
            [(variant, len(VARIANTS)), (checkpoint, num_checkpoints)],
            config.encoder_seeds,
            config.seed * 1000,
        )

        def stats(scores, key):
            return mean_std([s[key] for s in scores])

        return {
            "vae_ari": stats(by_variant, "ari"),
            "vae_nmi": stats(by_variant, "nmi"),
            "latent_probe": stats(by_variant, "probe"),
            "vae_ari_checkpoint": stats(by_checkpoint, "ari"),
            "vae_nmi_checkpoint": stats(by_checkpoint, "nmi"),
            "vae_ari_by_encoder_seed": [s["ari"] for s in by_variant],
            "num_train": int(len(train)),
            "num_test": int(len(test)),
            "num_checkpoints": num_checkpoints,
        }

    return stages.run("vae", described, run)


def predator_captures(config: Exp2Config, data_path: str, runs: dict) -> dict:
    """Captures per episode of each variant's greedy co-trained predators in the
    dataset's episodes: the mean, its 95% bootstrap interval (episodes resampled
    within seeds) and each seed's mean. Every predator is paid the game's
    ``capture_reward`` per predator-prey overlap, so a predator's reward over the
    episode divided by it counts the captures."""
    dataset = trajectory_data.load_dataset(data_path)
    variant = dataset.episode_labels("policy_id")
    seed = dataset.episode_labels("seed_index")
    rewards = dataset.episodes("rewards.predator")[:, :, 0].sum(1)  # [N]
    out: dict[str, dict] = {"mean": {}, "ci95": {}, "by_seed": {}}
    for index, name in enumerate(VARIANTS):
        reward = make(ENV, **runs[name]["env_overrides"])[1].capture_reward
        rows = variant == index
        captures = rewards[rows] / float(reward)
        out["mean"][name] = float(captures.mean())
        out["ci95"][name] = bootstrap_mean(
            captures, seed[rows], config.bootstrap, config.seed + index
        )
        out["by_seed"][name] = [
            float(captures[seed[rows] == s].mean()) for s in np.unique(seed[rows])
        ]
    return out


def run_exp2(config: Exp2Config, seeds: int | None, progress, stages) -> dict:
    """Run Exp 2; see the module docstring for the stages and the figures."""
    num_seeds = config.num_seeds if seeds is None else seeds
    runs = _train(config, num_seeds, progress, stages)
    data_path = _dataset(config, num_seeds, runs, stages)
    mined = _mine(config, data_path, stages)
    encoded = _encode(config, data_path, stages)
    captures = predator_captures(config, data_path, runs)
    progress(
        "mean angular step "
        + ", ".join(f"{k} {v:+.4f}" for k, v in mined["mean_dangle"].items())
        + f"; VAE ARI {encoded['vae_ari']['mean']:.3f}; captures per episode "
        + ", ".join(f"{k} {v:.2f}" for k, v in captures["mean"].items())
    )
    return {
        **mined,
        "captures_per_episode": captures,
        "vae_ari": encoded["vae_ari"]["mean"],
        "vae_ari_std": encoded["vae_ari"]["std"],
        "vae": encoded,
        "training": {v: runs[v]["summary"] for v in VARIANTS},
        "num_seeds": num_seeds,
        "research": RESEARCH,
        "stage_wall_s": dict(stages.timing_s),
    }


# -- report -------------------------------------------------------------------------


register_experiment(
    "exp2",
    run_exp2,
    {
        "default": Exp2Config(),
        "mopa": Exp2Config(recipe="mopa", hidden=(128, 128)),
        "quick": Exp2Config(
            recipe="mopa",
            total_steps=256,
            num_seeds=1,
            rnn=False,
            hidden=(16, 16),
            episodes_per_seed=12,
            vae_updates=20,
            kl_warmup=5,
            encoder_seeds=1,
            bootstrap=20,
        ),
    },
    "default",
    plot_fn=exp2_report.write_report,
    description="Exp 2: shaped prey on tag_static; behaviour mining (angular step) "
    "and a trajectory VAE that does not identify the policy (negative)",
    markdown_fn=exp2_report.results_markdown,
)
