"""A planner setting of ``mopa experiment intent_population`` tuned against the
fitting set: how a population row (``--row``, default ``population_mcts``) plays
the fitting set's prey with each value of one config field (``--vary FIELD
VALUE...``, e.g. ``mcts_particles 2 4 8 16``, ``greedy_population_model false
true``, ``bc_hidden [128,128] [256,256]``; values are JSON), every other field the
default profile's. A field of the clone library refits it for each value.

It tunes on the fitting set only: no held-out prey is played. Every value plays the
same episodes (one key, :func:`tuning_key`, apart from every stage's, so the
starting positions and the prey's draws are shared), ``--episodes`` per fitting prey
and predator seed, so each value's difference from the config's is a paired one,
with its interval over the episodes. ``unaware`` plays them too, for the ratio the
experiment's criteria read.

With its full library a planner has the faced fitting prey's own clone, which no
held-out prey has. ``--leave-one-out`` plays each fitting prey with the library the
``population`` stage would fit on the *other* fitting prey
(:func:`~mopa.experiments.intent_population.fit_library`: their member clones and
the pooled clone of their data), so every game is against a prey outside the
planner's library, as against a held-out prey, and still no held-out prey is played
or read.

``--metric log_likelihood`` plays no games: each value's score is the
log-likelihood per move of every fitting prey's data (its ``data`` stage's
episodes) under the population's Bayes predictive from a fresh belief, as the
``belief`` stage scores the held-out prey, paired over those episodes; with
``--leave-one-out``, a cross-validated likelihood of a library setting.

The rule, fixed before the first run: the config keeps its value unless another
value catches more with its paired interval above 0; then the one of those that
catches the most (``chosen``).

``--stages`` is the ``stages`` folder of a default-profile run (as in
``population_episodes.py``). Writes ``--out`` (JSON) and ``--out`` with
``.meta.json`` (config, versions, git SHA)::

    JAX_PLATFORMS=cpu python benchmarks/population_tuning.py \\
        --vary greedy_population_model false true --leave-one-out \\
        --stages DIR/stages --out benchmarks/population_greedy_loo.json
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from mopa.core.devices import use_cpu_devices

use_cpu_devices()  # as the mopa command does, before JAX starts

import jax  # noqa: E402
import numpy as np  # noqa: E402
from _population import config_from, play_named_rows, write_record  # noqa: E402

from mopa.core.runinfo import run_metadata  # noqa: E402
from mopa.eval.intervals import mean_interval  # noqa: E402
from mopa.experiments import intent_population as ip  # noqa: E402
from mopa.experiments import intent_population_rows as pr  # noqa: E402
from mopa.experiments.intent_conditions import (  # noqa: E402
    intent_game,
    read_teams,
    tree_search_planner,
)
from mopa.opponent.data import load_dataset  # noqa: E402
from mopa.opponent.population import (  # noqa: E402
    episode_beliefs,
    load_clones,
    population_log_probs,
)


def tuning_key(config: ip.PopulationExperimentConfig) -> jax.Array:
    """The episodes' key: the experiment's seed, apart from every stage's."""
    return jax.random.fold_in(jax.random.key(config.seed), 13)


def _fitting_captures(config, teams, libraries, row, episodes) -> np.ndarray:
    """``[prey, S, N]`` captures of ``row`` against every fitting prey, each
    with its library."""
    prey = pr.prey_entries(config, teams)
    rows = {}
    captures = []
    for name in config.fitting_prey:
        library = libraries[name]
        if id(library) not in rows:
            rows[id(library)] = pr.build_rows(config, teams, library)
        values = play_named_rows(
            rows[id(library)],
            [row],
            prey[name],
            tuning_key(config),
            num_episodes=episodes,
            paired=False,
            faced=prey[name].params,
        )
        captures.append(np.asarray(values[row], np.float64))
    return np.stack(captures)


def _fitting_log_likelihood(config, arrays, libraries) -> np.ndarray:
    """``[prey, E]`` log-likelihood per move of each episode of every fitting
    prey's data (``arrays``: :func:`~mopa.experiments.intent_population.
    prey_arrays` by prey) under the population's Bayes predictive (from a fresh
    belief, as the ``belief`` stage scores held-out prey), each prey with its
    library."""
    pop_config = config.population_config()
    per_prey = []
    for name in config.fitting_prey:
        obs, actions, _ = arrays[name]
        log_probs = population_log_probs(pop_config, libraries[name], obs)
        states = episode_beliefs(
            log_probs, actions, config.bayes_epsilon, config.fallback_prior
        )
        per_prey.append(np.asarray(states.log_likelihood[:, -1]) / actions.shape[1])
    return np.stack(per_prey)


