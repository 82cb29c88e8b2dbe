"""Exp 5 (``mopa experiment exp5``): on the balanced resource game the prey expresses
its strategy, and the three preconditions of the co-training plan follow.

Stages (each reused when its config is unchanged):

1. ``train_{algo}_{placement}``: circle and corners specialists on
   ``tag_balanced`` (presets ``research_{algo}_tag_balanced_{placement}``, or
   with profile ``mopa`` ``exp5_{algo}_{placement}``; predators and prey
   co-trained on one placement only), ``num_seeds`` seeds each.
2. ``data_{algo}``: every seed's co-trained pair plays ``chains_per_seed`` chains
   of ``episodes_per_chain`` consecutive episodes (auto-reset, 6 x 25 = 150 steps)
   on its own placement; the label of a chain is its placement (= specialist).
3. ``encode_{algo}``: representations of the **prey's** trajectory (the agent
   whose strategy is modelled). Train/test split by whole chains, stratified by
   placement, so no episode is on both sides.

   * ``probe_occupancy``: a linear probe (standardised logistic regression) on the
     occupancy histogram (``grid_size`` x ``grid_size`` over ``[-1, 1]^2``) of
     **one episode** (25 steps), fit on the training chains' episodes and scored
     on the held-out chains' episodes ("pooling occupancy over a trajectory").
     ``probe_occupancy_by_L`` is the same probe on the L-step windows below.
   * ``vae_ari_by_L`` / ``latent_probe_by_L``: **L counts prey steps across the
     consecutive episodes of a chain** (L = 25 is one episode, 150 is six; the
     research's "observation length", and its BC reads "L steps before a held-out
     episode" of a six-episode rollout). The representation is the occupancy of
     the chain's last L steps. For each L an MLP-VAE (KL annealed) is trained
     on the training chains with ``encoder_seeds`` seeds; ARI / NMI are those of
     k-means (k = 2) on the held-out latent means against the placement, the
     latent probe is fit on training latents and scored on held-out ones; both
     are averaged over encoder seeds.
4. ``bc_{algo}`` (``bc_algo``): latent-conditioned behaviour cloning of the prey,
   ``pi(a | obs, z)``, on the last episode of each chain (steps 125-150). The
   clone's observation is the prey's own observation **without the resource
   block** (relative resource positions and flags), so the only thing telling the
   clone which route to run is ``z``; ``z`` is the encoder-seed-0 VAE mean of the
   prey's occupancy over the L steps before that episode (steps ``[125 - L,
   125)``, L <= 125), the placement one-hot for the oracle, or nothing (vanilla).
   Action match is on the held-out chains; the majority baseline too.
   Steering (:func:`mopa.opponent.bc.steering_rate`): in each placement's game,
   against that placement's co-trained predators (every seed), the clone plays
   one game with ``z_circle`` and the same game (same start, same keys, resets
   included) with ``z_corners`` (the mean training latents of each specialist at
   ``bc_length``); a route counts as steered when its occupancy is closer to the
   named specialist's mean episode occupancy than the other route is. A game is
   ``steering_steps`` steps of consecutive episodes (auto-reset, as the dataset's
   chains), the route the prey's occupancy over all of them: the research finds
   that one 25-step trajectory is "dominated by evasion noise" and that its
   occupancy shows the strategy from about L = 100 steps, so the route is judged
   over the same length as the latent that names it (``bc_length``).
   ``steering_by_steps`` gives the rate for every L of ``lengths`` up to
   ``steering_steps`` (25 is one episode), ``steering_reference_by_steps`` the
   same criterion applied to the specialists' own routes (the first L steps of
   every chain, every circle chain against every corners chain:
   :func:`mopa.opponent.bc.route_separability`), i.e. how far the criterion can
   tell the two specialists apart at that length. ``steering_by_seed`` is the rate
   against each predator seed (both games), ``steering_ci95`` its 95% Student-t
   interval over those seeds, ``steering_ci95_episodes`` a percentile bootstrap
   over steering games (resampled within each game and predator seed).
5. ``brittleness_{algo}``: cross-play on each prey's own placement: the
   co-trained predators (same placement, seed ``i`` vs seed ``i``) and the
   predators trained on the other placement, ``tournament_episodes`` episodes per
   seed pair. ``brittleness_drop = 1 - captures(unfamiliar) / captures
   (co-trained)``, captures averaged over the two prey; its 95% interval is a
   percentile bootstrap over episodes (resampled within each cell and seed pair).

The headline keys are those of ``primary_algo`` (IQL, whose prey expresses the
strategy most cleanly) and, for brittleness, ``brittleness_algo`` (MAPPO, as the
research); every algorithm's figures are under ``by_algo``.
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
from mopa.envs.wrappers import AutoReset
from mopa.errors import InvalidParameterError
from mopa.eval.intervals import mean_interval
from mopa.eval.protocol import cell_stats, familiarity_drop, mean_std
from mopa.eval.tournament import TournamentEntry, play_tournament
from mopa.experiments import part1
from mopa.opponent import bc
from mopa.opponent import data as trajectory_data
from mopa.opponent.encoders import VAEConfig, latent_means, load_encoder, save_encoder
from mopa.opponent.metrics import probe_accuracy_split, score_vae_seeds
from mopa.opponent.representations import occupancy, window_occupancy
from mopa.players import PolicyPlayer
from mopa.report import exp5_report
from mopa.report.exp5_report import RESEARCH
from mopa.runs.registry import recipe_field, register_experiment

PLACEMENTS = ("circle", "corners")
"""The specialists' placements; a chain's label is the index of its placement."""
ENV = "tag_balanced"
ALGOS = ("iql", "mappo")


@dataclasses.dataclass(frozen=True, kw_only=True)
class Exp5Config:
    """Exp 5: specialists, encoders by observation length, BC, brittleness."""

    algos: tuple[str, ...] = ALGOS
    """Algorithms whose specialists are trained (``iql``, ``mappo``)."""
    total_steps: int = 2_000_000
    """Environment steps per specialist seed."""
    num_seeds: int = 3
    """Training seeds per specialist."""
    chains_per_seed: int = 100
    """Chains each seed's co-trained pair plays for the dataset."""
    episodes_per_chain: int = 6
    """Consecutive episodes per chain (6 x 25 = 150 steps)."""
    lengths: tuple[int, ...] = (25, 50, 100, 125, 150)
    """Observation lengths L (prey steps across a chain's episodes)."""
    grid_size: int = 8
    """Cells per axis of the occupancy histogram."""
    test_fraction: float = 0.25
    """Share of chains held out (stratified by placement)."""
    latent_size: int = 2
    """VAE latent size (2 chosen on a validation split of the training chains: 4
    collapsed with these settings)."""
    vae_hidden: tuple[int, ...] = (128, 128)
    """VAE hidden widths."""
    vae_updates: int = 4000
    """VAE Adam updates."""
    kl_warmup: int = 1000
    """Updates over which the KL weight rises to 1."""
    decoder_std: float = 0.05
    """Standard deviation of the VAE's Gaussian likelihood on occupancy cells."""
    encoder_seeds: int = 3
    """VAE seeds per L (figures are their mean)."""
    primary_algo: str = "iql"
    """Algorithm whose figures are the headline keys."""
    bc_algo: str = "iql"
    """Algorithm whose prey is behaviour-cloned."""
    bc_length: int = 100
    """L of the latent the headline BC and the steering test condition on."""
    bc_epochs: int = 30
    """BC passes over its data."""
    steering_episodes: int = 100
    """Steering games per placement and predator seed."""
    steering_steps: int = 100
    """Steps of each steering game (consecutive episodes; one of ``lengths``): the
    route is judged over as many prey steps as the latent that names it reads."""
    steering_predator_seeds: int = 3
    """Predator seeds (the first ones) the steering test plays against."""
    brittleness_algo: str = "mappo"
    """Algorithm whose predators give the headline brittleness."""
    tournament_episodes: int = 100
    """Episodes per seed pair and cell of the cross-play."""
    bootstrap: int = 2000
    """Bootstrap resamples of the brittleness interval."""
    seed: int = 0
    """Base seed of data, splits, encoders, BC and tournaments."""
    recipe: str = recipe_field()
    """Training recipe: ``research`` (presets ``research_*_tag_balanced_*``: the
    research's IQL and 2 x 128 MAPPO on mopa's balanced game) or ``mopa``
    (``exp5_*``)."""

    def __post_init__(self):
        check_fields(self)
        check_recipe(self.recipe)
        for name in ("algos", "lengths", "vae_hidden"):
            object.__setattr__(self, name, tuple(getattr(self, name)))
        for algo in self.algos:
            if algo not in ALGOS:
                raise InvalidParameterError(f"algos: unknown {algo!r}; use {ALGOS}")
        for name in ("primary_algo", "bc_algo", "brittleness_algo"):
            if getattr(self, name) not in self.algos:
                raise InvalidParameterError(f"{name} must be one of algos")
        steps = self.episodes_per_chain * 25
        if not self.lengths or min(self.lengths) < 1 or max(self.lengths) > steps:
            raise InvalidParameterError(f"lengths must be in [1, {steps}]")
        if self.bc_length not in self.lengths or self.bc_length > steps - 25:
            raise InvalidParameterError(
                f"bc_length must be one of lengths and <= {steps - 25}"
            )
        if self.steering_steps not in self.lengths:
            raise InvalidParameterError("steering_steps must be one of lengths")
        for name in (
            "total_steps", "num_seeds", "chains_per_seed", "episodes_per_chain",
            "grid_size", "latent_size", "vae_updates", "encoder_seeds",
            "bc_epochs", "steering_episodes", "steering_predator_seeds",
            "tournament_episodes", "bootstrap",
        ):  # fmt: skip
            if getattr(self, name) < 1:
                raise InvalidParameterError(f"{name} must be >= 1")
        if self.num_seeds < 2:
            raise InvalidParameterError("num_seeds must be >= 2 (cross-play CIs)")
        check_probability("test_fraction", self.test_fraction)

    def vae(self) -> VAEConfig:
        return VAEConfig(
            input_size=self.grid_size**2,
            hidden=self.vae_hidden,
            latent_size=self.latent_size,
            num_updates=self.vae_updates,
            kl_warmup=self.kl_warmup,
            decoder_std=self.decoder_std,
            batch_size=128,
        )


