"""How surprising each prey's moves are to the population model, beside the
none-fits probability, in the ``adaptation`` stage's matches of ``mopa experiment
intent_population``.

The none-fits test weighs the family's predictive against a uniform-action
alternative, so a prey whose moves the family predicts only a little better than
chance reads as a member. The belief also tracks a second signal,
:func:`~mopa.opponent.population.excess_surprisal`: the nats by which the observed
moves were less likely than the members expect of their own moves. This script
replays the stage's matches (the same players, prey, keys and counts:
:func:`~mopa.experiments.intent_population.match_player`) and reports, per prey,
both signals at the end of the first episode and over the whole match: the
none-fits probability, the excess surprisal per move and the log-likelihood per
move, each over the matches (mean, 95% interval, smallest and largest match).

``--stages`` is the ``stages`` folder of a run of ``--profile`` (``mopa experiment
intent_population --profile P --out DIR`` or ``mopa verify``'s ``--scratch DIR``:
``DIR/stages``). Writes ``--out`` (JSON) and ``--out`` with ``.meta.json``
(config, versions, git SHA)::

    JAX_PLATFORMS=cpu python benchmarks/population_surprisal.py --profile mopa \\
        --stages DIR/stages --out benchmarks/population_surprisal_mopa.json
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
from _population import trained_stages, write_record  # noqa: E402

from mopa.core.runinfo import run_metadata  # noqa: E402
from mopa.eval.intervals import mean_interval  # noqa: E402
from mopa.experiments import intent_population as ip  # noqa: E402
from mopa.experiments import intent_population_rows as pr  # noqa: E402
from mopa.opponent.population import (  # noqa: E402
    excess_surprisal,
    none_fits_probability,
)


def _spread(values: np.ndarray) -> dict:
    """Mean and interval over matches, with the smallest and largest match."""
    return {
        **mean_interval(values),
        "min": float(values.min()),
        "max": float(values.max()),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--stages", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--profile", default="default", choices=sorted(ip.PROFILES))
    args = parser.parse_args()
    config = ip.PROFILES[args.profile]
    meta = run_metadata({"stages": str(args.stages), "profile": args.profile})
    play = pr.match_player(config, *trained_stages(config, args.stages))
    M = config.match_episodes
    start = time.perf_counter()
    per_prey = {}
    for name in [*config.held_out_prey, *config.out_of_family]:
        states = play(name).beliefs
        C = states.log_likelihood.shape[0]
        by_step = {
            "none_fits": jax.vmap(jax.vmap(none_fits_probability))(states),
            "excess": jax.vmap(jax.vmap(excess_surprisal))(states),
            "log_likelihood": states.log_likelihood,
        }
        by_step["moves"] = states.steps  # observed in the match so far
        ends = {
            k: np.asarray(v, np.float64).reshape(C, M, -1)[:, :, -1]
            for k, v in by_step.items()
        }  # [C, M]: at the end of every episode
        first, match = (lambda x: x[:, 0]), (lambda x: x[:, -1])
        per_prey[name] = {
            "family": name in config.held_out_prey,
            "moves": {
                "first_episode": first(ends["moves"])[0],
                "match": match(ends["moves"])[0],
            },
            "none_fits_first_episode": _spread(first(ends["none_fits"])),
            "none_fits_match": _spread(match(ends["none_fits"])),
            "excess_per_move_first_episode": _spread(
                first(ends["excess"]) / first(ends["moves"])
            ),
            "excess_per_move_match": _spread(
                match(ends["excess"]) / match(ends["moves"])
            ),
            "log_likelihood_per_move_match": _spread(
                match(ends["log_likelihood"]) / match(ends["moves"])
            ),
        }
        print(name, json.dumps(per_prey[name]["excess_per_move_match"]), flush=True)
    results = {
        "profile": args.profile,
        "matches_per_prey": C,
        "match_episodes": M,
        "per_prey": per_prey,
        "seconds": round(time.perf_counter() - start, 1),
    }
    write_record(args.out, results, meta)


if __name__ == "__main__":
    main()
