"""Environment steps per second, for mopa's games and JaxMARL's reference game.

One step means every agent of every game in the batch moves once. Each measurement
plays ``batch`` games with uniformly random actions (integers for discrete action
spaces, uniform in the box for continuous ones) for ``num_steps`` steps inside a
single jitted ``vmap`` + ``lax.scan``, and folds every observation and reward into a
checksum so the compiler cannot drop work. mopa and JaxMARL are measured by the same
harness, interleaved repetition by repetition, and the median is reported, so their
ratio is robust to a noisy machine.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from mopa.envs import Box, make, registered_envs
from mopa.envs.jaxmarl_compat import make_jaxmarl_tag

PURSUIT_ENVS = tuple(n for n in registered_envs() if n.startswith("tag"))
BATTALION_ENVS = ("battalion", "multi_battalion")
BENCH_ENVS = PURSUIT_ENVS + BATTALION_ENVS
"""Games ``mopa bench env`` measures by default."""
DEFAULT_BATCHES = (1, 64, 1024, 4096)


class StepHarness(NamedTuple):
    """What the harness needs of an implementation, for one game."""

    reset: Callable[[jax.Array], Any]  # key -> state
    step: Callable[[jax.Array, Any, jax.Array], tuple[Any, jax.Array]]
    # (key, state, actions [N] int32 or [N, D] float) -> (state, checksum [])
    num_agents: int
    num_actions: int  # discrete actions per agent (0 for Box actions)
    sample: Callable[[jax.Array, int], jax.Array] | None = None
    # (key, batch) -> [batch, N, ...] uniform actions; None: uniform integers


def mopa_harness(name: str, **overrides: Any) -> StepHarness:
    """Harness for the registered mopa game ``name`` (its ``step``, no auto-reset)."""
    env, params = make(name, **overrides)
    sizes = env.team_sizes
    splits = [sum(sizes[:t]) for t in range(1, len(sizes))]

    def reset(key):
        return env.reset(key, params)[1]

    def step(key, state, actions):
        team_actions = tuple(jnp.split(actions, splits))
        obs, state, rewards, _, _, _ = env.step(key, state, team_actions, params)
        checksum = sum(jnp.sum(o) for o in obs) + sum(jnp.sum(r) for r in rewards)
        return state, checksum

    space = env.action_space(0)
    if isinstance(space, Box):

        def sample(key, batch):
            return space.sample(key, (batch, env.num_agents))

        return StepHarness(reset, step, env.num_agents, 0, sample)
    return StepHarness(reset, step, env.num_agents, space.n)


def jaxmarl_harness(
    num_predators: int = 3, num_prey: int = 1, num_obstacles: int = 2
) -> StepHarness:
    """Harness for JaxMARL's ``MPE_simple_tag_v3`` ``step_env`` (needs ``jaxmarl``)."""
    pursuit, _ = make(
        "tag",
        num_predators=num_predators,
        num_prey=num_prey,
        num_obstacles=num_obstacles,
    )
    env = make_jaxmarl_tag(pursuit)
    agents = env.agents

    def reset(key):
        return env.reset(key)[1]

    def step(key, state, actions):
        obs, state, rewards, _, _ = env.step_env(
            key, state, {a: actions[i] for i, a in enumerate(agents)}
        )
        checksum = sum(jnp.sum(obs[a]) for a in agents) + sum(
            jnp.sum(rewards[a]) for a in agents
        )
        return state, checksum

    return StepHarness(reset, step, len(agents), 5)


def compile_rollout(
    harness: StepHarness, batch: int, num_steps: int
) -> Callable[[jax.Array], jax.Array]:
    """A jitted ``key -> checksum`` that plays ``batch`` games for ``num_steps``."""
    step = jax.vmap(harness.step, in_axes=(None, 0, 0))

    def run(key):
        key_reset, key_run = jax.random.split(key)
        states = jax.vmap(harness.reset)(jax.random.split(key_reset, batch))

        def body(carry, key_t):
            states, total = carry
            key_act, key_step = jax.random.split(key_t)
            if harness.sample is None:
                actions = jax.random.randint(
                    key_act, (batch, harness.num_agents), 0, harness.num_actions
                )
            else:
                actions = harness.sample(key_act, batch)
            states, checksum = step(key_step, states, actions)
            return (states, total + jnp.sum(checksum)), None

        (_, total), _ = jax.lax.scan(
            body, (states, jnp.zeros(())), jax.random.split(key_run, num_steps)
        )
        return total

    fn = jax.jit(run)
    jax.block_until_ready(fn(jax.random.key(0)))  # compile
    return fn


def _time(fn: Callable[[jax.Array], jax.Array], key: jax.Array) -> float:
    start = time.perf_counter()
    jax.block_until_ready(fn(key))
    return time.perf_counter() - start


def steps_for(batch: int, target_steps: int, max_scan: int = 5000) -> int:
    """Scan length so that ``batch * num_steps`` is about ``target_steps``, between
    20 and ``max_scan`` steps (small batches are slow per step and need fewer)."""
    return int(min(max_scan, max(20, target_steps // batch)))


def bench_env(
    envs: tuple[str, ...] = BENCH_ENVS,
    batches: tuple[int, ...] = DEFAULT_BATCHES,
    repeats: int = 5,
    target_steps: int = 400_000,
    include_jaxmarl: bool = True,
    progress: Callable[[str], None] | None = None,
) -> list[dict]:
    """Measure steps/s for each game and batch size.

    Returns:
        Rows ``{"env", "impl", "batch", "steps_per_s"}``; JaxMARL's simple_tag rows
        have ``env`` ``"tag"`` and ``impl`` ``"jaxmarl"``, measured interleaved with
        mopa's ``tag``.
    """
    harnesses: dict[tuple[str, str], StepHarness] = {
        (name, "mopa"): mopa_harness(name) for name in envs
    }
    if include_jaxmarl:
        harnesses[("tag", "jaxmarl")] = jaxmarl_harness()
    rows = []
    for batch in batches:
        num_steps = steps_for(batch, target_steps)
        compiled = {
            k: compile_rollout(h, batch, num_steps) for k, h in harnesses.items()
        }
        times: dict[tuple[str, str], list[float]] = {k: [] for k in compiled}
        for rep in range(repeats):
            for k, fn in compiled.items():
                times[k].append(_time(fn, jax.random.key(rep + 1)))
        for (name, impl), ts in times.items():
            rate = batch * num_steps / statistics.median(ts)
            rows.append(
                {"env": name, "impl": impl, "batch": batch, "steps_per_s": rate}
            )
            if progress:
                progress(
                    f"{name:14s} {impl:8s} batch {batch:5d}: {rate:12,.0f} steps/s"
                )
    return rows


def speedups(rows: list[dict], env: str = "tag") -> dict[int, float]:
    """mopa/JaxMARL steps-per-second ratio for ``env`` at each batch size."""
    rate = {(r["impl"], r["batch"]): r["steps_per_s"] for r in rows if r["env"] == env}
    return {
        b: rate[("mopa", b)] / rate[("jaxmarl", b)]
        for (impl, b) in rate
        if impl == "mopa" and ("jaxmarl", b) in rate
    }


__all__ = [
    "bench_env",
    "compile_rollout",
    "jaxmarl_harness",
    "mopa_harness",
    "speedups",
]
