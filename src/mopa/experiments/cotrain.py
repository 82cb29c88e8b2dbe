"""``mopa cotrain`` (``mopa experiment cotrain``): the co-training loop of
:mod:`mopa.cotrain` with its profiles, results.md and curves.

Profiles: ``default`` (5 generations, 3 seeds, ``tag_intent``), ``quick`` (tiny
budgets: checks the files and the loop, not the numbers). The report is
:mod:`mopa.report.cotrain_report`'s.
"""

from __future__ import annotations

import dataclasses

from mopa.cotrain import CotrainConfig, run_cotrain
from mopa.experiments.registry import profile_name, register_experiment
from mopa.opponent.bc import BCConfig
from mopa.opponent.styles import StyleConfig
from mopa.report.cotrain_report import results_markdown, write_report

PROFILES = {
    "default": CotrainConfig(),
    "quick": CotrainConfig(
        generations=2,
        num_seeds=2,
        family=(
            ("plain", ()),
            ("eager", (("env_overrides", (("intent_reward", 8.0),)),)),
        ),
        family_seeds=2,
        held_out_seeds=(1,),
        family_steps=4_096,
        blue_steps=2_048,
        red_steps=2_048,
        hidden=(16,),
        num_envs=8,
        rollout=32,
        num_chunks=1,
        data_episodes=4,
        styles=StyleConfig(
            num_styles=2,
            vae_updates=20,
            clone=BCConfig(num_actions=5, hidden=(8,), num_epochs=1, batch_size=32),
        ),
        eval_episodes=2,
    ),
}
"""Profiles of ``mopa cotrain``."""


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
