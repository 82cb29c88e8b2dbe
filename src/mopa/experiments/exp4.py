"""Exp 4 (``mopa experiment exp4``): the research's negative result, tested. On
``tag_resources`` with the random placement (circle or corners, a coin flip at each
reset) and the prey's collect reward raised from 5 to 20, the research found that a
linear probe on the dominated prey's raw trajectory reads the placement at chance;
this measures that probe beside views of the trajectory that can see a change of
route it cannot.

For each trainer (``algo``, then those in ``compare``), stages ``train_NAME``
(the recipe's preset for ``exp4_NAME_random``, with ``collect_reward`` 20),
``data_NAME`` (each seed's
co-trained pair plays ``chains_per_seed`` single episodes) and ``probe_NAME``. The
label of an episode is its placement (read from the game state, never shown to the
probe). ``probe_raw_placement`` is a linear probe on the **prey's** raw position
sequence of the episode (25 x 2 numbers), fit on a training split of the episodes
and scored on the held-out ones (split by episode, stratified by placement);
``probe_occupancy_placement`` is the same probe on the episode's occupancy
histogram, for contrast with Exp 5; ``probe_radius_placement`` the same probe on
the prey's distance from the arena's centre at each step (25 numbers, a function of
the raw positions that no rotation or reflection of the square arena changes: both
placements are symmetric under them, so a placement that changes how far out the
prey runs but not in which direction is invisible to a linear probe on positions
unless the trained prey favours some directions). ``probe_raw_by_seed`` fits the
raw probe within each seed's episodes (its prey's direction preferences are its
own); ``probe_raw_symmetrised_placement`` fits it after mapping each episode by one
of the square's 8 rotations and reflections drawn at random, which leaves the game
and both placements as they are and removes only the prey's direction
preferences. ``probe_raw_by_episodes`` refits the raw probe
on random subsets of ``subsample_sizes`` episodes (each label's share kept, the
same 75/25 split), to tell a data-size effect from a behavioural one: the research
probed 300 episodes. The top-level figures are ``algo``'s; ``by_algo`` holds every
trainer's, with the predators' captures per episode, so the probe can be read
against how strongly the predators dominate. Each trainer is also run at the
rewards ``also_collect_rewards`` (the research's first runs paid 5), stages
``train_NAME_collectR`` and so on, reported in ``by_collect_reward``.

The default recipe is the research's (presets ``research_iql_tag_resources_random``
and ``research_mappo_tag_resources_random``: its IQL and MAPPO, collection radius
0.15): IQL is the headline, MAPPO compared. Profile ``mopa`` runs mopa's lighter
recipe (radius 0.1) with IQL at JaxMARL's MPE settings (``iql_jaxmarl``) as the
headline and mopa's default IQL and MAPPO compared.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import jax
import numpy as np

from mopa.algos.presets import check_recipe
from mopa.core.checks import check_fields, check_probability
from mopa.core.stages import file_fingerprint
from mopa.envs import make
from mopa.errors import InvalidParameterError
from mopa.experiments import part1
from mopa.opponent import data as trajectory_data
from mopa.opponent.metrics import probe_accuracy_split, subsampled_probe
from mopa.opponent.representations import symmetrise, window_occupancy
from mopa.report import exp4_report
from mopa.runs.registry import recipe_field, register_experiment

ENV = "tag_resources"
RESEARCH = {"probe_raw_placement": 0.49, "resources_per_episode": 1.28}
"""The research's Exp 4 figures (IQL, collect reward 20)."""
ALGOS = ("iql_jaxmarl", "iql", "oa_iql", "mappo")
"""Trainers: each names the preset ``exp4_NAME_random``."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class Exp4Config:
    """Exp 4: raw-trajectory placement probe with a raised collect reward."""

    algo: str = "iql"
    """Trainer whose figures are the headline: ``iql``, ``oa_iql``, ``mappo`` or,
    under mopa's recipe only, ``iql_jaxmarl`` (IQL with JaxMARL's MPE settings)."""
    compare: tuple[str, ...] = ("mappo",)
    """Further trainers run and probed beside ``algo`` (reported in ``by_algo``)."""
    collect_reward: float = 20.0
    """The prey's reward per resource (the research raised it from 5 to 20)."""
    also_collect_rewards: tuple[float, ...] = (5.0,)
    """Further rewards per resource at which every trainer is run and probed."""
    total_steps: int = 2_000_000
    """Environment steps per seed."""
    num_seeds: int = 6
    """Training seeds (the research trained 3; each seed's prey has its own
    direction preferences, which the raw probe reads, so 3 are one small draw)."""
    chains_per_seed: int = 400
    """Episodes each seed's co-trained pair plays for the dataset."""
    grid_size: int = 8
    """Cells per axis of the contrast occupancy histogram."""
    test_fraction: float = 0.25
    """Share of episodes held out (stratified by placement)."""
    seed: int = 0
    """Base seed of the data and the split."""
    subsample_sizes: tuple[int, ...] = (100, 300, 600)
    """Episode counts at which the raw probe is refit on random subsets (sizes
    above the dataset's are skipped)."""
    subsample_repeats: int = 40
    """Random subsets per size."""
    recipe: str = recipe_field()
    """Training recipe: ``research`` (presets ``research_*_tag_resources_random``,
    the research's game with collection radius 0.15) or ``mopa``
    (``exp4_*_random``, radius 0.1)."""

    def __post_init__(self):
        check_fields(self)
        check_recipe(self.recipe)
        object.__setattr__(self, "compare", tuple(self.compare))
        object.__setattr__(
            self, "also_collect_rewards", tuple(map(float, self.also_collect_rewards))
        )
        rewards = (self.collect_reward, *self.also_collect_rewards)
        if any(r <= 0 for r in rewards) or len(set(rewards)) != len(rewards):
            raise InvalidParameterError(
                "also_collect_rewards must be > 0 and differ from each other and "
                f"from collect_reward, got {self.also_collect_rewards}"
            )
        for name in (self.algo, *self.compare):
            if name not in ALGOS:
                raise InvalidParameterError(
                    f"algo: unknown {name!r} (one of {', '.join(ALGOS)})"
                )
            if name == "iql_jaxmarl" and self.recipe != "mopa":
                raise InvalidParameterError(
                    "algo: iql_jaxmarl is one of mopa's alternatives; it runs with "
                    "recipe 'mopa' only"
                )
        if len(set((self.algo, *self.compare))) != 1 + len(self.compare):
            raise InvalidParameterError(
                f"compare must not repeat algo or itself, got {self.compare}"
            )
        for name in (
            "total_steps",
            "num_seeds",
            "chains_per_seed",
            "grid_size",
            "subsample_repeats",
        ):
            if getattr(self, name) < 1:
                raise InvalidParameterError(f"{name} must be >= 1")
        object.__setattr__(self, "subsample_sizes", tuple(self.subsample_sizes))
        if any(size < 8 for size in self.subsample_sizes):
            raise InvalidParameterError(
                f"subsample_sizes must each be >= 8, got {self.subsample_sizes}"
            )
        check_probability("test_fraction", self.test_fraction)


