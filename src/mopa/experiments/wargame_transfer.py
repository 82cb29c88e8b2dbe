"""The wargame's transfer benchmarks: ``mopa experiment wargame_generalization``
and ``mopa experiment wargame_terrain``.

Both train Blue through :func:`mopa.league.train` against one scripted Red
(``red``, L5 by default) and evaluate with :func:`mopa.league.evaluate_detailed`
(wins, draws and losses from the game's end signals, draws counted, 95% Wilson
intervals; see :mod:`mopa.experiments.wargame`). Nothing falls back: a game
setting the battalion game rejects, a missing checkpoint or a failed training run
fails the benchmark.

**Generalization.** A *scenario* is a setting of the game's parameters drawn from
a seed by :func:`~mopa.envs.battalion.procedural_scenario`: the start placements
(Blue's and Red's x bands, the shared y band, the spread of the start facing) and
the terrain generator (widths of hills and forests, forest cover, how much hills
slow). The game draws a fresh terrain layout from each episode's key, so a scenario is a
distribution of layouts and placements, not one map. A generalist trains on the
``train_scenarios`` (the league cycles through them chunk by chunk,
``TrainingConfig.scenarios``); each held-out scenario then gets

* the generalist zero-shot;
* the generalist fine-tuned on it for ``finetune_steps`` (the run starts from the
  generalist's actor weights, ``TrainingConfig.init_checkpoint``, at learning
  rate ``finetune_lr``; a policy checkpoint holds no critic, so for the first
  ``finetune_warmup_chunks`` chunks only the fresh critic learns);
* a specialist trained on it alone from scratch for ``specialist_steps``.

The report also gives the generalist on its own training scenarios, and the
reference's criteria read on these figures: a zero-shot win rate of at least 55%
on held-out scenarios, and fine-tuned at least 80% of the specialists' win rate.

**Terrain transfer.** Blue trains on the ``source`` terrain (open and flat by
default) and is tested on the ``target`` terrain (rugged and forested: narrow
steep hills that slow to 30% speed, wide dense forests). Reported: the win rate on
the source, on the target zero-shot, on the target after fine-tuning for
``finetune_steps`` from the trained weights, and of a Blue trained on the target
from scratch with the same step budget (what the budget alone buys) and of one
trained on the target with the source's budget (how hard the target itself is);
the drops in points (source minus target) with Newcombe 95% intervals, beside the
reference's criteria (a zero-shot drop under 20 points, under 5 after
fine-tuning).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from mopa.core.checks import check_fields
from mopa.envs.battalion import game_defaults, procedural_scenario
from mopa.errors import InvalidParameterError
from mopa.eval.intervals import proportion_difference
from mopa.eval.protocol import pooled_outcomes
from mopa.league.curriculum import CurriculumStage
from mopa.league.evaluation import evaluate_blue, red_mixture_kwargs
from mopa.league.training import TrainingConfig, train_blue
from mopa.report import wargame_report
from mopa.report.wargame_report import rate_cell
from mopa.runs.registry import register_experiment

BENCHMARK_TRAINING = TrainingConfig(
    game="battalion_vs_red",
    total_timesteps=1_000_000,
    n_envs=64,
    n_steps=128,
    num_chunks=16,
    hidden=(64, 64),
    lr=3e-4,
    ent_coef=0.01,
    gamma=0.995,
    update_epochs=4,
    num_minibatches=4,
)
"""PPO settings of the benchmarks' default runs (the step budgets of fine-tuning
and specialists are set per benchmark)."""

QUICK_TRAINING = BENCHMARK_TRAINING.replace(
    total_timesteps=4 * 16 * 2,
    n_envs=4,
    n_steps=16,
    num_chunks=2,
    hidden=(16,),
    num_minibatches=2,
    update_epochs=1,
)
"""Tiny settings of the quick profiles (every run of a quick profile uses this
budget, so they share one compiled program)."""


def scenario_stage(seed: int) -> CurriculumStage:
    """Scenario ``seed`` as a league game setting."""
    return CurriculumStage(name=f"s{seed}", game_kwargs=procedural_scenario(seed))


def _red_training(training: TrainingConfig, red: str, **changes: Any):
    kwargs = {**dict(training.game_kwargs), **red_mixture_kwargs(((red, 1.0),))}
    return training.replace(game_kwargs=kwargs, **changes)


def _fine_tuning(config, init: str | None) -> dict[str, Any]:
    """The training changes of a run that fine-tunes ``init`` (none without)."""
    if init is None:
        return {}
    return {
        "init_checkpoint": init,
        "lr": config.finetune_lr,
        "critic_warmup_chunks": config.finetune_warmup_chunks,
    }


def _check_fine_tuning(config) -> None:
    if not 0 <= config.finetune_warmup_chunks < config.training.num_chunks:
        raise InvalidParameterError(
            f"finetune_warmup_chunks must be in [0, {config.training.num_chunks}) "
            f"(training.num_chunks), got {config.finetune_warmup_chunks}"
        )
    if config.finetune_lr <= 0:
        raise InvalidParameterError(
            f"finetune_lr must be > 0, got {config.finetune_lr}"
        )


def _check_red(red: str) -> None:
    red_mixture_kwargs(((red, 1.0),))  # raises on a Red the league games lack


# -- wargame_generalization -----------------------------------------------------------
@dataclasses.dataclass(frozen=True, kw_only=True)
class WargameGeneralizationConfig:
    """Generalist vs fine-tuned vs specialists on held-out procedural scenarios."""

    training: TrainingConfig = BENCHMARK_TRAINING
    """The generalist's league run (its ``total_timesteps`` is its budget)."""
    red: str = "L5"
    """The scripted Red of every scenario."""
    train_scenarios: tuple[int, ...] = tuple(range(8))
    """Seeds of the training scenarios."""
    heldout_scenarios: tuple[int, ...] = (1000, 1001, 1002)
    """Seeds of the held-out scenarios (each must differ from every training
    one)."""
    finetune_steps: int = 200_000
    """Steps of fine-tuning the generalist on each held-out scenario."""
    finetune_lr: float = 1e-4
    """Learning rate of fine-tuning."""
    finetune_warmup_chunks: int = 6
    """Chunks (of ``training.num_chunks``) of fine-tuning in which only the fresh
    critic learns (``TrainingConfig.critic_warmup_chunks``)."""
    specialist_steps: int = 1_000_000
    """Steps of each held-out scenario's specialist (from scratch; by default the
    generalist's budget, so that both compile once)."""
    n_episodes: int = 200
    """Evaluation episodes per policy and scenario."""
    eval_seed: int = 2_000_000
    """Episode ``i`` of every evaluation uses ``jax.random.key(eval_seed + i)``."""

    def __post_init__(self):
        check_fields(self)
        _check_red(self.red)
        if not self.train_scenarios or not self.heldout_scenarios:
            raise InvalidParameterError("need training and held-out scenarios")
        shared = set(self.train_scenarios) & set(self.heldout_scenarios)
        if shared:
            raise InvalidParameterError(
                f"held-out scenarios {sorted(shared)} are also training scenarios"
            )
        _check_fine_tuning(self)
        for name in ("finetune_steps", "specialist_steps", "n_episodes"):
            if getattr(self, name) < 1:
                raise InvalidParameterError(
                    f"{name} must be >= 1, got {getattr(self, name)}"
                )

    def generalist(self) -> TrainingConfig:
        return _red_training(
            self.training,
            self.red,
            scenarios=tuple(scenario_stage(s) for s in self.train_scenarios),
            run_id="generalist",
        )

    def on_scenario(self, seed: int, steps: int, run_id: str, init=None):
        """A run on held-out scenario ``seed`` alone."""
        return _red_training(
            self.training.replace(
                game_kwargs={
                    **dict(self.training.game_kwargs),
                    **procedural_scenario(seed),
                }
            ),
            self.red,
            total_timesteps=steps,
            run_id=run_id,
            **_fine_tuning(self, init),
        )


