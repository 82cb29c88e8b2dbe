"""``mopa lemol``: LeMOL, MADDPG or M3DDPG against learning opponents on the
particle games, with the LeMOL experiments' flag names and defaults. Every flag
accepted is used.

The run is jitted one cycle at a time (seeds vmapped); a progress line follows
each cycle. ``--out`` receives ``config.json``, ``meta.json``, ``metrics.npz``
(``[seed, update]`` per update, ``cycle/<name>`` ``[seed, cycle]`` per cycle) and
``summary.json``; ``--lemol_save_path`` receives LeMOL's experience
(``experience.npz``: the opponent trajectories the model trained on last) and its
opponent model (``opponent_model.msgpack``).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

from mopa.errors import InvalidParameterError

CONFIG_FLAGS = (
    ("scenario", str), ("max_episode_len", int), ("num_episodes", int),
    ("num_adversaries", int), ("good_policy", str), ("bad_policy", str),
    ("lr", float), ("gamma", float), ("batch_size", int), ("num_units", int),
    ("adv_eps", float), ("adv_eps_s", float), ("agent_update_freq", int),
    ("polyak", float), ("replay_buffer_capacity", float), ("omlr", float),
    ("lstm_hidden_dim", int), ("chunk_length", int), ("num_traj_to_train", int),
    ("traj_per_iter", int), ("om_training_iters", int), ("n_opp_cycles", int),
    ("num_envs", int), ("num_seeds", int), ("seed", int),
)  # fmt: skip
"""Flags that set :class:`~mopa.algos.lemol.LeMOLConfig` fields of the same name;
a flag left out keeps the config's default (the LeMOL code's, shown by
``--dry_run``)."""


def add_parser(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "lemol",
        help="LeMOL / MADDPG / M3DDPG against learning opponents (push, adversary)",
        description="Train a focal team (the lemol one, else the adversaries) "
        "against a sequence of learning opponents: n_opp_cycles cycles of "
        "traj_per_iter play-outs of num_episodes episodes, each against a fresh "
        "opponent, then opponent-model training. Defaults are the LeMOL code's.",
    )
    for flag, kind in CONFIG_FLAGS:
        parser.add_argument(
            f"--{flag}", type=kind, help=f"config field {flag} (see --dry_run)"
        )
    parser.add_argument(
        "--discrete_actions",
        action="store_true",
        help="play one-hot moves instead of continuous force vectors",
    )
    parser.add_argument(
        "--lemol_save_path",
        type=Path,
        help="folder for LeMOL's experience (the opponent trajectories) and its "
        "opponent model; needs a lemol agent",
    )
    parser.add_argument(
        "--out",
        type=Path,
        help="run folder: config.json, meta.json, metrics.npz, summary.json",
    )
    parser.add_argument(
        "--dry_run",
        action="store_true",
        help="print the config as JSON and the run's size, then exit",
    )
    parser.set_defaults(run=run)


def build_config(args: argparse.Namespace):
    """The :class:`~mopa.algos.lemol.LeMOLConfig` the flags describe."""
    from mopa.algos.lemol import LeMOLConfig

    fields = {
        flag: getattr(args, flag)
        for flag, _ in CONFIG_FLAGS
        if getattr(args, flag) is not None
    }
    capacity = fields.get("replay_buffer_capacity")
    if capacity is not None:
        if not math.isfinite(capacity) or capacity != int(capacity):
            raise InvalidParameterError(
                f"--replay_buffer_capacity must be a whole number, got {capacity}"
            )
        fields["replay_buffer_capacity"] = int(capacity)
    fields["discrete_actions"] = args.discrete_actions
    return LeMOLConfig(**fields)


def run(args: argparse.Namespace) -> int:
    from mopa.core.files import check_output_folder

    config = build_config(args)
    if args.lemol_save_path is not None and not config.uses_model:
        raise InvalidParameterError(
            "--lemol_save_path needs a lemol agent (--good_policy or --bad_policy "
            "lemol)"
        )
    for flag, folder in (
        ("--out", args.out),
        ("--lemol_save_path", args.lemol_save_path),
    ):
        if folder is not None:
            check_output_folder(folder, flag)
    if args.out is not None and (args.out / "config.json").exists():
        raise InvalidParameterError(f"{args.out} holds a run; choose a new --out")
    if args.dry_run:
        print(json.dumps(config.to_dict()))
        print(
            f"{config.n_opp_cycles} cycles x {config.traj_per_iter} play-outs x "
            f"{config.updates_per_playout} updates ({config.steps_per_playout} "
            f"steps in each of {config.num_envs} games per play-out)"
        )
        return 0
    return _train(config, args)


def _train(config, args: argparse.Namespace) -> int:
    import jax
    import numpy as np

    from mopa.algos.lemol import make_lemol
    from mopa.core.files import write_json
    from mopa.core.runinfo import run_metadata

    meta = run_metadata(config.to_dict())  # the source as the run starts
    lemol = make_lemol(config)
    base = jax.random.key(config.seed)
    keys = jax.vmap(lambda i: jax.random.fold_in(base, i))(
        jax.numpy.arange(config.num_seeds)
    )
    start = time.perf_counter()
    carry = jax.jit(jax.vmap(lemol.init))(keys)
    cycle = jax.jit(jax.vmap(lemol.cycle))
    history: dict[str, list] = {}
    for c in range(config.n_opp_cycles):
        carry, metrics, cycle_metrics = cycle(carry)
        for name, value in metrics.items():
            history.setdefault(name, []).append(np.asarray(value))
        for name, value in cycle_metrics.items():
            history.setdefault(f"cycle/{name}", []).append(np.asarray(value)[:, None])
        print(
            _progress_line(c + 1, config, metrics, cycle_metrics, start),
            file=sys.stderr,
            flush=True,
        )
    arrays = {k: np.concatenate(v, 1) for k, v in history.items()}
    summary = _summary(config, arrays, time.perf_counter() - start)
    print(json.dumps(summary))
    if args.out is not None:
        write_json(args.out / "config.json", config.to_dict())
        write_json(args.out / "meta.json", meta)
        _write_npz(args.out / "metrics.npz", arrays)
        write_json(args.out / "summary.json", summary)
        print(f"run folder: {args.out}")
    if args.lemol_save_path is not None:
        _save_lemol(args.lemol_save_path, carry)
        print(f"LeMOL experience and opponent model: {args.lemol_save_path}")
    return 0


def _nanmean(x) -> float | None:
    import numpy as np

    x = np.asarray(x, np.float64)
    return float(np.nanmean(x)) if np.isfinite(x).any() else None


def _progress_line(c, config, metrics, cycle_metrics, start) -> str:
    parts = [f"cycle {c}/{config.n_opp_cycles} {time.perf_counter() - start:.0f}s:"]
    for name, value in metrics.items():
        mean = _nanmean(value)
        if name.startswith("return/") and mean is not None:
            parts.append(f"{name} {mean:+.2f}")
    for name, value in cycle_metrics.items():
        parts.append(f"{name} {_nanmean(value):.3f}")
    return " ".join(parts)


def _summary(config, arrays, wall_s: float) -> dict:
    """Per-seed means of the last cycle's updates and of every cycle metric."""
    per_cycle = config.traj_per_iter * config.updates_per_playout
    final = {}
    for name, values in arrays.items():
        tail = values[:, -1:] if name.startswith("cycle/") else values[:, -per_cycle:]
        final[name] = [_nanmean(v) for v in tail]
    return {
        "scenario": config.scenario,
        "good_policy": config.good_policy,
        "bad_policy": config.bad_policy,
        "num_seeds": config.num_seeds,
        "wall_s": wall_s,
        "last_cycle": final,
    }


def _write_npz(path: Path, arrays: dict) -> None:
    import io

    import numpy as np

    from mopa.core.files import atomic_write

    buffer = io.BytesIO()
    np.savez(buffer, **arrays)
    atomic_write(path, lambda f: f.write(buffer.getvalue()))


def _save_lemol(folder: Path, carry) -> None:
    import jax
    import numpy as np

    from mopa.core.checkpoint import write_msgpack

    store = carry.store
    _write_npz(
        folder / "experience.npz",
        {
            "obs": np.asarray(store.data.obs),
            "actions": np.asarray(store.data.actions),
            "valid": np.asarray(store.data.valid),
            "num_stored": np.asarray(store.size),
        },
    )
    params = jax.tree.map(np.asarray, carry.model_params)
    write_msgpack(folder / "opponent_model.msgpack", {"params": params})
