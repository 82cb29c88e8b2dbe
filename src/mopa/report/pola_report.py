"""The POLA experiments' plots (:mod:`mopa.experiments.pola`): P(find TFT) per
contribution factor (the exact IPD's Fig. 3) and the sampled games' reward
curves (Figs. 4-5). Read ``results.json`` only."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from mopa.report.figures import pyplot, save_figure


def plot_fig3(results: dict, out: Path) -> list[Path]:
    """Bar chart of P(TFT) per contribution factor, one bar per method (Fig. 3)."""
    plt = pyplot()
    p = results["p_tft"]
    methods = list(p)
    cfs = list(next(iter(p.values())))
    fig, ax = plt.subplots(figsize=(8, 3.5))
    width = 0.8 / len(methods)
    for i, method in enumerate(methods):
        xs = np.arange(len(cfs)) + i * width
        ax.bar(xs, [p[method][cf] for cf in cfs], width, label=method)
    ax.set_xticks(np.arange(len(cfs)) + 0.4 - width / 2, cfs)
    ax.set_xlabel("contribution factor")
    ax.set_ylabel(f"P(find TFT), {results['num_seeds']} seeds")
    ax.set_ylim(0, 1.05)
    ax.legend(fontsize=7, ncol=3)
    fig.tight_layout()
    return [save_figure(fig, out / "fig3.png")]


def plot_sampled(results: dict, out: Path) -> list[Path]:
    """Reward per step vs each other and vs ALLD (and the own-coin proportion on
    the Coin Game) against outer steps, mean +/- 95% CI over seeds (Figs. 4-5)."""
    plt = pyplot()
    coin = any(r["own_coin_proportion"] is not None for r in results.values())
    panels = [("vs_each_other", "reward per step vs each other"),
              ("vs_alld", "reward per step vs ALLD")]  # fmt: skip
    if coin:
        panels.append(("own_coin", "own-coin proportion"))
    fig, axes = plt.subplots(1, len(panels), figsize=(4.2 * len(panels), 3.4))
    for ax, (key, label) in zip(axes, panels, strict=True):
        for method, r in results.items():
            c = r["curves"]
            x, y = np.asarray(c["outer_steps"]), np.asarray(c[key])
            ax.plot(x, y, label=method)
            if f"{key}_ci95" in c:
                half = np.asarray(c[f"{key}_ci95"])
                ax.fill_between(x, y - half, y + half, alpha=0.2)
        ax.set_xlabel("outer steps")
        ax.set_ylabel(label)
    axes[0].legend(fontsize=7)
    fig.tight_layout()
    return [save_figure(fig, out / "curves.png")]
