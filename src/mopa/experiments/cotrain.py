"""``mopa cotrain`` (``mopa experiment cotrain``): the co-training loop of
:mod:`mopa.cotrain` with its profiles, results.md and curves.

Profiles: ``default`` (5 generations, 3 seeds, ``tag_intent``, red's family the
prey of ``intent_population`` and its scripted prey), ``quick`` (tiny budgets:
checks the files and the loop, not the numbers), ``battalion`` and
``battalion_quick`` (the battalion with the scripted Red family). The report is
:mod:`mopa.report.cotrain_report`'s.
"""

from __future__ import annotations

import dataclasses

from mopa.cotrain import CotrainConfig, run_cotrain
from mopa.envs.scripted_red import STRATEGIES
from mopa.opponent.bc import BCConfig
from mopa.planning import DaggerConfig
from mopa.report.cotrain_report import results_markdown, write_report
from mopa.runs.registry import profile_name, register_experiment


def tiny(config: CotrainConfig, num_actions: int, **fields) -> CotrainConfig:
    """``config`` at the quick profiles' budgets (they check the files and the
    loop, not the numbers); ``num_actions`` red's actions, ``fields`` the rest."""
    return dataclasses.replace(
        config,
        num_seeds=2,
        blue_first_steps=2_048,
        blue_steps=2_048,
        red_steps=2_048,
        hidden=(16,),
        num_envs=8,
        rollout=32,
        num_chunks=1,
        model_clone=BCConfig(
            num_actions=num_actions, hidden=(8,), num_epochs=1, batch_size=32
        ),
        intent_rounds=1,
        planner_rollouts=1,
        planner_horizon=2,
        mcts_particles=1,
        dagger=DaggerConfig(max_rounds=1, episodes=1, num_updates=20, batch_size=32),
        planner_episodes=1,
        **fields,
    )


BATTALION = CotrainConfig(
    game="battalion",
    game_overrides=(("discrete", True),),
    blue_team="blue",
    red_team="red",
    red_private_tail=0,
    metric="blue_win",
    family=tuple((name, (("scripted", name),)) for name in STRATEGIES),
    family_seeds=1,
    held_out_seeds=(),
    held_out_family=("flank_right", "feint"),
    scripted_episodes=64,
    blue_first_steps=1_200_000,
    blue_steps=300_000,
    red_steps=300_000,
    hidden=(64,),
    num_envs=32,
    rollout=64,
    num_intents=1,
    belief_input="appended",
    model_clone=BCConfig(num_actions=18, hidden=(64,), num_epochs=5),
    data_episodes=8,
    eval_episodes=8,
    planner_episodes=4,
    planners=("lookahead",),
    teacher="lookahead",
    planner_joint=False,
    planner_rollouts=4,
    planner_horizon=4,
    dagger=DaggerConfig(max_rounds=3, keep=0.9, episodes=2, num_updates=1500),
)
"""The battalion league: red's family is the scripted strategy family of
``wargame_intent`` (rush, flank left and right, stand-off, hold, feint), each
cloned into red's actor (:mod:`mopa.cotrain.scripted`); flank right and feint are
held out. Blue's score is its win rate (``blue_win``); the model blues observe the
joint belief over the model's members (no intents), padded to the league's last
population; the planner looks ahead per agent on the game's rewards."""
QUICK_FAMILY = tuple(
    (name, fields)
    for name, fields in CotrainConfig().family
    if name in ("unaware", "belief", "evader")
)
PROFILES = {
    "default": CotrainConfig(),
    "quick": tiny(
        CotrainConfig(),
        5,
        generations=2,
        family=QUICK_FAMILY,
        family_seeds=2,
        held_out_seeds=(1,),
        family_steps=4_096,
        scripted_episodes=2,
        scripted_updates=20,
        data_episodes=4,
        eval_episodes=2,
    ),
    "battalion": BATTALION,
    "battalion_quick": tiny(
        BATTALION,
        18,
        blues=("blind", "remodel", "plan"),
        generations=1,
        family=tuple((n, (("scripted", n),)) for n in ("rush", "hold", "feint")),
        held_out_family=("feint",),
        scripted_episodes=2,
        scripted_updates=50,
        data_episodes=3,
        eval_episodes=1,
    ),
}
"""Profiles of ``mopa cotrain``: ``default`` and ``quick`` on ``tag_intent``,
``battalion`` and ``battalion_quick`` on the battalion with the scripted Red
family."""


def run(
    config: CotrainConfig, seeds: int | None, progress, stages, backend=None
) -> dict:
    if seeds is not None:
        config = dataclasses.replace(config, num_seeds=seeds)
    results = run_cotrain(config, progress, stages, backend)
    return {"profile": profile_name(config, PROFILES), **results}


register_experiment(
    "cotrain",
    run,
    PROFILES,
    "default",
    plot_fn=write_report,
    description="co-training loop: red adapts, blue re-models red and answers",
    markdown_fn=results_markdown,
)
