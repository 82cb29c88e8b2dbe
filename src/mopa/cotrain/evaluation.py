"""The co-training loop's evaluation of one generation of one lineage, and the
planning blue's planners.

Every blue plays its mode (a policy's most likely move; the planners are
deterministic), every red samples its moves, as in training. Each red set (red's
population, the held-out reds, blue's best response) is one tournament whose key
does not depend on the generation, and a cell's episodes depend only on that key
and the cell's two names (:func:`mopa.eval.tournament.cell_keys`): a blue's score
against a red in two generations is paired episode by episode (the same starting
states).
"""

from __future__ import annotations

import zlib
from pathlib import Path
from typing import TYPE_CHECKING, Any

import jax
import jax.numpy as jnp
import numpy as np

from mopa.algos.common import pool_size
from mopa.cotrain.model import read_model
from mopa.envs import make
from mopa.errors import InvalidParameterError
from mopa.eval.intervals import mean_interval
from mopa.eval.tournament import TournamentEntry, play_tournament
from mopa.opponent.belief_game import BeliefObservation, IntentBeliefInput
from mopa.opponent.population import member_episodes
from mopa.planning import (
    LookaheadConfig,
    LookaheadPlayer,
    ObservedBeliefPlanner,
    PopulationOpponentModel,
    StateBeliefPlanner,
    population_planner_params,
)
from mopa.planning.pursuit_planners import pursuit_lookahead, pursuit_tree_search
from mopa.players import PolicyPlayer
from mopa.policy import read_policy_file

if TYPE_CHECKING:
    from mopa.cotrain.loop import CotrainConfig

GROUPS = ("population", "held_out", "best_response")
"""The red sets every blue meets, each one tournament."""


# -- the games blue plays and the teams' checkpoints ---------------------------------
def read_team(path: str | Path, team: str) -> tuple[Any, Any]:
    """``(spec, params [S, ...])`` of ``team`` in a checkpoint file."""
    return read_policy_file(path).teams[team]


def intent_game(config: CotrainConfig):
    """The game whose blue observes an intent input (``predator_intent_obs``)."""
    return make(
        config.game, **{**dict(config.game_overrides), "predator_intent_obs": True}
    )


def blue_game(config: CotrainConfig, model_path: str | None):
    """``(game, params)`` blue plays: the game (``None``: the blind blue), or the
    game with blue's belief under the model at ``model_path``."""
    if model_path is None:
        return make(config.game, **dict(config.game_overrides))
    population, clones = read_model(Path(model_path))
    if config.belief_input == "intent":
        env, _ = intent_game(config)
        game = IntentBeliefInput(
            env, config.blue_team, config.red_team, population, clones
        )
    else:
        env, _ = make(config.game, **dict(config.game_overrides))
        game = BeliefObservation(
            env,
            config.blue_team,
            config.red_team,
            population,
            clones,
            max_members=config.max_members,
        )
    return game, game.default_params


def episode_scores(config: CotrainConfig, result, row: int = 0) -> np.ndarray:
    """Blue's score of every episode of ``result``'s blue ``row``, ``[C, P, N]``:
    1 a win, 0.5 a draw, 0 a loss, by :func:`_outcome`'s rule."""
    totals = {key: np.asarray(value[row]) for key, value in result.totals.items()}
    if {"blue_win", "red_win", "draw"} <= set(totals):  # battalion (blue first)
        return (totals["blue_win"] > 0) + 0.5 * (totals["draw"] > 0)
    if "captures" in totals:  # pursuit: a capture is blue's win
        return (totals["captures"] > 0).astype(np.float64)
    mine = result.metric(f"return/{config.blue_team}")[row]
    theirs = result.metric(f"return/{config.red_team}")[row]
    return (mine > theirs) + 0.5 * (mine == theirs)


def planner_entry(
    config: Any, game: Any, params: Any, kind: str, spec: Any, stacked: Any
) -> tuple[Any, Any]:
    """``(player, params [S, ...])``: the planner ``kind`` (``lookahead`` or
    ``mcts``) of blue's belief ``game``, rolling out the MAPPO blue ``(spec,
    stacked [S, ...])`` after the root and drawing red's moves from the model's
    clones under blue's belief (read from the game's state or its observation,
    :class:`~mopa.planning.StateBeliefPlanner` or
    :class:`~mopa.planning.ObservedBeliefPlanner`)."""
    red = game.team_index(config.red_team)
    model = PopulationOpponentModel(
        game.population, team=red, num_opponents=game.team_sizes[red]
    )
    intent_input = isinstance(game, IntentBeliefInput)
    simulated = game.env if intent_input else game
    planner = _planner(config, simulated, kind, spec, model, red)
    planner_params = population_planner_params(
        params.env if intent_input else params,
        stacked,
        params.clones,
        game.population.num_intents,
    )
    if intent_input:
        return StateBeliefPlanner(planner), planner_params
    player = ObservedBeliefPlanner(
        planner, num_members=game.num_members, padded_members=game.padded_members
    )
    return player, planner_params


