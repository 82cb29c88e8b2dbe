"""Programs launched side by side, again and again: the child process of the
stress tests of ``play_tournament`` (``tests/eval/test_tournament.py``) and of
``Stages.run_together`` (``tests/experiments/test_stages.py``).

The number of CPU devices is fixed when JAX starts, so each stress test runs this
module in a process of its own (:func:`run_stress`, ``JAX_NUM_CPU_DEVICES`` set)::

    python -m tests.concurrency tournament|stages CALLS

Each call runs under a watchdog (:func:`faulthandler.dump_traceback_later`): a
call that does not return in time prints every thread's stack and ends the
process with exit code 1, and the process as a whole runs under a timeout, so a
hang fails the test instead of stalling the suite. The last line printed on
success says what ran.

The players are small but real: a tree search (which a tournament on one device
plays as a program of its own, beside the other rows) and Q predators against a
prey that refits an online correction of its policy at every step (the Newton
solve of :func:`mopa.opponent.online.fit_residual`, batched over the games by the
tournament): the work that hung the population experiment's evaluation when its
solve was a batched LAPACK kernel (:mod:`mopa.core.linalg`).
"""

from __future__ import annotations

import dataclasses
import faulthandler
import functools
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import struct

from mopa.core.compile_cache import use_compile_cache
from mopa.core.devices import use_quick_compile
from mopa.envs import make
from mopa.envs.pursuit import PREDATOR, PREY
from mopa.eval import tournament
from mopa.eval.tournament import TournamentEntry, broadcast_seeds
from mopa.experiments.stages import Stages
from mopa.opponent.online import (
    OnlineResidualConfig,
    fit_residual,
    floored_base,
    residual_log_probs,
)
from mopa.planning import LookaheadParams, MCTSConfig, MCTSPlayer, PolicyOpponentModel
from mopa.players import PolicyPlayer
from mopa.policy import PolicySpec, agent_inputs, apply_by_rows, init_params

CALLS = 20
"""Calls of each stress test."""
DEVICE_COUNTS = (1, 2)
"""CPU devices of the stress tests' processes: XLA's thread pool has one thread per
core or per device, whichever is more, so on a 2-core machine both counts give a
pool that two programs side by side can fill."""
FIRST_CALL_S = 240
"""Watchdog of the first call, which compiles the programs."""
CALL_S = 45
"""Watchdog of every later call (each takes well under a second)."""
NUM_EPISODES = 8
"""Episodes per seed pair: fewer than ``MIN_SPREAD_EPISODES``, so the tournament
stays on one device and plays each tree search as a program of its own."""
HORIZON = 5
NUM_SEEDS = 2
"""Seeds of every entry: ``2 x 2`` seed pairs, so the prey solves ``4 x 8 = 32``
systems at once in every cell."""
MOVES = 16
"""Moves the prey's correction is fitted to."""


@struct.dataclass
class FittingPreyParams:
    """The prey's policy and the moves its correction is fitted to."""

    policy_params: Any
    features: jax.Array  # [MOVES, F]
    base: jax.Array  # [MOVES, A] floored base log-probabilities
    actions: jax.Array  # [MOVES] int32


@dataclasses.dataclass(frozen=True)
class FittingPrey:
    """A prey that plays its Q-policy corrected by an online residual refitted at
    every step to the moves in its params (two Newton steps from zero)."""

    spec: PolicySpec
    config: OnlineResidualConfig
    num_agents: int = 1
    carry_size: int = 0

    def act(self, params, key, state, obs, carry, reset):
        del key, state, reset
        values = apply_by_rows(
            self.spec.module(), params.policy_params, agent_inputs(self.spec, obs)
        )[0]  # [1, A]
        mask = jnp.ones((MOVES,), bool)
        zeros = jnp.zeros((self.config.num_features, self.config.num_actions))
        weights = fit_residual(
            self.config, params.features, params.base, params.actions, mask, zeros
        )
        log_probs = residual_log_probs(self.config, weights, values, obs)
        return jnp.argmax(log_probs, -1).astype(jnp.int32), carry


def q_spec(env, team: int) -> PolicySpec:
    """A small Q-network policy for team ``team`` of ``env``."""
    return PolicySpec(
        kind="q",
        num_agents=env.team_sizes[team],
        obs_size=env.observation_space(team).shape[0],
        num_actions=5,
        hidden=(16,),
    )


def seeded_params(spec: PolicySpec, seed: int, num_seeds: int = NUM_SEEDS) -> Any:
    """``spec``'s freshly initialised weights for ``num_seeds`` seeds ``[S, ...]``."""
    keys = jax.random.split(jax.random.key(seed), num_seeds)
    return jax.vmap(lambda k: init_params(spec, k))(keys)


