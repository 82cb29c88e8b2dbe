"""Exp 5's report (:mod:`mopa.experiments.exp5`): ``results.md`` beside the
research's figures, and the plots. Reads ``results.json`` only."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from mopa.report.figures import pyplot, save_figure

RESEARCH = {
    "probe_occupancy": {"iql": 0.98, "mappo": 0.96},
    "vae_ari_L100": 0.87,
    "latent_probe_L100": 0.99,
    "mappo_latent_probe": 0.83,
    "bc_action_match": 0.62,
    "bc_majority": 0.24,
    "steering_rate": 0.85,
    "captures_cotrained": 1.59,
    "captures_unfamiliar": 0.91,
    "brittleness_drop": 0.43,
}
"""The research's Exp 5 figures (README), shown beside mopa's."""


def results_markdown(results: dict) -> str:
    """``results.md``: mopa's Exp 5 figures beside the research's."""
    r, research = results, results["research"]
    lines = [
        "# Exp 5: distinct strategies, an encodable latent, a brittle opponent",
        "",
        f"{r['num_seeds']} seeds per specialist; headline algorithm "
        f"{r['primary_algo']} (BC: {r['bc_algo']}, brittleness: "
        f"{r['brittleness_algo']}).",
        "",
        "| figure | mopa | research |",
        "|---|---|---|",
    ]
    for algo, entry in r["by_algo"].items():
        lines.append(
            f"| occupancy probe, one episode ({algo}) | {entry['probe_occupancy']:.3f}"
            f" | {research['probe_occupancy'].get(algo, float('nan')):.2f} |"
        )
    for length, value in r["vae_ari_by_L"].items():
        ref = f"{research['vae_ari_L100']:.2f}" if length == "100" else ""
        lines.append(f"| VAE ARI, L = {length} | {value:.3f} | {ref} |")
    for length, value in r["latent_probe_by_L"].items():
        ref = f"{research['latent_probe_L100']:.2f}" if length == "100" else ""
        lines.append(f"| latent probe, L = {length} | {value:.3f} | {ref} |")
    bcm = r["bc_action_match"]
    lines += [
        f"| BC action match, vanilla | {bcm['vanilla']:.3f} | |",
        f"| BC action match, latent | {bcm['latent']:.3f} | "
        f"{research['bc_action_match']:.2f} |",
        f"| BC action match, oracle | {bcm['oracle']:.3f} | |",
        f"| BC majority baseline | {bcm['majority']:.3f} | "
        f"{research['bc_majority']:.2f} |",
        f"| steering rate, routes of {r['steering_steps']} steps (chance 0.5; "
        f"over predator seeds {', '.join(f'{v:.3f}' for v in r['steering_by_seed'])}"
        f", bootstrap over episodes [{r['steering_ci95_episodes'][0]:.3f}, "
        f"{r['steering_ci95_episodes'][1]:.3f}]) | "
        f"{r['steering_rate']:.3f} [{r['steering_ci95'][0]:.3f}, "
        f"{r['steering_ci95'][1]:.3f}] | {research['steering_rate']:.2f} |",
    ]
    for steps, value in r["steering_by_steps"].items():
        ref = r["steering_reference_by_steps"][steps]
        lines.append(
            f"| steering rate, routes of {steps} steps (the specialists' own routes "
            f"under the same criterion: {ref:.3f}) | {value:.3f} | |"
        )
    lines += [
        f"| captures, co-trained predators | {r['captures_cotrained']:.2f} "
        f"[{r['captures_cotrained_ci95'][0]:.2f}, "
        f"{r['captures_cotrained_ci95'][1]:.2f}] | "
        f"{research['captures_cotrained']:.2f} |",
        f"| captures, unfamiliar predators | {r['captures_unfamiliar']:.2f} "
        f"[{r['captures_unfamiliar_ci95'][0]:.2f}, "
        f"{r['captures_unfamiliar_ci95'][1]:.2f}] | "
        f"{research['captures_unfamiliar']:.2f} |",
        f"| brittleness drop | {r['brittleness_drop']:.1%} "
        f"[{r['brittleness_drop_ci95'][0]:.1%}, "
        f"{r['brittleness_drop_ci95'][1]:.1%}] | "
        f"{research['brittleness_drop']:.0%} |",
        "",
        "Intervals are 95%: bootstrap over episodes for captures and the drop, "
        "Student-t over predator seeds for steering. ARI and latent probe are "
        "means over encoder seeds, on held-out chains.",
        "",
    ]
    return "\n".join(lines)


def write_report(results: dict, out: Path) -> list[Path]:
    """Encoder quality by L, BC by L, occupancy maps, and the cross-play."""
    plt = pyplot()
    paths = []
    fig, axes = plt.subplots(1, 2, figsize=(9, 3.5))
    for algo, entry in results["by_algo"].items():
        lengths = [int(k) for k in entry["vae_ari_by_L"]]
        for ax, name in zip(axes, ("vae_ari_by_L", "latent_probe_by_L"), strict=True):
            mean = [v["mean"] for v in entry[name].values()]
            std = [v["std"] for v in entry[name].values()]
            ax.errorbar(lengths, mean, yerr=std, marker="o", label=algo, capsize=3)
    axes[0].set_ylabel("VAE ARI (k-means, held out)")
    axes[1].set_ylabel("latent linear probe (held out)")
    for ax in axes:
        ax.set_xlabel("observation length L (prey steps)")
        ax.set_ylim(-0.05, 1.05)
        ax.legend()
    fig.tight_layout()
    paths.append(save_figure(fig, out / "exp5_encoder_by_L.png"))

    bc_entry = results["by_algo"][results["bc_algo"]]
    fig, ax = plt.subplots(figsize=(5, 3.5))
    by_length = bc_entry["bc_latent_by_L"]
    ax.plot([int(k) for k in by_length], list(by_length.values()), "o-", label="latent")
    bcm = bc_entry["bc_action_match"]
    for name, style in (("vanilla", "--"), ("oracle", ":"), ("majority", "-.")):
        ax.axhline(bcm[name], ls=style, color="gray", label=name)
    ax.set_xlabel("L of the latent")
    ax.set_ylabel("held-out action match")
    ax.set_title(
        f"steering rate {bc_entry['steering_rate']:.2f} "
        f"(routes of {bc_entry['steering_steps']} steps)"
    )
    ax.legend(fontsize=8)
    fig.tight_layout()
    paths.append(save_figure(fig, out / "exp5_bc.png"))

    algos = list(results["by_algo"])
    fig, axes = plt.subplots(len(algos), 2, figsize=(6, 3 * len(algos)), squeeze=False)
    for row, algo in enumerate(algos):
        for col, (placement, grid) in enumerate(
            results["by_algo"][algo]["mean_occupancy"].items()
        ):
            axes[row, col].imshow(
                np.asarray(grid).T, origin="lower", extent=(-1, 1, -1, 1)
            )
            axes[row, col].set_title(f"{algo} {placement}-prey occupancy")
    fig.tight_layout()
    paths.append(save_figure(fig, out / "exp5_occupancy.png"))

    fig, ax = plt.subplots(figsize=(6, 3.5))
    width = 0.8 / len(algos)
    for i, algo in enumerate(algos):
        cells = results["by_algo"][algo]["brittleness"]["cells"]
        names = list(cells)
        mean = np.array([cells[n]["mean"] for n in names])
        ci = np.array([cells[n]["ci95"] for n in names])
        xs = np.arange(len(names)) + i * width
        ax.bar(xs, mean, width, yerr=[mean - ci[:, 0], ci[:, 1] - mean], label=algo)
    ax.set_xticks(np.arange(len(names)) + 0.4 - width / 2, names, fontsize=7)
    ax.set_ylabel("captures / episode")
    ax.legend()
    fig.tight_layout()
    paths.append(save_figure(fig, out / "exp5_brittleness.png"))
    return paths
