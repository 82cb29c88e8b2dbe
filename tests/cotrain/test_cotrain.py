"""The co-training loop: its files and schema (quick profile, through the CLI),
resuming after a kill, and its configuration's errors."""

from __future__ import annotations

import dataclasses
import json
import runpy
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest

from mopa.cli.cotrain import PROFILE_NAMES
from mopa.cli.main import main
from mopa.core.stages import Stages
from mopa.cotrain import BLUES, CotrainConfig, meta_weights, run_cotrain, write_league
from mopa.cotrain.model import first_guess
from mopa.envs import make
from mopa.errors import InvalidParameterError
from mopa.experiments.cotrain import PROFILES
from mopa.league import CheckpointManifest, EloRatings, LeagueStore, fit_bradley_terry
from mopa.opponent.population import MemberEpisodes
from tests.browser import assert_plots_unclipped, image_widths, report_page

QUICK = PROFILES["quick"]
EVALUATED = ("score_vs_population", "score_vs_held_out")


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("cotrain") / "quick"
    assert main(["cotrain", "--profile", "quick", "--out", str(out)]) == 0
    return out


def _interval(cell: dict) -> None:
    low, high = cell["ci95"]
    assert low <= cell["mean"] <= high


@pytest.mark.slow
def test_the_quick_profile_writes_the_files_and_the_schema(quick_run):
    for name in ("results.json", "results.md", "config.json", "meta.json"):
        assert (quick_run / name).is_file(), name
    assert (quick_run / "generations.png").stat().st_size > 10_000
    assert (quick_run / "report.html").stat().st_size > 10_000
    results = json.loads((quick_run / "results.json").read_text())
    assert results["profile"] == "quick"
    assert set(results["lineages"]) == set(BLUES)
    members = results["family"]["members"]
    assert len(members) == len(QUICK.family) * QUICK.family_seeds
    held_out = [m for m in members if m["held_out"]]
    assert len(held_out) == len(QUICK.family) * len(QUICK.held_out_seeds)
    fitting = len(members) - len(held_out)
    scripted = [m for m in members if "clone" in m]
    assert [m["name"] for m in scripted] == ["evader_s0", "evader_s1"]
    for member in scripted:
        assert 0.2 < member["clone"]["agreement"] <= 1.0  # above chance (1 / 5)
    common = results["common"]
    assert set(common) == {"blind", "model", "model_blue"}
    for blue, generations in results["lineages"].items():
        assert [g["generation"] for g in generations] == list(range(QUICK.generations))
        for g in generations:
            # Red's population grows by one best response (all its seeds) a
            # generation; the meta-strategy weighs each of its checkpoints.
            assert g["population_size"] == fitting + g["generation"]
            assert len(g["meta_weights"]) == g["population_size"]
            for key in EVALUATED:
                _interval(g[key])
                assert len(g[key]["per_blue_seed"]) == QUICK.num_seeds
            _interval(g["exploitability"]["score_vs_best_response"])
            _interval(g["exploitability"]["best_response_return"])
            # The newest reds: this generation's best response, and the one
            # before from generation 1 on.
            _interval(g["score_vs_newest"])
            planned = blue == "plan"
            assert ("planners" in g) == planned
            assert (g["distillation"] is not None) == planned
            if planned:  # the planners and the policy they roll out
                assert set(g["planners"]) == {"rollout", *QUICK.planners}
                for row in g["planners"].values():
                    for key in EVALUATED:
                        _interval(row[key])
                distillation = g["distillation"]
                assert distillation["teacher"] == QUICK.teacher
                assert len(distillation["seeds"]) == QUICK.num_seeds
                for rounds in distillation["seeds"]:
                    assert [r["round"] for r in rounds] == list(range(len(rounds)))
                    assert rounds[0]["teacher_share"] == 1.0
                    assert all(r["samples"] > 0 for r in rounds)
            fitted = blue != "blind"  # every model blue has a model at g0
            refitted = blue in ("remodel", "plan") or g["generation"] == 0
            assert (g["model"] is not None) == (fitted and refitted)
            if g["model"] is not None:
                model = g["model"]
                # One member per red checkpoint of the population, and pooled.
                assert len(model["members"]) == g["population_size"] + 1
                assert model["members"][-1] == "pooled"
                assert model["intent_labels"] == "inferred"
                assert 0.0 <= model["label_accuracy"] <= 1.0
                assert len(model["em_relabelled"]) == QUICK.intent_rounds
            belief = g["belief_on_newest_red"]
            assert (belief is None) == (blue == "blind")
            if belief is not None:
                assert belief["num_members"] == len(
                    (g["model"] or generations[0]["model"])["members"]
                )
                _interval(belief["intent_accuracy"])
                _interval(belief["none_fits"])
                # fit_once's generation-0 model has no member for a later red
                assert (belief["member"] is None) == (
                    blue == "fit_once" and g["generation"] > 0
                )
        assert (
            results["final"][blue]["exploitability"]
            == generations[-1]["exploitability"]
        )
        rows = results["improvement"][blue]
        assert set(rows) == (
            {"blue", "rollout", *QUICK.planners} if blue == "plan" else {"blue"}
        )
        for cell in rows.values():
            _interval(cell)
    assert set(results["criteria"]) >= {
        "lookahead_over_blind/score_vs_held_out",
        "mcts_over_blind/score_vs_population",
        f"distilled_over_{QUICK.teacher}/score_vs_population",
        "distilled_over_blind/exploitability",
        "remodel_over_fit_once/score_vs_newest",
    }
    text = (quick_run / "results.md").read_text()
    assert "captures vs its best response" in text and "| remodel |" in text
    assert "| plan (lookahead) |" in text and "Improvement against" in text