def run_exp4(config: Exp4Config, seeds: int | None, progress, stages) -> dict:
    """Train, play and probe each trainer; see the module docstring."""
    num_seeds = config.num_seeds if seeds is None else seeds
    names = (config.algo, *config.compare)
    rewards = (config.collect_reward, *config.also_collect_rewards)
    by_reward = {
        f"{reward:g}": {
            name: _train_and_probe(
                name,
                config,
                reward,
                f"_collect{reward:g}" if reward != config.collect_reward else "",
                num_seeds,
                progress,
                stages,
            )
            for name in names
        }
        for reward in rewards
    }
    by_algo = by_reward[f"{config.collect_reward:g}"]
    headline = by_algo[config.algo]

    def rows(runs):
        return {
            name: {k: v for k, v in row.items() if k != "training"}
            for name, row in runs.items()
        }

    return {
        **{k: v for k, v in headline.items() if k != "training"},
        "algo": config.algo,
        "by_algo": rows(by_algo),
        "by_collect_reward": {reward: rows(runs) for reward, runs in by_reward.items()},
        "training": headline["training"],
        "num_seeds": num_seeds,
        "research": RESEARCH,
        "stage_wall_s": dict(stages.timing_s),
    }


def train_config(name: str, config: Exp4Config, reward: float, num_seeds: int):
    """The training config of trainer ``name`` at collect reward ``reward`` under
    ``config``'s recipe (the random placement)."""
    train = part1.train_config(
        f"exp4_{name}_random", config.total_steps, num_seeds, config.recipe
    )
    game = dict(train.env_overrides)
    game["collect_reward"] = float(reward)
    return train.replace(env_overrides=tuple(game.items()))


