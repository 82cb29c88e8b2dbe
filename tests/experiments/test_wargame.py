"""The wargame experiments (``wargame_ladder``, ``wargame_generalization``,
``wargame_terrain``) on their quick profiles: files and schema, report rows,
held-out scenarios that really differ, fine-tuning that starts from the trained
weights, and the intervals on hand-worked values.

Every run of the quick profiles has the same league settings, so the three
experiments share one compiled training chunk and one compiled evaluation.
"""

import dataclasses
import json

import jax
import numpy as np
import pytest

from mopa.errors import InvalidParameterError
from mopa.experiments import wargame, wargame_transfer
from mopa.league import CurriculumStage, evaluate_detailed, load_league_policy, train
from mopa.league.training import Callback
from mopa.runs.registry import get_preset, run_experiment

NAMES = ("wargame_ladder", "wargame_generalization", "wargame_terrain")


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("wargame")
    out = {}
    for name in NAMES:
        results = run_experiment(name, "quick", out=root / name)
        out[name] = (root / name, results)
    return out


def stage_result(folder, stage):
    return json.loads((folder / "stages" / stage / "stage.json").read_text())


@pytest.mark.slow
def test_quick_profiles_write_their_files(runs):
    for name in NAMES:
        folder, results = runs[name]
        for file in ("results.json", "config.json", "meta.json", "results.md"):
            assert (folder / file).is_file(), (name, file)
        assert json.loads((folder / "results.json").read_text()) == json.loads(
            json.dumps(results)
        )
        described = json.loads((folder / "config.json").read_text())
        assert (described["experiment"], described["preset"]) == (name, "quick")
        meta = json.loads((folder / "meta.json").read_text())
        assert meta["git_sha"] and meta["versions"]["jax"] == jax.__version__
        assert "NaN" not in (folder / "results.json").read_text()


def check_summary(summary, n):
    assert summary["wins"] + summary["draws"] + summary["losses"] == summary["n"] == n
    for name in ("win", "draw", "loss"):
        count = summary[{"win": "wins", "draw": "draws", "loss": "losses"}[name]]
        assert summary[f"{name}_rate"] == count / n
        low, high = summary[f"{name}_ci95"]
        assert 0.0 <= low <= summary[f"{name}_rate"] <= high <= 1.0


@pytest.mark.slow
def test_ladder_report_has_every_level_beside_the_reference(runs):
    folder, results = runs["wargame_ladder"]
    config = get_preset("wargame_ladder", "quick")
    assert list(results["levels"]) == list(wargame.LEVELS)
    assert results["training"]["env_steps"] == config.training.total_timesteps
    lines = (folder / "results.md").read_text().splitlines()
    for level, summary in results["levels"].items():
        check_summary(summary, config.n_episodes)
        assert summary["target_met"] == (summary["win_rate"] >= wargame.TARGETS[level])
        row = [line for line in lines if line.startswith(f"| {level} |")]
        assert len(row) == 1
        cells = [c.strip() for c in row[0].strip("|").split("|")]
        assert cells[1:4] == [str(summary[k]) for k in ("wins", "draws", "losses")]
        assert cells[-1] == f"{wargame.REFERENCE_PPO[level]:.2f}"
    assert results["all_targets_met"] == all(
        s["target_met"] for s in results["levels"].values()
    )


@pytest.mark.slow
def test_ladder_ppo_starts_from_the_cloned_teacher(runs):
    folder, results = runs["wargame_ladder"]
    config = get_preset("wargame_ladder", "quick")
    cloned = stage_result(folder, "clone")["result"]["checkpoint"]
    started = json.loads(
        (folder / "stages" / "train" / "stage_config.json").read_text()
    )
    assert started["config"]["init_checkpoint"] == cloned
    assert (
        started["config"]["critic_warmup_chunks"] == config.clone.critic_warmup_chunks
    )
    clone = results["clone"]
    assert 0.0 <= clone["teacher_agreement"] <= 1.0 and clone["samples"] > 0
    lines = (folder / "results.md").read_text().splitlines()
    assert list(clone["levels"]) == list(wargame.LEVELS)
    for level, summary in clone["levels"].items():
        check_summary(summary, config.n_episodes)
        row = [line for line in lines if line.startswith(f"| {level} (clone) |")]
        assert len(row) == 1
    again = evaluate_detailed(
        cloned, config.n_episodes, seed=config.eval_seed, opponent="L5"
    )
    assert (again.wins, again.draws, again.losses) == tuple(
        clone["levels"]["L5"][k] for k in ("wins", "draws", "losses")
    )


def test_ladder_clone_needs_the_terrain_features():
    plain = wargame.LADDER_TRAINING.replace(game_kwargs={"reward_received": 10.0})
    with pytest.raises(InvalidParameterError, match="terrain_obs"):
        wargame.WargameLadderConfig(training=plain, clone=wargame.CloneConfig())


