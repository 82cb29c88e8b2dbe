"""The two comparisons of ``mopa experiment intent_population`` that its default
episode counts leave to chance, played again with more episodes on the same trained
stages:

* against each out-of-family prey, ``population_planner`` and
  ``flat_belief_planner`` on the same episodes (paired, as the experiment's
  ``paired_out_of_family``), ``--out-of-family-episodes`` per predator seed (the
  default profile plays 50): their per-episode difference and its interval;
* against the held-out prey, ``population_mcts`` and ``unaware``,
  ``--held-out-episodes`` per prey and predator seed (the default plays 10): their
  captures, the ratio of the means and its bootstrap interval
  (:func:`scipy.stats.bootstrap` over the episodes of each row).

``--out-of-family-row`` plays another row than ``population_planner`` against
``flat_belief_planner`` there (e.g. ``population_mcts``); ``--set FIELD VALUE``
(repeatable, values JSON) changes a field of the default profile's config; an
episode count of 0 skips that comparison.

The players, prey, tournament key and pairing are the experiment's own
(:func:`~mopa.experiments.intent_population.build_rows`,
:func:`~mopa.experiments.intent_population.prey_entries`); only the episode counts
differ, so the episodes are new ones. ``--stages`` is the ``stages`` folder of a
default-profile run (``mopa experiment intent_population --out DIR`` or ``mopa
verify results/intent_population --scratch DIR``: ``DIR/stages``). Writes ``--out``
(JSON) and ``--out`` with ``.meta.json`` (config, versions, git SHA)::

    JAX_PLATFORMS=cpu python benchmarks/population_episodes.py \\
        --stages DIR/stages --out benchmarks/population_episodes.json
"""

from __future__ import annotations

import argparse
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
from scipy import stats  # noqa: E402

from mopa.core.runinfo import run_metadata  # noqa: E402
from mopa.eval.intervals import mean_interval  # noqa: E402
from mopa.experiments import intent_population_rows as pr  # noqa: E402


def _captures(rows, names, entry, key, episodes, paired, faced=None):
    """``[R, S, N]`` captures of rows ``names`` against one prey entry."""
    values = play_named_rows(
        rows, names, entry, key, num_episodes=episodes, paired=paired, faced=faced
    )
    return np.stack([np.asarray(values[r], np.float64) for r in names])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--stages", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--out-of-family-episodes", type=int, default=500)
    parser.add_argument("--held-out-episodes", type=int, default=100)
    parser.add_argument("--out-of-family-row", default="population_planner")
    add_set_option(parser)
    args = parser.parse_args()
    config = config_from(parser, args.set)
    changes = {f: getattr(config, f) for f, _ in args.set}
    if args.out_of_family_row not in pr.ROWS:
        parser.error(f"--out-of-family-row must be one of {list(pr.ROWS)}")
    meta = run_metadata(
        {
            "stages": str(args.stages),
            "out_of_family_episodes": args.out_of_family_episodes,
            "held_out_episodes": args.held_out_episodes,
            "out_of_family_row": args.out_of_family_row,
            "set": changes,
        }
    )
    teams, clones = trained_stages(config, args.stages)
    rows = pr.build_rows(config, teams, clones)
    prey = pr.prey_entries(config, teams)
    key = pr.eval_key(config)
    start = time.perf_counter()

    out_of_family = {}
    versus = (args.out_of_family_row, "flat_belief_planner")
    for name in config.out_of_family if args.out_of_family_episodes else ():
        values = _captures(
            rows, versus, prey[name], key, args.out_of_family_episodes,
            config.paired_out_of_family,
        )  # fmt: skip
        out_of_family[name] = {
            **{r: float(values[i].mean()) for i, r in enumerate(versus)},
            "difference": {
                **mean_interval(values[0] - values[1]),
                "n": int(values[0].size),
            },
        }
        print(name, out_of_family[name], flush=True)

    held = ("population_mcts", "unaware")
    per_prey, pooled = {}, {r: [] for r in held}
    if not args.held_out_episodes:
        _write(args, {"out_of_family": out_of_family}, start, meta)
        return
    for name in config.held_out_prey:
        entry = prey[name]
        values = _captures(
            rows, held, entry, key, args.held_out_episodes, False, entry.params
        )
        per_prey[name] = {r: float(values[i].mean()) for i, r in enumerate(held)}
        for i, r in enumerate(held):
            pooled[r].append(values[i].ravel())
        print(name, per_prey[name], flush=True)
    a, b = (np.concatenate(pooled[r]) for r in held)
    ratio = stats.bootstrap(
        (a, b),
        lambda x, y, axis: x.mean(axis) / y.mean(axis),
        vectorized=True,
        paired=False,
        confidence_level=0.95,
        n_resamples=9999,
        random_state=np.random.default_rng(0),
    )
    held_out = {
        **{r: mean_interval(v) for r, v in zip(held, (a, b), strict=True)},
        "ratio": float(a.mean() / b.mean()),
        "ratio_ci95": [
            float(ratio.confidence_interval.low),
            float(ratio.confidence_interval.high),
        ],
        "n_per_row": int(a.size),
        "per_prey": per_prey,
    }
    print(held_out, flush=True)
    _write(args, {"out_of_family": out_of_family, "held_out": held_out}, start, meta)


def _write(args, results, start, meta) -> None:
    results["seconds"] = round(time.perf_counter() - start, 1)
    write_record(args.out, results, meta)


if __name__ == "__main__":
    main()