def run_wargame_generalization(
    config: WargameGeneralizationConfig, seeds: int | None, progress, stages
) -> dict:
    """Train the generalist, then fine-tune and train a specialist on each
    held-out scenario; evaluate every policy on its scenarios."""
    if seeds not in (None, 1):
        raise InvalidParameterError(
            f"wargame_generalization trains one seed; seeds={seeds} is not supported"
        )
    generalist = config.generalist()
    trained = stages.run(
        "generalist",
        generalist.identity(),
        lambda folder: train_blue(generalist, folder, "generalist", progress),
    )

    def evaluate(checkpoint: str, seed: int) -> dict[str, Any]:
        return evaluate_blue(
            checkpoint,
            config.red,
            config.n_episodes,
            config.eval_seed,
            procedural_scenario(seed),
        )

    in_distribution = {}
    for seed in config.train_scenarios:
        in_distribution[f"s{seed}"] = evaluate(trained["checkpoint"], seed)
        progress(
            f"generalist on training s{seed}: {rate_cell(in_distribution[f's{seed}'])}"
        )
    heldout = {}
    runs: dict[str, dict[str, Any]] = {"generalist": _run_info(trained)}
    for seed in config.heldout_scenarios:
        name = f"s{seed}"
        finetune = config.on_scenario(
            seed, config.finetune_steps, f"finetune_{seed}", trained["checkpoint"]
        )
        tuned = stages.run(
            f"finetune_{seed}",
            {**finetune.identity(), "from": generalist.identity()},
            lambda folder, c=finetune, n=name: train_blue(
                c, folder, f"fine-tune {n}", progress
            ),
        )
        specialist = config.on_scenario(seed, config.specialist_steps, f"spec_{seed}")
        special = stages.run(
            f"specialist_{seed}",
            specialist.identity(),
            lambda folder, c=specialist, n=name: train_blue(
                c, folder, f"specialist {n}", progress
            ),
        )
        runs[f"finetune_{seed}"] = _run_info(tuned)
        runs[f"specialist_{seed}"] = _run_info(special)
        row = {
            "zero_shot": evaluate(trained["checkpoint"], seed),
            "fine_tuned": evaluate(tuned["checkpoint"], seed),
            "specialist": evaluate(special["checkpoint"], seed),
        }
        heldout[name] = row
        progress(
            f"held-out {name}: zero-shot {rate_cell(row['zero_shot'])}, fine-tuned "
            f"{rate_cell(row['fine_tuned'])}, specialist {rate_cell(row['specialist'])}"
        )
    pooled = {
        policy: pooled_outcomes([row[policy] for row in heldout.values()])
        for policy in ("zero_shot", "fine_tuned", "specialist")
    }
    pooled["training_scenarios"] = pooled_outcomes(list(in_distribution.values()))
    specialist_rate = pooled["specialist"]["win_rate"]
    ratio = (
        pooled["fine_tuned"]["win_rate"] / specialist_rate
        if specialist_rate > 0
        else None
    )
    return {
        "red": config.red,
        "scenarios": {
            "train": {f"s{s}": procedural_scenario(s) for s in config.train_scenarios},
            "heldout": {
                f"s{s}": procedural_scenario(s) for s in config.heldout_scenarios
            },
        },
        "in_distribution": in_distribution,
        "heldout": heldout,
        "pooled": pooled,
        "criteria": {
            "zero_shot_win_rate": pooled["zero_shot"]["win_rate"],
            "zero_shot_at_least_0.55": pooled["zero_shot"]["win_rate"] >= 0.55,
            "fine_tuned_over_specialist": ratio,
            "fine_tuned_at_least_0.8_of_specialist": ratio is not None and ratio >= 0.8,
        },
        "budgets": {
            "generalist_steps": config.training.total_timesteps,
            "finetune_steps": config.finetune_steps,
            "finetune_lr": config.finetune_lr,
            "finetune_warmup_chunks": config.finetune_warmup_chunks,
            "num_chunks": config.training.num_chunks,
            "specialist_steps": config.specialist_steps,
        },
        "runs": runs,
        "n_episodes": config.n_episodes,
        "eval_seed": config.eval_seed,
        "stage_wall_s": dict(stages.timing_s),
    }


