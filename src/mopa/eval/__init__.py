"""Evaluation: play players against each other and measure them."""

from mopa.eval.draws import pool_draws
from mopa.eval.evaluate import (
    EpisodeTotals,
    episode_horizon,
    evaluate,
    play_episode,
    play_episodes,
    record_episode,
)
from mopa.eval.tournament import (
    TournamentEntry,
    TournamentResult,
    cell_keys,
    play_tournament,
)

__all__ = [
    "EpisodeTotals",
    "episode_horizon",
    "TournamentEntry",
    "TournamentResult",
    "cell_keys",
    "evaluate",
    "play_episode",
    "play_episodes",
    "play_tournament",
    "pool_draws",
    "record_episode",
]
