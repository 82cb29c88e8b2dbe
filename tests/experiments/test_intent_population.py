"""The population experiment (issue 22, ``mopa experiment intent_population``):
one quick-profile run shared by the tests here (the files, the ``results.json``
schema, the fixed split, the out-of-family rows, stage reuse, the report in a
headless browser), and the experiment's players checked against hand-worked or
offline numbers. The quick profile's captures are not checked: its budgets are
tiny."""

import base64
import dataclasses
import json
import re
import shutil

import jax
import numpy as np
import pytest

from mopa.cli.main import main
from mopa.core.stages import Stages
from mopa.errors import InvalidParameterError
from mopa.experiments import run_experiment
from mopa.experiments.intent_conditions import read_teams
from mopa.experiments.intent_population import (
    PROFILES,
    PopulationExperimentConfig,
    _population,
    run_intent_population,
)
from mopa.experiments.intent_population_rows import (
    ROWS,
    build_rows,
    match_player,
)
from mopa.opponent.online import residual_weight
from mopa.opponent.population import load_clones, none_fits_probability
from tests.browser import assert_plots_unclipped, image_widths, report_page

STAGES = (
    "train_unaware",
    "train_oracle",
    "train_belief",
    "train_belief_bonus2",
    "data",
    "population",
    "belief",
    "eval",
    "adaptation",
)
IMAGES = ("conditions.png", "adaptation.png", "belief_calibration.png", "none_fits.png")
SCHEMA_KEYS = {
    "profile",
    "split",
    "conditions_held_out",
    "conditions_fitting",
    "conditions_out_of_family",
    "out_of_family_versus_flat",
    "out_of_family_versus_flat_per_prey",
    "per_prey",
    "adaptation",
    "belief_accuracy_by_step",
    "ece_by_step",
    "mean_ece",
    "log_likelihood_per_move",
    "clones",
    "timing_s",
    "versions",
    "git_sha",
}
QUICK = PROFILES["quick"]


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory):
    """One quick-profile run through the CLI (shared by the tests here)."""
    out = tmp_path_factory.mktemp("intent_population") / "quick"
    argv = ["experiment", "intent_population", "--preset", "quick", "--out", str(out)]
    assert main(argv) == 0
    return out


@pytest.fixture(scope="module")
def results(quick_run):
    return json.loads((quick_run / "results.json").read_text())


def _check_table(table: dict, rows: tuple, episodes: int) -> None:
    assert list(table) == list(rows)
    for name, row in table.items():
        assert set(row) == {"mean", "ci95", "n_episodes", "n_seeds"}, name
        lo, hi = row["ci95"]
        assert lo <= row["mean"] <= hi, name
        assert row["mean"] >= 0.0, name
        assert row["n_episodes"] == episodes, name
        assert row["n_seeds"] == len(QUICK.predator_seeds), name


