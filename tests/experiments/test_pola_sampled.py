"""The sampled POLA experiments (``pola-ipd``, ``pola-coin``): seeds trained
together, vmapped, give each seed's own run; the results carry every seed."""

import dataclasses
import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from mopa.algos.pola.sampled import (
    Metrics,
    SeedRun,
    chunk_length,
    env_steps,
    make_train,
    summarise_seeds,
    train_seeds,
)
from mopa.core.stages import Stages
from mopa.experiments.pola import (
    CPU_SAMPLED,
    PAPER_SAMPLED,
    SampledExperimentConfig,
    _tiny,
    run_sampled,
)


@pytest.mark.parametrize(
    ("num_updates", "expected"),
    # 1,000 -> 100 (10 chunks); 150 -> 15; 251 is prime -> 1; 2 -> 1; 20 -> 2
    [(1000, 100), (150, 15), (251, 1), (2, 1), (20, 2)],
)
def test_chunk_length_divides_the_run(num_updates, expected):
    assert chunk_length(num_updates) == expected


@pytest.mark.slow
@pytest.mark.parametrize(
    # POLA-OM covers POLA-DiCE's update and adds the opponent models
    ("env", "method"),
    [("ipd", "pola_om"), ("coin", "lola_dice")],
)
def test_vmapped_seeds_equal_single_runs(env, method):
    config = _tiny(CPU_SAMPLED[env][method])
    keys = jax.random.split(jax.random.key(3), 3)
    done = []
    trained = train_seeds(config, keys, lambda n, chunk: done.append(n))
    assert done == [1, 2]  # n_update 2 -> chunks of 1 update
    train = jax.jit(make_train(config))
    for s in range(3):
        single = train(keys[s])
        for name, a, b in zip(single._fields, single, trained.metrics, strict=True):
            np.testing.assert_allclose(
                np.asarray(a), b[s], rtol=1e-5, atol=1e-5, err_msg=name
            )
    # different seeds are different runs
    assert not np.allclose(trained.metrics.vs_alld[0], trained.metrics.vs_alld[1])
    assert trained.cpu_s > 0 and trained.wall_s > 0


@pytest.mark.slow
def test_run_sampled_reports_every_seed_and_its_interval():
    # The Coin Game's LOLA-DiCE at the tiny sizes and three seeds: the programs
    # test_vmapped_seeds_equal_single_runs compiled (loaded, not compiled again).
    cpu = CPU_SAMPLED["coin"]
    config = SampledExperimentConfig(
        env="coin",
        methods=("lola_dice",),
        num_seeds=3,
        **{m: _tiny(c) for m, c in cpu.items()},
    )
    lines = []
    results = run_sampled(config, None, lines.append)
    entry = results["lola_dice"]
    assert entry["num_seeds"] == 3
    for name in ("vs_each_other", "vs_alld", "own_coin_proportion"):
        per_seed = np.asarray(entry["per_seed"][name])
        assert per_seed.shape == (3,)
        key = "own_coin_proportion" if name == "own_coin_proportion" else name
        assert entry[key] == pytest.approx(per_seed.mean())
        # 95% Student-t half-width over 3 seeds: t_{0.975, 2} = 4.303
        assert entry["ci95"][name] == pytest.approx(
            4.303 * per_seed.std(ddof=1) / np.sqrt(3), rel=1e-3
        )
    assert 0.0 <= entry["own_coin_proportion"] <= 1.0
    assert len(entry["curves"]["vs_each_other"]) == config.lola_dice.n_update
    assert entry["cpu_s_per_outer_step_per_seed"] > 0
    # the stage starts, one progress line per chunk (2 updates of 1), a summary,
    # the stage ends
    assert lines[0] == "[train_lola_dice] running"
    assert len(lines) == 5 and lines[-2].startswith("lola_dice: 3 seeds")
    assert lines[-1].startswith("[train_lola_dice] done in")
    # seed s of the experiment is make_train on its own key
    key = jax.random.fold_in(jax.random.key(config.seed), 2)
    single = jax.jit(make_train(config.lola_dice))(key)
    np.testing.assert_allclose(
        jnp.mean(single.vs_alld[-1]), entry["per_seed"]["vs_alld"][2], atol=1e-5
    )


