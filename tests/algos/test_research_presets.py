"""The ``research_*`` presets against the research's settings, value by value.

The tables below are copied from ``research-settings.md`` (the research's public
code and configs); each preset's config must equal them field for field, and the
game it builds must carry the listed constants.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import mopa.envs
from mopa.algos.presets import PRESETS, preset

EPISODE_TRANSITIONS = 25
"""Transitions learnt per episode (the research: 32 episodes x 25 transitions)."""

IQL_TABLE = {
    "hidden": (128, 128),  # Dense(128) - ReLU - Dense(128) - ReLU - Dense(5)
    "rnn": False,
    "agent_id": True,  # one-hot agent id
    "optimiser": "radam",
    "max_grad_norm": 25.0,
    "lr": 0.005,
    "anneal_lr": True,  # decayed linearly to ~0 over all updates
    "num_envs": 8,  # 8 games x 26 steps, a reset every update
    "num_steps": 26,
    "replay": "episodes",
    "buffer_size": 5_000 * 26,  # 5,000 whole episodes
    "batch_size": 32,  # 32 whole episodes per gradient step
    "num_epochs": 1,  # one gradient step per update
    "double_q": True,
    "gamma": 0.9,
    "target_update_interval": 200,
    "tau": 1.0,
    "eps_start": 1.0,
    "eps_finish": 0.05,
    "eps_decay": 0.1,  # over the first 10% of updates
    "learning_starts": 10_000,
    "total_steps": 2_000_000,
    "num_seeds": 3,
    "opp_coef": 0.5,
    # The opponent head's cross-entropy over all 26 stored steps of an episode
    # (src/iql_teams_oa_mlp.py: the mean over every step, where its TD loss drops
    # the last); benchmarks/research_components.py takes the same update.
    "opp_loss_all_steps": True,
}
IQL_RNN_TABLE = {**IQL_TABLE, "rnn": True, "hidden": (64, 64)}  # Exp 2: GRU, h 64

MAPPO_TABLE = {
    "hidden": (128, 128),  # two hidden layers, actor and critic
    "activation": "relu",
    "critic_input": "all_obs",  # all 4 agents' raw observations
    "agent_id": True,
    "lr": 3e-4,
    "anneal_lr": True,
    "max_grad_norm": 0.5,
    "num_envs": 32,
    "num_steps": 128,
    "gamma": 0.99,
    "gae_lambda": 0.95,
    "clip_eps": 0.2,
    "ent_coef": 0.01,
    "vf_coef": 0.5,
    "update_epochs": 4,
    "num_minibatches": 4,
    "total_steps": 2_000_000,
    "num_seeds": 3,
}

RUN_PLUMBING = {"seed": 0, "num_chunks": 20, "frozen": ()}
"""Fields the reference does not speak to: mopa's defaults."""
MAPPO_UNSTATED = {"bootstrap_truncation": True}
"""MAPPO fields the reference does not state (mopa's default kept)."""

OBSTACLES = [[0.5, 0.5], [-0.5, -0.5]]
RESOURCE_GAME = {
    "collect_radius": 0.15,
    "collect_reward": 5.0,
    "resource_ring_radius": 0.6,
    "resource_corner": 0.8,
    "fixed_obstacles": True,
    "obstacle_pos": OBSTACLES,
}
INTENT_GAME = {
    "intent_radius": 0.35,
    "intent_reward": 4.0,
    "intent_corner": 0.8,
    "predator_max_speed": 0.75,
    "predator_accel": 2.0,
}
SHAPING_GAME = {
    "shape_coef": 0.1,
    "shape_r_in": 0.25,
    "shape_r_out": 0.6,
    "fixed_obstacles": True,
    "obstacle_pos": OBSTACLES,
}
PLACEMENT = {"circle": 0, "corners": 1, "random": 2}
BELIEF = {"belief_alpha_low": 0.0, "belief_alpha_high": 1.0}


