"""Ratings: Elo with fixed anchors, team Elo, openskill (mu, sigma) and an offline
Bradley-Terry fit of a whole results table.

Elo (400 scale) follows seed 001's baseline so its numbers compare: the expected
score of ``a`` against ``b`` is ``1 / (1 + 10^((R_b - R_a) / 400))``; the K factor
is 40 for a player's first 30 games, 20 until 100 and 10 after. Unlike the
reference, every game is its own update (a batch of ``n`` results is ``n``
sequential updates, not one update with the mean score) and both players move,
except anchors, whose ratings are fixed: ``random`` 500, the scripted ladder
``scripted_l1`` ... ``scripted_l5`` 600 ... 1000. Unknown players start at 1000.

With a :class:`~mopa.league.store.LeagueStore`, ratings and game counts live in
its database and each game's read-update-write is one transaction (concurrent
writers lose nothing); without one they live in memory.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterable, Sequence
from typing import Any, NamedTuple

import numpy as np

from mopa.errors import InvalidParameterError
from mopa.league.store import LeagueStore

DEFAULT_RATING = 1000.0
"""Rating of a player never seen before."""
ANCHORS = {
    "random": 500.0,
    "scripted_l1": 600.0,
    "scripted_l2": 700.0,
    "scripted_l3": 800.0,
    "scripted_l4": 900.0,
    "scripted_l5": 1000.0,
}
"""Fixed ratings of the reference players; they never move."""
TEAM_ANCHORS = {f"team_{name}": rating for name, rating in ANCHORS.items()}
"""The same anchors for team ratings (``team_random``, ``team_scripted_l1``...)."""


def expected_score(rating_a: float, rating_b: float) -> float:
    """Elo expected score of a player rated ``rating_a`` against ``rating_b``."""
    return 1.0 / (1.0 + 10.0 ** ((rating_b - rating_a) / 400.0))


def k_factor(games: int) -> float:
    """40 for the first 30 games, 20 up to 100, then 10."""
    if games < 30:
        return 40.0
    if games < 100:
        return 20.0
    return 10.0


def _check_score(score: float) -> float:
    score = float(score)
    if not 0.0 <= score <= 1.0:
        raise InvalidParameterError(f"a game's score must be in [0, 1], got {score}")
    return score


class EloRatings:
    """Elo ratings with fixed anchors, updated game by game.

    Args:
        store: persist ratings, game counts and matches in this league store
            (``None``: in memory).
        anchors: fixed ratings (default :data:`ANCHORS`).
    """

    def __init__(
        self, store: LeagueStore | None = None, anchors: dict[str, float] | None = None
    ):
        self.store = store
        self.anchors = dict(ANCHORS if anchors is None else anchors)
        self._ratings: dict[str, float] = {}
        self._games: dict[str, int] = {}

    # -- reading ---------------------------------------------------------------------
    def _row(self, db, name: str) -> tuple[float, int]:
        if name in self.anchors:
            games = 0
            if db is not None:
                rows = db.execute(
                    "SELECT games FROM ratings WHERE name = ?", (name,)
                ).fetchall()
                games = rows[0][0] if rows else 0
            else:
                games = self._games.get(name, 0)
            return self.anchors[name], games
        if db is None:
            return self._ratings.get(name, DEFAULT_RATING), self._games.get(name, 0)
        rows = db.execute(
            "SELECT rating, games FROM ratings WHERE name = ?", (name,)
        ).fetchall()
        return (rows[0][0], rows[0][1]) if rows else (DEFAULT_RATING, 0)

    def rating(self, name: str) -> float:
        """Current rating of ``name`` (anchor, stored, or the default)."""
        if self.store is None:
            return self._row(None, name)[0]
        return self._row(self.store._connection, name)[0]

    def games(self, name: str) -> int:
        """Games ``name`` has played."""
        if self.store is None:
            return self._row(None, name)[1]
        return self._row(self.store._connection, name)[1]

    def all_ratings(self) -> dict[str, float]:
        """Every rated player (anchors included)."""
        if self.store is None:
            ratings = dict(self._ratings)
        else:
            ratings = dict(
                self.store.query("SELECT name, rating FROM ratings WHERE system='elo'")
            )
        return {**ratings, **self.anchors}

    # -- updating --------------------------------------------------------------------
    def _apply(self, db, player: str, opponent: str, score: float) -> float:
        rating_p, games_p = self._row(db, player)
        rating_o, games_o = self._row(db, opponent)
        expected = expected_score(rating_p, rating_o)
        delta_p = k_factor(games_p) * (score - expected)
        delta_o = k_factor(games_o) * ((1.0 - score) - (1.0 - expected))
        new_p = rating_p if player in self.anchors else rating_p + delta_p
        new_o = rating_o if opponent in self.anchors else rating_o + delta_o
        for name, rating, games in (
            (player, new_p, games_p + 1),
            (opponent, new_o, games_o + 1),
        ):
            if db is None:
                if name not in self.anchors:
                    self._ratings[name] = rating
                self._games[name] = games
            else:
                db.execute(
                    "INSERT OR REPLACE INTO ratings (name, system, rating, games, "
                    "updated) VALUES (?, 'elo', ?, ?, ?)",
                    (name, rating, games, time.time()),
                )
        return new_p - rating_p

    def update(
        self,
        player: str,
        opponent: str,
        scores: float | Sequence[float],
        *,
        step: int | None = None,
        source: str | None = None,
    ) -> float:
        """Rate the games of ``player`` against ``opponent`` one by one.

        Args:
            scores: each game's score for ``player`` (1 win, 0.5 draw, 0 loss),
                or one score.
            step: training step, recorded with each match.
            source: what produced the games (e.g. ``"eval"``), recorded.

        Returns:
            ``player``'s total rating change.

        Raises:
            InvalidParameterError: a player playing itself or a score outside
                ``[0, 1]``.
        """
        if player == opponent:
            raise InvalidParameterError(f"{player!r} cannot be rated against itself")
        scores = [_check_score(s) for s in np.atleast_1d(scores)]
        if self.store is None:
            return sum(self._apply(None, player, opponent, s) for s in scores)
        total = 0.0
        with self.store.transaction() as db:
            for score in scores:
                total += self._apply(db, player, opponent, score)
                db.execute(
                    "INSERT INTO matches (player, opponent, score, step, source, "
                    "created) VALUES (?, ?, ?, ?, ?, ?)",
                    (player, opponent, score, step, source, time.time()),
                )
        return total


class TeamEloRatings(EloRatings):
    """Elo ratings of teams, anchored by :data:`TEAM_ANCHORS` (and the single
    anchors), so team and single ratings share a scale but not names."""

    def __init__(self, store: LeagueStore | None = None):
        super().__init__(store, {**ANCHORS, **TEAM_ANCHORS})


# -- openskill ---------------------------------------------------------------------
class SkillRating(NamedTuple):
    mu: float
    sigma: float

    @property
    def ordinal(self) -> float:
        """Conservative skill ``mu - 3 sigma`` (for leaderboards)."""
        return self.mu - 3.0 * self.sigma


class OpenSkillRatings:
    """Bayesian (mu, sigma) ratings (openskill's Plackett-Luce model): draws are
    equal ranks; unequal teams allowed; win and draw predictions.

    Stored in the league store's ``ratings`` table under ``system='openskill'``
    when a store is given.
    """

    def __init__(self, store: LeagueStore | None = None):
        from openskill.models import PlackettLuce

        self.model = PlackettLuce()
        self.store = store
        self._ratings: dict[str, SkillRating] = {}

    def _key(self, name: str) -> str:
        return f"openskill:{name}"

    def _get(self, db, name: str) -> SkillRating:
        if db is None:
            found = self._ratings.get(name)
        else:
            rows = db.execute(
                "SELECT rating, sigma FROM ratings WHERE name = ?", (self._key(name),)
            ).fetchall()
            found = SkillRating(*rows[0]) if rows else None
        if found is None:
            fresh = self.model.rating()
            return SkillRating(fresh.mu, fresh.sigma)
        return found

    def rating(self, name: str) -> SkillRating:
        db = None if self.store is None else self.store._connection
        return self._get(db, name)

    def _model_rating(self, rating: SkillRating, name: str):
        return self.model.rating(mu=rating.mu, sigma=rating.sigma, name=name)

    def update(self, teams: Sequence[Sequence[str]], ranks: Sequence[float]) -> None:
        """Rate one game of ``teams`` (lists of player names) finishing at
        ``ranks`` (lower is better; equal ranks are a draw)."""
        if self.store is None:
            self._rate(None, teams, ranks)
            return
        with self.store.transaction() as db:
            self._rate(db, teams, ranks)

    def _rate(self, db, teams, ranks) -> None:
        current = [[self._model_rating(self._get(db, n), n) for n in t] for t in teams]
        rated = self.model.rate(current, ranks=list(ranks))
        for names, team in zip(teams, rated, strict=True):
            for name, player in zip(names, team, strict=True):
                value = SkillRating(float(player.mu), float(player.sigma))
                if db is None:
                    self._ratings[name] = value
                else:
                    db.execute(
                        "INSERT OR REPLACE INTO ratings (name, system, rating, sigma, "
                        "games, updated) VALUES (?, 'openskill', ?, ?, "
                        "COALESCE((SELECT games FROM ratings WHERE name = ?), 0) + 1, "
                        "?)",
                        (
                            self._key(name),
                            value.mu,
                            value.sigma,
                            self._key(name),
                            time.time(),
                        ),
                    )

    def record(self, player: str, opponent: str, score: float) -> None:
        """One 1v1 game: ``score`` 1 (``player`` won), 0.5 (draw) or 0."""
        score = _check_score(score)
        ranks = [0, 0] if score == 0.5 else ([0, 1] if score > 0.5 else [1, 0])
        self.update([[player], [opponent]], ranks)

    def predict(self, player: str, opponent: str) -> dict[str, float]:
        """``{"win", "draw", "loss"}`` probabilities of ``player`` against
        ``opponent`` (openskill's ``predict_win`` and ``predict_draw``; the win
        and loss shares split what the draw leaves)."""
        a = [self._model_rating(self.rating(player), player)]
        b = [self._model_rating(self.rating(opponent), opponent)]
        draw = float(self.model.predict_draw([a, b]))
        win_a, win_b = (float(p) for p in self.model.predict_win([a, b]))
        scale = (1.0 - draw) / (win_a + win_b)
        return {"win": win_a * scale, "draw": draw, "loss": win_b * scale}


# -- Bradley-Terry -----------------------------------------------------------------
class BradleyTerryFit(NamedTuple):
    names: tuple[str, ...]
    ratings: np.ndarray
    """``[P]`` Elo-scale ratings (400 / ln 10 per logit), anchored so the first
    anchor present keeps its rating (else mean 1000)."""
    ci95: np.ndarray
    """``[P, 2]`` 95% intervals from the inverse Fisher information."""

    def leaderboard(self) -> list[tuple[str, float, float, float]]:
        """``(name, rating, lo, hi)`` best first."""
        order = np.argsort(-self.ratings)
        return [
            (self.names[i], float(self.ratings[i]), *map(float, self.ci95[i]))
            for i in order
        ]


ELO_PER_LOGIT = 400.0 / math.log(10.0)


def fit_bradley_terry(
    matches: Iterable[tuple[str, str, float]],
    anchors: dict[str, float] | None = None,
    prior: float = 1e-3,
) -> BradleyTerryFit:
    """Maximum-likelihood Bradley-Terry strengths of every player in ``matches``
    (``(player, opponent, score)`` rows; draws count as half a win each).

    ``P(i beats j) = sigmoid(s_i - s_j)``; a small Gaussian prior (``prior`` times
    ``s^2 / 2``) keeps players who won or lost everything finite. Intervals are
    ``+- 1.96`` standard errors from the inverse of the Hessian (with one
    player's strength pinned, which fixes the scale's origin).
    """
    from scipy.optimize import minimize

    rows = [(a, b, _check_score(s)) for a, b, s in matches]
    if not rows:
        raise InvalidParameterError("no matches to fit")
    names = tuple(sorted({a for a, _, _ in rows} | {b for _, b, _ in rows}))
    index = {n: i for i, n in enumerate(names)}
    i = np.array([index[a] for a, _, _ in rows])
    j = np.array([index[b] for _, b, _ in rows])
    y = np.array([s for _, _, s in rows])

    def objective(s):
        d = s[i] - s[j]
        p = 1.0 / (1.0 + np.exp(-d))
        nll = -np.sum(y * np.log(p + 1e-12) + (1 - y) * np.log(1 - p + 1e-12))
        grad = np.zeros_like(s)
        np.add.at(grad, i, -(y - p))
        np.add.at(grad, j, y - p)
        return nll + prior * np.sum(s * s) / 2, grad + prior * s

    result = minimize(objective, np.zeros(len(names)), jac=True, method="L-BFGS-B")
    strengths = result.x
    d = strengths[i] - strengths[j]
    p = 1.0 / (1.0 + np.exp(-d))
    w = p * (1 - p)
    hessian = prior * np.eye(len(names))
    np.add.at(hessian, (i, i), w)
    np.add.at(hessian, (j, j), w)
    np.add.at(hessian, (i, j), -w)
    np.add.at(hessian, (j, i), -w)
    anchors = ANCHORS if anchors is None else anchors
    pinned = next((n for n in names if n in anchors), None)
    ratings = strengths * ELO_PER_LOGIT
    if pinned is not None:
        ratings = ratings - ratings[index[pinned]] + anchors[pinned]
    else:
        ratings = ratings - ratings.mean() + DEFAULT_RATING
    keep = [k for k in range(len(names)) if names[k] != pinned] if pinned else None
    se = np.zeros(len(names))
    if keep is not None:
        covariance = np.linalg.inv(hessian[np.ix_(keep, keep)])
        se[keep] = np.sqrt(np.maximum(np.diag(covariance), 0.0))
    else:  # ratings centred on their mean: the covariance of the centred ones
        centre = np.eye(len(names)) - 1.0 / len(names)
        covariance = centre @ np.linalg.inv(hessian) @ centre
        se = np.sqrt(np.maximum(np.diag(covariance), 0.0))
    half = 1.96 * se * ELO_PER_LOGIT
    return BradleyTerryFit(
        names, ratings, np.stack([ratings - half, ratings + half], -1)
    )


def score_of(outcome: int) -> float:
    """Elo score of an outcome code (1 win, 0 draw, -1 loss)."""
    return {1: 1.0, 0: 0.5, -1: 0.0}[int(outcome)]


def outcomes_to_scores(outcomes: Iterable[Any]) -> list[float]:
    return [score_of(o) for o in outcomes]
