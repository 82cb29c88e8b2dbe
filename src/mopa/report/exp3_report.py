"""Exp 3's report (:mod:`mopa.experiments.exp3`): the research's claims checked on
the cross-play table, ``results.md`` beside the research's numbers, and the
tournament heatmap. Reads the results and the tournament it saved."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np


def _cell(cell: dict | None) -> str:
    if cell is None:
        return "-"
    lo, hi = cell["ci95"]
    return f"{cell['mean']:.2f} [{lo:.2f}, {hi:.2f}]"


def results_markdown(
    results: dict,
    predators: Sequence[str],
    prey: Sequence[str],
    research: Mapping[str, float],
) -> str:
    """``results.md``: mopa's table of ``predators`` (rows) against ``prey``
    (columns) beside the research's numbers of the OA-plan prey column
    (``research``, by predator)."""
    captures = results["captures"]
    episodes = results["num_episodes_per_cell"] // results["num_seeds"]
    lines = [
        "# Exp 3: cross-play of IQL, OA-IQL and the OA planner on tag",
        "",
        f"Captures per episode, mean [95% CI] over {results['num_seeds']} seed pairs "
        f"(seed i vs seed i) x {episodes} episodes; rows are predators, columns "
        "prey. In brackets after a cell of the OA-plan prey column: the research's "
        "figure.",
        "",
        "| predator \\ prey | " + " | ".join(prey) + " |",
        "|---|" + "---|" * len(prey),
    ]
    for row in predators:
        if row not in captures:
            continue
        cells = []
        for column in prey:
            text = _cell(captures[row].get(column))
            if column == "oa_plan" and row in research:
                text += f" (research {research[row]:.2f})"
            cells.append(text)
        lines.append(f"| {row} | " + " | ".join(cells) + " |")
    acc = results["opp_head_accuracy"]
    f = results["findings"]

    def number(x):
        return "-" if x is None else f"{x:.3f}"

    lines += [
        "",
        f"Opponent-head accuracy at the end of training: predators "
        f"{number(acc['pred'])}, prey {number(acc['prey'])} (research, Exp 1: 0.53 "
        "and 0.58).",
        "",
        f"- OA-plan prey concedes the fewest captures in every row: "
        f"{f['oa_plan_prey_fewest_in_every_row']} (its mean drop against the two "
        f"greedy prey: {f['oa_plan_prey_drop_vs_greedy_prey']:.2f} captures per "
        f"episode; intervals separated in every row: "
        f"{f['oa_plan_prey_drop_separated']}; research: about 2).",
        f"- OA-plan predators are the worst predators in every column: "
        f"{f['oa_plan_pred_worst_in_every_column']} (worst per column: "
        f"{f['worst_pred_per_column']}).",
    ]
    if "joint_minus_per_agent_pred" in f:
        joint = ", ".join(
            f"{column} {value:+.2f}"
            for column, value in f["joint_minus_per_agent_pred"].items()
        )
        lines.append(
            f"- Joint-action predator planner minus the per-agent one, per prey: "
            f"{joint}."
        )
    lines += [
        "",
        f"3x3 tournament wall time (compilation included): "
        f"{results['tournament_wall_s']:.1f} s (research: about 50 s).",
    ]
    if results.get("joint_row_wall_s") is not None:
        lines.append(f"Joint-planner row: {results['joint_row_wall_s']:.1f} s.")
    return "\n".join(lines) + "\n"


def write_report(results: dict, out: Path) -> list[Path]:
    """The heatmap of the 3x3 tournament (and the joint row), from the stage."""
    from mopa.report.tournament import load_tournament, plot_tournament_heatmap

    stage = out / "stages" / "tournament"
    paths = []
    for name, target in (
        ("tournament.json", "exp3_heatmap.png"),
        ("tournament_joint.json", "exp3_joint_row.png"),
    ):
        if (stage / name).exists():
            paths.append(
                plot_tournament_heatmap(load_tournament(stage / name), out / target)
            )
    return paths


def findings(captures: dict, prey: Sequence[str]) -> dict:
    """The research's two claims, checked on mopa's table of captures (rows the
    predators, columns the ``prey``): does the OA-plan prey concede the fewest
    captures in every row, and are the OA-plan predators the worst predators in
    every column? Plus the joint planner's effect."""

    def mean(row, column):
        return captures[row][column]["mean"]

    def separated(row_a, col_a, row_b, col_b):
        """Whether cell a's interval lies wholly below cell b's."""
        return captures[row_a][col_a]["ci95"][1] < captures[row_b][col_b]["ci95"][0]

    greedy_rows = [r for r in prey]
    prey_best = {
        row: min(prey, key=lambda column, row=row: mean(row, column))
        for row in greedy_rows
    }
    pred_worst = {
        column: min(greedy_rows, key=lambda row, column=column: mean(row, column))
        for column in prey
    }
    out = {
        "oa_plan_prey_fewest_in_every_row": all(
            v == "oa_plan" for v in prey_best.values()
        ),
        "oa_plan_prey_drop_vs_greedy_prey": float(
            np.mean(
                [
                    (mean(row, "iql_greedy") + mean(row, "oa_greedy")) / 2
                    - mean(row, "oa_plan")
                    for row in greedy_rows
                ]
            )
        ),
        "oa_plan_prey_drop_separated": all(
            separated(row, "oa_plan", row, "oa_greedy")
            and separated(row, "oa_plan", row, "iql_greedy")
            for row in greedy_rows
        ),
        "oa_plan_pred_worst_in_every_column": all(
            v == "oa_plan" for v in pred_worst.values()
        ),
        "best_prey_per_row": prey_best,
        "worst_pred_per_column": pred_worst,
    }
    if "oa_plan_joint" in captures:
        out["joint_minus_per_agent_pred"] = {
            column: mean("oa_plan_joint", column) - mean("oa_plan", column)
            for column in prey
        }
        out["joint_minus_iql_greedy_pred"] = {
            column: mean("oa_plan_joint", column) - mean("iql_greedy", column)
            for column in prey
        }
    return out
