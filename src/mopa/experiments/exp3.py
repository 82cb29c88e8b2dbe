"""Exp 3 of the research: an opponent-action head as a point-estimate opponent
model, and a Monte-Carlo planner that samples from it, judged in cross-play.

Stages (each reused when re-run with the same config):

1. ``train_iql`` and ``train_oa_iql``: two-team IQL and OA-IQL on ``tag`` (MLP
   128-128; the research's recipe, presets ``research_iql_tag`` and
   ``research_oa_iql_tag``, or with profile ``mopa`` mopa's, ``exp3_iql`` and
   ``exp3_oa_iql``), both teams learning, one learner per team, every seed at
   once.
2. ``tournament``: predators (rows) against prey (columns), seed ``i`` against seed
   ``i`` (the research's pairing), ``episodes`` episodes per seed and cell, mean
   captures per episode with a 95% interval over all episodes of a cell. Variants
   of each side: ``iql_greedy`` and ``oa_greedy`` (argmax Q of the IQL and OA-IQL
   policies) and ``oa_plan``: the OA-IQL policy wrapped in a Monte-Carlo lookahead
   (:class:`~mopa.planning.LookaheadPlayer`; ``K`` rollouts of horizon ``H`` per
   candidate, per-agent coordinate descent, the opponents sampled from the team's
   own opponent-action head, leaf ``max_a Q``). The 3x3 table is timed as one
   tournament (``tournament_wall_s``, compilation included); the predators'
   joint-action planner (``oa_plan_joint``, all 125 joint actions) is a fourth row
   played as a second tournament.

The research's numbers (seed 000, Exp 3): the OA-plan prey concedes the fewest
captures in every column (1.57, 1.15, 1.07 against the IQL-greedy, OA-greedy and
OA-plan predators, about 2 fewer than against the greedy prey), the OA-plan
predators are the worst predators, and the opponent heads reach 0.53 (predators)
and 0.58 (prey) accuracy in its Exp 1 (a "+7 pp" gap in Exp 3).
"""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp

from mopa.algos.driver import run_training
from mopa.algos.presets import check_recipe, recipe_preset
from mopa.core.checkpoint import POLICY_FILE
from mopa.core.checks import check_fields
from mopa.errors import InvalidParameterError
from mopa.eval.protocol import cell_stats
from mopa.eval.tournament import broadcast_seeds
from mopa.policy import read_policy_file
from mopa.report import exp3_report
from mopa.runs.registry import recipe_field, register_experiment

PREDATOR_VARIANTS = ("iql_greedy", "oa_greedy", "oa_plan", "oa_plan_joint")
PREY_VARIANTS = ("iql_greedy", "oa_greedy", "oa_plan")