@pytest.mark.slow
def test_quick_run_writes_the_files_and_the_schema(quick_run, results):
    for name in ("results.json", "results.md", "report.html", *IMAGES):
        assert (quick_run / name).stat().st_size > 0, name
    config = json.loads((quick_run / "config.json").read_text())
    assert config["config"]["held_out_seeds"] == list(QUICK.held_out_seeds)
    assert set(results) == SCHEMA_KEYS
    assert results["profile"] == "quick"
    per_cell = QUICK.eval_episodes * len(QUICK.predator_seeds)
    split = results["split"]
    _check_table(
        results["conditions_held_out"], ROWS, per_cell * len(split["held_out"])
    )
    _check_table(results["conditions_fitting"], ROWS, per_cell * len(split["fitting"]))
    # The out-of-family prey have no policy network: every row but the true
    # model. Each is played for out_of_family_episodes per seed.
    assert split["out_of_family"] == list(QUICK.out_of_family)
    per_prey_cell = QUICK.out_of_family_episodes * len(QUICK.predator_seeds)
    outside = results["conditions_out_of_family"]
    _check_table(
        outside,
        tuple(r for r in ROWS if r != "true_model_planner"),
        per_prey_cell * len(QUICK.out_of_family),
    )
    versus_flat = results["out_of_family_versus_flat"]
    assert versus_flat["mean"] == pytest.approx(
        outside["population_planner"]["mean"] - outside["flat_belief_planner"]["mean"]
    )
    lo, hi = versus_flat["ci95"]
    assert lo <= versus_flat["mean"] <= hi
    # Every row played the same out-of-family episodes: the difference is paired.
    assert versus_flat["paired"] is True
    assert versus_flat["n"] == per_prey_cell * len(QUICK.out_of_family)
    per_prey = results["out_of_family_versus_flat_per_prey"]
    assert list(per_prey) == list(QUICK.out_of_family)
    for name, difference in per_prey.items():
        assert difference["paired"] is True
        assert difference["n"] == per_prey_cell
        assert difference["mean"] == pytest.approx(
            results["per_prey"][name]["population_planner"]
            - results["per_prey"][name]["flat_belief_planner"]
        )
    # The pooled difference is the episode-weighted mean of the per-prey ones.
    assert versus_flat["mean"] == pytest.approx(
        np.mean([d["mean"] for d in per_prey.values()])
    )
    assert set(results["per_prey"]) == {
        *split["fitting"],
        *split["held_out"],
        *QUICK.out_of_family,
    }
    for key in ("belief_accuracy_by_step", "ece_by_step"):
        assert len(results[key]) == 25
        assert all(0.0 <= v <= 1.0 for v in results[key])
    assert results["mean_ece"] == pytest.approx(np.mean(results["ece_by_step"]))
    ll = results["log_likelihood_per_move"]
    # A floored model gives every move at least eps / A: -log(0.05 / 5) = 4.6.
    for value in (ll["population"], ll["best_single_clone"]):
        assert -np.log(5 / QUICK.bayes_epsilon) <= value < 0
    assert ll["best_single_clone"] == max(ll["per_clone"].values())
    assert ll["best_clone"] in results["clones"]["members"]
    adaptation = results["adaptation"]
    assert set(adaptation["per_prey"]) == {*split["held_out"], *QUICK.out_of_family}
    held = adaptation["held_out"]
    assert len(held["captures_by_episode"]) == QUICK.match_episodes
    assert held["num_matches"] == (
        QUICK.matches_per_seed * len(QUICK.predator_seeds) * len(split["held_out"])
    )
    for summary in adaptation["per_prey"].values():
        assert len(summary["none_fits_by_step_first_episode"]) == 25
        assert all(0.0 <= p <= 1.0 for p in summary["none_fits_by_episode_end"])
        weights = summary["residual_weight_by_episode_end"]  # online_fallback
        assert len(weights) == QUICK.match_episodes
        assert all(0.0 <= w <= 1.0 for w in weights)
        # The largest of M member probabilities is at least 1 / M.
        members = len(results["clones"]["members"])
        assert all(
            1 / members - 1e-6 <= p <= 1.0 + 1e-6
            for p in summary["top_member_by_episode_end"]
        )
    assert set(results["timing_s"]) == set(STAGES)
    markdown = (quick_run / "results.md").read_text()
    assert "| row | held-out prey | fitting set | out of family |" in markdown
    for name in QUICK.out_of_family:
        assert f"| {name}: population_planner not below flat_belief_planner" in (
            markdown
        )


@pytest.mark.slow
def test_the_split_is_fixed_and_nothing_fitted_sees_a_held_out_prey(
    quick_run, results, tmp_path
):
    split = results["split"]
    assert split["held_out"] == QUICK.held_out_prey
    assert split["fitting"] == QUICK.fitting_prey
    assert not set(split["held_out"]) & set(split["fitting"])
    # A third of the prey held out, and every training condition in both sets.
    total = len(split["held_out"]) + len(split["fitting"])
    assert total == len(QUICK.conditions) * QUICK.num_seeds >= 12
    assert len(split["held_out"]) == total // 3
    for condition in QUICK.conditions:
        assert any(n.startswith(f"{condition}_s") for n in split["held_out"])
    # The predators evaluated are of seeds none of whose prey is held out.
    held_seeds = {int(n.rsplit("_s", 1)[1]) for n in split["held_out"]}
    assert not held_seeds & set(split["predator_seeds"])
    # The clones are the fitting set's, one each, and the pooled one of all of
    # them; fitting reads no held-out data: it runs on a folder holding only the
    # fitting set's datasets.
    assert results["clones"]["members"] == [*split["fitting"], "pooled"]
    examples = results["clones"]["examples_per_member"]
    assert examples[-1] == sum(examples[:-1])
    data = tmp_path / "data"
    data.mkdir()
    for name in split["fitting"]:
        shutil.copy(quick_run / "stages" / "data" / f"{name}.npz", data)
    out = tmp_path / "population"
    out.mkdir()
    refit = _population(QUICK, data, out)
    assert refit["members"] == [*split["fitting"], "pooled"]
    assert refit["final_loss"] == pytest.approx(results["clones"]["final_loss"])