# -- stages -------------------------------------------------------------------------
def train_config(config: Exp5Config, algo: str, placement: str, num_seeds: int):
    """The training config of ``algo``'s ``placement`` specialist under
    ``config``'s recipe."""
    return part1.train_config(
        f"exp5_{algo}_{placement}", config.total_steps, num_seeds, config.recipe
    )


def _train(config, algo, num_seeds, progress, stages) -> dict[str, dict]:
    runs = {}
    for placement in PLACEMENTS:
        name = f"{algo}_{placement}"
        train = train_config(config, algo, placement, num_seeds)
        runs[name] = part1.train_stage(stages, f"train_{name}", train, progress)
    return runs


def _dataset(config, num_seeds, algo, runs, stages) -> str:
    described = {
        "runs": [runs[f"{algo}_{p}"] for p in PLACEMENTS],
        "chains_per_seed": config.chains_per_seed,
        "episodes_per_chain": config.episodes_per_chain,
        "num_seeds": num_seeds,
        "seed": config.seed,
    }

    def build(folder: Path) -> dict[str, Any]:
        parts = []
        for index, placement in enumerate(PLACEMENTS):
            teams = part1.load_teams(runs[f"{algo}_{placement}"]["run"])
            parts.append(
                trajectory_data.play_dataset(
                    ENV,
                    {"resource_placement": placement},
                    teams,
                    jax.random.fold_in(jax.random.key(config.seed), index),
                    num_seeds=num_seeds,
                    num_chains=config.chains_per_seed,
                    episodes_per_chain=config.episodes_per_chain,
                    policy_id=index,
                    policy_names=PLACEMENTS,
                )
            )
        dataset = trajectory_data.concatenate(parts, PLACEMENTS)
        path = trajectory_data.save_dataset(folder / "dataset.npz", dataset)
        return {"path": str(path), "num_chains": dataset.num_chains}

    return stages.run(f"data_{algo}", described, build)["path"]


