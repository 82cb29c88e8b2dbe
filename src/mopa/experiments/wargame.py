"""The wargame's experiments: a trained Blue against the scripted Red ladder
(``mopa experiment wargame_ladder``) and the shared pieces of the wargame's
transfer benchmarks (:mod:`mopa.experiments.wargame_transfer`).

Every Blue here is trained through :func:`mopa.league.train` (PPO with a
centralised critic, the league's MAPPO, on ``battalion_vs_red`` with discrete
actions) and evaluated through :func:`mopa.league.evaluate_detailed`: wins, draws
and losses from the game's own end signals (a simultaneous break and the
500-step limit are draws), episode ``i`` of an evaluation seeded
``eval_seed + i``, the policy acting greedily. Rates carry 95% Wilson score
intervals; nothing falls back: an error in training or evaluation fails the
experiment.

``wargame_ladder``: one Blue trained against a mixture of the ladder's levels
(each episode's Red drawn from ``mixture``, a game parameter, so every level
shares one compiled program), then evaluated against each of L1-L5 over
``n_episodes`` episodes, beside the targets (at least 95% against L1-L4 and 60%
against L5) and the reference PPO baseline of seed 001 (85, 85, 100, 100, 25%).
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path
from typing import Any

import numpy as np
from scipy.stats import binomtest

from mopa.errors import InvalidParameterError
from mopa.experiments.registry import register_experiment
from mopa.league.training import Callback, LeagueRun, TrainingConfig

LEVELS = ("L1", "L2", "L3", "L4", "L5")
"""The scripted Red ladder, weakest first."""
REFERENCE_PPO = {"L1": 0.85, "L2": 0.85, "L3": 1.00, "L4": 1.00, "L5": 0.25}
"""Win rates of seed 001's PPO baseline (about 50k steps) against the ladder."""
TARGETS = {"L1": 0.95, "L2": 0.95, "L3": 0.95, "L4": 0.95, "L5": 0.60}
"""The win rates a trained Blue must reach against each level."""


# -- intervals -----------------------------------------------------------------
def wilson_interval(successes: int, n: int) -> tuple[float, float]:
    """95% Wilson score interval of a binomial proportion (Wilson 1927; SciPy's
    ``binomtest(...).proportion_ci(method="wilson")``): it stays inside ``[0, 1]``
    and is not degenerate at 0 or ``n`` successes.

    Raises:
        InvalidParameterError: ``n < 1`` or ``successes`` outside ``[0, n]``.
    """
    if n < 1 or not 0 <= successes <= n:
        raise InvalidParameterError(
            f"need 0 <= successes <= n, n >= 1: {successes}/{n}"
        )
    interval = binomtest(successes, n).proportion_ci(0.95, method="wilson")
    return float(interval.low), float(interval.high)


def difference_interval(k1: int, n1: int, k2: int, n2: int) -> dict[str, Any]:
    """Difference of two independent proportions ``k1/n1 - k2/n2`` with
    Newcombe's 95% hybrid score interval (Newcombe 1998, method 10), built from
    the two Wilson intervals.

    Returns:
        ``{"diff", "ci95": [lo, hi]}``.
    """
    p1, p2 = k1 / n1, k2 / n2
    l1, u1 = wilson_interval(k1, n1)
    l2, u2 = wilson_interval(k2, n2)
    diff = p1 - p2
    low = diff - math.sqrt((p1 - l1) ** 2 + (u2 - p2) ** 2)
    high = diff + math.sqrt((u1 - p1) ** 2 + (p2 - l2) ** 2)
    return {"diff": diff, "ci95": [low, high]}


def outcome_summary(wins: int, draws: int, losses: int) -> dict[str, Any]:
    """Counts, rates and 95% Wilson intervals of an evaluation."""
    n = wins + draws + losses
    summary: dict[str, Any] = {"wins": wins, "draws": draws, "losses": losses, "n": n}
    for name, count in (("win", wins), ("draw", draws), ("loss", losses)):
        summary[f"{name}_rate"] = count / n
        summary[f"{name}_ci95"] = list(wilson_interval(count, n))
    return summary