def _train_and_probe(
    name: str,
    config: Exp4Config,
    reward: float,
    suffix: str,
    num_seeds: int,
    progress,
    stages,
) -> dict[str, Any]:
    """Stages ``train_NAME{suffix}``, ``data_NAME{suffix}`` and
    ``probe_NAME{suffix}`` of one trainer at collect reward ``reward``."""
    train = train_config(name, config, reward, num_seeds)
    game = dict(train.env_overrides)
    run = part1.train_stage(stages, f"train_{name}{suffix}", train, progress)

    def build(folder: Path) -> dict[str, Any]:
        dataset = trajectory_data.play_dataset(
            ENV,
            game,
            part1.load_teams(run["run"]),
            jax.random.key(config.seed),
            num_seeds=num_seeds,
            num_chains=config.chains_per_seed,
            episodes_per_chain=1,
            policy_id=0,
            policy_names=("random",),
        )
        path = trajectory_data.save_dataset(folder / "dataset.npz", dataset)
        return {"path": str(path)}

    described = {"run": run, "chains_per_seed": config.chains_per_seed}
    data_path = stages.run(
        f"data_{name}{suffix}", {**described, "seed": config.seed}, build
    )["path"]
    capture_reward = make(ENV, **game)[1].capture_reward

    def probe(folder: Path) -> dict[str, Any]:
        del folder
        dataset = trajectory_data.load_dataset(data_path)
        labels = dataset.episode_labels("placement").astype(np.int64)
        prey = dataset.positions("prey")  # [C, 25, 2]
        raw = prey.reshape(prey.shape[0], -1)
        occ = window_occupancy(prey, 0, prey.shape[1], config.grid_size)
        train_index, test_index = trajectory_data.split_indices(
            len(labels), config.test_fraction, config.seed, labels
        )

        def score(features, train_index=train_index, test_index=test_index):
            return probe_accuracy_split(
                features[train_index],
                labels[train_index],
                features[test_index],
                labels[test_index],
                config.seed,
            )

        def score_within(seed_index):
            members = np.flatnonzero(dataset["seed_index"] == seed_index)
            if len(np.unique(labels[members])) < 2:
                return None  # one placement only: nothing to tell apart
            train, test = trajectory_data.split_indices(
                len(members), config.test_fraction, config.seed, labels[members]
            )
            return score(raw, members[train], members[test])

        collected = dataset["rewards.prey"] > 0.5 * reward
        # Every predator is paid capture_reward per predator-prey overlap.
        captures = dataset["rewards.predator"][:, :, 0].sum() / capture_reward
        return {
            "probe_raw_by_episodes": subsampled_probe(
                raw,
                labels,
                config.subsample_sizes,
                config.subsample_repeats,
                config.test_fraction,
                config.seed,
            ),
            "probe_raw_placement": score(raw),
            "probe_occupancy_placement": score(occ),
            "probe_radius_placement": score(np.linalg.norm(prey, axis=-1)),
            "probe_raw_symmetrised_placement": score(
                symmetrise(prey, np.random.default_rng(config.seed)).reshape(
                    prey.shape[0], -1
                )
            ),
            "probe_raw_by_seed": [
                score_within(index) for index in np.unique(dataset["seed_index"])
            ],
            "resources_per_episode": float(collected.sum() / dataset.num_episodes),
            "captures_per_episode": float(captures / dataset.num_episodes),
            "placement_share_corners": float(np.mean(labels == 1)),
            "num_episodes": int(len(labels)),
        }

    stage_config = {
        "data": file_fingerprint(data_path),
        # what the stage computes: a stage folder from before a figure was added
        # is redone rather than reused without it
        "figures": [
            "raw", "occupancy", "radius", "raw_by_seed", "raw_symmetrised",
            "raw_by_episodes",
        ],
        "collect_reward": reward,
        **{
            k: getattr(config, k)
            for k in (
                "grid_size", "test_fraction", "seed", "subsample_sizes",
                "subsample_repeats",
            )
        },
    }  # fmt: skip
    probed = stages.run(f"probe_{name}{suffix}", stage_config, probe)
    progress(
        f"[{name}{suffix}] raw placement probe {probed['probe_raw_placement']:.3f}"
    )
    return {**probed, "training": run["summary"]}


register_experiment(
    "exp4",
    run_exp4,
    {
        "default": Exp4Config(),
        "mopa": Exp4Config(recipe="mopa", algo="iql_jaxmarl", compare=("iql", "mappo")),
        "quick": Exp4Config(
            recipe="mopa",
            algo="iql_jaxmarl",
            compare=("iql",),
            total_steps=4096,
            num_seeds=1,
            chains_per_seed=40,
            subsample_sizes=(20,),
            subsample_repeats=3,
        ),
    },
    "default",
    plot_fn=exp4_report.write_report,
    description="Exp 4: placement probes of the prey's trajectory on tag_resources",
    markdown_fn=exp4_report.results_markdown,
)
