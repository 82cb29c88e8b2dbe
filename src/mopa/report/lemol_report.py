"""The LeMOL experiment's report (:mod:`mopa.experiments.lemol`): the verdict,
``results.md`` and the plots. Reads ``results.json`` only."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from mopa.report.figures import pyplot, save_figure

MODEL_METHODS = ("lemol", "bc")
"""Methods with an opponent model (and so prediction scores)."""
UNIFORM_ACCURACY = 1.0 / 5.0
"""Accuracy of the uniform predictor over the 5 moves."""


def verdict(results: dict, later: tuple[int, int]) -> str:
    """One plain sentence from the accuracy gap over the later cycles."""
    gap = results["accuracy_gap"]
    start, end = later
    span = f"cycles {start + 1}-{end}"
    if gap["ci95"] is None:
        interval = "no interval with one seed"
    else:
        interval = f"95% interval [{gap['ci95'][0]:+.3f}, {gap['ci95'][1]:+.3f}]"
    accuracy = results["later_accuracy"]
    figures = (
        f"LeMOL {accuracy['lemol']['mean']:.3f} vs BC {accuracy['bc']['mean']:.3f}, "
        f"difference {gap['mean']:+.3f}, {interval}"
    )
    if gap["outcome"] == "lemol better":
        return f"LeMOL beats the behaviour-cloning model in {span} ({figures})."
    if gap["outcome"] == "bc better":
        return (
            f"LeMOL does not beat the behaviour-cloning model in {span}: BC is "
            f"more accurate ({figures})."
        )
    return (
        f"LeMOL does not beat the behaviour-cloning model in {span}: the "
        f"difference is not distinguishable from 0 ({figures})."
    )


def _cell(entry: dict, digits: int = 2) -> str:
    mean, ci = entry["mean"], entry["ci95"]
    if ci is None:
        return f"{mean:.{digits}f}"
    return f"{mean:.{digits}f} [{ci[0]:.{digits}f}, {ci[1]:.{digits}f}]"


def results_markdown(results: dict) -> str:
    """``results.md``: the verdict, the accuracy and cross-entropy per cycle,
    and both agents' returns per cycle and over the later cycles."""
    start, end = results["later_cycles"]
    methods = results["methods"]
    uniform = results["uniform"]
    lines = [
        "# LeMOL vs a behaviour-cloning opponent model on push (one-hot moves)",
        "",
        f"**{results['verdict']}**",
        "",
        f"{results['num_seeds']} seeds, {results['num_cycles']} cycles; means with "
        "95% Student-t intervals over seeds. Accuracy and cross-entropy are the "
        "models' online predictions of the fresh, learning opponent's moves in "
        "each cycle's play-outs, made before that cycle's model training "
        f"(uniform predictor: accuracy {uniform['accuracy']:.2f}, cross-entropy "
        f"{uniform['cross_entropy']:.3f}).",
        "",
        "| cycle | LeMOL accuracy | BC accuracy | LeMOL cross-entropy | "
        "BC cross-entropy |",
        "|---:|---:|---:|---:|---:|",
    ]
    acc, acc_ci = results["prediction_accuracy"], results["prediction_accuracy_ci95"]
    ce, ce_ci = results["cross_entropy"], results["cross_entropy_ci95"]
    for c in range(results["num_cycles"]):
        cells = [
            _cell({"mean": acc[m][c], "ci95": acc_ci[m][c]}, 3) for m in MODEL_METHODS
        ] + [_cell({"mean": ce[m][c], "ci95": ce_ci[m][c]}, 3) for m in MODEL_METHODS]
        lines.append(f"| {c + 1} | " + " | ".join(cells) + " |")
    gap, ce_gap = results["accuracy_gap"], results["cross_entropy_gap"]
    lines += [
        "",
        f"Over cycles {start + 1}-{end}: accuracy LeMOL minus BC "
        f"{_cell(gap, 3)} (per seed "
        + ", ".join(f"{x:+.3f}" for x in gap["per_seed"])
        + f"); cross-entropy LeMOL minus BC {_cell(ce_gap, 3)}.",
    ]
    within = results["within_playout_accuracy"]
    bins = len(within["lemol"]["mean"])
    lines += [
        "",
        f"Accuracy over the play-out (the opponent learning from scratch), in "
        f"{bins} equal parts of its updates, cycles {start + 1}-{end}:",
        "",
        "| model | " + " | ".join(str(b + 1) for b in range(bins)) + " |",
        "|---|" + "---:|" * bins,
    ]
    for m in MODEL_METHODS:
        cells = " | ".join(f"{x:.3f}" for x in within[m]["mean"])
        lines.append(f"| {m} | {cells} |")
    lines += [
        "",
        "## Returns per cycle (focal adversary / learning good agent)",
        "",
        "| cycle | " + " | ".join(methods) + " |",
        "|---:|" + "---:|" * len(methods),
    ]
    per_cycle = results["returns_per_cycle"]
    for c in range(results["num_cycles"]):
        cells = [
            f"{per_cycle[m]['adversary']['mean'][c]:+.2f} / "
            f"{per_cycle[m]['good']['mean'][c]:+.2f}"
            for m in methods
        ]
        lines.append(f"| {c + 1} | " + " | ".join(cells) + " |")
    lines += [
        "",
        f"## Returns over cycles {start + 1}-{end}",
        "",
        "| focal agent uses | focal adversary's return | learning opponent's return |",
        "|---|---:|---:|",
    ]
    for m in methods:
        lines.append(
            f"| {m} | {_cell(results['returns'][m])} | "
            f"{_cell(results['returns_opponent'][m])} |"
        )
    lines.append("")
    return "\n".join(lines)


