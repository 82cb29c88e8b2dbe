"""Two rows of ``mopa experiment intent_population`` in the same matches against the
prey outside the family: does a planner that learns the prey it meets pull ahead
of the flat-belief planner as a match goes on?

``--row`` (default ``population_planner``) and ``--versus`` (default
``flat_belief_planner``) each play the ``adaptation`` stage's matches
(:func:`~mopa.experiments.intent_population.match_player`: ``match_episodes``
consecutive episodes against one prey, the same keys for both rows)
``--matches-per-seed`` per predator seed against each out-of-family prey. Reports
per prey the paired per-match differences of their captures: in each episode of
the match, over the late episodes (6-10 of 10, as the adaptation criterion) and
over the whole match; and, with ``online_fallback``, how much weight the row's
correction of its fallback had at each episode's end.

``--set FIELD VALUE`` (repeatable, values JSON) changes a field of the default
profile's config (e.g. ``--set online_fallback true``). ``--stages`` is the
``stages`` folder of a default-profile run. Writes ``--out`` (JSON) and ``--out``
with ``.meta.json`` (config, versions, git SHA)::

    JAX_PLATFORMS=cpu python benchmarks/population_matches.py \\
        --stages DIR/stages --set online_fallback true \\
        --out benchmarks/population_matches_online.json
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
from _population import add_set_option, config_from, trained_stages, write_record  # noqa: E402

from mopa.core.runinfo import run_metadata  # noqa: E402
from mopa.errors import InvalidParameterError  # noqa: E402
from mopa.eval.intervals import mean_interval  # noqa: E402
from mopa.experiments import intent_population_rows as pr  # noqa: E402
from mopa.opponent.online import residual_weight  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--stages", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--matches-per-seed", type=int, default=50)
    parser.add_argument("--row", default="population_planner")
    parser.add_argument("--versus", default="flat_belief_planner")
    add_set_option(parser)
    args = parser.parse_args()
    changes = [*args.set, ("matches_per_seed", str(args.matches_per_seed))]
    config = config_from(parser, changes)
    meta = run_metadata(
        {
            "stages": str(args.stages),
            "matches_per_seed": args.matches_per_seed,
            "row": args.row,
            "versus": args.versus,
            "set": {f: getattr(config, f) for f, _ in args.set},
        }
    )
    teams, clones = trained_stages(config, args.stages)
    try:
        plays = [
            pr.match_player(config, teams, clones, r) for r in (args.row, args.versus)
        ]
    except InvalidParameterError as error:
        parser.error(str(error))
    start = time.perf_counter()
    M = config.match_episodes
    late = slice(M // 2, M)
    results = {}
    for name in config.out_of_family:
        row, versus = (play(name) for play in plays)
        a, b = row.captures.astype(np.float64), versus.captures.astype(np.float64)
        results[name] = {
            args.row: a.mean(0).tolist(),
            args.versus: b.mean(0).tolist(),
            "difference_by_episode": [
                mean_interval(a[:, e] - b[:, e]) for e in range(M)
            ],
            "difference_late": mean_interval(a[:, late].mean(1) - b[:, late].mean(1)),
            "difference_match": mean_interval(a.mean(1) - b.mean(1)),
            "late_episodes": [M // 2 + 1, M],
            "num_matches": int(a.shape[0]),
        }
        if row.residuals is not None:
            weight = np.asarray(jax.vmap(jax.vmap(residual_weight))(row.residuals))
            ends = weight.reshape(a.shape[0], M, -1)[:, :, -1]
            results[name]["residual_weight_by_episode_end"] = ends.mean(0).tolist()
        print(name, json.dumps(results[name]), flush=True)
    results["seconds"] = round(time.perf_counter() - start, 1)
    write_record(args.out, results, meta)


if __name__ == "__main__":
    main()
