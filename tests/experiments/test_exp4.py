"""``mopa experiment exp4`` end to end on its quick profile: files, the results
schema and stage reuse (the quick budget learns nothing, so no numbers)."""

import json
import shutil

import jax
import numpy as np
import pytest

from mopa.envs import make
from mopa.experiments import run_experiment
from mopa.experiments.exp4 import Exp4Config
from mopa.opponent.metrics import subsampled_probe
from mopa.opponent.representations import SQUARE_SYMMETRIES, symmetrise


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("exp4") / "run"
    run_experiment("exp4", "quick", out)
    return out


@pytest.mark.slow
def test_quick_run_writes_files_and_schema(quick_run):
    for name in ("results.json", "results.md", "config.json", "exp4_probe.png"):
        assert (quick_run / name).is_file(), name
    results = json.loads((quick_run / "results.json").read_text())
    for name in (
        "probe_raw_placement",
        "probe_occupancy_placement",
        "probe_radius_placement",
        "probe_raw_symmetrised_placement",
    ):
        assert isinstance(results[name], float) and 0.0 <= results[name] <= 1.0
    # one seed: the raw probe within it is the raw probe (same episodes, same split)
    assert results["probe_raw_by_seed"] == [results["probe_raw_placement"]]
    # The random placement flips a fair coin per episode: both layouts occur.
    assert 0.0 < results["placement_share_corners"] < 1.0
    assert results["num_episodes"] == 40
    by_size = results["probe_raw_by_episodes"]
    assert list(by_size) == ["20"] and by_size["20"]["repeats"] == 3
    assert 0.0 <= by_size["20"]["p05"] <= by_size["20"]["mean"] <= 1.0
    assert "raw-trajectory placement probe" in (quick_run / "results.md").read_text()
    # The headline is the first trainer's; every trainer has its own row.
    assert results["algo"] == "iql_jaxmarl"
    assert list(results["by_algo"]) == ["iql_jaxmarl", "iql"]
    for row in results["by_algo"].values():
        assert row["num_episodes"] == 40 and row["captures_per_episode"] >= 0.0
    headline = results["by_algo"]["iql_jaxmarl"]
    assert headline["probe_raw_placement"] == results["probe_raw_placement"]
    assert headline["captures_per_episode"] == results["captures_per_episode"]
    # Every trainer also ran at the research's first collect reward, 5.
    assert list(results["by_collect_reward"]) == ["20", "5"]
    assert results["by_collect_reward"]["20"] == results["by_algo"]
    at_5 = results["by_collect_reward"]["5"]
    assert list(at_5) == ["iql_jaxmarl", "iql"]
    assert at_5["iql"]["num_episodes"] == 40
    assert "| `iql` | 5 |" in (quick_run / "results.md").read_text()


@pytest.mark.slow
def test_a_second_run_reuses_every_stage(quick_run, tmp_path):
    out = tmp_path / "again"
    shutil.copytree(quick_run, out)
    before = json.loads((out / "results.json").read_text())
    lines = []
    results = run_experiment("exp4", "quick", out, progress=lines.append)
    for stage in ("train", "data", "probe"):
        for name in ("iql_jaxmarl", "iql", "iql_jaxmarl_collect5", "iql_collect5"):
            line = f"[{stage}_{name}] reused (finished earlier with this config)"
            assert line in lines, line
    assert json.dumps(results, sort_keys=True) == json.dumps(before, sort_keys=True)


def test_config_names_a_bad_field():
    with pytest.raises(Exception, match="test_fraction"):
        Exp4Config(test_fraction=1.5)


def test_config_names_a_bad_trainer():
    with pytest.raises(Exception, match="unknown 'ppo'"):
        Exp4Config(compare=("ppo",))
    with pytest.raises(Exception, match="must not repeat"):
        Exp4Config(algo="iql", compare=("mappo", "iql"))
    with pytest.raises(Exception, match="also_collect_rewards"):
        Exp4Config(also_collect_rewards=(20.0,))
    with pytest.raises(Exception, match="also_collect_rewards"):
        Exp4Config(also_collect_rewards=(-1.0,))


def test_the_trainers_differ_only_by_their_settings():
    """Each trainer's run differs from the others only in the algorithm settings:
    the game, its overrides and the budget are shared."""
    from mopa.algos.presets import JAXMARL_MPE_IQL, preset

    ours, jaxmarl = preset("exp4_iql_random"), preset("exp4_iql_jaxmarl_random")
    assert jaxmarl == ours.replace(**JAXMARL_MPE_IQL)
    assert jaxmarl.lr == 0.005 and jaxmarl.hidden == (64, 64)


def test_config_names_bad_subsample_fields():
    with pytest.raises(Exception, match="subsample_sizes"):
        Exp4Config(subsample_sizes=(4,))
    with pytest.raises(Exception, match="subsample_repeats"):
        Exp4Config(subsample_repeats=0)


def test_subsampled_probe_scores_random_subsets():
    rng = np.random.default_rng(1)
    labels = np.repeat([0, 1], [120, 80])  # 60% / 40%
    noise = rng.normal(size=(200, 6))
    config = Exp4Config(subsample_sizes=(50, 100, 500), subsample_repeats=5)
    # the label written into a feature: every subset's probe is perfect
    separable = np.concatenate([noise, 3.0 * labels[:, None]], 1)
    probe = dict(
        sizes=config.subsample_sizes,
        repeats=config.subsample_repeats,
        test_fraction=config.test_fraction,
        seed=config.seed,
    )
    perfect = subsampled_probe(separable, labels, **probe)
    assert list(perfect) == ["50", "100"]  # 500 > 200 episodes: skipped
    for size in ("50", "100"):
        assert perfect[size] == {"mean": 1.0, "std": 0.0, "p05": 1.0, "repeats": 5}
    # features that carry no label: the probe is near chance on average
    blind = subsampled_probe(noise, labels, **probe)
    assert 0.3 < blind["100"]["mean"] < 0.75
    assert blind["100"]["std"] > 0.0


def test_the_square_symmetries_keep_both_placements_and_symmetrise_draws_them_all():
    for placement in ("circle", "corners"):
        env, params = make("tag_resources", resource_placement=placement)
        layout = np.asarray(env.reset(jax.random.key(0), params)[1].resource_pos)
        for matrix in SQUARE_SYMMETRIES:
            mapped = layout @ matrix.T
            # the same set of resource positions, in some order
            distances = np.linalg.norm(mapped[:, None] - layout[None], axis=-1)
            np.testing.assert_allclose(distances.min(axis=1), 0.0, atol=1e-6)
    assert len({m.tobytes() for m in SQUARE_SYMMETRIES.astype(int)}) == 8
    rng = np.random.default_rng(0)
    positions = rng.normal(size=(400, 5, 2))
    mapped = symmetrise(positions, rng)
    np.testing.assert_allclose(
        np.linalg.norm(mapped, axis=-1), np.linalg.norm(positions, axis=-1)
    )
    # each trajectory is mapped by one matrix, all 8 occur
    used = set()
    for before, after in zip(positions, mapped, strict=True):
        matches = [
            i
            for i, m in enumerate(SQUARE_SYMMETRIES)
            if np.allclose(before @ m.T, after)
        ]
        assert len(matches) == 1
        used.add(matches[0])
    assert used == set(range(8))
    with pytest.raises(Exception, match="shape"):
        symmetrise(positions[..., :1], rng)