def test_the_split_is_validated():
    with pytest.raises(InvalidParameterError, match="held_out_seeds"):
        PopulationExperimentConfig(num_seeds=3, held_out_seeds=(3,))
    with pytest.raises(InvalidParameterError, match="every seed is held out"):
        PopulationExperimentConfig(num_seeds=2, held_out_seeds=(0, 1))
    with pytest.raises(InvalidParameterError, match="conditions"):
        PopulationExperimentConfig(conditions=("unaware", "nope"))
    with pytest.raises(InvalidParameterError, match="out_of_family_episodes"):
        PopulationExperimentConfig(out_of_family_episodes=0)
    with pytest.raises(InvalidParameterError, match="out_of_family must be keys"):
        PopulationExperimentConfig(out_of_family=("evader", "statue"))
    with pytest.raises(InvalidParameterError, match="out_of_family must not repeat"):
        PopulationExperimentConfig(out_of_family=("evader", "evader"))
    with pytest.raises(
        InvalidParameterError, match=r"planning_prior must be in \(0, 1\)"
    ):
        PopulationExperimentConfig(planning_prior=1.0)
    # The recognition rule by default; a given prior as given.
    assert PopulationExperimentConfig(fallback_prior=0.02).planner_prior == 0.98
    assert PopulationExperimentConfig(planning_prior=0.3).planner_prior == 0.3
    # The tree search's own: the belief's prior by default, the lookahead's on None.
    assert PopulationExperimentConfig().mcts_prior == 0.01
    assert PopulationExperimentConfig(mcts_planning_prior=None).mcts_prior == 0.99
    with pytest.raises(
        InvalidParameterError, match=r"mcts_planning_prior must be in \(0, 1\)"
    ):
        PopulationExperimentConfig(mcts_planning_prior=0.0)


@pytest.fixture(scope="module")
def quick_stages(quick_run):
    """The quick run's trained teams and clone library."""
    stages = quick_run / "stages"
    teams = {c: read_teams(stages / f"train_{c}") for c in QUICK.conditions}
    return teams, load_clones(stages / "population" / "clones.msgpack")


@pytest.mark.slow
def test_match_player_replays_the_adaptation_stage(quick_stages, results):
    play = match_player(QUICK, *quick_stages)
    name = QUICK.held_out_prey[0]
    captures, states, intents, residuals = play(name)
    C, M = len(QUICK.predator_seeds) * QUICK.matches_per_seed, QUICK.match_episodes
    assert captures.shape == (C, M)
    assert states.log_likelihood.shape[0] == C and intents.shape[0] == C
    ends = np.asarray(jax.vmap(jax.vmap(none_fits_probability))(states)).reshape(
        C, M, -1
    )[:, :, -1]
    stage = results["adaptation"]["per_prey"][name]
    np.testing.assert_allclose(
        ends.mean(0), stage["none_fits_by_episode_end"], atol=1e-6
    )
    by_episode = [e["mean"] for e in stage["captures_by_episode"]]
    np.testing.assert_allclose(captures.mean(0), by_episode, atol=1e-6)
    # online_fallback (the default): the fallback's correction, replayed
    weight = jax.vmap(jax.vmap(residual_weight))(residuals)
    np.testing.assert_allclose(
        np.asarray(weight).reshape(C, M, -1)[:, :, -1].mean(0),
        stage["residual_weight_by_episode_end"],
        atol=1e-6,
    )
    with pytest.raises(InvalidParameterError, match="prey must be one of"):
        play(QUICK.fitting_prey[0])


@pytest.mark.slow
def test_each_population_row_plans_on_its_own_prior(quick_stages):
    config = dataclasses.replace(QUICK, planning_prior=0.2, mcts_planning_prior=0.7)
    rows = build_rows(config, *quick_stages)
    assert rows["population_planner"][0].planning_prior == 0.2
    assert rows["population_mcts"][0].planning_prior == 0.7
    rows = build_rows(
        dataclasses.replace(config, mcts_planning_prior=None), *quick_stages
    )
    assert rows["population_mcts"][0].planning_prior == 0.2


