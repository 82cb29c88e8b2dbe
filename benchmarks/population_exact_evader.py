"""How much a better model of the evader could give the lookahead: the population
planner of ``mopa experiment intent_population`` with the evader's own rule as its
model of the prey, against ``flat_belief_planner``, on the same episodes.

The evader (:class:`~mopa.experiments.intent_population_players.EvaderPrey`) is
deterministic and its rule reads only what its observation holds, so a planner
can be handed the exact model (:meth:`EvaderPrey.opponent_model`): the population
planner with that rule as its fallback and a planning prior of ``1 - 1e-9`` that
none fits, so its rollouts imagine the evader's own moves and nothing else. Its
captures bound what any model of the evader gives the lookahead; the population
planner itself (whose fallback is the flat-belief planner's prey, corrected
online with ``--set online_fallback true``) plays beside it. Paired episodes,
``--episodes`` per predator seed, the experiment's key and prey. Writes ``--out``
(JSON) and ``--out`` with ``.meta.json``::

    JAX_PLATFORMS=cpu python benchmarks/population_exact_evader.py \\
        --stages DIR/stages --out benchmarks/population_exact_evader.json
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import time
from pathlib import Path

from mopa.core.devices import use_cpu_devices

use_cpu_devices()  # as the mopa command does, before JAX starts

import numpy as np  # noqa: E402
from _population import add_set_option, config_from, trained_stages, write_record  # noqa: E402

from mopa.core.runinfo import run_metadata  # noqa: E402
from mopa.eval.intervals import mean_interval  # noqa: E402
from mopa.experiments import intent_population as ip  # noqa: E402
from mopa.experiments.intent import intent_game  # noqa: E402
from mopa.experiments.intent_population_players import EvaderPrey  # noqa: E402

EXACT = "exact_model_planner"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--stages", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--episodes", type=int, default=500)
    add_set_option(parser)
    args = parser.parse_args()
    config = config_from(parser, args.set)
    meta = run_metadata(
        {
            "stages": str(args.stages),
            "episodes": args.episodes,
            "set": {f: getattr(config, f) for f, _ in args.set},
        }
    )
    teams, clones = trained_stages(config, args.stages)
    rows = ip.build_rows(config, teams, clones)
    player, params_fn = rows["population_planner"]
    model = player.planner.opponent_model
    env, _ = intent_game()
    exact = dataclasses.replace(
        model, fallback=EvaderPrey(env).opponent_model()
    )  # its params are ignored: the rule has none
    rows[EXACT] = (
        dataclasses.replace(
            player,
            planner=dataclasses.replace(player.planner, opponent_model=exact),
            planning_prior=1 - 1e-9,
        ),
        params_fn,
    )
    names = (EXACT, "population_planner", "flat_belief_planner")
    start = time.perf_counter()
    values = ip.play_rows(
        rows,
        list(names),
        ip.prey_entries(config, teams)["evader"],
        ip.eval_key(config),
        num_episodes=args.episodes,
        paired=True,
    )
    captures = {r: np.asarray(values[r], np.float64).ravel() for r in names}
    flat = captures["flat_belief_planner"]
    results = {
        "captures": {r: mean_interval(v) for r, v in captures.items()},
        "versus_flat": {
            r: {**mean_interval(captures[r] - flat), "n": int(flat.size)}
            for r in names[:2]
        },
        "seconds": round(time.perf_counter() - start, 1),
    }
    print(json.dumps(results, indent=1), flush=True)
    write_record(args.out, results, meta)


if __name__ == "__main__":
    main()
