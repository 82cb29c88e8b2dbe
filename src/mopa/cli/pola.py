"""``mopa pola`` (LOLA-DiCE / POLA-DiCE / POLA-OM on ``ipd`` or ``coin``) and
``mopa pola-exact`` (LOLA / outer POLA on the exact IPD), with the reference
implementation's flag names. Every flag accepted is used."""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import signal
import threading
import time
from pathlib import Path

from mopa.errors import InvalidParameterError, UnknownNameError

SAMPLED_FLAGS = (
    ("env", str), ("n_update", int), ("inner_steps", int), ("outer_steps", int),
    ("lr_in", float), ("lr_out", float), ("lr_v", float), ("inner_beta", float),
    ("outer_beta", float), ("batch_size", int), ("rollout_len", int),
    ("contrib_factor", float), ("gae_lambda", float), ("hidden_size", int),
    ("layers_before_gru", int), ("opp_model_steps", int),
    ("opp_model_data_batches", int), ("om_lr_p", float), ("om_lr_v", float),
)  # fmt: skip
"""Flags that set :class:`~mopa.algos.pola.sampled.SampledConfig` fields."""


def add_parsers(commands: argparse._SubParsersAction) -> None:
    sampled = commands.add_parser(
        "pola",
        help="LOLA-DiCE / POLA-DiCE / POLA-OM on the IPD or the Coin Game",
        description="Train two opponent-shaping agents against each other. "
        "Defaults are the paper's POLA-DiCE IPD command; --preset starts from "
        "another preset (GAME-METHOD-paper or GAME-METHOD-cpu) and flags override.",
    )
    sampled.add_argument(
        "--preset", help="start from a preset, e.g. ipd-pola_dice-cpu (see --help)"
    )
    for flag, kind in SAMPLED_FLAGS:
        sampled.add_argument(f"--{flag}", type=kind, help=f"config field {flag}")
    sampled.add_argument(
        "--opp_model", action="store_true", help="POLA-OM: learn opponent models"
    )
    sampled.add_argument("--seed", type=int, default=1, help="PRNG seed")
    sampled.add_argument(
        "--print_every", type=int, default=1, help="print metrics every N updates"
    )
    sampled.add_argument(
        "--checkpoint_every",
        type=int,
        default=0,
        help="save parameters every N updates into --save_dir (0: only at the end)",
    )
    sampled.add_argument(
        "--save_dir",
        type=Path,
        help="folder for checkpoints, metrics.json, config.json and meta.json "
        "(Ctrl-C stops after the update in progress and saves the updates done)",
    )
    sampled.set_defaults(run=run_sampled)

    exact = commands.add_parser(
        "pola-exact",
        help="LOLA / outer POLA on the exact IPD (LOLA_exact.py flags)",
        description="Exact-value IPD learning; prints the fraction of repeats "
        "that find tit-for-tat.",
    )
    exact.add_argument("--n_agents", type=int, default=2, help="must be 2")
    exact.add_argument("--using_nn", action="store_true", help="MLP policies")
    exact.add_argument(
        "--ill_condition", action="store_true", help="pre-conditioned tabular"
    )
    exact.add_argument("--nn_hidden_size", type=int, default=16)
    exact.add_argument("--print_every", type=int, default=200)
    exact.add_argument("--repeats", type=int, default=1, help="seeds (vmapped)")
    exact.add_argument("--num_epochs", type=int, default=50)
    exact.add_argument(
        "--init_state_representation",
        type=int,
        default=2,
        help="2 (a separate start state) is the only one supported",
    )
    exact.add_argument(
        "--set_seed", action="store_true", help="use --seed (else a random seed)"
    )
    exact.add_argument("--seed", type=int, default=1)
    exact.add_argument("--lr_policies_inner", type=float, default=0.05)
    exact.add_argument("--lr_policies_outer", type=float, default=0.05)
    exact.add_argument("--inner_steps", type=int, default=1)
    exact.add_argument(
        "--actual_update",
        action="store_true",
        help="differentiate through the opponent's actual step (else Taylor LOLA)",
    )
    exact.add_argument("--base_cf_no_scale", type=float, default=1.33)
    exact.add_argument("--gamma", type=float, default=0.96)
    exact.add_argument("--std", type=float, default=0.1)
    exact.add_argument("--outer_exact_prox", action="store_true", help="outer POLA")
    exact.add_argument("--outer_beta", type=float, default=0.0)
    exact.add_argument("--prox_threshold", type=float, default=1e-8)
    exact.add_argument("--prox_outer_max_iters", type=int, default=5000)
    exact.add_argument(
        "--print_prox_loops_info",
        action="store_true",
        help="print the POLA iterations used per epoch",
    )
    exact.set_defaults(run=run_exact)