def _split(config, dataset):
    labels = dataset["policy_id"]
    return trajectory_data.split_indices(
        dataset.num_chains, config.test_fraction, config.seed, labels
    )


def _encode(config, algo, data_path, stages) -> dict[str, Any]:
    described = {
        "data": file_fingerprint(data_path),
        **{
            k: getattr(config, k)
            for k in (
                "lengths", "grid_size", "test_fraction", "latent_size",
                "vae_hidden", "vae_updates", "kl_warmup", "decoder_std",
                "encoder_seeds", "seed",
            )
        },
    }  # fmt: skip

    def run(folder: Path) -> dict[str, Any]:
        dataset = trajectory_data.load_dataset(data_path)
        train, test = _split(config, dataset)
        labels = dataset["policy_id"]
        prey = dataset.positions("prey")  # [C, S, 2]
        steps = prey.shape[1]
        # One episode per example: every episode of every chain.
        horizon = dataset.horizon
        episodes = prey.reshape(-1, horizon, 2)
        episode_occ = window_occupancy(episodes, 0, horizon, config.grid_size)
        episode_labels = np.repeat(labels, dataset.episodes_per_chain)
        per_chain = dataset.episodes_per_chain
        train_ep = (train[:, None] * per_chain + np.arange(per_chain)).ravel()
        test_ep = (test[:, None] * per_chain + np.arange(per_chain)).ravel()
        result: dict[str, Any] = {
            "probe_occupancy": probe_accuracy_split(
                episode_occ[train_ep],
                episode_labels[train_ep],
                episode_occ[test_ep],
                episode_labels[test_ep],
                config.seed,
            ),
            "mean_occupancy": {
                p: episode_occ[episode_labels == i]
                .mean(0)
                .reshape(config.grid_size, config.grid_size)
                .tolist()
                for i, p in enumerate(PLACEMENTS)
            },
            "probe_occupancy_by_L": {},
            "vae_ari_by_L": {},
            "vae_nmi_by_L": {},
            "latent_probe_by_L": {},
            "encoder_files": {},
        }
        vae = config.vae()
        for length in config.lengths:
            features = window_occupancy(prey, steps - length, steps, config.grid_size)
            result["probe_occupancy_by_L"][str(length)] = probe_accuracy_split(
                features[train], labels[train], features[test], labels[test]
            )
            (scores,), params = score_vae_seeds(
                vae,
                features,
                train,
                test,
                [(labels, 2)],
                config.encoder_seeds,
                config.seed * 1000,
            )
            path = folder / f"vae_L{length}.msgpack"
            save_encoder(path, vae, params)
            result["encoder_files"][str(length)] = str(path)
            for key, name in (
                ("ari", "vae_ari_by_L"),
                ("nmi", "vae_nmi_by_L"),
                ("probe", "latent_probe_by_L"),
            ):
                result[name][str(length)] = mean_std([s[key] for s in scores])
        return result

    return stages.run(f"encode_{algo}", described, run)