def _expected() -> dict[str, tuple[str, str, dict, dict, dict]]:
    """``{preset: (algo, env, config table, game params, game structure)}``."""
    table = {}
    for variant, direction in (("baseline", 0.0), ("cw", -1.0), ("ccw", 1.0)):
        table[f"research_iql_rnn_tag_static_{variant}"] = (
            "iql",
            "tag_static",
            IQL_RNN_TABLE,
            {**SHAPING_GAME, "shape_dir": direction},
            {},
        )
    for algo in ("iql", "oa_iql"):
        table[f"research_{algo}_tag"] = (algo, "tag", IQL_TABLE, {}, {})
    for placement, code in PLACEMENT.items():
        game = {**RESOURCE_GAME, "resource_placement": code}
        for algo in ("iql", "oa_iql"):
            table[f"research_{algo}_tag_resources_{placement}"] = (
                algo,
                "tag_resources",
                IQL_TABLE,
                game,
                {"num_resources": 4},
            )
        table[f"research_mappo_tag_resources_{placement}"] = (
            "mappo",
            "tag_resources",
            MAPPO_TABLE,
            game,
            {"num_resources": 4},
        )
    table["research_mappo_tag"] = ("mappo", "tag", MAPPO_TABLE, {}, {})
    for placement in ("circle", "corners"):  # no research constants for Exp 5
        game = {"resource_placement": PLACEMENT[placement]}
        table[f"research_iql_tag_balanced_{placement}"] = (
            "iql",
            "tag_balanced",
            IQL_TABLE,
            game,
            {},
        )
        table[f"research_mappo_tag_balanced_{placement}"] = (
            "mappo",
            "tag_balanced",
            MAPPO_TABLE,
            game,
            {},
        )
    intent = {
        "unaware": ({}, {"predator_intent_obs": False}),
        "oracle": ({}, {"predator_intent_obs": True}),
        "belief": (BELIEF, {"predator_intent_obs": True}),
    }
    for condition, (params, structure) in intent.items():
        table[f"research_mappo_tag_intent_{condition}"] = (
            "mappo",
            "tag_intent",
            MAPPO_TABLE,
            {**INTENT_GAME, **params},
            {"num_intents": 4, **structure},
        )
    table["research_mappo_tag_intent_unaware_private_critic"] = (
        "mappo",
        "tag_intent",
        {**MAPPO_TABLE, "critic_input": "state"},  # mopa's critic, named alternative
        INTENT_GAME,
        {"num_intents": 4, "predator_intent_obs": False},
    )
    return table


EXPECTED = _expected()


def test_the_research_presets_are_exactly_the_tabled_ones():
    research = {name for name in PRESETS if name.startswith("research_")}
    assert research == set(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_research_preset_matches_the_reference_table(name):
    algo, env_name, table, game_params, game_structure = EXPECTED[name]
    config = preset(name)
    fields = {
        k: v for k, v in dataclasses.asdict(config).items() if k != "env_overrides"
    }
    unstated = MAPPO_UNSTATED if algo == "mappo" else {}
    assert fields == {
        "algo": algo,
        "env": env_name,
        **table,
        **RUN_PLUMBING,
        **unstated,
    }
    env, params = mopa.envs.make(config.env, **dict(config.env_overrides))
    for field, value in game_params.items():
        np.testing.assert_allclose(
            np.asarray(getattr(params, field), np.float64), value, err_msg=field
        )
    for field, value in game_structure.items():
        assert getattr(env, field) == value, field
    # Derived figures of the reference.
    assert config.total_steps // config.steps_per_update == config.num_updates
    if algo == "mappo":
        assert config.num_updates == 488
        return
    assert config.num_updates == 9_615
    assert config.buffer_segments == 5_000  # whole episodes
    assert config.buffer_segments // config.num_envs == 625  # per game slot
    reuse = config.batch_size * EPISODE_TRANSITIONS / config.steps_per_update
    assert 3.8 <= reuse < 3.9  # ~3.8x: 800 transitions learnt per 208 collected
    assert params.max_steps == EPISODE_TRANSITIONS
