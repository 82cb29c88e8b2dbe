"""Exp 4's report (:mod:`mopa.experiments.exp4`): ``results.md`` beside the
research's figures, and the plots. Reads ``results.json`` only."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from mopa.report.figures import pyplot, save_figure


def results_markdown(results: dict) -> str:
    """``results.md``: mopa's Exp 4 figures beside the research's."""
    research = results["research"]
    return "\n".join(
        [
            "# Exp 4: does a dominated prey's trajectory carry the placement?",
            "",
            f"Headline trainer: `{results.get('algo', 'iql')}`.",
            "",
            "| figure | mopa | research |",
            "|---|---|---|",
            f"| raw-trajectory placement probe (chance 0.5) | "
            f"{results['probe_raw_placement']:.3f} | "
            f"{research['probe_raw_placement']:.2f} |",
            f"| occupancy placement probe | "
            f"{results['probe_occupancy_placement']:.3f} | |",
            f"| distance-from-centre placement probe | "
            f"{results['probe_radius_placement']:.3f} | |",
            f"| raw probe, direction preferences removed | "
            f"{results['probe_raw_symmetrised_placement']:.3f} | |",
            f"| prey resources per episode | {results['resources_per_episode']:.2f}"
            f" | {research['resources_per_episode']:.2f} |",
            "",
            f"{results['num_episodes']} episodes, {results['num_seeds']} seeds; "
            "probes fit on 75% of episodes and scored on the rest.",
            "",
            "Every trainer at every collect reward (raw probe on random subsets: "
            "mean ± std, 5th percentile):",
            "",
            "| trainer | collect reward | captures / episode | prey resources / "
            "episode | raw probe | raw probe within each seed | raw probe, "
            "symmetrised | distance probe | occupancy probe | raw probe on subsets |",
            "|---|---:|---:|---:|---:|---|---:|---:|---:|---|",
            *[
                f"| `{name}` | {reward} | {row['captures_per_episode']:.2f} | "
                f"{row['resources_per_episode']:.2f} | "
                f"{row['probe_raw_placement']:.3f} | "
                + " / ".join(
                    "-" if score is None else f"{score:.2f}"
                    for score in row["probe_raw_by_seed"]
                )
                + f" | {row['probe_raw_symmetrised_placement']:.3f}"
                f" | {row['probe_radius_placement']:.3f} | "
                f"{row['probe_occupancy_placement']:.3f} | "
                + "; ".join(
                    f"{size}: {s['mean']:.3f} ± {s['std']:.3f}, p05 {s['p05']:.3f}"
                    for size, s in row["probe_raw_by_episodes"].items()
                )
                + " |"
                for reward, name, row in _rows(results)
            ],
            "",
        ]
    )


def write_report(results: dict, out: Path) -> list[Path]:
    """Bar chart of the four probes of every trainer and collect reward against
    chance."""
    plt = pyplot()
    rows = _rows(results)
    fig, ax = plt.subplots(figsize=(1.6 + 1.4 * len(rows), 3.2))
    x = np.arange(len(rows))
    fields = (
        ("probe_raw_placement", "raw positions"),
        ("probe_raw_symmetrised_placement", "raw, direction preferences removed"),
        ("probe_radius_placement", "distance from centre"),
        ("probe_occupancy_placement", "occupancy"),
    )
    width = 0.8 / len(fields)
    for offset, (field, label) in enumerate(fields):
        ax.bar(
            x + (offset - (len(fields) - 1) / 2) * width,
            [row[field] for *_, row in rows],
            width,
            label=label,
        )
    ax.set_xticks(x, [f"{name}\ncollect {reward}" for reward, name, _ in rows])
    ax.tick_params(axis="x", labelsize=7)
    ax.axhline(0.5, ls="--", color="gray", label="chance")
    ax.set_ylim(0, 1)
    ax.set_ylabel("held-out placement probe")
    ax.legend(fontsize=7, loc="upper right")
    fig.tight_layout()
    return [save_figure(fig, out / "exp4_probe.png")]


def _rows(results: dict) -> list[tuple[str, str, dict]]:
    """``(collect reward, trainer, figures)`` of every run, headline reward first."""
    by_reward = results.get("by_collect_reward", {})
    return [
        (reward, name, row)
        for reward, runs in by_reward.items()
        for name, row in runs.items()
    ]
