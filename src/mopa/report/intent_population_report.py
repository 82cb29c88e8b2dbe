"""The report of the population experiment (issue 22,
:mod:`mopa.experiments.intent_population`): ``results.md``, the plots and
``report.html``, one self-contained page (images embedded as base64).

Everything here reads the saved ``results.json`` dict; nothing imports training
code.
"""

from __future__ import annotations

import html
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from matplotlib.figure import Figure

from mopa.core.files import atomic_write
from mopa.report.calibration import plot_calibration_by_step
from mopa.report.figures import plot_interval_bars, save_png
from mopa.report.intent_report import holds_mark, interval_cell, markdown_table
from mopa.report.page import figures_html, html_page, html_table

CONDITIONS_PNG = "conditions.png"
ADAPTATION_PNG = "adaptation.png"
CALIBRATION_PNG = "belief_calibration.png"
NONE_FITS_PNG = "none_fits.png"
REPORT = "report.html"
POOLS = (
    ("conditions_held_out", "held-out prey"),
    ("conditions_fitting", "fitting set"),
    ("conditions_out_of_family", "out of family"),
)
"""``results.json`` tables of captures, and their labels."""


# -- checks --------------------------------------------------------------------------
def _mean(table: Mapping, name: str) -> float | None:
    row = table.get(name)
    return None if row is None else float(row["mean"])


def _check(statement: str, needs: list, fn: Callable[[], bool]):
    if any(value is None for value in needs):
        return statement, None
    return statement, bool(fn())


def capture_checks(table: Mapping[str, Any]) -> list[tuple[str, bool | None]]:
    """The issue's orderings on one pool's ``{ROW: {"mean", "ci95"}}``:
    ``(statement, holds)``; ``None`` where a row is missing."""
    m = lambda n: _mean(table, n)  # noqa: E731
    pop, mcts, unaware = m("population_planner"), m("population_mcts"), m("unaware")
    oracle, true = m("oracle"), m("true_model_planner")
    return [
        _check(
            "population_planner >= 1.5 x unaware",
            [pop, unaware],
            lambda: pop >= 1.5 * unaware,
        ),
        _check("population_planner >= oracle", [pop, oracle], lambda: pop >= oracle),
        _check(
            "population_planner > unaware, intervals apart",
            [pop, unaware],
            lambda: (
                table["population_planner"]["ci95"][0] > table["unaware"]["ci95"][1]
            ),
        ),
        _check(
            "population_mcts >= 2.5 x unaware",
            [mcts, unaware],
            lambda: mcts >= 2.5 * unaware,
        ),
        _check(
            "population_planner within 15% of true_model_planner (goal)",
            [pop, true],
            lambda: pop >= 0.85 * true,
        ),
    ]


def other_checks(results: Mapping[str, Any]) -> list[tuple[str, bool | None]]:
    """The issue's belief, adaptation and out-of-family criteria."""
    accuracy = results["belief_accuracy_by_step"]
    ll = results["log_likelihood_per_move"]
    adaptation = results["adaptation"]["held_out"]["late_minus_first"]
    per_prey = results.get("out_of_family_versus_flat_per_prey") or {
        name: results.get("out_of_family_versus_flat")
        for name in results["split"]["out_of_family"]
    }
    return [
        _check(
            f"intent belief accuracy >= 0.95 by step {len(accuracy)} (held-out)",
            [accuracy],
            lambda: accuracy[-1] >= 0.95,
        ),
        _check("mean ECE <= 0.05 (held-out)", [1], lambda: results["mean_ece"] <= 0.05),
        _check(
            "population log-likelihood > best single clone's (held-out)",
            [1],
            lambda: ll["population"] > ll["best_single_clone"],
        ),
        _check(
            "adaptation: late episodes - first > 0, paired interval above 0",
            [1],
            lambda: adaptation["ci95"][0] > 0,
        ),
        *(
            _check(
                f"{name}: population_planner not below flat_belief_planner (the "
                + ("paired " if versus_flat and versus_flat.get("paired") else "")
                + "difference's 95% interval reaches 0)",
                [versus_flat],
                lambda versus_flat=versus_flat: versus_flat["ci95"][1] >= 0,
            )
            for name, versus_flat in per_prey.items()
        ),
    ]


def criteria(results: Mapping[str, Any]) -> list[tuple[str, bool | None]]:
    """Every criterion of the experiment on a results tree: the orderings against
    the held-out prey, then the belief, adaptation and out-of-family ones."""
    held_out = capture_checks(results["conditions_held_out"])
    ordering = [(f"{s} (held-out)", held) for s, held in held_out]
    return [*ordering, *other_checks(results)]