def _planner(config, env, kind: str, spec, model, red: int):
    """The planner of ``env`` (no belief yet: its player supplies it)."""
    if config.planner_joint:
        lookahead = pursuit_lookahead(
            env,
            spec,
            model,
            num_rollouts=config.planner_rollouts,
            horizon=config.planner_horizon,
            gamma=config.planner_gamma,
            distance_weight=config.distance_weight,
        )
        if kind == "lookahead":
            return lookahead
        return pursuit_tree_search(lookahead, config.mcts_particles)
    if kind != "lookahead":
        raise InvalidParameterError(
            f"planners: {kind!r} plans joint actions; with planner_joint off only "
            "the per-agent lookahead plays"
        )
    lookahead = LookaheadConfig(
        num_rollouts=config.planner_rollouts,
        horizon=config.planner_horizon,
        gamma=config.planner_gamma,
        leaf_weight=0.0,
        mode="per_agent",
    )
    return LookaheadPlayer(env, config.blue_team, lookahead, model, spec)


def evaluate(
    config: Any,
    blue_path: str,
    rollout_path: str | None,
    model_path: str | None,
    population: list[str],
    held_out: list[str],
    red_path: str,
    newest: list[str],
    newest_member: int | None,
    g: int,
    progress,
) -> dict[str, Any]:
    """One generation of one lineage against every red set.

    Args:
        blue_path: the deployed blue (every seed).
        rollout_path: the MAPPO blue the planners roll out (the ``plan``
            lineage), else ``None``.
        model_path: blue's model (``None``: the blind blue).
        population, held_out: red checkpoint paths.
        red_path: blue's best response.
        newest: the population's best response of the generation before (none at
            generation 0): with ``red_path``, the newest reds.
        newest_member: the newest red's member of the model, if it has one.

    Returns:
        ``{"summary", "scores", "held_out_episodes", "payoffs"}``: the summary
        goes into the results; ``scores`` every episode's outcome by row and red
        (the league's matches), ``held_out_episodes`` every row's per-episode
        score against the held-out reds (pairing generations) and ``payoffs``
        the deployed blue's mean score against each red of the population (the
        next meta-strategy).
    """

    game, params = blue_game(config, model_path)
    blue_spec, blue_stack = read_team(blue_path, config.blue_team)
    policies = [TournamentEntry("blue", PolicyPlayer(blue_spec), blue_stack)]
    planners = []
    if rollout_path is not None:
        spec, stacked = read_team(rollout_path, config.blue_team)
        policies.append(TournamentEntry("rollout", PolicyPlayer(spec), stacked))
        for kind in config.planners:
            player, planner_params = planner_entry(
                config, game, params, kind, spec, stacked
            )
            planners.append(TournamentEntry(kind, player, planner_params))
    groups = {
        "population": population,
        "held_out": held_out,
        "best_response": [red_path],
    }
    progress(
        f"[eval g{g}] {len(policies)} policies and {len(planners)} planners x "
        f"{sum(len(v) for v in groups.values())} red checkpoints"
    )
    values: dict[str, dict[str, np.ndarray]] = {}  # row -> column -> [P, N]
    returns: dict[str, dict[str, np.ndarray]] = {}
    outcomes: dict[str, dict[str, list[float]]] = {}
    for group, paths in groups.items():
        reds = [
            entry
            for i, path in enumerate(paths)
            for entry in _seed_entries(config, f"{group}_{i}", path)
        ]
        key = jax.random.fold_in(jax.random.key(config.seed), _hash(group))
        for rows, episodes in (
            (policies, config.eval_episodes),
            (planners, config.planner_episodes),
        ):
            if not rows:
                continue
            result = play_tournament(
                game, params, rows, reds, key, num_episodes=episodes
            )
            metric = result.metric(config.metric)
            red_return = result.metric(f"return/{config.red_team}")
            for r, row in enumerate(result.row_names):
                scores = episode_scores(config, result, r)  # [C, P, N]
                for c, column in enumerate(result.column_names):
                    values.setdefault(row, {})[column] = np.asarray(metric[r, c])
                    returns.setdefault(row, {})[column] = np.asarray(red_return[r, c])
                    outcomes.setdefault(row, {}).setdefault(
                        column.rsplit("_s", 1)[0], []
                    ).extend(np.ravel(scores[c]).tolist())
    newest_columns = [f"population_{population.index(p)}" for p in newest] + [
        "best_response_0"
    ]
    summaries = {
        row: _summary(by_column, returns[row], newest_columns)
        for row, by_column in values.items()
    }
    summary = summaries["blue"]
    if rollout_path is not None:
        summary["planners"] = {row: s for row, s in summaries.items() if row != "blue"}
    summary["belief_on_newest_red"] = (
        None
        if model_path is None
        else belief_on_red(
            config, game, params, blue_path, population[-1], newest_member, g
        )
    )
    held = {
        row: np.concatenate(
            [
                np.ravel(v)
                for c, v in sorted(by_column.items())
                if c.startswith("held_out_")
            ]
        ).tolist()
        for row, by_column in values.items()
    }
    payoffs = [
        float(
            np.mean(
                [
                    np.mean(v)
                    for c, v in values["blue"].items()
                    if c.rsplit("_s", 1)[0] == f"population_{i}"
                ]
            )
        )
        for i in range(len(population))
    ]
    # the best response joins the population next: its payoff too
    payoffs.append(summary["exploitability"]["score_vs_best_response"]["mean"])
    return {
        "summary": summary,
        "scores": outcomes,
        "held_out_episodes": held,
        "payoffs": payoffs,
    }