def write_report(results: dict, out: Path) -> list[Path]:
    """``lemol_prediction.png`` (accuracy and cross-entropy per cycle, with the
    uniform predictor), ``lemol_within_playout.png`` (accuracy over a play-out,
    later cycles) and ``lemol_returns.png`` (the focal agent's return per
    cycle); bands are 95% intervals over seeds."""
    plt = pyplot()
    labels = {"lemol": "LeMOL (LSTM)", "bc": "behaviour clone", "maddpg": "MADDPG",
              "m3ddpg": "M3DDPG"}  # fmt: skip
    cycles = np.arange(1, results["num_cycles"] + 1)
    start, end = results["later_cycles"]

    def band(ax, x, mean, ci, label):
        mean = np.asarray(mean, np.float64)
        ax.plot(x, mean, marker="o", ms=3, label=label)
        if all(c is not None for c in ci):
            ci = np.asarray(ci, np.float64)
            ax.fill_between(x, ci[:, 0], ci[:, 1], alpha=0.2)

    fig, axes = plt.subplots(1, 2, figsize=(9, 3.5))
    panels = (
        ("prediction_accuracy", "accuracy", "prediction accuracy"),
        ("cross_entropy", "cross_entropy", "cross-entropy (nats)"),
    )
    for ax, (key, uniform_key, ylabel) in zip(axes, panels, strict=True):
        for m in MODEL_METHODS:
            band(ax, cycles, results[key][m], results[f"{key}_ci95"][m], labels[m])
        ax.axhline(results["uniform"][uniform_key], ls="--", c="gray", label="uniform")
        ax.axvspan(start + 0.5, end + 0.5, color="gray", alpha=0.08)
        ax.set_xlabel("cycle (shaded: the later cycles)")
        ax.set_ylabel(ylabel)
    axes[0].legend(fontsize=7)
    fig.tight_layout()
    paths = [save_figure(fig, out / "lemol_prediction.png")]

    fig, ax = plt.subplots(figsize=(4.5, 3.5))
    within = results["within_playout_accuracy"]
    bins = np.arange(1, len(within["lemol"]["mean"]) + 1)
    for m in MODEL_METHODS:
        band(ax, bins, within[m]["mean"], within[m]["ci95"], labels[m])
    ax.axhline(UNIFORM_ACCURACY, ls="--", c="gray", label="uniform")
    ax.set_xlabel("part of the play-out (the opponent learning)")
    ax.set_ylabel(f"accuracy, cycles {start + 1}-{end}")
    ax.legend(fontsize=7)
    fig.tight_layout()
    paths.append(save_figure(fig, out / "lemol_within_playout.png"))

    fig, ax = plt.subplots(figsize=(4.5, 3.5))
    for m in results["methods"]:
        entry = results["returns_per_cycle"][m]["adversary"]
        band(ax, cycles, entry["mean"], entry["ci95"], labels[m])
    ax.set_xlabel("cycle")
    ax.set_ylabel("focal adversary's return")
    ax.legend(fontsize=7)
    fig.tight_layout()
    paths.append(save_figure(fig, out / "lemol_returns.png"))
    return paths