def table_rows(results: Mapping) -> tuple[list[str], list[list[str]]]:
    """Header and rows of the captures table (every row, every pool)."""
    names = list(results["conditions_held_out"])
    header = ["row", *(label for _, label in POOLS)]
    rows = [
        [name, *(interval_cell(results[key].get(name)) for key, _ in POOLS)]
        for name in names
    ]
    return header, rows


def _ratio(table: Mapping, a: str, b: str) -> str:
    x, y = _mean(table, a), _mean(table, b)
    return "-" if x is None or y is None or y == 0 else f"{x / y:.2f}"


# -- results.md ----------------------------------------------------------------------
def results_markdown(results: Mapping) -> str:
    """``results.md``: the captures table, the ratios, the checks, the belief and
    the adaptation figures."""
    split = results["split"]
    header, rows = table_rows(results)
    lines = [
        "# Opponent models that generalise (issue 22)",
        "",
        f"Profile `{results['profile']}`, git `{results['git_sha']}`. Captures per "
        "episode, mean [95% CI over episodes], predator seeds "
        f"{split['predator_seeds']}.",
        "",
        f"- fitting set ({len(split['fitting'])}): {', '.join(split['fitting'])}",
        f"- held out ({len(split['held_out'])}): {', '.join(split['held_out'])}",
        f"- out of family: {', '.join(split['out_of_family'])}",
        "",
        *markdown_table(header, rows),
        "",
        "| ratio | held-out | fitting |",
        "|---|---|---|",
    ]
    for a, b in (
        ("population_planner", "unaware"),
        ("population_mcts", "unaware"),
        ("population_planner", "oracle"),
        ("population_planner", "true_model_planner"),
        ("belief_planner", "unaware"),
    ):
        lines.append(
            f"| {a} / {b} | {_ratio(results['conditions_held_out'], a, b)} | "
            f"{_ratio(results['conditions_fitting'], a, b)} |"
        )
    lines += ["", "| criterion | held-out | fitting |", "|---|---|---|"]
    for (statement, held), (_, fit) in zip(
        capture_checks(results["conditions_held_out"]),
        capture_checks(results["conditions_fitting"]),
        strict=True,
    ):
        lines.append(f"| {statement} | {holds_mark(held)} | {holds_mark(fit)} |")
    for statement, holds in other_checks(results):
        lines.append(f"| {statement} | {holds_mark(holds)} | |")
    accuracy = results["belief_accuracy_by_step"]
    ll = results["log_likelihood_per_move"]
    lines += [
        "",
        "## Belief on held-out prey",
        "",
        f"Intent accuracy {accuracy[0]:.2f} at step 1, {accuracy[-1]:.2f} at step "
        f"{len(accuracy)}; mean ECE {results['mean_ece']:.3f}. Log-likelihood per "
        f"move: population {ll['population']:.3f} nats, best single clone "
        f"({ll['best_clone']}) {ll['best_single_clone']:.3f}, uniform "
        f"{ll['uniform']:.3f}.",
    ]
    lines += _adaptation_lines(results["adaptation"])
    lines += ["", "## Out of family", "", out_of_family_text(results)]
    return "\n".join(lines) + "\n"


def out_of_family_text(results: Mapping) -> str:
    """One paragraph: the belief's confidence and the none-fits signal against each
    out-of-family prey beside the held-out prey's, and the planner against the
    flat-belief planner there."""
    adaptation = results["adaptation"]
    held = adaptation["held_out"]
    table = results["conditions_out_of_family"]
    parts = []
    for name in results["split"]["out_of_family"]:
        summary = adaptation["per_prey"][name]
        parts.append(
            f"Against {name} (population_planner's matches): P(none fits) "
            f"{summary['none_fits_by_episode_end'][0]:.2f} after episode 1 and "
            f"{summary['none_fits_by_episode_end'][-1]:.2f} after episode "
            f"{len(summary['none_fits_by_episode_end'])} (flagged, >= 0.5, at "
            f"{summary['none_fits_flagged_share']:.0%} of episode ends); largest "
            f"member probability {summary['top_member_by_episode_end'][0]:.2f} "
            f"and {summary['top_member_by_episode_end'][-1]:.2f}."
        )
    parts.append(
        f"Held-out prey: P(none fits) {held['none_fits_by_episode_end'][0]:.2f} and "
        f"{held['none_fits_by_episode_end'][-1]:.2f} (flagged at "
        f"{held['none_fits_flagged_share']:.0%} of episode ends); largest member "
        f"probability {held['top_member_by_episode_end'][0]:.2f} and "
        f"{held['top_member_by_episode_end'][-1]:.2f}."
    )
    pop, flat = _mean(table, "population_planner"), _mean(table, "flat_belief_planner")
    if pop is not None and flat is not None:
        parts.append(
            f"Captures against the out-of-family prey: population_planner "
            f"{interval_cell(table['population_planner'])}, flat_belief_planner "
            f"{interval_cell(table['flat_belief_planner'])}"
            + (
                f"; difference {interval_cell(results['out_of_family_versus_flat'])}"
                if "out_of_family_versus_flat" in results
                else ""
            )
            + "".join(
                f"; against {name} {interval_cell(difference)}"
                for name, difference in results.get(
                    "out_of_family_versus_flat_per_prey", {}
                ).items()
            )
            + "."
        )
    return " ".join(parts)