@pytest.mark.slow
def test_a_rerun_reuses_the_methods_whose_config_did_not_change(tmp_path):
    # POLA-OM's three seeds are a program test_vmapped_seeds_equal_single_runs
    # compiled; LOLA-DiCE's, before and after its change, are new.
    tiny = {m: _tiny(c) for m, c in CPU_SAMPLED["ipd"].items()}
    config = SampledExperimentConfig(
        env="ipd", methods=("pola_om", "lola_dice"), num_seeds=3, **tiny
    )
    first = run_sampled(config, None, lambda line: None, Stages(tmp_path))
    lines = []
    again = run_sampled(config, None, lines.append, Stages(tmp_path, lines.append))
    assert again == first
    assert lines == [
        "[train_pola_om] reused (finished earlier with this config)",
        "[train_lola_dice] reused (finished earlier with this config)",
    ]
    # a new LOLA-DiCE setting retrains LOLA-DiCE only, with its own numbers
    changed = SampledExperimentConfig(
        env="ipd",
        methods=("pola_om", "lola_dice"),
        num_seeds=3,
        **{**tiny, "lola_dice": dataclasses.replace(tiny["lola_dice"], lr_out=0.3)},
    )
    lines.clear()
    third = run_sampled(changed, None, lines.append, Stages(tmp_path, lines.append))
    assert third["pola_om"] == first["pola_om"]
    assert third["lola_dice"]["per_seed"] != first["lola_dice"]["per_seed"]
    assert lines[0].startswith("[train_pola_om] reused")
    assert "[train_lola_dice] running" in lines
    # the seeds (base seed and count) are part of a stage's config
    stored = json.loads((tmp_path / "train_pola_om" / "stage.json").read_text())
    assert stored["config"]["key_offsets"] == [0, 1, 2]
    assert stored["config"]["seed"] == 0


def test_a_runs_summary_by_hand():
    """Three seeds, two updates: the last update's figures averaged over the two
    agents, their mean and Student-t half-width over the seeds, the curves and
    the environment steps."""
    config = dataclasses.replace(
        PAPER_SAMPLED["ipd"]["pola_dice"], n_update=2, outer_steps=3
    )
    last = np.array([[0.5, 1.5], [2.0, 2.0], [3.0, 3.0]])  # [S, 2] seed means 1, 2, 3
    first = np.zeros((3, 2))
    pair = np.stack([first, last], 1)  # [S, U, 2]
    metrics = Metrics(
        vs_each_other=pair,
        vs_alld=-pair,
        vs_allc=pair + 1.0,
        vs_tft=pair,
        own_coin=np.zeros((3, 2)),
        model_accuracy=np.zeros((3, 2, 2)),
    )
    run = SeedRun(metrics, compile_s=1.0, wall_s=2.0, cpu_s=36.0)
    entry = summarise_seeds(run, config)
    # mean 2, s = 1: half-width t(0.975, 2) / sqrt(3) = 4.302653 / 1.732051
    assert entry["vs_each_other"] == 2.0 and entry["vs_alld"] == -2.0
    assert entry["vs_allc"] == 3.0
    assert entry["ci95"]["vs_each_other"] == pytest.approx(2.484138, abs=1e-6)
    assert entry["per_seed"]["vs_tft"] == [1.0, 2.0, 3.0]
    assert entry["own_coin_proportion"] is None  # the IPD has no coins
    assert entry["curves"]["outer_steps"] == [3, 6]
    assert entry["curves"]["vs_each_other"] == [0.0, 2.0]
    # 36 CPU seconds over 3 seeds x 2 updates x 3 outer steps
    assert entry["cpu_s_per_outer_step_per_seed"] == 2.0
    # per update 2 x 3 outer steps x (2 inner + 1) rollouts = 18, of 2000 x 50 steps
    assert entry["env_steps_per_run"] == env_steps(config) == 18 * 2 * 2000 * 50