def _libraries(config, stages: Path, leave_one_out: bool, cache: dict) -> dict:
    """``{fitting prey: clone library}``: with ``leave_one_out`` the library of
    the other fitting prey, else the fitting set's (the ``population`` stage's
    when ``config``'s library is the stage's); fitted once per library config."""
    library = config.population_config()
    if library not in cache:
        names = config.fitting_prey
        if leave_one_out:
            cache[library] = {
                name: ip.fit_library(
                    config, stages / "data", [n for n in names if n != name]
                )[0]
                for name in names
            }
        else:
            if library == ip.PROFILES["default"].population_config():
                clones = load_clones(stages / "population" / "clones.msgpack")
            else:
                clones = ip.fit_library(config, stages / "data", names)[0]
            cache[library] = dict.fromkeys(names, clones)
    return cache[library]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--stages", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--episodes", type=int, default=50)
    parser.add_argument("--vary", nargs="+", required=True, metavar="FIELD VALUE")
    parser.add_argument("--row", default="population_mcts")
    parser.add_argument("--leave-one-out", action="store_true")
    parser.add_argument(
        "--metric", choices=("captures", "log_likelihood"), default="captures"
    )
    args = parser.parse_args()
    base = ip.PROFILES["default"]
    field = args.vary[0]
    if len(args.vary) < 3:
        parser.error("--vary: a field of the experiment's config and two values")
    configs = [config_from(parser, [(field, v)], "--vary", base) for v in args.vary[1:]]
    values = [getattr(c, field) for c in configs]
    if getattr(base, field) not in values:
        parser.error(f"--vary must include the config's value, {getattr(base, field)}")
    meta = run_metadata(
        {
            "stages": str(args.stages),
            "episodes": args.episodes,
            "vary": {field: values},
            "row": args.row,
            "leave_one_out": args.leave_one_out,
            "metric": args.metric,
        }
    )
    teams = {c: read_teams(args.stages / f"train_{c}") for c in base.conditions}
    start = time.perf_counter()
    cache: dict = {}
    by_episode = args.metric == "log_likelihood"
    if by_episode:
        arrays = {
            name: ip.prey_arrays(load_dataset(args.stages / "data" / f"{name}.npz"))
            for name in base.fitting_prey
        }
    else:
        libraries = _libraries(base, args.stages, args.leave_one_out, cache)
        unaware = _fitting_captures(base, teams, libraries, "unaware", args.episodes)
        print("unaware", unaware.mean(), flush=True)
    env, _ = intent_game()
    belief_spec = teams["belief"]["predator"][0]
    prey_spec = teams["belief"]["prey"][0]
    captures, runs = [], []
    for config in configs:
        search = tree_search_planner(
            config.intent_config(), env, belief_spec, prey_spec
        ).config
        tic = time.perf_counter()
        libraries = _libraries(config, args.stages, args.leave_one_out, cache)
        if by_episode:
            captures.append(_fitting_log_likelihood(config, arrays, libraries))
        else:
            captures.append(
                _fitting_captures(config, teams, libraries, args.row, args.episodes)
            )
        runs.append(
            {
                "tree_search_simulations": search.num_simulations,
                "seconds": round(time.perf_counter() - tic, 1),
            }
        )
        print(getattr(config, field), captures[-1].mean(), runs[-1], flush=True)

    reference = captures[values.index(getattr(base, field))]
    by_value = [
        {
            "value": value,
            **run,
            args.metric: mean_interval(v),
            **({} if by_episode else {"ratio_to_unaware": v.mean() / unaware.mean()}),
            "difference_from_config": mean_interval(v - reference),
            "per_prey": dict(
                zip(
                    base.fitting_prey,
                    v.reshape(len(v), -1).mean(1).tolist(),
                    strict=True,
                )
            ),
        }
        for value, run, v in zip(values, runs, captures, strict=True)
    ]
    better = [r for r in by_value if r["difference_from_config"]["ci95"][0] > 0]
    chosen = max(better, key=lambda r: r[args.metric]["mean"], default=None)
    results = {
        "field": field,
        "metric": args.metric,
        "row": None if by_episode else args.row,
        "fitting_prey": base.fitting_prey,
        "leave_one_out": args.leave_one_out,
        "episodes_per_prey_and_seed": args.episodes,
        "config_value": getattr(base, field),
        "unaware": None if by_episode else mean_interval(unaware),
        "values": by_value,
        "chosen": getattr(base, field) if chosen is None else chosen["value"],
        "seconds": round(time.perf_counter() - start, 1),
    }
    print(json.dumps(results, indent=1), flush=True)
    write_record(args.out, results, meta)


if __name__ == "__main__":
    main()
