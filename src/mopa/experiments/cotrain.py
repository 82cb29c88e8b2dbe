"""``mopa cotrain`` (``mopa experiment cotrain``): the co-training loop of
:mod:`mopa.cotrain` with its profiles, results.md and curves.

Profiles: ``default`` (5 generations, 3 seeds, ``tag_intent``), ``quick`` (tiny
budgets: checks the files and the loop, not the numbers).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import numpy as np

from mopa.cotrain import CotrainConfig, run_cotrain
from mopa.experiments.registry import profile_name, register_experiment
from mopa.opponent.bc import BCConfig
from mopa.opponent.styles import StyleConfig
from mopa.report.intent_report import interval_cell

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

CURVES = (
    ("exploitability", "captures_vs_best_response", "captures vs its best response"),
    ("captures_vs_held_out", None, "captures vs held-out reds"),
    ("captures_vs_population", None, "captures vs red's population"),
)


def run(config: CotrainConfig, seeds: int | None, progress, stages) -> dict:
    if seeds is not None:
        config = dataclasses.replace(config, num_seeds=seeds)
    results = run_cotrain(config, progress, stages)
    return {"profile": profile_name(config, PROFILES), **results}


def _curve(generations: list[dict], key: str, sub: str | None) -> list[dict]:
    return [g[key][sub] if sub else g[key] for g in generations]


def results_markdown(results: dict[str, Any]) -> str:
    lines = [
        "# Co-training: red adapts, blue re-models",
        "",
        f"Profile `{results['profile']}`. Blue's captures per episode, mean [95% "
        "interval over episodes], at each generation (higher is better for blue; "
        "captures against its best response measure how exploitable it is).",
        "",
    ]
    lineages = results["lineages"]
    count = len(next(iter(lineages.values())))
    header = "| blue | " + " | ".join(f"g{g}" for g in range(count)) + " |"
    for key, sub, label in CURVES:
        lines += [f"## {label}", "", header, "|" + "---|" * (count + 1)]
        for blue, generations in lineages.items():
            cells = [interval_cell(c) for c in _curve(generations, key, sub)]
            lines.append(f"| {blue} | " + " | ".join(cells) + " |")
        lines.append("")
    models = [
        (blue, g)
        for blue, generations in lineages.items()
        for g in generations
        if g["model"]
    ]
    if models:
        lines += [
            "## Styles found without labels",
            "",
            "| blue | generation | styles | ARI vs red identity (purity) | "
            "ARI vs red's intent (purity) |",
            "|---|---|---|---|---|",
        ]
        for blue, g in models:
            cells = [
                f"{score['ari']:.2f} ({score['purity']:.2f})" if score else "-"
                for score in (
                    g["model"]["against_identities"],
                    g["model"].get("against_intents"),
                )
            ]
            lines.append(
                f"| {blue} | {g['generation']} | {g['model']['num_styles']} | "
                + " | ".join(cells)
                + " |"
            )
        lines.append("")
    return "\n".join(lines)


def plots(results: dict[str, Any], out: Path) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(CURVES), figsize=(4.2 * len(CURVES), 3.4))
    for ax, (key, sub, label) in zip(axes, CURVES, strict=True):
        for blue, generations in results["lineages"].items():
            cells = _curve(generations, key, sub)
            x = np.arange(len(cells))
            mean = np.array([c["mean"] for c in cells])
            low = np.array([c["ci95"][0] for c in cells])
            high = np.array([c["ci95"][1] for c in cells])
            ax.plot(x, mean, marker="o", label=blue)
            ax.fill_between(x, low, high, alpha=0.2)
        ax.set_xlabel("generation")
        ax.set_title(label, fontsize=10)
        ax.set_xticks(range(len(cells)))
    axes[0].set_ylabel("captures per episode")
    axes[0].legend(fontsize=8)
    fig.tight_layout()
    path = out / "generations.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return [path]


register_experiment(
    "cotrain",
    run,
    PROFILES,
    "default",
    plot_fn=plots,
    description="co-training loop: red adapts, blue re-models red and answers",
    markdown_fn=results_markdown,
)