def _run_info(trained: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in trained.items() if k != "checkpoint"}


# -- wargame_terrain ------------------------------------------------------------------


OPEN_FLAT = (("flat_terrain", True),)
"""Open, flat ground: no hills, no forests."""
RUGGED_FORESTED = (
    ("flat_terrain", False),
    ("hill_sigma_low", 0.03),
    ("hill_sigma_high", 0.08),
    ("hill_speed_factor", 0.3),
    ("forest_sigma_low", 0.12),
    ("forest_sigma_high", 0.25),
    ("forest_cover", 1.0),
)
"""Rugged, forested ground: narrow steep hills that slow to 30% speed on the
highest cells, and wide forests whose peak cover is 0.5-1."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class WargameTerrainConfig:
    """Train on one terrain distribution, test on another."""

    training: TrainingConfig = BENCHMARK_TRAINING
    """The source run (its ``total_timesteps`` is its budget)."""
    red: str = "L5"
    """The scripted Red."""
    source: tuple[tuple[str, Any], ...] = OPEN_FLAT
    """Game parameters of the training terrain."""
    target: tuple[tuple[str, Any], ...] = RUGGED_FORESTED
    """Game parameters of the test terrain."""
    finetune_steps: int = 200_000
    """Step budget of fine-tuning on the target (and of the from-scratch
    control)."""
    finetune_lr: float = 1e-4
    """Learning rate of fine-tuning."""
    finetune_warmup_chunks: int = 6
    """Chunks (of ``training.num_chunks``) of fine-tuning in which only the fresh
    critic learns (``TrainingConfig.critic_warmup_chunks``)."""
    n_episodes: int = 200
    """Evaluation episodes per policy and terrain."""
    eval_seed: int = 3_000_000
    """Episode ``i`` of every evaluation uses ``jax.random.key(eval_seed + i)``."""

    def __post_init__(self):
        check_fields(self)
        _check_red(self.red)
        for name in ("source", "target"):
            object.__setattr__(
                self, name, tuple((str(k), v) for k, v in getattr(self, name))
            )
        if dict(self.source) == dict(self.target):
            raise InvalidParameterError("source and target terrain are the same")
        defaults = game_defaults()
        for key, _ in (*self.source, *self.target):
            if key not in defaults:
                raise InvalidParameterError(
                    f"{key!r} is not a field of the battalion game"
                )
        _check_fine_tuning(self)
        for name in ("finetune_steps", "n_episodes"):
            if getattr(self, name) < 1:
                raise InvalidParameterError(
                    f"{name} must be >= 1, got {getattr(self, name)}"
                )

    def terrain_kwargs(self, terrain: tuple[tuple[str, Any], ...]) -> dict[str, Any]:
        """Game overrides of ``terrain``: every field either terrain sets, the
        other's fields at the game's defaults (so that a policy's recorded source
        settings never leak into an evaluation on the target)."""
        defaults = game_defaults()
        keys = {k for k, _ in self.source} | {k for k, _ in self.target}
        return {**{k: defaults[k] for k in sorted(keys)}, **dict(terrain)}

    def on_terrain(self, terrain, steps: int, run_id: str, init=None):
        """A run on ``terrain``."""
        return _red_training(
            self.training.replace(
                game_kwargs={
                    **dict(self.training.game_kwargs),
                    **self.terrain_kwargs(terrain),
                }
            ),
            self.red,
            total_timesteps=steps,
            run_id=run_id,
            **_fine_tuning(self, init),
        )


def run_wargame_terrain(
    config: WargameTerrainConfig, seeds: int | None, progress, stages
) -> dict:
    """Train on the source terrain, fine-tune on the target, and a from-scratch
    control on the target; evaluate on both terrains."""
    if seeds not in (None, 1):
        raise InvalidParameterError(
            f"wargame_terrain trains one seed; seeds={seeds} is not supported"
        )
    source = config.on_terrain(config.source, config.training.total_timesteps, "source")
    trained = stages.run(
        "source",
        source.identity(),
        lambda folder: train_blue(source, folder, "source", progress),
    )
    finetune = config.on_terrain(
        config.target, config.finetune_steps, "finetune", trained["checkpoint"]
    )
    tuned = stages.run(
        "finetune",
        {**finetune.identity(), "from": source.identity()},
        lambda folder: train_blue(finetune, folder, "fine-tune", progress),
    )
    scratch = config.on_terrain(config.target, config.finetune_steps, "scratch")
    control = stages.run(
        "scratch",
        scratch.identity(),
        lambda folder: train_blue(scratch, folder, "scratch", progress),
    )
    native = config.on_terrain(config.target, config.training.total_timesteps, "target")
    on_target = stages.run(
        "target",
        native.identity(),
        lambda folder: train_blue(native, folder, "target", progress),
    )

    def evaluate(checkpoint: str, terrain) -> dict[str, Any]:
        return evaluate_blue(
            checkpoint,
            config.red,
            config.n_episodes,
            config.eval_seed,
            config.terrain_kwargs(terrain),
        )

    table = {
        "source_on_source": evaluate(trained["checkpoint"], config.source),
        "source_on_target": evaluate(trained["checkpoint"], config.target),
        "fine_tuned_on_target": evaluate(tuned["checkpoint"], config.target),
        "scratch_on_target": evaluate(control["checkpoint"], config.target),
        "target_on_target": evaluate(on_target["checkpoint"], config.target),
    }
    for name, summary in table.items():
        progress(f"{name}: {rate_cell(summary)}")
    base = table["source_on_source"]

    def drop(summary: dict[str, Any]) -> dict[str, Any]:
        return proportion_difference(
            base["wins"], base["n"], summary["wins"], summary["n"]
        )

    drops = {
        "zero_shot": drop(table["source_on_target"]),
        "fine_tuned": drop(table["fine_tuned_on_target"]),
        "scratch": drop(table["scratch_on_target"]),
        "target_trained": drop(table["target_on_target"]),
    }
    return {
        "red": config.red,
        "source": dict(config.source),
        "target": dict(config.target),
        "evaluations": table,
        "drops": drops,
        "criteria": {
            "zero_shot_drop_under_0.20": drops["zero_shot"]["diff"] < 0.20,
            "zero_shot_drop_upper_under_0.20": drops["zero_shot"]["ci95"][1] < 0.20,
            "fine_tuned_drop_under_0.05": drops["fine_tuned"]["diff"] < 0.05,
            "fine_tuned_drop_upper_under_0.05": drops["fine_tuned"]["ci95"][1] < 0.05,
        },
        "budgets": {
            "source_steps": config.training.total_timesteps,
            "finetune_steps": config.finetune_steps,
            "finetune_lr": config.finetune_lr,
            "finetune_warmup_chunks": config.finetune_warmup_chunks,
            "num_chunks": config.training.num_chunks,
        },
        "runs": {
            "source": _run_info(trained),
            "finetune": _run_info(tuned),
            "scratch": _run_info(control),
            "target": _run_info(on_target),
        },
        "n_episodes": config.n_episodes,
        "eval_seed": config.eval_seed,
        "stage_wall_s": dict(stages.timing_s),
    }


QUICK_SCENARIOS = dict(
    training=QUICK_TRAINING,
    finetune_steps=QUICK_TRAINING.total_timesteps,
    finetune_lr=QUICK_TRAINING.lr,
    finetune_warmup_chunks=1,
    n_episodes=8,
)

register_experiment(
    "wargame_generalization",
    run_wargame_generalization,
    {
        "default": WargameGeneralizationConfig(),
        "quick": WargameGeneralizationConfig(
            **QUICK_SCENARIOS,
            train_scenarios=(0, 1),
            heldout_scenarios=(1000,),
            specialist_steps=QUICK_TRAINING.total_timesteps,
        ),
    },
    "default",
    description="train on procedural scenarios; held-out scenarios zero-shot, "
    "fine-tuned and against specialists (win/draw/loss, 95% intervals)",
    markdown_fn=wargame_report.markdown_wargame_generalization,
)

register_experiment(
    "wargame_terrain",
    run_wargame_terrain,
    {
        "default": WargameTerrainConfig(),
        "quick": WargameTerrainConfig(**QUICK_SCENARIOS),
    },
    "default",
    description="train on open flat terrain, test on rugged forested terrain: "
    "zero-shot and fine-tuned drops (win/draw/loss, 95% intervals)",
    markdown_fn=wargame_report.markdown_wargame_terrain,
)