@pytest.mark.slow
def test_the_report_renders_in_a_headless_browser(quick_run):
    results = json.loads((quick_run / "results.json").read_text())
    with report_page(quick_run / "report.html") as page:
        # every blue, and the planning blue's planners and rollout policy beside
        # its distillation
        rows = len(BLUES) + 1 + len(QUICK.planners)
        assert page.locator("#final tbody tr").count() == rows
        assert page.locator("#final").is_visible()
        players = len(results["ratings"]["players"])
        assert page.locator("#ratings tbody tr").count() == players
        assert "mopa cotrain --profile quick" in page.content()
        widths = image_widths(page)
        assert len(widths) == 1 and widths[0] > 0
        assert_plots_unclipped(page, 1)


@pytest.mark.slow
def test_the_league_store_holds_every_checkpoint_and_rates_every_player(quick_run):
    """The manifest lists every policy and model of the league; every
    evaluation episode is a match; the Bradley-Terry ratings in results.json are
    the store's matches refitted, with the store's Elo beside them."""
    results = json.loads((quick_run / "results.json").read_text())
    root = quick_run / "stages"
    with LeagueStore(root, read_only=True) as store:
        rows = CheckpointManifest(store).rows()
        matches = store.matches()
        elo = EloRatings(store).all_ratings()
    paths = {Path(row.path) for row in rows}
    assert paths == set(root.glob("*/*.policy")) | set(root.glob("*/model.msgpack"))
    assert {row.kind for row in rows} == {"snapshot"}
    assert all(Path(row.path).is_file() for row in rows)
    g = QUICK.generations
    assert {row.run_id for row in rows if row.stage == g - 1} == {
        *(f"{side}_{blue}" for side in ("blue", "red") for blue in BLUES),
        "remodel_model",
        "plan_model",
        "blue_plan_rollout",
    }
    # Every blue seed plays every red seed: the family (one seed a member), the
    # best responses of the earlier generations and its own; a policy for
    # eval_episodes episodes, a planner for planner_episodes.
    family = len(results["family"]["members"])
    expected = 0
    for generations in results["lineages"].values():
        for gen in generations:
            red_seeds = family + (gen["generation"] + 1) * QUICK.num_seeds
            episodes = QUICK.eval_episodes
            if "planners" in gen:  # the rollout policy, the planners
                episodes += QUICK.eval_episodes
                episodes += len(QUICK.planners) * QUICK.planner_episodes
            expected += QUICK.num_seeds * red_seeds * episodes
    assert len(matches) == expected
    assert {m["score"] for m in matches} <= {0.0, 0.5, 1.0}
    players = results["ratings"]["players"]
    assert set(players) == {m["player"] for m in matches} | {
        m["opponent"] for m in matches
    }
    blues = [p for p in players if p.startswith("blue:")]
    rows = len(BLUES) + 1 + len(QUICK.planners)  # the rollout policy, the planners
    assert len(blues) == rows * g
    for planner in QUICK.planners:
        assert sum(p.endswith(f"_{planner}") for p in blues) == g
    fit = fit_bradley_terry([(m["player"], m["opponent"], m["score"]) for m in matches])
    for name, rating, low, high in fit.leaderboard():
        assert players[name]["rating"] == pytest.approx(rating)
        assert players[name]["ci95"] == pytest.approx([low, high])
        assert players[name]["elo"] == pytest.approx(elo[name])


