"""What the online correction of the fallback costs the population planners: the
time to play ``--episodes`` episodes per predator seed against one held-out prey
with ``online_fallback`` off and on, in one process, alternated ``--repeats``
times after a first, compiling, play of each (the machines are shared and noisy,
so the figure is the ratio of the two in the same run). ``--set FIELD VALUE``
(repeatable, values JSON) changes a field of the default profile's config in both
(e.g. the correction's ``online_features``).

Writes ``--out`` (JSON) and ``--out`` with ``.meta.json``::

    JAX_PLATFORMS=cpu python benchmarks/population_online_speed.py \\
        --stages DIR/stages --out benchmarks/population_online_speed.json
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from mopa.core.devices import use_cpu_devices

use_cpu_devices()  # as the mopa command does, before JAX starts

import numpy as np  # noqa: E402
from _population import (  # noqa: E402
    add_set_option,
    config_from,
    play_named_rows,
    trained_stages,
    write_record,
)

from mopa.core.runinfo import run_metadata  # noqa: E402
from mopa.experiments import intent_population_rows as pr  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--stages", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--episodes", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument(
        "--row", choices=("population_planner", "population_mcts"),
        default="population_planner",
    )  # fmt: skip
    add_set_option(parser)
    args = parser.parse_args()
    meta = run_metadata(vars(args) | {"stages": str(args.stages), "out": str(args.out)})
    base = config_from(parser, args.set)
    teams, clones = trained_stages(base, args.stages)
    prey = pr.prey_entries(base, teams)[base.held_out_prey[0]]
    plays = {}
    for flag in (False, True):
        config = config_from(parser, [*args.set, ("online_fallback", json.dumps(flag))])
        rows = pr.build_rows(config, teams, clones)
        plays[flag] = lambda rows=rows, config=config: play_named_rows(
            rows, [args.row], prey, pr.eval_key(config),
            num_episodes=args.episodes, paired=False, faced=prey.params,
        )  # fmt: skip
    seconds = {False: [], True: []}
    for flag in (False, True):
        plays[flag]()  # compile
    for _ in range(args.repeats):
        for flag in (False, True):
            start = time.perf_counter()
            plays[flag]()
            seconds[flag].append(time.perf_counter() - start)
    off, on = (float(np.median(seconds[f])) for f in (False, True))
    results = {
        "row": args.row,
        "episodes": args.episodes * len(base.predator_seeds),
        "seconds_off": seconds[False],
        "seconds_on": seconds[True],
        "median_off": off,
        "median_on": on,
        "on_over_off": on / off,
    }
    print(json.dumps(results, indent=1), flush=True)
    write_record(args.out, results, meta)


if __name__ == "__main__":
    main()
