"""The league's backends: a tournament and an evaluation sweep give the same
numbers, bit for bit, in this process and on a local Ray instance; the Ray
backend without Ray installed is a one-line error naming the extra.

The players are small actor policies on ``tag`` (20-step episodes), each biased
towards a different move so that cells differ
(:func:`mopa.bench.ray_speed.write_biased_policy`); every evaluation here has the same
shapes (8 padded episodes, a checkpoint opponent), so each process compiles one
program.
"""

import json
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from mopa.bench.ray_speed import write_biased_policy
from mopa.cli.main import main
from mopa.errors import CheckpointError, InvalidParameterError
from mopa.league import TrainingConfig, evaluate_detailed, run_episodes
from mopa.league.backend import (
    InProcessBackend,
    JaxSettings,
    eval_job,
    evaluate_sweep,
    league_tournament,
    make_backend,
    seed_configs,
    train_runs,
)
from mopa.league.evaluation import load_league_policy

GAME = dict(game="tag", hidden=(16,), game_kwargs={"max_steps": 20})


@pytest.fixture(scope="module")
def players(tmp_path_factory):
    root = tmp_path_factory.mktemp("players")
    predators = [
        write_biased_policy(root / f"predator{m}.msgpack", "predator", m, m, **GAME)
        for m in (1, 3)
    ]
    prey = [
        write_biased_policy(root / f"prey{m}.msgpack", "prey", m, 10 + m, **GAME)
        for m in (0, 2, 4)
    ]
    return predators, prey


@pytest.mark.slow
def test_tournament_is_identical_in_process_and_on_ray(players, ray_backend):
    predators, prey = players
    kwargs = dict(n_episodes=8, seed=5, deterministic=False)
    here = league_tournament(predators, prey, backend=InProcessBackend(), **kwargs)
    on_ray = league_tournament(predators, prey, backend=ray_backend, **kwargs)
    assert on_ray.returns.dtype == here.returns.dtype == np.float32  # x64 off
    np.testing.assert_array_equal(on_ray.outcomes, here.outcomes)
    np.testing.assert_array_equal(on_ray.returns, here.returns)
    assert on_ray.results == here.results
    # The cells differ and both outcomes occur: the comparison is not vacuous.
    assert len({tuple(r) for r in here.returns.reshape(6, 8).tolist()}) > 1
    assert {-1, 1} <= set(np.unique(here.outcomes).tolist())
    # Pursuit: the prey never draws; payoff = (wins - losses) / 8 per cell.
    wins = np.array([[r.wins for r in row] for row in here.results])
    losses = np.array([[r.losses for r in row] for row in here.results])
    assert (wins + losses == 8).all()
    np.testing.assert_array_equal(here.payoff(), (wins - losses) / 8)
    # A cell is the library's own evaluation of that pair, whatever the split.
    for r, predator in enumerate(predators):
        for c, opponent in enumerate(prey):
            direct = evaluate_detailed(predator, opponent=opponent, **kwargs)
            assert here.results[r][c] == direct
    episodes = run_episodes(load_league_policy(predators[1]), prey[2], 8, 5, False)
    np.testing.assert_array_equal(here.returns[1, 2], episodes["return"])


@pytest.mark.slow
def test_sweep_is_identical_in_process_and_on_ray(players, ray_backend):
    predators, prey = players
    # (Sampled actions throughout: greedy play would compile a second program.)
    jobs = [
        eval_job(predators[0], prey[1], n_episodes=8, seed=3, deterministic=False),
        eval_job(predators[1], prey[0], n_episodes=5, seed=0, deterministic=False),
        eval_job(predators[0], prey[1], n_episodes=4, seed=5, deterministic=False),
        eval_job(predators[1], prey[2], n_episodes=7, seed=11, deterministic=False),
        eval_job(predators[0], prey[2], n_episodes=8, seed=2, deterministic=False),
    ]
    here = evaluate_sweep(jobs)
    on_ray = evaluate_sweep(jobs, ray_backend)
    for a, b in zip(here, on_ray, strict=True):
        assert a.job == b.job and a.result == b.result
        assert a.episodes.keys() == b.episodes.keys()
        for key in a.episodes:
            np.testing.assert_array_equal(a.episodes[key], b.episodes[key])
    assert [o.result.n_episodes for o in on_ray] == [8, 5, 4, 7, 8]
    # Episode i uses seed + i: seeds 5..8 are episodes 2..5 of the seeds-3 job.
    np.testing.assert_array_equal(
        on_ray[2].episodes["return"], on_ray[0].episodes["return"][2:6]
    )


