"""A planner setting of ``mopa experiment intent_population`` tuned against the
fitting set: how a population row (``--row``, default ``population_mcts``) plays
the fitting set's prey with each value of one config field (``--vary FIELD
VALUE...``, e.g. ``mcts_particles 2 4 8 16``, ``greedy_population_model false
true``; values are JSON), every other field the default profile's.

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
import dataclasses
import json
import time
from pathlib import Path

from mopa.core.devices import use_cpu_devices

use_cpu_devices()  # as the mopa command does, before JAX starts

import jax  # noqa: E402
import numpy as np  # noqa: E402

from mopa.core.runinfo import run_metadata  # noqa: E402
from mopa.eval.intervals import mean_interval  # noqa: E402
from mopa.experiments import intent_population as ip  # noqa: E402
from mopa.experiments.intent import (  # noqa: E402
    intent_game,
    read_teams,
    tree_search_planner,
)


def tuning_key(config: ip.PopulationExperimentConfig) -> jax.Array:
    """The episodes' key: the experiment's seed, apart from every stage's."""
    return jax.random.fold_in(jax.random.key(config.seed), 13)


def _fitting_captures(config, teams, libraries, row, episodes) -> np.ndarray:
    """``[prey, S, N]`` captures of ``row`` against every fitting prey, each
    with its library."""
    prey = ip.prey_entries(config, teams)
    rows = {}
    captures = []
    for name in config.fitting_prey:
        library = libraries[name]
        if id(library) not in rows:
            rows[id(library)] = ip.build_rows(config, teams, library)
        values = ip.play_rows(
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--stages", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--episodes", type=int, default=50)
    parser.add_argument("--vary", nargs="+", required=True, metavar="FIELD VALUE")
    parser.add_argument("--row", default="population_mcts")
    parser.add_argument("--leave-one-out", action="store_true")
    args = parser.parse_args()
    base = ip.PROFILES["default"]
    field, values = args.vary[0], [json.loads(v) for v in args.vary[1:]]
    if not hasattr(base, field) or len(values) < 2:
        parser.error("--vary: a field of the experiment's config and two values")
    if getattr(base, field) not in values:
        parser.error(f"--vary must include the config's value, {getattr(base, field)}")
    meta = run_metadata(
        {
            "stages": str(args.stages),
            "episodes": args.episodes,
            "vary": {field: values},
            "row": args.row,
            "leave_one_out": args.leave_one_out,
        }
    )
    teams = {c: read_teams(args.stages / f"train_{c}") for c in base.conditions}
    start = time.perf_counter()
    if args.leave_one_out:
        libraries = {
            name: ip.fit_library(
                base,
                args.stages / "data",
                [n for n in base.fitting_prey if n != name],
            )[0]
            for name in base.fitting_prey
        }
    else:
        clones = ip.load_clones(args.stages / "population")
        libraries = dict.fromkeys(base.fitting_prey, clones)
    print("libraries", round(time.perf_counter() - start, 1), flush=True)
    unaware = _fitting_captures(base, teams, libraries, "unaware", args.episodes)
    print("unaware", unaware.mean(), flush=True)
    env, _ = intent_game()
    belief_spec = teams["belief"]["predator"][0]
    prey_spec = teams["belief"]["prey"][0]
    captures, runs = [], []
    for value in values:
        config = dataclasses.replace(base, **{field: value})
        search = tree_search_planner(
            config.intent_config(), env, belief_spec, prey_spec
        ).config
        tic = time.perf_counter()
        captures.append(
            _fitting_captures(config, teams, libraries, args.row, args.episodes)
        )
        runs.append(
            {
                "tree_search_simulations": search.num_simulations,
                "seconds": round(time.perf_counter() - tic, 1),
            }
        )
        print(value, captures[-1].mean(), runs[-1], flush=True)

    reference = captures[values.index(getattr(base, field))]
    by_value = [
        {
            "value": value,
            **run,
            "captures": mean_interval(v),
            "ratio_to_unaware": float(v.mean() / unaware.mean()),
            "difference_from_config": mean_interval(v - reference),
            "per_prey": dict(
                zip(base.fitting_prey, v.mean(axis=(1, 2)).tolist(), strict=True)
            ),
        }
        for value, run, v in zip(values, runs, captures, strict=True)
    ]
    better = [r for r in by_value if r["difference_from_config"]["ci95"][0] > 0]
    chosen = max(better, key=lambda r: r["captures"]["mean"], default=None)
    results = {
        "field": field,
        "row": args.row,
        "fitting_prey": base.fitting_prey,
        "leave_one_out": args.leave_one_out,
        "episodes_per_prey_and_seed": args.episodes,
        "config_value": getattr(base, field),
        "unaware": mean_interval(unaware),
        "values": by_value,
        "chosen": getattr(base, field) if chosen is None else chosen["value"],
        "seconds": round(time.perf_counter() - start, 1),
    }
    print(json.dumps(results, indent=1), flush=True)
    args.out.write_text(json.dumps(results, indent=1) + "\n")
    args.out.with_suffix(".meta.json").write_text(json.dumps(meta, indent=1) + "\n")


if __name__ == "__main__":
    main()
