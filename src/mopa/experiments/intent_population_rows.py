"""The rows of the population experiment (:mod:`mopa.experiments.
intent_population`) and how they are played: every row as a composition of
library objects (:class:`~mopa.planning.IntentPredator`,
:class:`~mopa.planning.PopulationPredator` with its population model, fallback
and online correction), the prey (trained and scripted), the ``eval`` stage's
tournaments and statistics (:mod:`mopa.eval.protocol`), and the ``adaptation``
stage's matches with the belief replayed from their moves.

Rows (all use the predators of the ``predator_seeds``):

* ``unaware``: the unaware-condition predators (no intent input);
* ``oracle``: the oracle-condition predators fed the true corner;
* ``flat_belief_planner``: the joint lookahead
  (:func:`~mopa.experiments.intent_conditions.lookahead_planner`, the belief-condition
  predators after the root) with its seed's belief-condition prey as the prey
  model, under a uniform intent belief;
* ``belief_planner``: the same model with exact Bayes under it (Exp 6's planner:
  the own-seed model);
* ``population_planner``: the lookahead with the population model, drawing an
  (intent, member) per rollout from the joint belief, updated online from the
  prey's moves (:class:`~mopa.planning.PopulationPredator`); when none fits,
  the flat-belief planner's prey model, corrected online to the prey's moves
  (``online_fallback``, :mod:`mopa.opponent.online`; linear in the prey's threat
  features, ``online_features``, beside a fit of those features alone,
  ``online_free_fit``);
* ``population_mcts``: the tree search (:func:`~mopa.experiments.intent_conditions.
  tree_search_planner`'s budget) with the same model and belief, its none-fits
  probability from a prior of its own (``mcts_planning_prior``);
* ``true_model_planner``: the lookahead and exact Bayes given the faced prey's own
  policy (the upper bound).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import jax
import jax.numpy as jnp
import numpy as np

from mopa.core.files import write_json
from mopa.envs.pursuit import NUM_ACTIONS, PREY, PursuitEnv
from mopa.errors import InvalidParameterError
from mopa.eval.protocol import (
    opponent_means,
    play_rows,
    pooled_table,
    row_difference,
)
from mopa.eval.tournament import TournamentEntry, broadcast_seeds
from mopa.experiments.intent_conditions import (
    intent_game,
    lookahead_planner,
    tree_search_planner,
)
from mopa.opponent.online import (
    OnlineResidualConfig,
    init_online_residual,
)
from mopa.opponent.population import (
    load_clones,
)
from mopa.planning import (
    SCRIPTED_PREY_PLAYERS,
    IntentModelParams,
    IntentPredator,
    Matches,
    OnlineResidualModel,
    PopulationOpponentModel,
    PopulationPredator,
    PreyModel,
    intent_predator_params,
    match_summary,
    pooled_match_summary,
    population_planner_params,
    residual_params,
)
from mopa.planning import match_player as population_matches
from mopa.players import PolicyPlayer

if TYPE_CHECKING:
    from mopa.experiments.intent_population import PopulationExperimentConfig


ROWS = (
    "unaware",
    "oracle",
    "flat_belief_planner",
    "belief_planner",
    "population_planner",
    "population_mcts",
    "true_model_planner",
)
"""Evaluation rows, in table order."""


OUT_OF_FAMILY_PREY = SCRIPTED_PREY_PLAYERS
"""Scripted prey outside the trained family, by name (each built from the game)."""


_SOURCES = ("bayes", "flat")
"""Belief sources of the Exp 6 predators built here (``params.source`` indexes)."""


ONLINE_FEATURES: dict[str, Callable[[PursuitEnv], Callable | None]] = {
    "observation": lambda env: None,
    "threats": lambda env: env.prey_threat_features,
}
"""``online_features`` -> the online correction's ``features_fn`` for the game."""


def _seed_slice(tree: Any, seeds: tuple[int, ...]) -> Any:
    index = np.asarray(seeds)
    return jax.tree.map(lambda x: x[index], tree)


def _repeat_seeds(tree: Any, num_seeds: int) -> Any:
    """A one-seed ``[1, ...]`` tree repeated to ``[S, ...]``."""
    return jax.tree.map(lambda x: jnp.broadcast_to(x, (num_seeds, *x.shape[1:])), tree)