def _adaptation_lines(adaptation: Mapping) -> list[str]:
    held = adaptation["held_out"]
    late = held["late_minus_first"]
    first, last = held["late_episodes"]
    lines = [
        "",
        f"## Adaptation (population_planner, matches of "
        f"{len(held['captures_by_episode'])} episodes)",
        "",
        f"Held-out prey, {held['num_matches']} matches: episodes {first}-{last} "
        f"minus episode 1, {late['mean']:+.2f} [{late['ci95'][0]:+.2f}, "
        f"{late['ci95'][1]:+.2f}].",
        "",
        "| prey | "
        + " | ".join(f"ep {e + 1}" for e in range(len(held["captures_by_episode"])))
        + " | none fits at the end | top member at the end |",
        "|" + "---|" * (len(held["captures_by_episode"]) + 3),
    ]
    for name, summary in {"held-out (pooled)": held, **adaptation["per_prey"]}.items():
        cells = [f"{c['mean']:.2f}" for c in summary["captures_by_episode"]]
        lines.append(
            f"| {name} | {' | '.join(cells)} | "
            f"{summary['none_fits_by_episode_end'][-1]:.2f} | "
            f"{summary['top_member_by_episode_end'][-1]:.2f} |"
        )
    return lines


# -- plots ---------------------------------------------------------------------------
def plot_conditions(results: Mapping, path: str | Path) -> Path:
    """Captures per episode of every row with 95% intervals, against the held-out
    prey, the fitting set and the out-of-family prey."""
    colours = ("tab:blue", "tab:orange", "tab:green")
    return plot_interval_bars(
        list(results["conditions_held_out"]),
        [
            (label, colour, results[key])
            for (key, label), colour in zip(POOLS, colours, strict=True)
        ],
        path,
        title="Captures per episode by prey set (95% CI)",
        ylabel="captures per episode",
    )


def _match_series(adaptation: Mapping, outside: Sequence[str]) -> dict:
    """``{label: summary}``: the held-out prey pooled, then each of ``outside``."""
    series = {"held-out prey": adaptation["held_out"]}
    series.update({n: s for n, s in adaptation["per_prey"].items() if n in outside})
    return series


def plot_adaptation(
    adaptation: Mapping, path: str | Path, outside: Sequence[str]
) -> Path:
    """Captures by episode index of a match (95% intervals), held-out prey pooled
    and each out-of-family prey of ``outside``."""
    figure = Figure(figsize=(7.0, 4.0), dpi=100, facecolor="white")
    ax = figure.subplots()
    for name, summary in _match_series(adaptation, outside).items():
        by_episode = summary["captures_by_episode"]
        episodes = np.arange(1, len(by_episode) + 1)
        means = np.array([c["mean"] for c in by_episode])
        lo = np.array([c["ci95"][0] for c in by_episode])
        hi = np.array([c["ci95"][1] for c in by_episode])
        ax.plot(episodes, means, marker="o", label=name)
        ax.fill_between(episodes, lo, hi, alpha=0.2)
    ax.set_xlabel("episode of the match")
    ax.set_ylabel("captures per episode")
    ax.set_title("population_planner across a match (95% CI)")
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    figure.tight_layout()
    return save_png(figure, path)


