"""Co-training leagues over mopa's games: train a learner against scripted
opponents, a fixed policy or a self-play pool with a curriculum; evaluate with
wins, draws and losses from the game's own end signals; rate (Elo with anchors,
openskill, Bradley-Terry); measure exploitability (a trained best response, the
meta-game NashConv); and keep pools, ratings, registry and checkpoint manifest in
one crash-safe SQLite store per league directory.

The API follows seed 001's training harness::

    from mopa.league import train, TrainingConfig, evaluate_detailed

    result = train(total_timesteps=100_000, checkpoint_dir="league")
    evaluate_detailed(result.final_checkpoint, n_episodes=50, opponent="scripted_l3")
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "Arena": "mopa.league.arena",
    "ArenaParams": "mopa.league.arena",
    "outcome_rule": "mopa.league.arena",
    "BestModel": "mopa.league.callbacks",
    "MetricsLogger": "mopa.league.callbacks",
    "RatingEval": "mopa.league.callbacks",
    "RewardBreakdown": "mopa.league.callbacks",
    "WinRateVsPool": "mopa.league.callbacks",
    "read_metrics": "mopa.league.callbacks",
    "BATTALION_TEAM_STAGES": "mopa.league.curriculum",
    "CurriculumScheduler": "mopa.league.curriculum",
    "CurriculumStage": "mopa.league.curriculum",
    "scripted_ladder_stages": "mopa.league.curriculum",
    "transfer_weights": "mopa.league.curriculum",
    "EvaluationResult": "mopa.league.evaluation",
    "LeaguePolicy": "mopa.league.evaluation",
    "evaluate": "mopa.league.evaluation",
    "evaluate_blue": "mopa.league.evaluation",
    "evaluate_detailed": "mopa.league.evaluation",
    "red_mixture_kwargs": "mopa.league.evaluation",
    "evaluate_team_vs_pool": "mopa.league.evaluation",
    "evaluate_vs_pool": "mopa.league.evaluation",
    "load_league_policy": "mopa.league.evaluation",
    "run_episodes": "mopa.league.evaluation",
    "scripted_red_kwargs": "mopa.league.evaluation",
    "BestResponseResult": "mopa.league.exploitability",
    "best_response_exploitability": "mopa.league.exploitability",
    "CheckpointManifest": "mopa.league.manifest",
    "config_hash": "mopa.league.manifest",
    "exploitability_proxy": "mopa.league.nash",
    "meta_nash": "mopa.league.nash",
    "nash_conv": "mopa.league.nash",
    "population_nash_conv": "mopa.league.nash",
    "OpponentPool": "mopa.league.pool",
    "SnapshotTrigger": "mopa.league.pool",
    "TeamOpponentPool": "mopa.league.pool",
    "ANCHORS": "mopa.league.ratings",
    "EloRatings": "mopa.league.ratings",
    "OpenSkillRatings": "mopa.league.ratings",
    "TeamEloRatings": "mopa.league.ratings",
    "expected_score": "mopa.league.ratings",
    "fit_bradley_terry": "mopa.league.ratings",
    "Echelon": "mopa.league.registry",
    "PolicyEntry": "mopa.league.registry",
    "PolicyRegistry": "mopa.league.registry",
    "LeagueStore": "mopa.league.store",
    "Callback": "mopa.league.training",
    "LeagueRun": "mopa.league.training",
    "TrainingConfig": "mopa.league.training",
    "TrainResult": "mopa.league.training",
    "train": "mopa.league.training",
    "train_blue": "mopa.league.training",
    "ProgressLog": "mopa.league.training",
    "nash_exploitability_proxy": "mopa.league.nash",
    "league_tournament": "mopa.league.backend",
    "evaluate_sweep": "mopa.league.backend",
    "eval_job": "mopa.league.backend",
    "train_seeds": "mopa.league.backend",
    "make_backend": "mopa.league.backend",
    "RayBackend": "mopa.league.backend",
    "InProcessBackend": "mopa.league.backend",
}
"""Public name -> module; imported on first use, so ``import mopa.league.store``
(in a writer process, say) does not import JAX and the trainers."""


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        module = importlib.import_module(_EXPORTS[name])
        value = getattr(
            module,
            "exploitability_proxy" if name == "nash_exploitability_proxy" else name,
        )
        globals()[name] = value
        return value
    raise AttributeError(f"module 'mopa.league' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(_EXPORTS)


__all__ = sorted(_EXPORTS)
