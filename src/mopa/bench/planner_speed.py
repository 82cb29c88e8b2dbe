"""Planner speed: Monte-Carlo lookahead decisions per second, with two references
measured in the same run.

A decision is one team action chosen by :class:`~mopa.planning.LookaheadPlayer`
for one game. Each measurement runs ``jit(vmap(player.act))`` over ``batch`` games
of ``tag`` (3 predators planning against the prey, the OA-IQL opponent head as the
opponent model, as in Exp 3) and reports the median over repetitions. The
references: the greedy policy's decisions per second on the same batch (what
planning costs over acting), and the bare game's steps per second at the planner's
imagined batch (``batch x candidates x rollouts`` games), against which the
planner's imagined steps per second show its overhead over pure simulation; and,
as for training (:mod:`mopa.bench.train_speed`), the machine's own limit: the
FLOPs of a decision from XLA's cost analysis
(:func:`~mopa.bench.compute.program_flops`), the GFLOP/s achieved, and a plain
jitted matmul of the planner's largest layer application
(:func:`~mopa.bench.compute.largest_dense_layer`) measured in the same run.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp

from mopa.bench.compute import largest_dense_layer, matmul_limit, program_flops
from mopa.bench.env_speed import compile_rollout, mopa_harness
from mopa.envs import make
from mopa.envs.pursuit import PREDATOR
from mopa.planning import (
    LookaheadConfig,
    LookaheadParams,
    LookaheadPlayer,
    OpponentHeadModel,
)
from mopa.players import PolicyPlayer
from mopa.policy import PolicySpec, init_params

BENCH_MODES = ("per_agent", "joint")
"""Planner modes measured by default."""


def median_call_seconds(
    fn: Callable[[], Any], repeats: int, min_seconds: float
) -> float:
    """Median seconds per call of ``fn`` (already compiled), each repetition
    running enough calls to last about ``min_seconds``."""
    start = time.perf_counter()
    jax.block_until_ready(fn())
    calls = max(1, int(min_seconds / max(time.perf_counter() - start, 1e-6)))
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(calls):
            out = fn()
        jax.block_until_ready(out)
        times.append((time.perf_counter() - start) / calls)
    return statistics.median(times)


def bench_planner(
    modes: tuple[str, ...] = BENCH_MODES,
    batch: int = 100,
    num_rollouts: int = 5,
    horizon: int = 3,
    hidden: tuple[int, ...] = (128, 128),
    repeats: int = 5,
    min_seconds: float = 0.5,
    progress: Callable[[dict[str, Any]], None] | None = None,
) -> list[dict[str, Any]]:
    """Measure planner decisions per second on ``tag`` for each mode.

    Args:
        modes: planner modes (``"per_agent"``, ``"joint"``).
        batch: games decided in parallel (one ``vmap``).
        num_rollouts: ``K`` rollouts per candidate.
        horizon: ``H`` steps per rollout.
        hidden: hidden widths of the predators' OA-IQL Q-network.
        repeats: timed repetitions (median).
        min_seconds: about this long per repetition.

    Returns:
        Rows ``{"mode", "batch", "num_rollouts", "horizon", "candidates",
        "decisions_per_s", "greedy_decisions_per_s", "planner_slowdown",
        "imagined_steps_per_s", "env_steps_per_s", "env_batch", "sim_fraction",
        "compile_s", "hidden", "flops_per_decision", "gflop_s", "matmul_shape",
        "matmul_gflop_s", "matmul_fraction"}``: ``planner_slowdown`` is greedy
        over planner decisions per second; ``sim_fraction`` is imagined over
        bare-game steps per second (1 would mean the planner costs no more than
        its simulation); ``matmul_fraction`` is ``gflop_s`` over a plain matmul of
        ``matmul_shape`` (rows x inputs x outputs) on the same machine.
    """
    env, env_params = make("tag")
    spec = PolicySpec(
        kind="q",
        num_agents=env.team_sizes[PREDATOR],
        obs_size=int(env.observation_space(PREDATOR).shape[0]),
        num_actions=env.action_space(PREDATOR).n,
        hidden=hidden,
        num_opponents=env.num_agents - env.team_sizes[PREDATOR],
        opponent_actions=env.action_space(1 - PREDATOR).n,
    )
    key_params, key_reset, key_act = jax.random.split(jax.random.key(0), 3)
    weights = init_params(spec, key_params)
    obs, states = jax.jit(jax.vmap(env.reset, in_axes=(0, None)))(
        jax.random.split(key_reset, batch), env_params
    )
    team_obs = obs[PREDATOR]
    carry = jnp.zeros((batch, spec.num_agents, spec.carry_size))
    reset = jnp.zeros((batch, spec.num_agents), bool)
    keys = jax.random.split(key_act, batch)
    in_axes = (None, 0, 0, 0, 0, 0)

    greedy = jax.jit(jax.vmap(PolicyPlayer(spec).act, in_axes=in_axes))
    greedy_s = median_call_seconds(
        lambda: greedy(weights, keys, states, team_obs, carry, reset)[0],
        repeats,
        min_seconds,
    )
    rows = []
    for mode in modes:
        config = LookaheadConfig(num_rollouts=num_rollouts, horizon=horizon, mode=mode)
        player = LookaheadPlayer(
            env, PREDATOR, config, OpponentHeadModel(spec, PREDATOR), spec
        )
        # The head is read from the own weights, in the Q-values' forward pass.
        params = LookaheadParams(env_params, weights, ())
        start = time.perf_counter()
        planner = (
            jax.jit(jax.vmap(player.act, in_axes=in_axes))
            .lower(params, keys, states, team_obs, carry, reset)
            .compile()
        )
        compile_s = time.perf_counter() - start
        planner_s = median_call_seconds(
            lambda planner=planner, params=params: planner(
                params, keys, states, team_obs, carry, reset
            )[0],
            repeats,
            min_seconds,
        )
        args = (params, keys, states, team_obs, carry, reset)
        act = jax.vmap(player.act, in_axes=in_axes)
        flops = program_flops(act, *args) / batch
        layer = largest_dense_layer(act, *args)
        imagined_per_decision = player.num_candidates * num_rollouts * horizon
        env_batch = batch * player.num_candidates * num_rollouts
        env_steps = 20
        bare = compile_rollout(mopa_harness("tag"), env_batch, env_steps)
        bare_s = median_call_seconds(
            lambda bare=bare: bare(jax.random.key(1)), repeats, 0.0
        )
        decisions = batch / planner_s
        row = {
            "mode": mode,
            "batch": batch,
            "num_rollouts": num_rollouts,
            "horizon": horizon,
            "candidates": player.num_candidates,
            "decisions_per_s": decisions,
            "greedy_decisions_per_s": batch / greedy_s,
            "planner_slowdown": planner_s / greedy_s,
            "imagined_steps_per_s": decisions * imagined_per_decision,
            "env_steps_per_s": env_batch * env_steps / bare_s,
            "env_batch": env_batch,
            "sim_fraction": decisions
            * imagined_per_decision
            / (env_batch * env_steps / bare_s),
            "compile_s": compile_s,
            "hidden": list(hidden),
            "flops_per_decision": flops,
            "gflop_s": flops * decisions / 1e9,
        }
        row.update(matmul_limit(layer, row["gflop_s"], 1, repeats=repeats))
        rows.append(row)
        if progress is not None:
            progress(row)
    return rows


__all__ = ["BENCH_MODES", "bench_planner"]