def _behaviour_clone(config, algo, data_path, encoded, runs, stages) -> dict:
    described = {
        "data": file_fingerprint(data_path),
        "encoders": {
            length: file_fingerprint(path)
            for length, path in encoded["encoder_files"].items()
        },
        "runs": [runs[f"{algo}_{p}"] for p in PLACEMENTS],
        **{
            k: getattr(config, k)
            for k in (
                "lengths", "grid_size", "test_fraction", "bc_length", "bc_epochs",
                "steering_episodes", "steering_steps", "steering_predator_seeds",
                "bootstrap", "seed",
            )
        },
    }  # fmt: skip

    def run(folder: Path) -> dict[str, Any]:
        del folder
        dataset = trajectory_data.load_dataset(data_path)
        train, test = _split(config, dataset)
        labels = dataset["policy_id"]
        prey = dataset.positions("prey")
        horizon, steps = dataset.horizon, dataset.steps_per_chain
        start = steps - horizon  # the held-out (cloned) episode: the chain's last
        env, _ = make(ENV)
        width = 3 * env.num_resources  # the prey's resource block, cut off
        strip = lambda obs: obs[..., : obs.shape[-1] - width]  # noqa: E731
        obs = strip(dataset["obs.prey"][:, start:, 0])  # [C, H, D']
        actions = dataset["actions.prey"][:, start:, 0]  # [C, H]
        bc_config = bc.BCConfig(
            num_actions=int(env.action_space(1).n), num_epochs=config.bc_epochs
        )
        train_fn = jax.jit(bc.make_train(bc_config))
        key = jax.random.key(config.seed)

        def flat(x, chains):
            return jnp.asarray(x[chains].reshape(len(chains) * horizon, -1))

        def per_step(z):  # [C, Z] -> [C, H, Z]
            return np.repeat(z[:, None], horizon, 1)

        def fit_and_match(z):
            zs = None if z is None else per_step(z)
            params, _ = train_fn(
                key,
                flat(obs, train),
                flat(actions, train)[:, 0],
                None if zs is None else flat(zs, train),
            )
            match = bc.action_match(
                bc_config,
                params,
                flat(obs, test),
                flat(actions, test)[:, 0],
                None if zs is None else flat(zs, test),
            )
            return params, float(match)

        _, vanilla = fit_and_match(None)
        _, oracle = fit_and_match(np.eye(len(PLACEMENTS), dtype=np.float32)[labels])
        by_length, latents = {}, {}
        for length in config.lengths:
            if length > start:
                continue
            vae, vae_params = load_encoder(encoded["encoder_files"][str(length)])
            features = window_occupancy(prey, start - length, start, config.grid_size)
            z = latent_means(vae, vae_params, features)
            params, by_length[str(length)] = fit_and_match(z)
            latents[length] = (z, params)
        majority = float(
            bc.majority_match(flat(actions, test)[:, 0], bc_config.num_actions)
        )
        # Steering: swap z alone in a fixed game against fixed predators.
        z, params = latents[config.bc_length]
        z_train, label_train = z[train], labels[train]
        z_a = z_train[label_train == 0].mean(0)
        z_b = z_train[label_train == 1].mean(0)
        episodes = prey.reshape(-1, horizon, 2)
        episode_labels = np.repeat(labels, dataset.episodes_per_chain)
        occ = window_occupancy(episodes, 0, horizon, config.grid_size)
        route_a, route_b = (
            occ[episode_labels == 0].mean(0),
            occ[episode_labels == 1].mean(0),
        )
        prey_index = dataset.agent_index("prey")
        grid = config.grid_size

        def route_fn(trajectory):
            return occupancy(trajectory.state.pos[:, prey_index], grid).reshape(-1)

        predators = [
            part1.load_teams(runs[f"{algo}_{p}"]["run"])["predator"] for p in PLACEMENTS
        ]
        games = [
            (AutoReset(game), game_params)
            for game, game_params in (
                make(ENV, resource_placement=placement) for placement in PLACEMENTS
            )
        ]
        lengths = [n for n in config.lengths if n <= config.steering_steps]
        sweep = bc.steering_sweep(
            jax.random.key(config.seed + 1), games, predators, bc_config, params,
            z_a, z_b, route_a, route_b, route_fn, config.steering_episodes, lengths,
            num_seeds=config.steering_predator_seeds, obs_fn=strip,
        )  # fmt: skip
        by_steps = {n: (sweep.rates[i], sweep.scores[i]) for i, n in enumerate(lengths)}
        reference = {}
        for num_steps in lengths:
            routes = window_occupancy(prey, 0, num_steps, grid)
            reference[str(num_steps)] = float(
                bc.route_separability(
                    routes[labels == 0], routes[labels == 1], route_a, route_b
                )
            )
        headline, scores = by_steps[config.steering_steps]
        per_seed = headline.mean(0)
        # Episodes resampled within each (game, predator seed) cell.
        rng = np.random.default_rng(config.seed)
        draws = np.take_along_axis(
            scores[None],
            rng.integers(0, scores.shape[-1], (config.bootstrap, *scores.shape)),
            -1,
        ).mean((1, 2, 3))
        return {
            "bc_action_match": {
                "vanilla": vanilla,
                "latent": by_length[str(config.bc_length)],
                "oracle": oracle,
                "majority": majority,
            },
            "bc_latent_by_L": by_length,
            "steering_rate": float(headline.mean()),
            "steering_ci95": mean_interval(per_seed, method="t")["ci95"],
            "steering_ci95_episodes": [
                float(np.percentile(draws, q)) for q in (2.5, 97.5)
            ],
            "steering_by_seed": per_seed.tolist(),
            "steering_by_game_seed": headline.ravel().tolist(),
            "steering_steps": config.steering_steps,
            "steering_by_steps": {
                str(n): float(r.mean()) for n, (r, _) in by_steps.items()
            },
            "steering_reference_by_steps": reference,
            "bc_length": config.bc_length,
        }

    return stages.run(f"bc_{algo}", described, run)


