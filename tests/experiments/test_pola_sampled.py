"""The sampled POLA experiments (``pola-ipd``, ``pola-coin``): seeds trained
together, vmapped, give each seed's own run; the results carry every seed."""

import dataclasses
import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from mopa.algos.pola.sampled import chunk_length, make_train, train_seeds
from mopa.core.stages import Stages
from mopa.experiments.pola import (
    CPU_SAMPLED,
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