# -- training and evaluation through the league -------------------------------------
def ladder_red_kwargs(mixture: tuple[tuple[str, float], ...]) -> dict[str, Any]:
    """Game overrides of ``battalion_vs_red`` whose Red is drawn per episode from
    ``mixture`` (``(type, weight)`` pairs, normalised), built with the league's
    Red types so that any mixture is a parameter of one compiled game.

    Raises:
        InvalidParameterError: an unknown type, a negative weight or no weight.
    """
    from mopa.envs.scripted_red import RED_TYPE_INDEX, RED_TYPES
    from mopa.league.evaluation import LEAGUE_REDS

    probs = np.zeros(len(RED_TYPES))
    for name, weight in mixture:
        if name not in LEAGUE_REDS:
            raise InvalidParameterError(
                f"mixture: {name!r} is not one of {', '.join(LEAGUE_REDS)}"
            )
        if weight < 0:
            raise InvalidParameterError(f"mixture: weight of {name} is negative")
        probs[RED_TYPE_INDEX[name]] += weight
    if probs.sum() <= 0:
        raise InvalidParameterError("mixture: the weights sum to 0")
    probs = probs / probs.sum()
    return {"red": ",".join(LEAGUE_REDS), "red_probs": tuple(float(p) for p in probs)}


class ProgressLog(Callback):
    """Reports every chunk's training win rate and the running wall time."""

    def __init__(self, label: str, progress):
        self.label = label
        self.progress = progress
        self.win_rates: list[float] = []

    def on_chunk_end(self, run: LeagueRun) -> None:
        wins = np.asarray(run.rows["win_per_episode"], np.float64)
        finished = np.isfinite(wins)
        win_rate = float(wins[finished].mean()) if finished.any() else None
        self.win_rates.append(win_rate)  # None: no episode ended in the chunk
        shown = "-" if win_rate is None else f"{win_rate:.3f}"
        self.progress(
            f"{self.label}: chunk {run.chunk}/{run.num_chunks}, {run.env_steps} steps, "
            f"training win rate {shown}, {run.wall_s:.0f} s"
        )


def train_blue(
    training: TrainingConfig, folder: Path, label: str, progress
) -> dict[str, Any]:
    """Train ``training`` with its league in ``folder``; the final checkpoint is
    ``folder/runs/<run_id>/final.msgpack``.

    Returns:
        ``{"checkpoint", "env_steps", "wall_s", "train_win_rate" (per chunk),
        "promotions"}``.
    """
    from mopa.league.training import train

    log = ProgressLog(label, progress)
    result = train(training.replace(checkpoint_dir=str(folder)), callbacks=[log])
    return {
        "checkpoint": str(result.final_checkpoint),
        "env_steps": int(result.env_steps),
        "wall_s": float(result.wall_s),
        "train_win_rate": log.win_rates,
        "promotions": result.promotions,
    }