def test_the_league_store_can_be_written_again_from_the_same_rows(tmp_path):
    """write_league leaves its rows as they were, so a second store made from
    them (a rerun of the last stage) holds the same checkpoints and ratings."""
    files = [tmp_path / f"{name}.policy" for name in ("a", "b")]
    for file in files:
        file.write_bytes(b"weights")
    checkpoints = [
        {"path": str(file), "step": 10 * i, "seed": 0, "stage": i, "run_id": "blue_x"}
        for i, file in enumerate(files)
    ]
    before = [dict(row) for row in checkpoints]
    matches = [("x_s0", "m_s0", 0, [1.0, 0.5, 0.0]), ("x_s0", "m_s1", 1, [1.0, 1.0])]
    first = write_league(QUICK, tmp_path, checkpoints, matches)
    assert checkpoints == before
    second = write_league(QUICK, tmp_path, checkpoints, matches)
    assert second == first
    assert set(first["players"]) == {"blue:x_s0", "red:m_s0", "red:m_s1"}
    with LeagueStore(tmp_path, read_only=True) as store:
        rows = CheckpointManifest(store).rows()
        assert len(store.matches()) == 5
    assert sorted(row.path for row in rows) == sorted(str(f.resolve()) for f in files)


@pytest.mark.slow
def test_a_ray_league_equals_the_in_process_league(quick_run, ray_backend, tmp_path):
    """The family runs and a lineage as Ray jobs on two workers: every figure
    equals the same league's in-process run (one generation of the quick
    profile's blind blue, for the suite's time). The in-process league is the
    quick run's own: each of its stages is one the quick run computed in this
    process with the same config, so all are reused, and none is recomputed."""
    config = dataclasses.replace(QUICK, blues=("blind",), generations=1)
    shutil.copytree(quick_run / "stages", tmp_path / "here")
    lines = []
    here = run_cotrain(config, lines.append, Stages(tmp_path / "here", lines.append))
    assert any(
        line.endswith("reused (finished earlier with this config)") for line in lines
    )
    assert not any(line.endswith("running") for line in lines)
    stages = Stages(tmp_path / "ray")
    on_ray = run_cotrain(config, lambda line: None, stages, ray_backend)
    for key in ("family", "lineages", "final", "ratings"):
        assert json.loads(json.dumps(on_ray[key])) == json.loads(json.dumps(here[key]))
    ran = {p.name for p in (tmp_path / "ray").iterdir() if (p / "stage.json").is_file()}
    assert set(stages.timing_s) == ran


@pytest.mark.slow
def test_a_killed_league_resumes_to_the_same_results(quick_run, tmp_path):
    """The uninterrupted league's folder, moved, its last generation's stages
    removed; killed half-way through the best response's training, run again:
    every number equals the uninterrupted run's, and every earlier stage is
    reused."""
    root = tmp_path / "moved" / "stages"
    shutil.copytree(quick_run / "stages", root)
    last = QUICK.generations - 1
    redone = [f"{kind}_fit_once_g{last}" for kind in ("blue", "red", "eval")]
    for name in redone:
        shutil.rmtree(root / name)

    class KilledError(Exception):
        pass

    def kill(line: str) -> None:
        if line.startswith(f"[red_fit_once_g{last}] chunk"):
            raise KilledError(line)

    with pytest.raises(KilledError):
        run_cotrain(QUICK, kill, Stages(root))
    assert (root / redone[0] / "stage.json").is_file()
    assert not (root / redone[1] / "stage.json").exists()
    lines = []
    resumed = run_cotrain(QUICK, lines.append, Stages(root, progress=lines.append))
    ran = sorted(line.split("]")[0][1:] for line in lines if line.endswith("running"))
    assert ran == sorted(redone[1:])  # all else reused, the moved folder included
    uninterrupted = json.loads((quick_run / "results.json").read_text())
    for key in ("family", "lineages", "final", "ratings"):
        assert json.loads(json.dumps(resumed[key])) == uninterrupted[key], key