def tournament_sides(env, env_params) -> tuple[list, list]:
    """Rows: two Q predators (one group) and a small tree search (a group that
    plays its games in turn: a program of its own beside the predators' on one
    device); the column: the fitting prey."""
    predator, prey = q_spec(env, PREDATOR), q_spec(env, PREY)
    model = PolicyOpponentModel(prey, PREY)
    prey_params = seeded_params(prey, 3)

    search = MCTSPlayer(
        env,
        PREDATOR,
        MCTSConfig(
            num_simulations=4,
            num_particles=1,
            leaf_horizon=1,
            leaf_weight=0.0,
            max_num_considered_actions=4,
        ),
        model,
        predator,
    )
    own = seeded_params(predator, 1)
    plan = LookaheadParams(broadcast_seeds(env_params, NUM_SEEDS), own, prey_params)
    rows = [
        TournamentEntry("policy_a", PolicyPlayer(predator), own),
        TournamentEntry("policy_b", PolicyPlayer(predator), seeded_params(predator, 2)),
        TournamentEntry("search", search, plan),
    ]
    config = OnlineResidualConfig(num_actions=5, obs_size=prey.obs_size)
    key_obs, key_base, key_actions = jax.random.split(jax.random.key(4), 3)
    obs = jax.random.normal(key_obs, (NUM_SEEDS, MOVES, prey.obs_size))
    base = floored_base(config, jax.random.normal(key_base, (NUM_SEEDS, MOVES, 5)))
    fitting = FittingPreyParams(
        policy_params=prey_params,
        features=jnp.concatenate([obs, jnp.ones((NUM_SEEDS, MOVES, 1))], -1),
        base=base,
        actions=jax.random.randint(key_actions, (NUM_SEEDS, MOVES), 0, 5),
    )
    columns = [TournamentEntry("fitting_prey", FittingPrey(prey, config), fitting)]
    return rows, columns


def _programs(rows, columns) -> int:
    """How many programs the tournament runs side by side."""
    groups_a = tournament._group([TournamentEntry(*row) for row in rows])
    groups_b = tournament._group([TournamentEntry(*column) for column in columns])
    return len(tournament._programs(groups_a, groups_b, None))


def _play(env, env_params, rows, columns, seed: int) -> np.ndarray:
    """``[R, C, P, N, 2]`` returns of one tournament."""
    return tournament.play_tournament(
        env,
        env_params,
        rows,
        columns,
        jax.random.key(seed),
        num_episodes=NUM_EPISODES,
        horizon=HORIZON,
    ).returns


def _watched(call_index: int, fn, *args) -> Any:
    faulthandler.dump_traceback_later(
        FIRST_CALL_S if call_index == 0 else CALL_S, exit=True
    )
    try:
        return fn(*args)
    finally:
        faulthandler.cancel_dump_traceback_later()


def stress_tournament(calls: int) -> str:
    """``play_tournament`` with its programs side by side, ``calls`` times with one
    key: every call must give the first call's numbers."""
    env, env_params = make("tag")
    rows, columns = tournament_sides(env, env_params)
    programs = _programs(rows, columns)
    assert programs >= 2, programs
    first = None
    for i in range(calls):
        returns = _watched(i, _play, env, env_params, rows, columns, 7)
        if first is None:
            first = returns
        np.testing.assert_array_equal(returns, first)
    return (
        f"tournament: {calls} calls of {programs} programs side by side on "
        f"{jax.device_count()} CPU device(s), the same numbers every call"
    )


def stress_stages(calls: int) -> str:
    """``Stages.run_together`` of three stages, each a tournament of the fitting
    prey (the tree searches left out: one program per stage), ``calls`` times:
    every call must give the first call's numbers, and each stage its own."""
    env, env_params = make("tag")
    rows, columns = tournament_sides(env, env_params)
    plain = [row for row in rows if row.name != "search"]

    def stage(seed: int):
        return lambda folder: _play(env, env_params, plain, columns, seed).tolist()

    seeds = (11, 12, 13)
    with tempfile.TemporaryDirectory(prefix="mopa-stress-") as root:
        stages = Stages(root)
        first = None
        for i in range(calls):
            together = [(f"play_{s}", {"seed": s}, stage(s)) for s in seeds]
            results = _watched(
                i, functools.partial(stages.run_together, force=True), together
            )
            if first is None:
                first = results
                assert len({str(r) for r in results}) == len(seeds)  # own keys
            assert results == first
    return (
        f"stages: {calls} calls of {len(seeds)} stages together on "
        f"{jax.device_count()} CPU device(s), the same numbers every call"
    )


def run_stress(which: str, num_devices: int, calls: int = CALLS) -> str:
    """Run ``which`` (``"tournament"`` or ``"stages"``) ``calls`` times in a child
    process with ``num_devices`` CPU devices; fail (never hang) if it does not
    finish.

    Returns:
        The child's last line (what ran).
    """
    budget = FIRST_CALL_S + calls * CALL_S  # the child's own watchdogs fire first
    command = [sys.executable, "-m", "tests.concurrency", which, str(calls)]
    env = {
        **os.environ,
        "JAX_PLATFORMS": "cpu",
        "JAX_NUM_CPU_DEVICES": str(num_devices),
    }
    root = Path(__file__).resolve().parents[1]
    try:
        done = subprocess.run(
            command, cwd=root, env=env, capture_output=True, text=True, timeout=budget
        )
    except subprocess.TimeoutExpired as error:  # its output is bytes, if any
        output = b"".join(part or b"" for part in (error.stdout, error.stderr))
        pytest.fail(
            f"{which} on {num_devices} device(s) hung: no end in {budget} s\n"
            + output.decode(errors="replace")[-6000:]
        )
    output = (done.stdout + done.stderr)[-6000:]
    assert done.returncode == 0, (
        f"{which} on {num_devices} device(s) failed or hung (watchdog):\n{output}"
    )
    return done.stdout.strip().splitlines()[-1]


def main(argv: list[str]) -> int:
    use_quick_compile()  # as the test session compiles (tests/conftest.py)
    use_compile_cache()
    which, calls = argv[0], int(argv[1])
    run = {"tournament": stress_tournament, "stages": stress_stages}[which]
    print(run(calls), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