def sampled_config(args: argparse.Namespace):
    """The :class:`SampledConfig` the flags describe."""
    from mopa.algos.pola.sampled import SampledConfig
    from mopa.experiments.pola import CPU_SAMPLED, PAPER_SAMPLED

    base = SampledConfig()
    if args.preset:
        parts = args.preset.split("-")
        tables = {"paper": PAPER_SAMPLED, "cpu": CPU_SAMPLED}
        try:
            game, method, kind = parts
            base = tables[kind][game][method]
        except (ValueError, KeyError):
            names = [
                f"{g}-{m}-{k}"
                for k, table in tables.items()
                for g in table
                for m in table[g]
            ]
            raise UnknownNameError(
                f"unknown preset {args.preset!r}; presets: {', '.join(names)}"
            ) from None
    changes = {
        flag: getattr(args, flag)
        for flag, _ in SAMPLED_FLAGS
        if getattr(args, flag) is not None
    }
    if args.opp_model:
        changes["opp_model"] = True
    return dataclasses.replace(base, **changes)


def _save_checkpoint(path: Path, agents) -> None:
    from flax import serialization

    from mopa.core.files import atomic_write

    params = [{"policy": a.policy, "value": a.value} for a in agents]
    data = serialization.to_bytes(params)
    atomic_write(path, lambda file: file.write(data))


def run_sampled(args: argparse.Namespace) -> int:
    import jax
    import numpy as np

    from mopa.algos.pola.sampled import Learner, jitted_update
    from mopa.core.checks import check_count, check_seed
    from mopa.core.files import check_output_folder
    from mopa.core.runinfo import run_metadata

    check_count("--print_every", args.print_every)
    check_count("--checkpoint_every", args.checkpoint_every, low=0)
    check_seed("--seed", args.seed)
    config = sampled_config(args)
    if args.save_dir:
        check_output_folder(args.save_dir, "--save_dir")
    described = {**dataclasses.asdict(config), "seed": args.seed}
    meta = run_metadata(described)  # the source as the run starts
    learner = Learner(config)
    key_init, key_run = jax.random.split(jax.random.key(args.seed))
    agents = learner.init(key_init)
    history = []
    start = time.perf_counter()
    with _StopRequest() as stop:
        for u in range(config.n_update):
            if stop.requested:
                break
            agents, metrics = jitted_update(
                learner, agents, jax.random.fold_in(key_run, u)
            )
            m = jax.tree.map(lambda x: np.asarray(x).tolist(), metrics._asdict())
            history.append(m)
            if (u + 1) % args.print_every == 0 or u + 1 == config.n_update:
                line = _progress_line(config, u, time.perf_counter() - start, m)
                print(line, flush=True)
            if (
                args.save_dir
                and args.checkpoint_every
                and (u + 1) % args.checkpoint_every == 0
            ):
                _save_checkpoint(args.save_dir / f"checkpoint_{u + 1}.msgpack", agents)
    done = len(history)
    if done < config.n_update:  # interrupted: keep the updates done
        print(f"interrupted after {done} of {config.n_update} updates", flush=True)
        meta["interrupted_after_updates"] = done
    if args.save_dir:
        name = "final" if done == config.n_update else f"interrupted_{done}"
        _save_run(args.save_dir, name, agents, history, described, meta)
    return 0 if done == config.n_update else 130


class _StopRequest:
    """Within the block, Ctrl-C (SIGINT) asks the training loop to stop after the
    update in progress, so the updates done are saved; a second one stops at once.
    Outside the main thread, where Python cannot catch signals, nothing changes."""

    def __enter__(self) -> _StopRequest:
        self.requested = False
        self._previous = None
        if threading.current_thread() is threading.main_thread():
            self._previous = signal.signal(signal.SIGINT, self._request)
        return self

    def _request(self, signum, frame) -> None:
        if self.requested:
            raise KeyboardInterrupt
        self.requested = True

    def __exit__(self, *exc) -> None:
        if self._previous is not None:
            signal.signal(signal.SIGINT, self._previous)