@pytest.mark.slow
def test_cli_tournament_on_ray_matches_the_library(players, ray_backend, tmp_path):
    predators, prey = players
    out = tmp_path / "table.json"
    argv = ["league", "tournament", "--players", *predators, "--opponents", *prey]
    argv += ["--n-episodes", "8", "--seed", "5", "--stochastic", "--out", str(out)]
    assert main([*argv, "--backend", "ray", "--ray-workers", "2"]) == 0
    data = json.loads(out.read_text())
    here = league_tournament(predators, prey, 8, 5, deterministic=False)
    assert data["outcomes"] == here.outcomes.tolist()
    np.testing.assert_array_equal(np.float32(data["returns"]), here.returns)
    nash = data["meta_nash"]
    assert sum(nash["players"]) == pytest.approx(1.0)
    assert sum(nash["opponents"]) == pytest.approx(1.0)


def test_a_worker_error_arrives_as_itself(players, ray_backend, tmp_path):
    damaged = tmp_path / "damaged.msgpack"
    damaged.write_bytes(b"not a checkpoint")
    jobs = [eval_job(players[0][0], players[1][0], 8, deterministic=False)]
    jobs.append(eval_job(damaged, players[1][0], 8))
    for backend in (InProcessBackend(), ray_backend):
        with pytest.raises(CheckpointError, match="damaged.msgpack"):
            evaluate_sweep(jobs, backend)


def test_ray_backend_without_ray_names_the_extra(players, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` now fails
    with pytest.raises(InvalidParameterError, match=r"pip install mopa\[ray\]"):
        make_backend("ray")
    argv = ["league", "evaluate", players[0][0], "--opponent", players[1][0]]
    assert main([*argv, "--backend", "ray"]) == 2
    err = capsys.readouterr().err
    assert err.strip().count("\n") == 0 and "pip install mopa[ray]" in err
    assert "Traceback" not in err


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--backend", "dask"], "unknown --backend 'dask'"),
        (["--ray-workers", "2"], "need --backend ray"),
        (["--backend", "ray", "--ray-workers", "0"], "--ray-workers must be >= 1"),
        (["--n-episodes", "0"], "--n-episodes must be >= 1"),
        (["--opponent", "scripted_l9"], "unknown opponent 'scripted_l9'"),
    ],
)
def test_evaluate_bad_input_is_one_line(players, extra, message, capsys):
    argv = ["league", "evaluate", players[0][0], "--opponent", players[1][0]]
    assert main([*argv, *extra]) == 2
    err = capsys.readouterr().err
    assert err.startswith("mopa: error: ") and message in err
    assert err.strip().count("\n") == 0


def test_missing_checkpoint_and_seed_runs_are_errors(tmp_path, capsys):
    argv = ["league", "tournament", "--players", str(tmp_path / "none.msgpack")]
    assert main([*argv, "--opponents", "random"]) == 2
    assert "no checkpoint at" in capsys.readouterr().err
    config = TrainingConfig(
        **GAME, opponent="random", run_id="learner", checkpoint_dir=str(tmp_path)
    )
    assert [c.run_id for c in seed_configs(config, [3, 0])] == [
        "learner-s3",
        "learner-s0",
    ]
    assert [c.seed for c in seed_configs(config, [3, 0])] == [3, 0]
    with pytest.raises(InvalidParameterError, match="seeds must differ"):
        seed_configs(config, [1, 1])
    with pytest.raises(InvalidParameterError, match="two runs named 'learner'"):
        train_runs([config, config.replace(seed=1)])
    with pytest.raises(InvalidParameterError, match="resume needs"):
        train_runs([config.replace(checkpoint_dir=None)], resume=True)


def test_jax_settings_are_checked():
    here = JaxSettings.current()
    assert here == JaxSettings("cpu", False, jax.local_device_count())
    here.apply()  # the same settings: nothing to change
    with pytest.raises(RuntimeError, match="a worker runs JAX with"):
        JaxSettings("cpu", False, here.num_devices + 3).apply()
    assert jnp.zeros(()).dtype == jnp.float32


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--workers", "0"], "--workers must be >= 1"),
        (["--episodes", "0"], "--episodes must be >= 1"),
    ],
)
def test_bench_ray_bad_input_is_one_line(extra, message, capsys, tmp_path):
    out = tmp_path / "bench.json"
    assert main(["bench", "ray", "--json", str(out), *extra]) == 2
    err = capsys.readouterr().err
    assert err.startswith("mopa: error: ") and message in err
    assert err.strip().count("\n") == 0
    assert not out.exists()