@pytest.mark.slow
def test_the_tutorial_runs_the_league_of_two_blues(quick_run, tmp_path, capsys):
    """``docs/tutorials/cotrain.py`` (the site's "Run the co-training loop"), on a
    copy of the quick run's stages: every stage it asks for is one the quick run
    finished (so none runs again), and what it prints are the quick run's
    figures for its two blues at generation 0."""
    root = tmp_path / "stages"
    shutil.copytree(quick_run / "stages", root)
    tutorial = Path(__file__).resolve().parents[2] / "docs" / "tutorials" / "cotrain.py"
    argv = sys.argv
    sys.argv = [str(tutorial), str(root)]
    try:
        namespace = runpy.run_path(str(tutorial), run_name="__main__")
    finally:
        sys.argv = argv
    printed = capsys.readouterr().out
    assert "running" not in printed and "reused" in printed
    results = namespace["results"]
    assert set(results["final"]) == {"blind", "remodel"}
    assert [g["generation"] for g in results["lineages"]["blind"]] == [0]
    quick = json.loads((quick_run / "results.json").read_text())
    for blue in ("blind", "remodel"):
        figure = results["lineages"][blue][0]["score_vs_population"]
        assert figure == quick["lineages"][blue][0]["score_vs_population"]
        assert f"{blue:8s} population {figure['mean']:.2f}" in printed
    assert "blue:remodel_g0" in printed and "red:unaware_s0" in printed


def test_the_cli_profiles_are_the_experiments():
    assert set(PROFILE_NAMES) == set(PROFILES)


def test_bad_leagues_are_named():
    with pytest.raises(InvalidParameterError, match="blues must be distinct"):
        CotrainConfig(blues=("blind", "psychic"))
    with pytest.raises(InvalidParameterError, match="every family seed is held"):
        CotrainConfig(family_seeds=1, held_out_seeds=(0,))
    with pytest.raises(InvalidParameterError, match="held_out_seeds must be in"):
        CotrainConfig(held_out_seeds=(5,))
    with pytest.raises(InvalidParameterError, match="generations must be >= 1"):
        CotrainConfig(generations=0)
    with pytest.raises(InvalidParameterError, match="family names"):
        CotrainConfig(family=(("a", ()), ("a", ())))
    for bad, message in (
        (dict(blue_team="prey", red_team="predator"), "first and second teams"),
        (dict(metric="goals"), "metric must be one of"),
        (dict(red_private_tail=18), "less than red's observation width"),
    ):
        with pytest.raises(InvalidParameterError, match=message):
            run_cotrain(dataclasses.replace(QUICK, **bad), print, Stages(None))
    config = CotrainConfig(red_private_tail=2)
    assert config.population_config().drop_obs_tail == 2  # never reads red's tail
    for field, value, message in (
        ("meta_strategy", "greedy", "meta_strategy must be one of"),
        ("belief_input", "telepathy", "belief_input must be one of"),
        ("intent_labels", "guessed", "intent_labels must be one of"),
        ("planners", ("lookahead", "oracle"), "planners must be distinct names"),
        ("meta_uniform", 1.5, "meta_uniform must be in"),
        ("intent_rounds", -1, "intent_rounds must be >= 0"),
        ("blue_first_steps", 0, "blue_first_steps must be >= 1"),
    ):
        with pytest.raises(InvalidParameterError, match=message):
            dataclasses.replace(QUICK, **{field: value})
    with pytest.raises(InvalidParameterError, match="teacher 'mcts' must be one"):
        dataclasses.replace(QUICK, planners=("lookahead",), teacher="mcts")
    plain = dataclasses.replace(QUICK, game_overrides=(), num_intents=1)
    with pytest.raises(InvalidParameterError, match="belief_input 'intent' needs"):
        run_cotrain(plain, print, Stages(None))