def _hash(name: str) -> int:
    return zlib.crc32(name.encode()) & 0x7FFFFFFF


def _seed_entries(config, prefix: str, path: str) -> list[TournamentEntry]:
    """Every seed of the red checkpoint ``path`` as its own entry,
    ``<prefix>_s<seed>`` (params ``[1, ...]``), sampling its moves."""

    spec, stacked = read_team(path, config.red_team)
    return [
        TournamentEntry(
            f"{prefix}_s{s}",
            PolicyPlayer(spec, greedy=False),
            jax.tree.map(lambda x, s=s: x[s : s + 1], stacked),
        )
        for s in range(pool_size(stacked))
    ]


def _summary(
    by_column: dict[str, np.ndarray],
    red_returns: dict[str, np.ndarray],
    newest: list[str],
) -> dict[str, Any]:
    """One row's scores against each red set: mean, 95% interval over episodes,
    and per blue seed."""

    def pooled(chosen: list[str]) -> dict[str, Any] | None:
        cells = [v for c, v in by_column.items() if c.rsplit("_s", 1)[0] in chosen]
        if not cells:
            return None
        summary = mean_interval(np.concatenate([np.ravel(v) for v in cells]))
        per_seed = np.mean(np.stack([np.asarray(v) for v in cells]), (0, 2))
        return {**summary, "per_blue_seed": per_seed.tolist()}

    groups = {c.rsplit("_s", 1)[0] for c in by_column}
    best = [c for c in red_returns if c.startswith("best_response_")]
    return {
        "score_vs_population": pooled(
            sorted(g for g in groups if g.startswith("population_"))
        ),
        "score_vs_held_out": pooled(
            sorted(g for g in groups if g.startswith("held_out_"))
        ),
        "score_vs_newest": pooled(newest),
        "exploitability": {
            "score_vs_best_response": pooled(["best_response_0"]),
            "best_response_return": mean_interval(
                np.concatenate([np.ravel(red_returns[c]) for c in best])
            ),
        },
    }


def belief_on_red(
    config, game, params, blue_path: str, red_path: str, member: int | None, g: int
) -> dict[str, Any]:
    """How blue's belief reads the red checkpoint ``red_path``:
    ``data_episodes`` fresh episodes of each blue seed (its mode) against it (its
    seeds in turn), the belief at each episode's end recomputed from red's moves
    as the game holds it (:func:`mopa.cotrain.model.last_beliefs`), read by
    :func:`mopa.cotrain.model.belief_on_episodes` (the intent against red's true
    intent: an evaluation)."""
    from mopa.cotrain.model import belief_on_episodes, last_beliefs, record_red

    blue_spec, blue_stack = read_team(blue_path, config.blue_team)
    red_spec, red_stack = read_team(red_path, config.red_team)
    key = jax.random.fold_in(jax.random.key(config.seed), 6000 + g)
    intents, beliefs = [], []
    for s in range(pool_size(blue_stack)):
        data = record_red(
            game,
            params,
            PolicyPlayer(blue_spec),
            jax.tree.map(lambda x, s=s: x[s], blue_stack),
            PolicyPlayer(red_spec, greedy=False),
            red_stack,
            jax.random.fold_in(key, s),
            config.data_episodes,
        )
        episodes = member_episodes(data, config.red_team)
        beliefs.append(
            last_beliefs(
                game.population,
                params.clones,
                episodes,
                game.epsilon,
                game.fallback_prior,
            )
        )
        if "intent" in data.header["episode_fields"] and config.num_intents > 1:
            intents.append(data.episode_labels("intent"))
    stacked = jax.tree.map(lambda *x: jnp.concatenate(x), *beliefs)
    truth = np.concatenate(intents) if intents else None
    return {
        "num_members": game.num_members,
        **belief_on_episodes(stacked, truth, member),
    }


__all__ = ["GROUPS", "belief_on_red", "evaluate", "planner_entry"]