def plot_none_fits(
    adaptation: Mapping, path: str | Path, outside: Sequence[str]
) -> Path:
    """The none-fits probability and the largest member probability through the
    first episode of a match, held-out prey against each out-of-family prey of
    ``outside``."""
    figure = Figure(figsize=(9.0, 3.8), dpi=100, facecolor="white")
    left, right = figure.subplots(1, 2)
    for name, summary in _match_series(adaptation, outside).items():
        steps = np.arange(1, len(summary["none_fits_by_step_first_episode"]) + 1)
        left.plot(steps, summary["none_fits_by_step_first_episode"], label=name)
        right.plot(steps, summary["top_member_by_step_first_episode"], label=name)
    left.set_title("P(none fits), first episode")
    right.set_title("largest member probability, first episode")
    for ax in (left, right):
        ax.set_xlabel("step")
        ax.set_ylim(-0.02, 1.02)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    figure.tight_layout()
    return save_png(figure, path)


# -- the page ------------------------------------------------------------------------
def report_html(results: Mapping, images: list[tuple[str, Path]]) -> str:
    """One self-contained page: the tables, the checks, every image."""
    esc = html.escape
    header, rows = table_rows(results)
    checks = [
        [statement, holds_mark(held), holds_mark(fit)]
        for (statement, held), (_, fit) in zip(
            capture_checks(results["conditions_held_out"]),
            capture_checks(results["conditions_fitting"]),
            strict=True,
        )
    ] + [
        [statement, holds_mark(holds), ""] for statement, holds in other_checks(results)
    ]
    per_prey = results["per_prey"]
    row_names = list(results["conditions_held_out"])
    prey_rows = [
        [prey, *(f"{values[r]:.2f}" if r in values else "-" for r in row_names)]
        for prey, values in per_prey.items()
    ]
    split = results["split"]
    ll = results["log_likelihood_per_move"]
    accuracy = results["belief_accuracy_by_step"]
    adaptation = results["adaptation"]["held_out"]
    late = adaptation["late_minus_first"]
    body = f"""<h1>Opponent models that generalise: held-out prey, and adaptation</h1>
<p>Profile <code>{esc(results["profile"])}</code>, git {esc(results["git_sha"])}.
Captures per episode, mean [95% CI], predator seeds
{esc(str(split["predator_seeds"]))}. Fitting set: {esc(", ".join(split["fitting"]))}.
Held out (never seen by the clones or the predators):
{esc(", ".join(split["held_out"]))}. Out of family:
{esc(", ".join(split["out_of_family"]))}.</p>
{html_table("conditions", header, rows)}
<h2>Criteria</h2>
{html_table("checks", ["criterion", "held-out", "fitting"], checks)}
<h2>Belief on held-out prey</h2>
<p>Intent accuracy {accuracy[0]:.2f} at step 1, {accuracy[-1]:.2f} at step
{len(accuracy)}; mean ECE {results["mean_ece"]:.3f}. Log-likelihood per move:
population {ll["population"]:.3f} nats, best single clone
({esc(ll["best_clone"])}) {ll["best_single_clone"]:.3f}, uniform
{ll["uniform"]:.3f}.</p>
<h2>Adaptation</h2>
<p>population_planner over {adaptation["num_matches"]} matches against held-out
prey: episodes {adaptation["late_episodes"][0]}-{adaptation["late_episodes"][1]}
minus episode 1, {late["mean"]:+.2f} [{late["ci95"][0]:+.2f},
{late["ci95"][1]:+.2f}].</p>
<h2>Out of family</h2>
<p>{esc(out_of_family_text(results))}</p>
<h2>Per prey</h2>
{html_table("per_prey", ["prey", *row_names], prey_rows)}
{figures_html(images)}
"""
    title = f"mopa: population opponent models ({results['profile']})"
    return html_page(title, body, font_px=13)


def write_report(results: Mapping, out: Path) -> list[Path]:
    """Write the plots and ``report.html`` into ``out``; returns the paths."""
    out = Path(out)
    outside = results["split"]["out_of_family"]
    images = [
        (
            "Captures per episode by prey set",
            plot_conditions(results, out / CONDITIONS_PNG),
        ),
        (
            "population_planner across a match",
            plot_adaptation(results["adaptation"], out / ADAPTATION_PNG, outside),
        ),
        (
            "Intent belief on held-out prey: accuracy and ECE by step",
            plot_calibration_by_step(
                results["belief_accuracy_by_step"],
                results["ece_by_step"],
                out / CALIBRATION_PNG,
                title="Population belief on held-out prey: accuracy and ECE by step",
            ),
        ),
        (
            "None fits and the largest member probability",
            plot_none_fits(results["adaptation"], out / NONE_FITS_PNG, outside),
        ),
    ]
    page = report_html(results, images)
    written = [path for _, path in images]
    written.append(atomic_write(out / REPORT, lambda file: file.write(page.encode())))
    return written