@pytest.mark.slow
def test_the_battalion_league_runs_from_the_scripted_family(tmp_path):
    """The battalion configuration (quick profile) end to end: red's family is
    the scripted strategies' clones, one family entry held out whole; blue's score
    is its win rate."""
    out = tmp_path / "battalion"
    assert main(["cotrain", "--profile", "battalion_quick", "--out", str(out)]) == 0
    config = PROFILES["battalion_quick"]
    results = json.loads((out / "results.json").read_text())
    assert results["metric"] == "blue_win"
    members = results["family"]["members"]
    assert [m["name"] for m in members] == [f"{n}_s0" for n, _ in config.family]
    assert [m["held_out"] for m in members] == [
        n in config.held_out_family for n, _ in config.family
    ]
    for member in members:
        assert 1.0 / 18 < member["clone"]["agreement"] <= 1.0
        assert member["clone"]["samples"] > 0
    for blue, generations in results["lineages"].items():
        assert len(generations) == config.generations
        for key in EVALUATED:
            _interval(generations[-1][key])
            assert 0.0 <= generations[-1][key]["mean"] <= 1.0  # a win rate
        assert (generations[0]["belief_on_newest_red"] is None) == (blue == "blind")
    for name in ("results.md", "report.html", "generations.png"):
        assert (out / name).stat().st_size > 0, name
    assert "blue_win vs held-out reds" in (out / "results.md").read_text()


def test_the_meta_strategy_draws_the_population():
    """Uniform: every red alike. Nash, on the meta-game of blue's last generation
    (scores 3, 1, 2): the equilibrium puts red's mass on the red that holds blue
    lowest; half the draw stays uniform."""
    assert meta_weights(QUICK, 2) == [1.0, 1.0]
    assert meta_weights(QUICK, 3, np.array([3.0, 1.0, 2.0])) == [1.0, 1.0, 1.0]
    nash = dataclasses.replace(QUICK, meta_strategy="nash", meta_uniform=0.5)
    assert meta_weights(nash, 2) == [1.0, 1.0]  # no payoffs yet: uniform
    np.testing.assert_allclose(
        meta_weights(nash, 3, np.array([3.0, 1.0, 2.0])),
        [1 / 6, 1 / 6 + 1 / 2, 1 / 6],
    )
    pure = dataclasses.replace(nash, meta_uniform=0.0)
    np.testing.assert_allclose(meta_weights(pure, 2, np.array([2.0, 5.0])), [1.0, 0.0])
    with pytest.raises(InvalidParameterError, match="one score per red"):
        meta_weights(nash, 3, np.array([2.0, 5.0]))


def test_the_first_guess_names_the_corner_the_prey_heads_for():
    env, _ = make("tag_intent")
    velocity = np.array([[1.0, 0.9], [-1.0, 0.5], [-0.3, -1.0], [0.8, -0.7]])
    obs = np.zeros((4, 3, 1, env.prey_obs_size), np.float32)
    obs[:, :, 0, 0:2] = velocity[:, None, :]  # the prey's own velocity
    episodes = MemberEpisodes(obs, np.zeros((4, 3, 1), np.int32), np.ones((4, 3)))
    # The corners: quadrants I, II, III, IV.
    assert first_guess(env, episodes, 4).tolist() == [0, 1, 2, 3]
    assert first_guess(env, episodes, 1).tolist() == [0, 0, 0, 0]
    battalion, _ = make("battalion", discrete=True)
    with pytest.raises(InvalidParameterError, match="needs a first guess"):
        first_guess(battalion, episodes, 4)


@pytest.mark.parametrize("folder", ["cotrain", "cotrain_battalion"])
def test_the_committed_folder_renders_its_own_tables(folder):
    """A committed folder written by this loop renders every table row of the
    results.md it was written with."""
    from mopa.report.cotrain_report import results_markdown

    root = Path(__file__).resolve().parents[2] / "results" / folder
    results = json.loads((root / "results.json").read_text())
    assert "improvement" in results and "criteria" in results
    rendered = [line for line in results_markdown(results).splitlines() if "|" in line]
    written = [
        line for line in (root / "results.md").read_text().splitlines() if "|" in line
    ]
    assert rendered == written


def test_results_of_the_earlier_loop_render_every_table_row():
    """A folder written before the loop fitted the population model (style
    models, one planner, no paired improvement; the battalion league's folder at
    ``d693eb9``, its results.json and results.md kept in ``data/earlier_loop``)
    renders with every table row its own results.md had: its figures, its
    planner and its styles."""
    from mopa.report.cotrain_report import results_markdown

    root = Path(__file__).resolve().parent / "data" / "earlier_loop"
    results = json.loads((root / "results.json").read_text())
    assert "improvement" not in results  # the earlier format
    rendered = results_markdown(results).splitlines()
    earlier = [
        line for line in (root / "results.md").read_text().splitlines() if "|" in line
    ]
    assert any(line.startswith("| plan (planner) |") for line in earlier)
    assert [line for line in earlier if line not in rendered] == []
