"""Exp 2's report (:mod:`mopa.experiments.exp2`): ``results.md`` beside the
research's figures, and the behaviour-mining plots. Reads ``results.json`` only;
the shaping variants are its keys, in the experiment's order."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from mopa.report.figures import pyplot, save_figure


def results_markdown(results: dict) -> str:
    """``results.md``: mopa's Exp 2 figures beside the research's."""
    r, research = results, results["research"]
    variants = list(r["mean_dangle"])
    lines = [
        "# Exp 2: shaping narrows the prey's strategy; a trajectory VAE does not "
        "see it",
        "",
        f"{r['num_seeds']} seeds per variant; "
        + ", ".join(f"{n} {k}" for k, n in r["num_episodes"].items())
        + " episodes.",
        "",
        "| variant | mean angular step (rad/step) [95% CI] | std | per-seed means "
        "| around the centre | research |",
        "|---|---|---|---|---|---|",
    ]
    for name in variants:
        low, high = r["mean_dangle_ci95"][name]
        c_low, c_high = r["mean_dangle_centre_ci95"][name]
        seeds = ", ".join(f"{v:+.4f}" for v in r["mean_dangle_by_seed"][name])
        lines.append(
            f"| {name} | {r['mean_dangle'][name]:+.4f} [{low:+.4f}, {high:+.4f}] "
            f"| {r['std_dangle'][name]:.2f} | {seeds} "
            f"| {r['mean_dangle_centre'][name]:+.4f} [{c_low:+.4f}, {c_high:+.4f}] "
            f"| {research['mean_dangle'][name]:+.4f} |"
        )
    captures = r["captures_per_episode"]
    lines += [
        "",
        "| variant | predators' captures per episode [95% CI] | per-seed means "
        "| research |",
        "|---|---|---|---|",
    ]
    for name in variants:
        low, high = captures["ci95"][name]
        seeds = ", ".join(f"{v:.2f}" for v in captures["by_seed"][name])
        lines.append(
            f"| {name} | {captures['mean'][name]:.2f} [{low:.2f}, {high:.2f}] "
            f"| {seeds} | {research['captures_per_episode'][name]:.1f} |"
        )
    vae = r["vae"]
    lines += [
        "",
        "| figure | mopa | research |",
        "|---|---|---|",
        f"| VAE ARI against the variant (k-means, k = 3) | "
        f"{vae['vae_ari']['mean']:.3f} +- {vae['vae_ari']['std']:.3f} | "
        f"<= {research['vae_ari_max']:.2f} (prey {research['prey_ari']:.3f}) |",
        f"| VAE NMI against the variant | {vae['vae_nmi']['mean']:.3f} | |",
        f"| VAE ARI against the checkpoint (k = {vae['num_checkpoints']}) | "
        f"{vae['vae_ari_checkpoint']['mean']:.3f} | |",
        f"| linear probe of the variant on the latent (chance 0.33) | "
        f"{vae['latent_probe']['mean']:.3f} | |",
        "",
        "Angular steps are the prey's, around the obstacle nearest it before the "
        "step (positive: counter-clockwise); intervals are 95% percentile "
        "bootstraps over episodes within seeds. Captures are the greedy "
        "co-trained predators' in the same episodes. VAE figures are means +- std over "
        f"encoder seeds, on {vae['num_test']} held-out episodes.",
        "",
    ]
    return "\n".join(lines)


def write_report(results: dict, out: Path) -> list[Path]:
    """Occupancy of the prey per variant over its angular-step histogram (the
    research's behaviour-mining figure), and the mean steps with their intervals."""
    plt = pyplot()
    variants = list(results["mean_dangle"])
    paths = []
    obstacles = np.asarray(results["obstacles"])
    fig, axes = plt.subplots(2, len(variants), figsize=(4 * len(variants), 7))
    edges = np.asarray(results["histogram"]["edges"])
    for col, name in enumerate(variants):
        ax = axes[0, col]
        ax.imshow(
            np.asarray(results["occupancy"][name]).T,
            origin="lower",
            extent=(-1, 1, -1, 1),
        )
        ax.scatter(obstacles[:, 0], obstacles[:, 1], c="white", marker="x")
        ax.set_title(f"{name}: prey occupancy")
        ax = axes[1, col]
        counts = np.asarray(results["histogram"]["counts"][name])
        ax.stairs(counts, edges, fill=True)
        ax.axvline(results["mean_dangle"][name], color="red", ls="--", label="mean")
        ax.set_xlabel("angular step around the nearest obstacle (rad)")
        ax.set_title(f"mean {results['mean_dangle'][name]:+.4f}")
        ax.legend()
    fig.tight_layout()
    paths.append(save_figure(fig, out / "exp2_behaviour.png"))

    fig, ax = plt.subplots(figsize=(4.5, 3.5))
    mean = np.array([results["mean_dangle"][n] for n in variants])
    ci = np.array([results["mean_dangle_ci95"][n] for n in variants])
    research = [results["research"]["mean_dangle"][n] for n in variants]
    xs = np.arange(len(variants))
    ax.bar(xs - 0.2, mean, 0.4, yerr=[mean - ci[:, 0], ci[:, 1] - mean], label="mopa")
    ax.bar(xs + 0.2, research, 0.4, label="research")
    ax.axhline(0.0, color="gray", lw=0.8)
    ax.set_xticks(xs, variants)
    ax.set_ylabel("mean angular step (rad/step)")
    ax.set_title(f"VAE ARI {results['vae_ari']:.3f}")
    ax.legend()
    fig.tight_layout()
    paths.append(save_figure(fig, out / "exp2_mean_dangle.png"))
    return paths
