"""Where the main job's evaluation time goes: each condition of ``mopa reproduce
intent``'s paired protocol (or, with ``--protocol common``, of its common-opponent
protocol) played alone, at the default profile's networks, planner sizes and
episode count, its time split into compilation (tracing, lowering, XLA) and the
rest (execution).

The teams, encoders and world models are trained briefly (a few thousand steps), so
the captures mean nothing; what a condition computes per decision, and so its time,
does not depend on how well its networks were trained. Writes ``--out`` (JSON) and
``--out`` with ``.meta.json`` (config, versions, git SHA)::

    JAX_PLATFORMS=cpu python benchmarks/eval_conditions.py \
        --out benchmarks/eval_conditions.json

``--stages DIR`` keeps the trained teams, encoders and world models in ``DIR`` and
reuses them on the next run (the default is a new temporary folder).
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import json
import tempfile
import time
from pathlib import Path

from mopa.core.devices import use_cpu_devices

use_cpu_devices()  # as the mopa command does, before JAX starts

import jax  # noqa: E402
import jax.monitoring  # noqa: E402

from mopa.core.runinfo import run_metadata  # noqa: E402
from mopa.core.stages import Stages  # noqa: E402
from mopa.eval.tournament import play_tournament  # noqa: E402
from mopa.experiments import intent  # noqa: E402
from mopa.experiments import intent_conditions as conditions  # noqa: E402

PHASES = {
    "/jax/core/compile/jaxpr_trace_duration": "trace_s",
    "/jax/core/compile/jaxpr_to_mlir_module_duration": "lower_s",
    "/jax/core/compile/backend_compile_duration": "compile_s",
}
_phases: collections.Counter = collections.Counter()


def _on_duration(event: str, duration: float, **kwargs) -> None:
    if event in PHASES:
        _phases[PHASES[event]] += duration


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--train-steps", type=int, default=3 * 8192)
    parser.add_argument("--protocol", choices=("paired", "common"), default="paired")
    parser.add_argument("--stages", type=Path, default=None)
    args = parser.parse_args()
    config = dataclasses.replace(
        intent.PROFILES["default"],
        train_steps=args.train_steps,
        train_chunks=1,
        data_episodes_per_seed=48,
        classifier_updates=100,
        jepa_updates=100,
        bc_epochs=2,
        wm_updates=20,
    )
    meta = run_metadata(
        {"config": dataclasses.asdict(config), "protocol": args.protocol}
    )
    stages = Stages(args.stages or Path(tempfile.mkdtemp(prefix="eval_conditions_")))
    teams = {}
    for condition in conditions.TRAIN_CONDITIONS:
        name = f"train_{condition}"
        cfg = intent.train_config(config, condition, config.num_seeds)
        stages.run(
            name,
            cfg.to_dict(),
            lambda f, cfg=cfg, name=name: intent.train_stage(cfg, f, name, print),
        )
        teams[condition] = conditions.read_teams(stages.folder(name))
    encoders, world_models = stages.folder("encoders"), stages.folder("world_models")
    stages.run(
        "encoders",
        {},
        lambda f: intent.encoders_stage(config, stages.folder("train_belief"), f),
    )
    stages.run(
        "world_models", {}, lambda f: intent.world_models_stage(config, encoders, f)
    )
    entries = conditions.build_entries(config, teams, encoders, world_models)
    env, params = conditions.intent_game()
    jax.monitoring.register_event_duration_secs_listener(_on_duration)
    if args.protocol == "paired":  # each row against its own prey, seed i vs i
        episodes, pairing = config.eval_episodes, "paired"
        games = config.num_seeds * episodes
        prey_of = {
            name: [entries["prey"][conditions.PAIRED_PREY[name]]]
            for name in conditions.CONDITIONS
        }
    else:  # every row against the pool of prey, every seed against every seed
        episodes, pairing = conditions.common_episodes(config, config.num_seeds), "all"
        games = len(conditions.TRAIN_CONDITIONS) * config.num_seeds**2 * episodes
        pool = [entries["prey"][c] for c in conditions.TRAIN_CONDITIONS]
        prey_of = dict.fromkeys(conditions.CONDITIONS, pool)
    rows = {}
    for name in conditions.CONDITIONS:
        _phases.clear()
        start = time.perf_counter()
        play_tournament(
            env,
            params,
            [entries["predators"][name]],
            prey_of[name],
            jax.random.key(7),
            num_episodes=episodes,
            pairing=pairing,
        )
        wall = time.perf_counter() - start
        phases = {key: round(_phases[key], 2) for key in PHASES.values()}
        rows[name] = {
            "wall_s": round(wall, 2),
            **phases,
            "rest_s": round(wall - sum(phases.values()), 2),
            "games": games,
        }
        print(name, rows[name], flush=True)
    args.out.write_text(json.dumps({"rows": rows}, indent=1) + "\n")
    args.out.with_suffix(".meta.json").write_text(json.dumps(meta, indent=1) + "\n")


if __name__ == "__main__":
    main()