def evaluate_blue(
    checkpoint: str,
    opponent: str,
    n_episodes: int,
    seed: int,
    env_kwargs: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """:func:`outcome_summary` of the checkpoint's Blue (greedy) against the
    scripted ``opponent`` on the game set by ``env_kwargs``."""
    from mopa.league.evaluation import evaluate_detailed

    result = evaluate_detailed(
        checkpoint,
        n_episodes=n_episodes,
        deterministic=True,
        seed=seed,
        opponent=opponent,
        env_kwargs=env_kwargs,
    )
    return outcome_summary(result.wins, result.draws, result.losses)


def rate_cell(summary: dict[str, Any], name: str = "win") -> str:
    """``0.95 [0.91, 0.97]``: a rate and its interval."""
    low, high = summary[f"{name}_ci95"]
    return f"{summary[f'{name}_rate']:.3f} [{low:.3f}, {high:.3f}]"


def outcome_columns(summary: dict[str, Any]) -> str:
    """The ``wins | draws | losses | win | draw | loss`` cells of a table row."""
    return (
        f"{summary['wins']} | {summary['draws']} | {summary['losses']} | "
        f"{rate_cell(summary)} | {rate_cell(summary, 'draw')} | "
        f"{rate_cell(summary, 'loss')}"
    )


OUTCOME_HEADER = (
    "wins | draws | losses | win rate [95% CI] | draw rate [95% CI] | "
    "loss rate [95% CI]"
)
"""Column titles of :func:`outcome_columns`."""


def training_dict(training: TrainingConfig) -> dict[str, Any]:
    """What a stage's result depends on in a training config (without where it is
    saved)."""
    return training.identity()


# -- wargame_ladder -------------------------------------------------------------------
LADDER_TRAINING = TrainingConfig(
    game="battalion_vs_red",
    game_kwargs={"reward_received": 10.0},
    total_timesteps=6_000_000,
    n_envs=128,
    n_steps=128,
    num_chunks=10,
    hidden=(128, 128),
    lr=3e-4,
    ent_coef=0.01,
    gamma=0.995,
    update_epochs=4,
    num_minibatches=4,
    run_id="ladder",
)
"""PPO settings of the default ladder run (the game's Red is set from the
experiment's ``mixture``). Damage received costs twice the reward of damage dealt
(``reward_received`` 10, a documented game option; the game's default is 5), so
that Blue values fighting from better cover than Red's."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class WargameLadderConfig:
    """A Blue trained through the league against a mixture of the ladder's
    levels, evaluated against each level."""

    training: TrainingConfig = LADDER_TRAINING
    """League training settings (``game_kwargs`` gets the mixture's Red)."""
    mixture: tuple[tuple[str, float], ...] = (
        ("L1", 0.1),
        ("L2", 0.1),
        ("L3", 0.1),
        ("L4", 0.2),
        ("L5", 0.5),
    )
    """``(Red type, weight)``: each training episode's Red is drawn from these."""
    n_episodes: int = 200
    """Evaluation episodes per level."""
    eval_seed: int = 1_000_000
    """Episode ``i`` of every evaluation uses ``jax.random.key(eval_seed + i)``."""

    def __post_init__(self):
        if self.n_episodes < 1:
            raise InvalidParameterError(
                f"n_episodes must be >= 1, got {self.n_episodes}"
            )
        object.__setattr__(
            self, "mixture", tuple((str(n), float(w)) for n, w in self.mixture)
        )
        ladder_red_kwargs(self.mixture)  # validates the mixture

    @property
    def training_config(self) -> TrainingConfig:
        """The league run: ``training`` with the mixture's Red."""
        kwargs = {**dict(self.training.game_kwargs), **ladder_red_kwargs(self.mixture)}
        return self.training.replace(game_kwargs=kwargs)


def run_wargame_ladder(
    config: WargameLadderConfig, seeds: int | None, progress, stages
) -> dict:
    """Train one Blue (stage ``train``) and evaluate it against every level."""
    if seeds not in (None, 1):
        raise InvalidParameterError(
            f"wargame_ladder trains one Blue (seed {config.training.seed}); "
            f"seeds={seeds} is not supported"
        )
    training = config.training_config
    trained = stages.run(
        "train",
        training_dict(training),
        lambda folder: train_blue(training, folder, "train", progress),
    )
    levels = {}
    for level in LEVELS:
        summary = evaluate_blue(
            trained["checkpoint"], level, config.n_episodes, config.eval_seed
        )
        summary["target"] = TARGETS[level]
        summary["reference_ppo"] = REFERENCE_PPO[level]
        summary["target_met"] = summary["win_rate"] >= TARGETS[level]
        levels[level] = summary
        progress(f"{level}: {rate_cell(summary)} (target {TARGETS[level]:.2f})")
    return {
        "levels": levels,
        "all_targets_met": all(s["target_met"] for s in levels.values()),
        "n_episodes": config.n_episodes,
        "eval_seed": config.eval_seed,
        "mixture": [list(p) for p in config.mixture],
        "training": {k: v for k, v in trained.items() if k != "checkpoint"},
        "stage_wall_s": dict(stages.timing_s),
    }


def markdown_wargame_ladder(results: dict) -> str:
    """``results.md``: the ladder table with intervals, targets and the
    reference's PPO baseline."""
    training = results["training"]
    mixture = ", ".join(f"{name} {weight:g}" for name, weight in results["mixture"])
    met = "met" if results["all_targets_met"] else "NOT met"
    lines = [
        "# A trained Blue against the scripted Red ladder (battalion_vs_red)",
        "",
        f"Targets (win rate at least 0.95 against L1-L4, 0.60 against L5): **{met}**.",
        "",
        f"Blue trained through `mopa.league` (MAPPO, discrete actions) for "
        f"{training['env_steps']:,} steps against a per-episode mixture of Red "
        f"levels ({mixture}); evaluated greedily over {results['n_episodes']} "
        "episodes per level (episode i seeded "
        f"{results['eval_seed']} + i). Outcomes from the game's end signals; "
        "draws (simultaneous break, 500-step limit) are counted. Intervals: 95% "
        "Wilson.",
        "",
        f"| level | {OUTCOME_HEADER} | target | reference PPO |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for level, summary in results["levels"].items():
        lines.append(
            f"| {level} | {outcome_columns(summary)} | {summary['target']:.2f} | "
            f"{summary['reference_ppo']:.2f} |"
        )
    lines += ["", f"Training wall time: {training['wall_s']:.0f} s.", ""]
    return "\n".join(lines)


register_experiment(
    "wargame_ladder",
    run_wargame_ladder,
    {
        "default": WargameLadderConfig(),
        "quick": WargameLadderConfig(
            training=LADDER_TRAINING.replace(
                total_timesteps=4 * 16 * 2,
                n_envs=4,
                n_steps=16,
                num_chunks=2,
                hidden=(16,),
                num_minibatches=2,
                update_epochs=1,
            ),
            n_episodes=8,
        ),
    },
    "default",
    description="a Blue trained through the league vs the scripted Red ladder "
    "L1-L5: win/draw/loss with 95% intervals beside the reference's PPO",
    markdown_fn=markdown_wargame_ladder,
)