def _brittleness(config, algo, runs, stages) -> dict[str, Any]:
    described = {
        "runs": [runs[f"{algo}_{p}"] for p in PLACEMENTS],
        "episodes": config.tournament_episodes,
        "bootstrap": config.bootstrap,
        "seed": config.seed,
    }

    def run(folder: Path) -> dict[str, Any]:
        del folder
        teams = {p: part1.load_teams(runs[f"{algo}_{p}"]["run"]) for p in PLACEMENTS}
        predators = [
            TournamentEntry(f"pred_{p}", PolicyPlayer(teams[p]["predator"][0]),
                            teams[p]["predator"][1])
            for p in PLACEMENTS
        ]  # fmt: skip
        captures = {}  # (predator placement, prey placement) -> [P, N]
        cells = {}
        for index, placement in enumerate(PLACEMENTS):
            env, params = make(ENV, resource_placement=placement)
            spec, stack = teams[placement]["prey"]
            prey = [TournamentEntry(f"prey_{placement}", PolicyPlayer(spec), stack)]
            result = play_tournament(
                env,
                params,
                predators,
                prey,
                jax.random.fold_in(jax.random.key(config.seed), index),
                num_episodes=config.tournament_episodes,
                pairing="paired",
            )
            values, table = result.metric("captures"), cell_stats(result)
            for r, predator in enumerate(PLACEMENTS):
                captures[predator, placement] = values[r, 0]
                cells[f"pred_{predator}/prey_{placement}"] = table[f"pred_{predator}"][
                    f"prey_{placement}"
                ]

        drop = familiarity_drop(captures, PLACEMENTS, config.bootstrap, config.seed)
        return {
            "captures_cotrained": drop["familiar"],
            "captures_cotrained_ci95": drop["familiar_ci95"],
            "captures_unfamiliar": drop["unfamiliar"],
            "captures_unfamiliar_ci95": drop["unfamiliar_ci95"],
            "drop": drop["drop"],
            "drop_ci95": drop["drop_ci95"],
            "cells": cells,
            "episodes_per_cell": int(np.prod(next(iter(captures.values())).shape)),
        }

    return stages.run(f"brittleness_{algo}", described, run)