@pytest.mark.slow
def test_a_second_run_reuses_every_stage(quick_run, results, tmp_path):
    out = tmp_path / "again"
    shutil.copytree(quick_run, out)
    lines = []
    again = run_experiment("intent_population", "quick", out, progress=lines.append)
    for stage in STAGES:
        assert f"[{stage}] reused (finished earlier with this config)" in lines
    assert not any(line.endswith("running") for line in lines)
    assert again["conditions_held_out"] == results["conditions_held_out"]
    assert again["adaptation"] == results["adaptation"]


def _recording(config):
    """A copy of ``config`` that notes the name of every attribute read from it
    (its fields, methods and properties, also through ``self`` inside them), and
    the set it notes them in."""
    read = set()

    class Recording(type(config)):
        def __getattribute__(self, name):
            read.add(name)
            return object.__getattribute__(self, name)

    fields = {f.name: getattr(config, f.name) for f in dataclasses.fields(config)}
    return Recording(**fields), read


def _keys(tree) -> set:
    """Every key of a JSON tree's dicts, at any depth."""
    if isinstance(tree, dict):
        return set(tree).union(*(_keys(v) for v in tree.values()))
    if isinstance(tree, list):
        return set().union(*(_keys(v) for v in tree))
    return set()


# Fields that reach the stage configs resolved or renamed: the key there.
_STORED_AS = {
    "recipe": "hidden",  # the networks of each condition's training config
    "conditions": "train",  # that config's keys
    "held_out_seeds": "split",
    "train_steps": "total_steps",
    "train_envs": "num_envs",
    "train_rollout": "num_steps",
    "train_chunks": "num_chunks",
    "data_episodes": "episodes",
    "bc_epochs": "num_epochs",
    "bc_hidden": "clone",
    "bc_batch_size": "batch_size",
    "planning_prior": "planner_prior",
    "mcts_planning_prior": "mcts_prior",
}


@pytest.mark.slow
def test_a_changed_player_setting_replays_the_games_only(quick_run, results, tmp_path):
    """A field that changes how the rows play (the online correction's features)
    reruns the eval and adaptation stages and reuses the rest; and every field the
    run reads, the replayed stages' bodies included, is in their stage configs, so
    that changing any of them replays the stages it changes."""
    stages = tmp_path / "stages"
    shutil.copytree(quick_run / "stages", stages)
    lines = []
    config, read = _recording(
        dataclasses.replace(PROFILES["quick"], online_features="observation")
    )
    assert PROFILES["quick"].online_features == "threats"
    again = run_intent_population(
        config, None, lines.append, Stages(stages, lines.append)
    )
    stored = set()
    for stage in ("eval", "adaptation"):
        stage_file = json.loads((stages / stage / "stage.json").read_text())
        stored |= _keys(stage_file["config"])
    fields = {f.name for f in dataclasses.fields(PopulationExperimentConfig)}
    missing = {n for n in read & fields if _STORED_AS.get(n, n) not in stored}
    assert not missing, f"read by the run but in no stage config: {sorted(missing)}"
    for stage in STAGES:
        rerun = stage in ("eval", "adaptation")
        assert (f"[{stage}] running" in lines) is rerun, stage
        assert (f"[{stage}] reused (finished earlier with this config)" in lines) is (
            not rerun
        ), stage
    assert again["log_likelihood_per_move"] == results["log_likelihood_per_move"]
    assert again["adaptation"] != results["adaptation"]


@pytest.mark.slow
def test_report_html_holds_the_tables_and_every_image(quick_run):
    page = (quick_run / "report.html").read_text()
    table = re.search(r'<table id="conditions">.*?</table>', page, re.S)
    assert table is not None
    for name in ROWS:
        assert f"<td>{name}</td>" in table.group(0)
    assert '<table id="checks">' in page and '<table id="per_prey">' in page
    sources = re.findall(r'<img alt="[^"]*" src="data:image/png;base64,([^"]+)"', page)
    assert len(sources) == len(IMAGES)
    embedded = {base64.b64decode(data) for data in sources}
    for name in IMAGES:
        assert (quick_run / name).read_bytes() in embedded, name
    assert 'src="http' not in page and "src='http" not in page


@pytest.mark.slow
def test_report_renders_in_a_headless_browser(quick_run):
    with report_page(quick_run / "report.html") as page:
        assert page.locator("#conditions tbody tr").count() == len(ROWS)
        assert page.locator("#conditions").is_visible()
        widths = image_widths(page)
        assert len(widths) == len(IMAGES)
        assert all(width > 0 for width in widths), widths
        assert_plots_unclipped(page, len(IMAGES))