RESEARCH = {
    "oa_plan_prey_column": {"iql_greedy": 1.57, "oa_greedy": 1.15, "oa_plan": 1.07},
    "greedy_prey_column_mean": 3.4,
    "planning_prey_column_mean": 1.3,
    "opp_head_accuracy": {"pred": 0.53, "prey": 0.58},
    "tournament_wall_s": 50.0,
}
"""What the research reports for Exp 3 (its README; its 3x3 figure is not given
cell by cell)."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class Exp3Config:
    """Exp 3: training budgets, the planner and the tournament."""

    total_steps: int = 2_000_000
    """Environment steps per seed of each training run."""
    num_seeds: int = 3
    """Seeds of each training run (and seed pairs of the tournament)."""
    episodes: int = 100
    """Evaluation episodes per seed pair and cell."""
    num_rollouts: int = 5
    """``K``: planner rollouts per candidate root action."""
    horizon: int = 3
    """``H``: planner rollout length."""
    gamma: float = 0.9
    """Planner discount (the research's, with gamma^3 = 0.73 on the leaf)."""
    joint: bool = True
    """Also play the predators' joint-action planner (the fourth row)."""
    seed: int = 0
    """Seed of the training runs and of the tournament."""
    train_overrides: tuple[tuple[str, Any], ...] = ()
    """Extra fields of both training configs (small networks for quick runs)."""
    recipe: str = recipe_field()
    """Training recipe: ``research`` (presets ``research_iql_tag`` and
    ``research_oa_iql_tag``) or ``mopa`` (``exp3_iql`` and ``exp3_oa_iql``)."""

    def __post_init__(self):
        check_fields(self)
        check_recipe(self.recipe)
        for name in ("total_steps", "num_seeds", "episodes", "num_rollouts"):
            if getattr(self, name) < 1:
                raise InvalidParameterError(
                    f"{name} must be >= 1, got {getattr(self, name)}"
                )
        if self.horizon < 0:
            raise InvalidParameterError(f"horizon must be >= 0, got {self.horizon}")
        object.__setattr__(
            self, "train_overrides", tuple(map(tuple, self.train_overrides))
        )


def train_config(algo: str, config: Exp3Config, num_seeds: int):
    """The training config of ``algo`` (``iql``, ``oa_iql``) under ``config``'s
    recipe and budget."""
    return recipe_preset(f"exp3_{algo}", config.recipe).replace(
        total_steps=config.total_steps,
        num_seeds=num_seeds,
        seed=config.seed,
        **dict(config.train_overrides),
    )


def _train_stage(algo: str, config: Exp3Config, num_seeds: int, progress, stages):
    train_cfg = train_config(algo, config, num_seeds)

    def train(folder: Path) -> dict:
        def report(p):
            progress(
                f"  {algo}: {p.env_steps:,}/{p.total_env_steps:,} steps per seed, "
                f"{p.chunk_steps_per_s:,.0f} steps/s"
            )

        result = run_training(train_cfg, out=folder, progress=report)
        final = result.summary["final"]
        return {
            "folder": str(folder),
            "wall_s": result.wall_s,
            "final": {
                k: final[k]["mean"]
                for k in final
                if k.startswith(("return/", "opp_acc/", "captures"))
            },
        }

    return stages.run(f"train_{algo}", train_cfg.to_dict(), train)


def _with_unused_head(spec, params, oa_spec, oa_params):
    """An IQL Q-network in the shape of the OA-IQL one: the same layers plus a zero
    opponent head, which greedy play never reads. The two greedy players then form
    one group of the tournament (one compiled block instead of two)."""
    bare = dict(num_opponents=0, opponent_actions=0)
    if dataclasses.replace(spec, **bare) != dataclasses.replace(oa_spec, **bare):
        return spec, params
    head = jax.tree.map(jnp.zeros_like, oa_params["params"]["opp_head"])
    return oa_spec, {"params": {**params["params"], "opp_head": head}}


def _entries(env, env_params, runs: dict, config: Exp3Config, team: str, modes):
    """Tournament entries of ``team``: greedy IQL, greedy OA-IQL and the OA-IQL
    planner in each of ``modes``."""
    from mopa.eval import TournamentEntry
    from mopa.planning import (
        LookaheadConfig,
        LookaheadParams,
        LookaheadPlayer,
        OpponentHeadModel,
    )
    from mopa.players import PolicyPlayer

    t = env.team_index(team)
    iql_spec, iql_params = runs["iql"].teams[team]
    oa_spec, oa_params = runs["oa_iql"].teams[team]
    num_seeds = runs["oa_iql"].num_seeds
    iql_spec, iql_params = _with_unused_head(iql_spec, iql_params, oa_spec, oa_params)
    entries = {
        "iql_greedy": TournamentEntry("iql_greedy", PolicyPlayer(iql_spec), iql_params),
        "oa_greedy": TournamentEntry("oa_greedy", PolicyPlayer(oa_spec), oa_params),
    }
    for mode, name in modes:
        player = LookaheadPlayer(
            env,
            t,
            LookaheadConfig(
                num_rollouts=config.num_rollouts,
                horizon=config.horizon,
                gamma=config.gamma,
                mode=mode,
            ),
            OpponentHeadModel(oa_spec, t),
            oa_spec,
        )
        # The head is read from the own weights, in the Q-values' forward pass.
        params = LookaheadParams(broadcast_seeds(env_params, num_seeds), oa_params, ())
        entries[name] = TournamentEntry(name, player, params)
    return entries


def _tournament_stage(
    config: Exp3Config, trained: dict, num_seeds: int, progress, stages
):
    import mopa.envs
    from mopa.eval import play_tournament
    from mopa.report.tournament import plot_tournament_heatmap, save_tournament

    stage_config = {
        "training": {algo: run["folder"] for algo, run in trained.items()},
        "training_configs": {
            algo: train_config(algo, config, num_seeds).to_dict() for algo in trained
        },
        "episodes": config.episodes,
        "num_rollouts": config.num_rollouts,
        "horizon": config.horizon,
        "gamma": config.gamma,
        "joint": config.joint,
        "seed": config.seed,
    }

    def play(folder: Path) -> dict:
        runs = {
            algo: read_policy_file(Path(run["folder"]) / POLICY_FILE)
            for algo, run in trained.items()
        }
        env, env_params = mopa.envs.make(
            runs["oa_iql"].env, **runs["oa_iql"].env_overrides
        )
        predators = _entries(
            env,
            env_params,
            runs,
            config,
            "predator",
            [("per_agent", "oa_plan")]
            + ([("joint", "oa_plan_joint")] if config.joint else []),
        )
        prey = _entries(
            env, env_params, runs, config, "prey", [("per_agent", "oa_plan")]
        )
        columns = [prey[name] for name in PREY_VARIANTS]
        key = jax.random.key(config.seed)
        progress("  3x3 tournament (greedy and per-agent planners)")
        tick = time.perf_counter()
        main = play_tournament(
            env,
            env_params,
            [predators[name] for name in PREY_VARIANTS],
            columns,
            key,
            num_episodes=config.episodes,
            pairing="paired",
        )
        main_wall = time.perf_counter() - tick
        progress(f"  3x3 tournament: {main_wall:.1f} s")
        save_tournament(main, folder / "tournament.json")
        plot_tournament_heatmap(main, folder / "heatmap.png")
        captures = cell_stats(main)
        joint_wall = None
        if config.joint:
            progress("  joint-action predator planner against every prey")
            tick = time.perf_counter()
            joint = play_tournament(
                env,
                env_params,
                [predators["oa_plan_joint"]],
                columns,
                key,
                num_episodes=config.episodes,
                pairing="paired",
            )
            joint_wall = time.perf_counter() - tick
            progress(f"  joint row: {joint_wall:.1f} s")
            save_tournament(joint, folder / "tournament_joint.json")
            captures.update(cell_stats(joint))
        return {
            "captures": captures,
            "tournament_wall_s": main_wall,
            "joint_row_wall_s": joint_wall,
            "num_episodes_per_cell": int(main.summary("captures")["num_episodes"]),
        }

    return stages.run("tournament", stage_config, play)


def run_exp3(config: Exp3Config, seeds: int | None, progress, stages) -> dict:
    """Train IQL and OA-IQL, then play the cross-play tournament with planners."""
    num_seeds = config.num_seeds if seeds is None else seeds
    trained = {}
    for algo in ("iql", "oa_iql"):
        progress(
            f"training {algo} on tag, {num_seeds} seeds x {config.total_steps:,} steps"
        )
        trained[algo] = _train_stage(algo, config, num_seeds, progress, stages)
    tournament = _tournament_stage(config, trained, num_seeds, progress, stages)
    final = trained["oa_iql"]["final"]
    results = {
        "captures": tournament["captures"],
        "opp_head_accuracy": {
            "pred": final.get("opp_acc/predator"),
            "prey": final.get("opp_acc/prey"),
        },
        "tournament_wall_s": tournament["tournament_wall_s"],
        "joint_row_wall_s": tournament["joint_row_wall_s"],
        "num_seeds": num_seeds,
        "num_episodes_per_cell": tournament["num_episodes_per_cell"],
        "training_final": {algo: run["final"] for algo, run in trained.items()},
        "findings": exp3_report.findings(tournament["captures"], PREY_VARIANTS),
        "timing_s": dict(stages.timing_s),
        "research": RESEARCH,
    }
    return results


register_experiment(
    "exp3",
    run_exp3,
    {
        "default": Exp3Config(),
        "mopa": Exp3Config(recipe="mopa"),
        "quick": Exp3Config(
            recipe="mopa",
            total_steps=12_288,
            num_seeds=2,
            episodes=4,
            num_rollouts=2,
            horizon=2,
            joint=False,
            train_overrides=(
                ("hidden", (16,)),
                ("num_envs", 8),
                ("learning_starts", 1024),
                ("buffer_size", 2048),
            ),
        ),
    },
    "default",
    plot_fn=exp3_report.write_report,
    markdown_fn=lambda results: exp3_report.results_markdown(
        results, PREDATOR_VARIANTS, PREY_VARIANTS, RESEARCH["oa_plan_prey_column"]
    ),
    description="IQL vs OA-IQL vs the OA-head planner on tag: cross-play tournament",
)