def build_rows(config, teams: dict, clones: Any) -> dict:
    """Every row's player and a function of the faced prey's params giving its
    entry params (only ``true_model_planner`` reads them).

    Returns:
        ``{ROW: (player, params_fn)}``; ``params_fn(prey_params [1, ...] | None)``
        gives the row's params ``[S, ...]`` (``S`` the predator seeds).
    """
    env, params = intent_game()
    K = env.num_intents
    icfg = config.intent_config()
    seeds = config.predator_seeds
    S = len(seeds)
    unaware_spec, unaware_params = teams["unaware"]["predator"]
    oracle_spec, oracle_params = teams["oracle"]["predator"]
    belief_spec, belief_params = teams["belief"]["predator"]
    prey_spec, own_prey = teams["belief"]["prey"]
    unaware_params, oracle_params, belief_params, own_prey = (
        _seed_slice(tree, seeds)
        for tree in (unaware_params, oracle_params, belief_params, own_prey)
    )
    common = dict(bayes_epsilon=config.bayes_epsilon)
    unaware = IntentPredator(env, unaware_spec, feed_none=True, **common)
    oracle = IntentPredator(env, oracle_spec, sources=("flat",), **common)
    planner = IntentPredator(
        env,
        belief_spec,
        sources=_SOURCES,
        planner=lookahead_planner(icfg, env, belief_spec, prey_spec),
        prey_model=PreyModel(prey_spec, config.greedy_prey_model),
        **common,
    )

    def intent_params(policy_params, source, feed, bayes_params=(), rollout_prey=None):
        return intent_predator_params(
            params,
            S,
            policy_params,
            source=_SOURCES.index(source),
            feed=feed,
            num_intents=K,
            bayes_params=bayes_params,
            planner_opponent=rollout_prey,
        )

    pop_config = config.population_config()
    M = jax.tree.leaves(clones)[0].shape[0]
    fallback = lookahead_planner(icfg, env, belief_spec, prey_spec).opponent_model
    fallback_params = IntentModelParams(
        policy_params=own_prey, belief=broadcast_seeds(jnp.full((K,), 1.0 / K), S)
    )
    if config.online_fallback:
        online = OnlineResidualConfig(
            num_actions=NUM_ACTIONS,
            obs_size=env.prey_obs_size,
            drop_obs_tail=K,
            epsilon=config.bayes_epsilon,
            features_fn=ONLINE_FEATURES[config.online_features](env),
            reweigh_base=config.online_reweigh_base,
            free_fit=config.online_free_fit,
        )
        fallback = OnlineResidualModel(fallback, online, team=PREY)
        fresh = init_online_residual(online)
        fallback_params = residual_params(
            fallback_params, jax.tree.map(lambda x: broadcast_seeds(x, S), fresh)
        )
    model = PopulationOpponentModel(
        pop_config,
        team=PREY,
        fallback=fallback if config.fallback_model else None,
        greedy=config.greedy_population_model,
    )
    population = dict(
        env=env,
        population=pop_config,
        num_members=M,
        epsilon=config.bayes_epsilon,
        fallback_prior=config.fallback_prior,
        planning_prior=config.planner_prior,
    )
    pop_planner = PopulationPredator(
        planner=dataclasses.replace(
            lookahead_planner(icfg, env, belief_spec, prey_spec), opponent_model=model
        ),
        **population,
    )
    pop_mcts = PopulationPredator(
        planner=dataclasses.replace(
            tree_search_planner(icfg, env, belief_spec, prey_spec),
            opponent_model=model,
        ),
        **{**population, "planning_prior": config.mcts_prior},
    )
    pop_params = population_planner_params(
        params,
        belief_params,
        clones,
        K,
        fallback_params=fallback_params if config.fallback_model else None,
    )
    own = dict(bayes_params=own_prey, rollout_prey=own_prey)
    fixed = {
        "unaware": (unaware, intent_params(unaware_params, "flat", "none")),
        "oracle": (oracle, intent_params(oracle_params, "flat", "true")),
        "flat_belief_planner": (
            planner,
            intent_params(belief_params, "flat", "belief", **own),
        ),
        "belief_planner": (
            planner,
            intent_params(belief_params, "bayes", "belief", **own),
        ),
        "population_planner": (pop_planner, pop_params),
        "population_mcts": (pop_mcts, pop_params),
    }
    rows = {name: (player, lambda prey, p=p: p) for name, (player, p) in fixed.items()}

    def true_model(prey):
        faced = _repeat_seeds(prey, S)
        return intent_params(
            belief_params, "bayes", "belief", bayes_params=faced, rollout_prey=faced
        )

    rows["true_model_planner"] = (planner, true_model)
    return rows


def prey_entries(config, teams: dict) -> dict[str, TournamentEntry]:
    """Every trained prey (params ``[1, ...]``) and every out-of-family prey, by
    name."""
    env, _ = intent_game()
    entries = {}
    for condition in config.conditions:
        spec, stacked = teams[condition]["prey"]
        for s in range(config.num_seeds):
            name = f"{condition}_s{s}"
            entries[name] = TournamentEntry(
                name, PolicyPlayer(spec), _seed_slice(stacked, (s,))
            )
    for name in config.out_of_family:
        entries[name] = TournamentEntry(name, OUT_OF_FAMILY_PREY[name](env), {})
    return entries


def eval_key(config: PopulationExperimentConfig) -> jax.Array:
    """The key of the ``eval`` stage's tournaments (every prey's episodes)."""
    return jax.random.fold_in(jax.random.key(config.seed), 7)