def _progress_line(config, u: int, seconds: float, m: dict) -> str:
    """One progress line: the update, the time so far and the evaluations."""
    import numpy as np

    line = (
        f"update {u + 1}/{config.n_update} {seconds:.0f}s: vs each other "
        f"{np.mean(m['vs_each_other']):.3f}, vs ALLD {np.mean(m['vs_alld']):.3f}, "
        f"vs ALLC {np.mean(m['vs_allc']):.3f}, vs TFT {np.mean(m['vs_tft']):.3f}"
    )
    if config.env == "coin":
        line += f", own coin {m['own_coin']:.3f}"
    if config.opp_model:
        line += f", model accuracy {np.mean(m['model_accuracy']):.3f}"
    return line


def _save_run(folder: Path, name: str, agents, history, described, meta) -> None:
    """The agents as ``NAME.msgpack``, beside the metrics, config and metadata."""
    from mopa.core.files import write_json

    _save_checkpoint(folder / f"{name}.msgpack", agents)
    write_json(folder / "metrics.json", history)
    write_json(folder / "config.json", described)
    write_json(folder / "meta.json", meta)
    print(f"wrote {folder}", flush=True)


def exact_config(args: argparse.Namespace):
    """The :class:`ExactConfig` the ``pola-exact`` flags describe."""
    from mopa.algos.pola.exact import ExactConfig

    if args.n_agents != 2:
        raise InvalidParameterError(f"--n_agents must be 2, got {args.n_agents}")
    if args.init_state_representation != 2:
        raise InvalidParameterError(
            "--init_state_representation must be 2 (a separate start state), "
            f"got {args.init_state_representation}"
        )
    if args.using_nn and args.ill_condition:
        raise InvalidParameterError("--ill_condition applies to tabular policies only")
    if args.outer_exact_prox:
        if not args.actual_update:
            raise InvalidParameterError("--outer_exact_prox needs --actual_update")
        method = "pola"
    else:
        method = "lola" if args.actual_update else "lola_taylor"
    policy = "mlp" if args.using_nn else "precond" if args.ill_condition else "tabular"
    return ExactConfig(
        method=method,
        policy=policy,
        contrib_factor=args.base_cf_no_scale,
        gamma=args.gamma,
        lr_inner=args.lr_policies_inner,
        lr_outer=args.lr_policies_outer,
        inner_steps=args.inner_steps,
        outer_beta=args.outer_beta,
        num_epochs=args.num_epochs,
        std=args.std,
        hidden_size=args.nn_hidden_size,
        prox_threshold=args.prox_threshold,
        prox_max_iters=args.prox_outer_max_iters,
    )


def run_exact(args: argparse.Namespace) -> int:
    import jax
    import numpy as np

    from mopa.algos.pola.exact import p_tft
    from mopa.core.checks import check_count, check_seed

    config = exact_config(args)
    for name in ("repeats", "print_every"):
        check_count(f"--{name}", getattr(args, name))
    check_seed("--seed", args.seed)
    seed = args.seed if args.set_seed else int.from_bytes(os.urandom(4), "little")
    keys = jax.random.split(jax.random.key(seed), args.repeats)
    found, out = p_tft(config, keys)
    values = np.asarray(out.values)
    probs = np.asarray(out.probs)
    print(f"{config.method} ({config.policy}), cf {config.contrib_factor}, seed {seed}")
    for epoch in range(args.print_every - 1, config.num_epochs, args.print_every):
        print(
            f"epoch {epoch + 1}: mean value {values[:, epoch].mean():.3f}; "
            f"repeat 0 P(C) agent 1 {np.round(probs[0, epoch, 0], 3).tolist()}, "
            f"agent 2 {np.round(probs[0, epoch, 1], 3).tolist()}"
        )
        if args.print_prox_loops_info:
            iters = np.asarray(out.iters)[:, epoch]
            print(f"  prox iterations per repeat and agent: {iters.tolist()}")
    print(f"Num runs where TFT found: {int(round(found * args.repeats))}")
    print(f"Proportion of runs where TFT found: {found}")
    print(json.dumps({"p_tft": found, "repeats": args.repeats}))
    return 0