def run_exp5(config: Exp5Config, seeds: int | None, progress, stages) -> dict:
    """Run Exp 5; see the module docstring for the stages and the figures."""
    num_seeds = config.num_seeds if seeds is None else seeds
    if num_seeds < 2:
        raise InvalidParameterError("exp5 needs at least 2 seeds")
    by_algo: dict[str, Any] = {}
    runs: dict[str, dict] = {}
    for algo in config.algos:
        runs.update(_train(config, algo, num_seeds, progress, stages))
        data_path = _dataset(config, num_seeds, algo, runs, stages)
        encoded = _encode(config, algo, data_path, stages)
        entry = {k: v for k, v in encoded.items() if k != "encoder_files"}
        entry["training"] = {p: runs[f"{algo}_{p}"]["summary"] for p in PLACEMENTS}
        if algo == config.bc_algo:
            entry.update(
                _behaviour_clone(config, algo, data_path, encoded, runs, stages)
            )
        entry["brittleness"] = _brittleness(config, algo, runs, stages)
        by_algo[algo] = entry
        progress(
            f"{algo}: probe {entry['probe_occupancy']:.3f}, ARI by L "
            + ", ".join(
                f"{k}: {v['mean']:.2f}" for k, v in entry["vae_ari_by_L"].items()
            )
        )
    primary, bc_entry = by_algo[config.primary_algo], by_algo[config.bc_algo]
    brittle = by_algo[config.brittleness_algo]["brittleness"]

    def means(table):
        return {k: v["mean"] for k, v in table.items()}

    return {
        "probe_occupancy": primary["probe_occupancy"],
        "vae_ari_by_L": means(primary["vae_ari_by_L"]),
        "latent_probe_by_L": means(primary["latent_probe_by_L"]),
        "bc_action_match": bc_entry["bc_action_match"],
        "steering_rate": bc_entry["steering_rate"],
        "steering_ci95": bc_entry["steering_ci95"],
        "steering_ci95_episodes": bc_entry["steering_ci95_episodes"],
        "steering_by_seed": bc_entry["steering_by_seed"],
        "steering_steps": bc_entry["steering_steps"],
        "steering_by_steps": bc_entry["steering_by_steps"],
        "steering_reference_by_steps": bc_entry["steering_reference_by_steps"],
        "brittleness_drop": brittle["drop"],
        "brittleness_drop_ci95": brittle["drop_ci95"],
        "captures_cotrained": brittle["captures_cotrained"],
        "captures_cotrained_ci95": brittle["captures_cotrained_ci95"],
        "captures_unfamiliar": brittle["captures_unfamiliar"],
        "captures_unfamiliar_ci95": brittle["captures_unfamiliar_ci95"],
        "primary_algo": config.primary_algo,
        "bc_algo": config.bc_algo,
        "brittleness_algo": config.brittleness_algo,
        "num_seeds": num_seeds,
        "by_algo": by_algo,
        "research": RESEARCH,
        "stage_wall_s": dict(stages.timing_s),
    }


# -- report -------------------------------------------------------------------------


register_experiment(
    "exp5",
    run_exp5,
    {
        "default": Exp5Config(),
        "mopa": Exp5Config(recipe="mopa"),
        "quick": Exp5Config(
            recipe="mopa",
            algos=("mappo",),
            primary_algo="mappo",
            bc_algo="mappo",
            brittleness_algo="mappo",
            total_steps=4096,
            num_seeds=2,
            chains_per_seed=8,
            lengths=(25, 50, 100, 150),
            vae_updates=20,
            kl_warmup=5,
            encoder_seeds=1,
            bc_epochs=1,
            steering_episodes=2,
            steering_steps=25,
            steering_predator_seeds=1,
            tournament_episodes=4,
            bootstrap=20,
        ),
    },
    "default",
    plot_fn=exp5_report.write_report,
    description="Exp 5: specialists on tag_balanced; occupancy probe, VAE by L, "
    "latent BC and steering, brittleness",
    markdown_fn=exp5_report.results_markdown,
)