def row_entries(rows: dict, names: list[str], faced: Any = None) -> list:
    """Rows ``names`` of :func:`build_rows` as tournament entries; ``faced``: the
    prey's policy params for ``true_model_planner`` (``None`` against a prey
    outside the family, where that row does not play)."""
    return [TournamentEntry(r, rows[r][0], rows[r][1](faced)) for r in names]


def eval_stage(config, teams: dict, clone_folder: Path, folder: Path, progress) -> dict:
    """Every row against every prey; pooled statistics per prey set."""
    env, params = intent_game()
    rows = build_rows(config, teams, load_clones(clone_folder / "clones.msgpack"))
    prey = prey_entries(config, teams)
    captures: dict[str, dict[str, list]] = {}
    for name, entry in prey.items():
        outside = name in config.out_of_family
        names = [r for r in ROWS if not outside or r != "true_model_planner"]
        progress(f"[eval] {len(names)} rows vs {name}")
        values = play_rows(
            env,
            params,
            row_entries(rows, names, None if outside else entry.params),
            entry,
            eval_key(config),
            num_episodes=config.episodes_against(name),
            paired_episodes=outside and config.paired_out_of_family,
        )
        captures[name] = {r: v.tolist() for r, v in values.items()}
    write_json(folder / "captures.json", captures)
    S = len(config.predator_seeds)
    pools = {
        "held_out": config.held_out_prey,
        "fitting": config.fitting_prey,
        "out_of_family": list(config.out_of_family),
    }

    def versus_flat(names):
        return row_difference(
            *(
                np.concatenate([captures[n][r] for n in names])
                for r in ("population_planner", "flat_belief_planner")
            ),
            paired=config.paired_out_of_family,
        )

    return {
        "pooled": {
            pool: pooled_table(captures, names, ROWS, S)
            for pool, names in pools.items()
        },
        "per_prey": opponent_means(captures),
        "versus_flat": versus_flat(config.out_of_family),  # their episodes pooled
        "versus_flat_per_prey": {n: versus_flat([n]) for n in config.out_of_family},
    }


def match_player(
    config: PopulationExperimentConfig,
    teams: dict,
    clones: Any,
    row: str = "population_planner",
) -> Callable[[str], Matches]:
    """``play(name)``: the ``adaptation`` stage's matches of ``population_planner``
    against prey ``name`` (a held-out or out-of-family prey; its place in the
    stage's order, held-out prey then out-of-family ones, picks the matches' key),
    ``matches_per_seed`` of ``match_episodes`` per predator seed
    (:func:`mopa.planning.match_player`).

    ``row`` plays another row of :func:`build_rows` (not ``true_model_planner``)
    in the same matches: the same keys, so the same starting positions and prey
    draws where the moves agree; the beliefs are then what the population belief
    would have said of its prey's moves."""
    env, params = intent_game()
    rows = build_rows(config, teams, clones)
    if row not in rows or row == "true_model_planner":
        raise InvalidParameterError(
            f"match_player: row must be one of "
            f"{[r for r in rows if r != 'true_model_planner']}, got {row!r}"
        )
    player, entry_params = rows[row]
    prey = prey_entries(config, teams)
    play = population_matches(
        env,
        params,
        player,
        entry_params(None),
        num_matches=config.matches_per_seed,
        episodes_per_match=config.match_episodes,
    )
    key = jax.random.fold_in(jax.random.key(config.seed), 11)
    order = [*config.held_out_prey, *config.out_of_family]

    def play_prey(name: str) -> Matches:
        if name not in order:
            raise InvalidParameterError(
                f"match_player: prey must be one of {order}, got {name!r}"
            )
        p = order.index(name)
        keys = [
            jax.random.fold_in(key, p * 1000 + i)
            for i in range(len(config.predator_seeds))
        ]
        opponent_params = jax.tree.map(lambda x: x[0], prey[name].params)
        return play(prey[name].player, opponent_params, keys)

    return play_prey


def adaptation_stage(config, teams: dict, clone_folder: Path, folder: Path, progress):
    """Matches of ``population_planner`` against every held-out prey and every
    out-of-family prey: captures by episode, and the belief through the match
    (:func:`mopa.planning.match_summary`)."""
    play = match_player(config, teams, load_clones(clone_folder / "clones.msgpack"))
    out = {}
    for name in [*config.held_out_prey, *config.out_of_family]:
        progress(f"[adaptation] matches vs {name}")
        out[name] = match_summary(play(name))
    pooled = pooled_match_summary([out[n] for n in config.held_out_prey])
    write_json(
        folder / "matches.json",
        {n: {k: v.tolist() for k, v in out[n]["raw"].items()} for n in out},
    )
    return {
        "held_out": {k: v for k, v in pooled.items() if k != "raw"},
        "per_prey": {n: {k: v for k, v in out[n].items() if k != "raw"} for n in out},
    }
