"""The run driver: run folders, checkpoints, exact resumption, bad configs."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import jax
import numpy as np
import pytest

import mopa
import mopa.envs
from mopa.algos import IQLConfig, MAPPOConfig, make_config, preset, run_training
from mopa.algos.presets import PRESETS
from mopa.core import checkpoint, numerics
from mopa.errors import CheckpointError, InvalidParameterError, UnknownNameError

TINY = dict(
    algo="oa_iql",
    env="tag",
    total_steps=8 * 4 * 120,
    num_envs=8,
    num_steps=4,
    buffer_size=640,
    batch_size=8,
    learning_starts=64,
    hidden=(16,),
    num_seeds=2,
    num_chunks=6,
)
CLI_SET = [
    f"--set={k}={json.dumps(v)}"
    for k, v in TINY.items()
    if k not in ("algo", "env", "total_steps", "num_seeds")
]


class StopRunError(Exception):
    pass


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory):
    out = tmp_path_factory.mktemp("runs") / "whole"
    return run_training(IQLConfig(**TINY), out=out)


def _metrics(folder: Path) -> dict[str, np.ndarray]:
    with np.load(folder / "metrics.npz", allow_pickle=False) as data:
        return {k: data[k] for k in data.files if k != "__chunks__"}


@pytest.mark.slow
def test_run_folder_contents(uninterrupted):
    out = uninterrupted.out
    for name in (
        "config.json",
        "meta.json",
        "metrics.npz",
        "metrics.jsonl",
        "summary.json",
        "checkpoint.msgpack",
        "train_state.msgpack",
    ):
        assert (out / name).is_file(), name
    meta = json.loads((out / "meta.json").read_text())
    assert meta["config"] == IQLConfig(**TINY).to_dict()
    assert meta["versions"]["jax"] == jax.__version__
    assert "git_sha" in meta
    metrics = _metrics(out)
    assert metrics["return/predator"].shape == (2, 120)
    rows = [
        json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()
    ]
    chunks = [r for r in rows if r["kind"] == "chunk"]
    assert len(chunks) == 6 and all(r["steps_per_s"] > 0 for r in chunks)
    per_seed = [r for r in rows if r["kind"] == "metrics" and r["seed"] == 1]
    assert per_seed[-1]["update"] == 120
    assert {
        "return/prey",
        "captures_per_episode",
        "opp_acc/prey",
        "loss/predator",
    } <= set(per_seed[-1])


@pytest.mark.slow
def test_interrupted_run_resumes_to_identical_metrics(uninterrupted, tmp_path):
    out = tmp_path / "interrupted"

    def stop_after_two(progress):
        if progress.chunk == 2:
            raise StopRunError

    with pytest.raises(StopRunError):
        run_training(IQLConfig(**TINY), out=out, progress=stop_after_two)
    assert not (out / "summary.json").exists()
    resumed = run_training(IQLConfig(**TINY), out=out)
    assert resumed.resumed_from_chunk == 2
    whole, again = _metrics(uninterrupted.out), _metrics(out)
    assert whole.keys() == again.keys()
    for name in whole:
        np.testing.assert_array_equal(whole[name], again[name], err_msg=name)


@pytest.mark.slow
def test_sigkilled_cli_run_resumes_to_identical_metrics(uninterrupted, tmp_path):
    out = tmp_path / "killed"
    command = [
        sys.executable,
        "-m",
        "mopa",
        "train",
        "--algo=oa_iql",
        "--env=tag",
        f"--steps={TINY['total_steps']}",
        "--seeds=2",
        f"--out={out}",
        "--quiet",
        *CLI_SET,
    ]
    env = {
        **os.environ,
        "JAX_PLATFORMS": "cpu",
        "JAX_COMPILATION_CACHE_DIR": str(tmp_path / "cache"),
        "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS": "0",
        # the numerics this process ran the uninterrupted run in (the command
        # defaults to portable; a test process is native unless told otherwise)
        numerics.ENVIRONMENT_VARIABLE: numerics.numerics_mode(),
    }
    process = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL)
    state = out / checkpoint.STATE_FILE
    deadline = time.monotonic() + 300
    while not state.exists():
        assert process.poll() is None, "the run ended before its first checkpoint"
        assert time.monotonic() < deadline
        time.sleep(0.005)
    process.send_signal(signal.SIGKILL)
    process.wait()
    assert not (out / "summary.json").exists(), "the run finished before the kill"
    finished = subprocess.run(command, env=env, capture_output=True, text=True)
    assert finished.returncode == 0, finished.stderr
    assert "resumed after chunk" in finished.stdout
    whole, again = _metrics(uninterrupted.out), _metrics(out)
    for name in whole:
        np.testing.assert_array_equal(whole[name], again[name], err_msg=name)


@pytest.mark.slow
def test_load_policy_without_training_code(uninterrupted):
    path = uninterrupted.out / "checkpoint.msgpack"
    policy = mopa.load_policy(path, team="prey", seed=1)
    spec, params = uninterrupted.policies["prey"]
    obs = jax.random.normal(jax.random.key(0), (1, 14))
    np.testing.assert_array_equal(
        policy(obs),
        spec.module()
        .apply(jax.tree.map(lambda x: x[1], params), _inputs(spec, obs))[0]
        .argmax(-1),
    )
    assert policy.spec.num_opponents == 3  # OA head kept as an opponent model
    code = (
        "import sys, mopa, jax.numpy as jnp\n"
        f"p = mopa.load_policy({str(path)!r}, team='predator')\n"
        "print(p(jnp.zeros((3, 16))).tolist())\n"
        "print(any(m.startswith('mopa.algos') for m in sys.modules))\n"
    )
    run = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env={**os.environ, "JAX_PLATFORMS": "cpu"},
    )
    assert run.returncode == 0, run.stderr
    lines = run.stdout.strip().splitlines()
    assert len(json.loads(lines[-2])) == 3
    assert lines[-1] == "False"


def _inputs(spec, obs):
    from mopa.policy import agent_inputs

    return agent_inputs(spec, obs)


@pytest.mark.slow
def test_frozen_opponent_from_a_checkpoint(uninterrupted):
    path = str(uninterrupted.out / "checkpoint.msgpack")
    config = IQLConfig(**{**TINY, "num_chunks": 1, "frozen": (("prey", path),)})
    result = run_training(config)
    assert set(result.policies) == {"predator"}
    assert np.isfinite(result.metrics["loss/predator"][:, -1]).all()


# -- bad input ------------------------------------------------------------------------
@pytest.mark.parametrize(
    "fields, message",
    [
        (dict(total_steps=0), "total_steps must be > 0"),
        (dict(total_steps=-5), "total_steps must be > 0"),
        (dict(num_envs=0), "num_envs must be > 0"),
        (dict(buffer_size=1000), "buffer_size (1000) must be a multiple"),
        (dict(total_steps=10), "total_steps (10) must be at least"),
        (dict(gamma=1.5), "gamma must be in [0, 1], got 1.5"),
        (dict(algo="mappo"), "algo must be one of"),
        (dict(frozen=(("blue", "random"),)), None),
    ],
)
def test_bad_iql_configs(fields, message):
    if message is None:  # valid config, invalid team: caught when the run is built
        with pytest.raises(InvalidParameterError, match="frozen team 'blue'"):
            run_training(IQLConfig(**{**TINY, **fields}))
        return
    with pytest.raises(InvalidParameterError) as error:
        IQLConfig(**{**TINY, **fields})
    assert message in str(error.value)


def test_bad_mappo_configs():
    with pytest.raises(
        InvalidParameterError, match="num_minibatches \\(3\\) must divide"
    ):
        MAPPOConfig(num_minibatches=3)
    with pytest.raises(InvalidParameterError, match="unknown MAPPOConfig field 'lrr'"):
        make_config("mappo", lrr=1.0)
    with pytest.raises(UnknownNameError, match="unknown algorithm 'dqn'"):
        make_config("dqn")
    with pytest.raises(UnknownNameError, match="unknown preset"):
        preset("exp9")


def test_checkpoint_errors(uninterrupted, tmp_path):
    state = uninterrupted.out / checkpoint.STATE_FILE
    config = IQLConfig(**TINY)
    with pytest.raises(CheckpointError, match="algorithm 'oa_iql', not 'mappo'"):
        checkpoint.read_train_state(state, algo="mappo", config={}, template=None)
    with pytest.raises(CheckpointError, match="another config"):
        checkpoint.read_train_state(
            state, algo="oa_iql", config={**config.to_dict(), "lr": 1.0}, template=None
        )
    garbage = tmp_path / "garbage.msgpack"
    garbage.write_bytes(b"\x00not msgpack at all\xff" * 10)
    with pytest.raises(CheckpointError, match="not a readable mopa checkpoint"):
        mopa.load_policy(garbage)
    with pytest.raises(CheckpointError, match="not a mopa-policy file"):
        mopa.load_policy(state)
    with pytest.raises(CheckpointError, match="no checkpoint at"):
        mopa.load_policy(tmp_path / "missing.msgpack")
    with pytest.raises(InvalidParameterError, match="seed must be in"):
        mopa.load_policy(uninterrupted.out, seed=5)


def test_every_preset_is_a_valid_config():
    assert len(PRESETS) >= 20
    for name, (description, config) in PRESETS.items():
        assert description and config.total_steps > 0, name
        # Configs validate at construction; the game and its fields must exist too.
        mopa.envs.make(config.env, **dict(config.env_overrides))
    assert preset("exp4_mappo_random").env_overrides == (
        ("resource_placement", "random"),
    )
    assert preset("exp1_oa_iql_rnn").rnn and preset("exp1_oa_iql_rnn").num_seeds == 1
    assert preset("exp6_mappo_belief").env == "tag_intent"


@pytest.mark.slow
def test_seeds_sharded_over_devices_compute_what_one_device_computes(uninterrupted):
    """The test session exposes 3 CPU devices, so the run of 2 seeds above was
    sharded over 2 of them; the same chunks on one device give the same numbers."""
    from mopa.algos.driver import (
        chunk_bounds,
        chunk_length,
        compile_chunk,
        seed_sharding,
    )
    from mopa.algos.registry import trainer_factory
    from mopa.algos.trainer import seed_keys
    from mopa.core.devices import dividing_devices

    assert len(jax.devices()) == 3
    assert [len(dividing_devices(n)) for n in (1, 2, 3, 4, 5, 6)] == [1, 2, 3, 2, 1, 3]
    assert seed_sharding(1) is None and seed_sharding(2) is not None
    config = IQLConfig(**TINY)
    trainer = trainer_factory(config)(config, None)
    carry = jax.jit(jax.vmap(trainer.init))(seed_keys(config))
    run_chunk = compile_chunk(trainer, chunk_length(config))
    rows = []
    for _, count in chunk_bounds(config):
        carry, chunk = run_chunk(carry, count)
        rows.append(np.asarray(chunk["loss/predator"])[:, :count])
    one_device = np.concatenate(rows, 1)
    np.testing.assert_allclose(
        uninterrupted.metrics["loss/predator"], one_device, rtol=1e-5, atol=1e-6
    )
    sharded = uninterrupted.policies["predator"][1]
    alone = trainer.policies(carry)["predator"][1]
    for a, b in zip(jax.tree.leaves(sharded), jax.tree.leaves(alone), strict=True):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-5, atol=1e-6)


@pytest.mark.slow
def test_a_run_too_large_for_the_machine_is_refused_before_its_folder(
    tmp_path, monkeypatch
):
    """The state of every seed is sized before any of it is allocated, the
    compiled chunk's working memory before it runs; either too large for the
    machine refuses the run naming the inputs, and leaves no folder."""
    from mopa.algos import driver
    from mopa.algos.trainer import seed_keys
    from mopa.core import checks

    config = IQLConfig(**TINY)
    trainer = driver.trainer_factory(config)(config, None)
    state = jax.eval_shape(jax.vmap(trainer.init), seed_keys(config))
    state_bytes = checks.tree_bytes(state)
    assert state_bytes > 640 * 8  # the replay buffers of two seeds, at least
    out = tmp_path / "run"
    # Memory for one seed's state but not both: num_seeds is named.
    monkeypatch.setattr(checks, "host_memory_bytes", lambda: state_bytes * 3 // 4)
    with pytest.raises(InvalidParameterError, match="num_seeds is too large"):
        run_training(config, out=out)
    monkeypatch.setattr(checks, "host_memory_bytes", lambda: state_bytes // 4)
    with pytest.raises(InvalidParameterError, match="the state of one seed"):
        run_training(config, out=out)
    # Room for the state, none for the chunk's working memory.
    monkeypatch.setattr(checks, "host_memory_bytes", lambda: state_bytes)
    with pytest.raises(InvalidParameterError, match="num_envs x num_steps"):
        run_training(config, out=out)
    assert not out.exists()
