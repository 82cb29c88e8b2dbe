"""The reproduction experiments train on the research's recipe by default and on
mopa's lighter one under profile ``mopa``; folders written before the recipe
existed still verify, against the profile that keeps their config."""

from __future__ import annotations

import dataclasses
import json

import pytest

from mopa.algos.presets import PRESETS, RESEARCH_COUNTERPARTS, preset, recipe_preset
from mopa.errors import InvalidParameterError, UnknownNameError
from mopa.experiments import exp2, exp3, exp4, exp5, intent, intent_population
from mopa.runs.registry import config_dict, get_preset
from mopa.runs.verify import recorded_run

BUDGET = ("total_steps", "num_seeds", "num_chunks", "seed")


def _budget_free(config) -> dict:
    """A training config without the fields an experiment sets from its own
    budget (steps, seeds, chunks, seed)."""
    return {k: v for k, v in config.to_dict().items() if k not in BUDGET}


def _same_recipe(built, name):
    assert _budget_free(built) == _budget_free(preset(name)), name


def _same_but_reward(built, name):
    """An Exp 4 training config is preset ``name`` with the collect reward set."""
    game = dict(built.env_overrides)
    own = dict(preset(name).env_overrides)
    if "collect_reward" in own:
        game["collect_reward"] = own["collect_reward"]
    else:
        del game["collect_reward"]
    _same_recipe(built.replace(env_overrides=tuple(game.items())), name)


def test_every_research_counterpart_is_a_preset_of_the_same_game_and_trainer():
    for ours, research in RESEARCH_COUNTERPARTS.items():
        a, b = preset(ours), preset(research)
        assert research.startswith("research_") and research in PRESETS
        assert (a.algo, a.env) == (b.algo, b.env), ours
        placement = dict(a.env_overrides).get("resource_placement")
        assert dict(b.env_overrides).get("resource_placement") == placement, ours


def test_default_profiles_train_the_research_presets():
    config = get_preset("exp2", "default")
    for variant, direction in (("baseline", 0.0), ("cw", -1.0), ("ccw", 1.0)):
        built = exp2.train_config(config, variant, 6)
        _same_recipe(built, f"research_iql_rnn_tag_static_{variant}")
        assert built.hidden == (64, 64) and built.rnn
        assert dict(built.env_overrides)["shape_dir"] == direction
    config = get_preset("exp3", "default")
    for algo in ("iql", "oa_iql"):
        built = exp3.train_config(algo, config, 3)
        _same_recipe(built, f"research_{algo}_tag")
        assert built.replay == "episodes" and built.optimiser == "radam"
    config = get_preset("exp4", "default")
    assert (config.algo, config.compare) == ("iql", ("mappo",))
    for algo in ("iql", "mappo"):
        built = exp4.train_config(algo, config, 20.0, 6)
        game = dict(built.env_overrides)
        assert game["collect_radius"] == 0.15 and game["collect_reward"] == 20.0
        _same_but_reward(built, f"research_{algo}_tag_resources_random")
    config = get_preset("exp5", "default")
    for algo in ("iql", "mappo"):
        for placement in ("circle", "corners"):
            built = exp5.train_config(config, algo, placement, 3)
            _same_recipe(built, f"research_{algo}_tag_balanced_{placement}")
    for profiles in (intent.PROFILES, intent_population.PROFILES):
        config = profiles["default"]
        if hasattr(config, "intent_config"):
            config = config.intent_config()
        for condition in ("unaware", "oracle", "belief"):
            built = intent.train_config(config, condition, 3)
            assert built.hidden == (128, 128)
            # The unaware predators' critic cannot see the prey's intent.
            critic = "state" if condition == "unaware" else "all_obs"
            assert built.critic_input == critic, condition


def test_mopa_profiles_train_the_first_figures_presets():
    assert _budget_free(
        exp2.train_config(get_preset("exp2", "mopa"), "cw", 6)
    ) == _budget_free(preset("exp2_static_cw"))
    _same_recipe(exp3.train_config("iql", get_preset("exp3", "mopa"), 3), "exp3_iql")
    config = get_preset("exp4", "mopa")
    assert (config.algo, config.compare) == ("iql_jaxmarl", ("iql", "mappo"))
    built = exp4.train_config("iql_jaxmarl", config, 20.0, 6)
    assert dict(built.env_overrides)["collect_reward"] == 20.0
    _same_but_reward(built, "exp4_iql_jaxmarl_random")
    _same_recipe(
        exp5.train_config(get_preset("exp5", "mopa"), "mappo", "circle", 3),
        "exp5_mappo_circle",
    )
    built = intent.train_config(intent.PROFILES["mopa"], "unaware", 3)
    assert built.hidden == (128,) and built.critic_input == "state"


def test_recipe_errors_name_the_problem():
    with pytest.raises(InvalidParameterError, match="recipe must be one of"):
        recipe_preset("exp3_iql", "paper")
    with pytest.raises(InvalidParameterError, match="no research counterpart"):
        recipe_preset("exp4_iql_jaxmarl_random", "research")
    with pytest.raises(UnknownNameError, match="unknown preset"):
        recipe_preset("exp9_iql", "research")
    with pytest.raises(InvalidParameterError, match="recipe must be one of"):
        exp3.Exp3Config(recipe="fast")
    with pytest.raises(InvalidParameterError, match="iql_jaxmarl"):
        exp4.Exp4Config(algo="iql_jaxmarl")


@pytest.mark.parametrize("name", ["exp2", "exp3", "exp4", "exp5", "intent"])
def test_a_folder_written_before_recipes_verifies_against_profile_mopa(name, tmp_path):
    mopa = config_dict(get_preset(name, "mopa"))
    old = {k: v for k, v in mopa.items() if k != "recipe"}
    folder = tmp_path / name
    folder.mkdir()
    described = {"experiment": name, "preset": "default", "seeds": None}
    (folder / "config.json").write_text(json.dumps({**described, "config": old}))
    (folder / "meta.json").write_text("{}")
    (folder / "results.json").write_text("{}")
    assert recorded_run(folder).preset == "mopa"
    # A folder of today's default stays on the default.
    research = config_dict(get_preset(name, "default"))
    (folder / "config.json").write_text(json.dumps({**described, "config": research}))
    assert recorded_run(folder).preset == "default"
    # A config that no profile has is still refused, naming the field.
    changed = {**research, "seed": 7}
    (folder / "config.json").write_text(json.dumps({**described, "config": changed}))
    with pytest.raises(InvalidParameterError, match="at seed = 7"):
        recorded_run(folder)
    # A preset name since dropped is followed to the preset that has its config;
    # with a config no preset has, the name is refused, naming the presets.
    gone = {**described, "preset": "light", "config": old}
    (folder / "config.json").write_text(json.dumps(gone))
    assert recorded_run(folder).preset == "mopa"
    (folder / "config.json").write_text(json.dumps({**gone, "config": changed}))
    with pytest.raises(UnknownNameError, match="unknown preset 'light'.*presets:"):
        recorded_run(folder)


def test_profiles_differ_from_default_only_in_the_recipe_and_its_choices():
    for name, allowed in (
        ("exp2", {"recipe", "hidden"}),
        ("exp3", {"recipe"}),
        ("exp4", {"recipe", "algo", "compare"}),
        ("exp5", {"recipe"}),
        ("intent", {"recipe"}),
        ("intent_population", {"recipe"}),
    ):
        default, mopa = get_preset(name, "default"), get_preset(name, "mopa")
        changed = {
            field.name
            for field in dataclasses.fields(default)
            if getattr(default, field.name) != getattr(mopa, field.name)
        }
        assert changed == allowed, name