@pytest.mark.slow
def test_ladder_evaluation_is_the_league_evaluation(runs):
    folder, results = runs["wargame_ladder"]
    config = get_preset("wargame_ladder", "quick")
    checkpoint = stage_result(folder, "train")["result"]["checkpoint"]
    again = evaluate_detailed(
        checkpoint, config.n_episodes, seed=config.eval_seed, opponent="L4"
    )
    summary = results["levels"]["L4"]
    assert (again.wins, again.draws, again.losses) == (
        summary["wins"],
        summary["draws"],
        summary["losses"],
    )


@pytest.mark.slow
def test_heldout_scenarios_differ_from_the_training_ones(runs):
    _, results = runs["wargame_generalization"]
    train_set = results["scenarios"]["train"]
    heldout = results["scenarios"]["heldout"]
    assert set(train_set).isdisjoint(heldout)
    for held in heldout.values():
        for trained in train_set.values():
            assert held != trained
            assert held["blue_x_low"] != trained["blue_x_low"]
    # Scenarios are reproducible settings of the game.
    assert wargame_transfer.procedural_scenario(1000) == heldout["s1000"]
    config = get_preset("wargame_generalization", "quick")
    with pytest.raises(InvalidParameterError, match="also training"):
        dataclasses.replace(config, heldout_scenarios=config.train_scenarios[:1])


@pytest.mark.slow
def test_generalization_report_rows(runs):
    folder, results = runs["wargame_generalization"]
    config = get_preset("wargame_generalization", "quick")
    text = (folder / "results.md").read_text()
    for seed in config.heldout_scenarios:
        row = results["heldout"][f"s{seed}"]
        for policy, label in (
            ("zero_shot", "zero-shot"),
            ("fine_tuned", "fine-tuned"),
            ("specialist", "specialist"),
        ):
            check_summary(row[policy], config.n_episodes)
            assert f"| s{seed} | {label} | {row[policy]['wins']} |" in text
    pooled = results["pooled"]["training_scenarios"]
    check_summary(pooled, config.n_episodes * len(config.train_scenarios))
    assert "| training scenarios | generalist |" in text


@pytest.mark.slow
def test_fine_tuning_starts_from_the_trained_weights(runs):
    folder, _ = runs["wargame_generalization"]
    generalist = stage_result(folder, "generalist")["result"]["checkpoint"]
    started = json.loads(
        (folder / "stages" / "finetune_1000" / "stage_config.json").read_text()
    )
    assert started["config"]["init_checkpoint"] == generalist
    assert started["config"]["game_kwargs"]  # the held-out scenario's settings

    class FirstWeights(Callback):
        def on_train_start(self, run):
            self.params = run.policy().params

    config = get_preset("wargame_generalization", "quick")
    run = config.on_scenario(1000, config.finetune_steps, "check", generalist)
    first = FirstWeights()
    train(run, callbacks=[first])
    trained = load_league_policy(generalist).params
    for a, b in zip(
        jax.tree.leaves(first.params), jax.tree.leaves(trained), strict=True
    ):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    with pytest.raises(FileNotFoundError):
        train(run.replace(init_checkpoint=str(folder / "missing.msgpack")))


def test_scenarios_that_change_the_game_structure_fail_loudly():
    config = get_preset("wargame_generalization", "quick").generalist()
    bad = CurriculumStage(name="bigger", game_kwargs={"num_forests": 9})
    with pytest.raises(InvalidParameterError, match="structure"):
        train(config.replace(scenarios=(*config.scenarios, bad)))


@pytest.mark.slow
def test_terrain_report_and_drops(runs):
    folder, results = runs["wargame_terrain"]
    config = get_preset("wargame_terrain", "quick")
    table = results["evaluations"]
    for summary in table.values():
        check_summary(summary, config.n_episodes)
    base = table["source_on_source"]["win_rate"]
    for drop, row in (
        ("zero_shot", "source_on_target"),
        ("fine_tuned", "fine_tuned_on_target"),
        ("scratch", "scratch_on_target"),
    ):
        entry = results["drops"][drop]
        assert entry["diff"] == pytest.approx(base - table[row]["win_rate"])
        assert entry["ci95"][0] <= entry["diff"] <= entry["ci95"][1]
    assert results["source"] == {"flat_terrain": True}
    assert results["target"]["flat_terrain"] is False
    text = (folder / "results.md").read_text()
    for label in ("trained on source (zero-shot)", "fine-tuned on target"):
        assert f"| {label} | target |" in text
    tuned = json.loads(
        (folder / "stages" / "finetune" / "stage_config.json").read_text()
    )
    source = stage_result(folder, "source")["result"]["checkpoint"]
    assert tuned["config"]["init_checkpoint"] == source
