"""The report of the hidden-intent experiment (Exp 6): ``results.md``, the plots, the
GIF and ``report.html``, one self-contained page (images embedded as base64).

Everything here reads saved results: the ``results.json`` dict and the files the
experiment's stages left in ``OUT/stages`` (the calibration's reliability bins,
the recorded GIF, per-seed numbers). Nothing imports training code.
"""

from __future__ import annotations

import html
import json
import math
import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from mopa.core.files import atomic_write, write_json
from mopa.report.calibration import plot_calibration_by_step, plot_reliability_diagram
from mopa.report.figures import plot_interval_bars
from mopa.report.page import figures_html, html_page, html_table

CONDITIONS_PNG = "conditions.png"
CALIBRATION_PNG = "belief_calibration.png"
RELIABILITY_PNG = "reliability.png"
GIF = "belief_planner.gif"
REPORT = "report.html"

MISSING_CONDITIONS: tuple[str, ...] = ()
"""Conditions of the issue not built yet (left out of ``conditions``)."""


RESEARCH = {
    "unaware": 2.68,
    "oracle": 4.05,
    "oracle_random_intent": 1.42,
    "belief_reactive": 2.82,
    "hard_inference": 2.56,
    "belief_planner": 4.31,
    "flat_belief_planner": 3.07,
    "jepa_belief_planner": 4.08,
    "wm_ssm_planner": 2.53,
    "wm_jepa_planner": 0.57,
}
"""Captures per episode in the research's Exp 6 write-up."""


RERUNS = {
    "rerun 1": {
        "unaware": 3.17,
        "oracle": 4.23,
        "oracle_random_intent": 1.40,
        "belief_reactive": 2.72,
        "hard_inference": 2.66,
        "belief_planner": 4.71,
        "flat_belief_planner": 3.41,
    },
    "rerun 2 (partitionable threefry)": {
        "unaware": 2.77,
        "oracle": 3.80,
        "oracle_random_intent": 1.45,
        "belief_reactive": 2.75,
        "hard_inference": 2.45,
        "belief_planner": 4.05,
        "flat_belief_planner": 3.41,
    },
}
"""The research pipeline rerun on this project's 2-core machine (``intent.md``)."""
DETAILS = "details.json"
ONLINE_SOURCE = "bayes"
"""The calibration stage's entry holding the online belief (``results.json``'s
``belief_accuracy_by_step`` and ``ece_by_step``)."""
ONLINE_BELIEF = "exact Bayes from the prey's policy"


# -- checks --------------------------------------------------------------------------
def _mean(table: Mapping, name: str) -> float | None:
    row = table.get(name)
    return None if row is None else float(row["mean"])


def ordering_checks(table: Mapping[str, Any]) -> list[tuple[str, bool | None]]:
    """The issue's orderings on one protocol's ``{NAME: {"mean", "ci95"}}``:
    ``(statement, holds)``; ``None`` where a condition is missing."""

    def ci(name):
        return table[name]["ci95"] if name in table else None

    def check(statement, names, fn):
        if any(n not in table for n in names):
            return statement, None
        return statement, bool(fn())

    m = lambda n: _mean(table, n)  # noqa: E731
    return [
        check(
            "oracle >= 1.3 x unaware",
            ("oracle", "unaware"),
            lambda: m("oracle") >= 1.3 * m("unaware"),
        ),
        check(
            "oracle_random_intent < unaware",
            ("oracle_random_intent", "unaware"),
            lambda: m("oracle_random_intent") < m("unaware"),
        ),
        check(
            "belief_planner >= 1.5 x unaware",
            ("belief_planner", "unaware"),
            lambda: m("belief_planner") >= 1.5 * m("unaware"),
        ),
        check(
            "belief_planner >= oracle",
            ("belief_planner", "oracle"),
            lambda: m("belief_planner") >= m("oracle"),
        ),
        check(
            "belief_planner > unaware, intervals apart",
            ("belief_planner", "unaware"),
            lambda: ci("belief_planner")[0] > ci("unaware")[1],
        ),
        check(
            "flat_belief_planner < belief_planner, intervals apart",
            ("flat_belief_planner", "belief_planner"),
            lambda: ci("flat_belief_planner")[1] < ci("belief_planner")[0],
        ),
        check(
            "jepa_belief_planner within belief_planner's interval or above",
            ("jepa_belief_planner", "belief_planner"),
            lambda: m("jepa_belief_planner") >= ci("belief_planner")[0],
        ),
        check(
            "bc_belief_planner within belief_planner's interval or above",
            ("bc_belief_planner", "belief_planner"),
            lambda: m("bc_belief_planner") >= ci("belief_planner")[0],
        ),
    ]


def criteria(results: Mapping[str, Any]) -> list[tuple[str, bool | None]]:
    """Exp 6's orderings on a results tree, under both protocols (the paired
    own-seed one and the common opponent pool): ``(statement, holds)``."""
    paired = ordering_checks(results["conditions"])
    common = ordering_checks(results["conditions_common_opponent"])
    return [
        *((f"{s} (paired)", held) for s, held in paired),
        *((f"{s} (common opponent)", held) for s, held in common),
    ]


def markdown_table(header: list[str], rows: list[list[str]]) -> list[str]:
    """The lines of a markdown table: the header, its rule, then the rows."""
    return [
        "| " + " | ".join(header) + " |",
        "|" + "---|" * len(header),
        *("| " + " | ".join(row) + " |" for row in rows),
    ]


def holds_mark(holds: bool | None) -> str:
    """A check's verdict as a table cell: yes, NO, or n/a where it cannot be read."""
    return {True: "yes", False: "NO", None: "n/a"}[holds]


# -- results.md ----------------------------------------------------------------------
def interval_cell(row: Mapping | None) -> str:
    """``mean [lo, hi]`` of a condition's row (``mean`` and ``ci95``), or a dash."""
    if row is None:
        return "—"
    lo, hi = row["ci95"]
    return f"{row['mean']:.2f} [{lo:.2f}, {hi:.2f}]"


def _number(value: float | None) -> str:
    return "—" if value is None else f"{value:.2f}"


def table_rows(
    results: Mapping, research: Mapping, reruns: Mapping[str, Mapping]
) -> tuple[list[str], list[list[str]]]:
    """The header and rows of the conditions table (also used by the HTML)."""
    header = [
        "condition",
        "mopa paired",
        "mopa common opponent",
        "research",
        *reruns,
    ]
    names = list(results["conditions"])
    for name in research:
        if name not in names:
            names.append(name)
    rows = []
    for name in names:
        rows.append(
            [
                name,
                interval_cell(results["conditions"].get(name)),
                interval_cell(results["conditions_common_opponent"].get(name)),
                _number(research.get(name)),
                *(_number(rerun.get(name)) for rerun in reruns.values()),
            ]
        )
    return header, rows


def results_markdown(
    results: Mapping,
    research: Mapping[str, float] = RESEARCH,
    reruns: Mapping[str, Mapping[str, float]] = RERUNS,
    missing: Sequence[str] = MISSING_CONDITIONS,
) -> str:
    """``results.md``: mopa's captures per episode beside the research's."""
    header, rows = table_rows(results, research, reruns)
    n = next(iter(results["conditions"].values()), {})
    lines = [
        f"# Exp 6: hidden intent (profile `{results['profile']}`)",
        "",
        "Captures per episode, mean [95% CI over episodes]. Paired: each condition "
        "against the prey co-trained with its predators (the research's protocol). "
        "Common opponent: every condition against the prey of all three training "
        f"conditions, every seed. {n.get('n_seeds', '?')} predator seed(s), "
        f"{n.get('n_episodes', '?')} episodes per paired row.",
        "",
        *markdown_table(header, rows),
        "",
        "## Orderings the issue asks for",
        "",
        "| statement | paired | common opponent |",
        "|---|---|---|",
    ]
    paired = ordering_checks(results["conditions"])
    common = ordering_checks(results["conditions_common_opponent"])
    disagree = []
    for (statement, a), (_, b) in zip(paired, common, strict=True):
        lines.append(f"| {statement} | {holds_mark(a)} | {holds_mark(b)} |")
        if a is not None and b is not None and a != b:
            disagree.append(statement)
    lines.append("")
    if disagree:
        lines.append(
            "The common-opponent protocol disagrees with the paired one on: "
            + "; ".join(disagree)
            + "."
        )
    else:
        lines.append("The two protocols agree on every ordering checked.")
    accuracy, ece = results["belief_accuracy_by_step"], results["ece_by_step"]
    lines += [
        "",
        f"## Online belief ({ONLINE_BELIEF})",
        "",
        f"Accuracy {accuracy[0]:.2f} after 1 step, "
        f"{accuracy[min(2, len(accuracy) - 1)]:.2f} after 3, {accuracy[-1]:.2f} "
        f"after {len(accuracy)} (research: 0.37 at 3 steps -> 0.97 at 25); mean "
        f"ECE over steps {float(np.mean(ece)):.3f}.",
        "",
        "## Learned world models",
        "",
        "Open-loop position RMSE 5 steps ahead (research: ssm 0.07, jepa 0.24): "
        + ", ".join(f"{k} {_number(v)}" for k, v in results["wm_rmse_5step"].items())
        + ".",
        "",
        *(
            [
                "Missing conditions (left out of `conditions`): "
                + ", ".join(f"`{m}`" for m in missing)
                + ".",
                "",
            ]
            if missing
            else []
        ),
        "## Time per stage (s)",
        "",
        "Wall seconds of each stage. Some run at the same time, so their times "
        "overlap: encoders beside train_unaware; calibration and world_models "
        "beside train_oracle; eval_paired, eval_common and gif together.",
        "",
        *(f"- {k}: {v:.1f}" for k, v in results["timing_s"].items()),
        "",
    ]
    return "\n".join(lines)


# -- plots ---------------------------------------------------------------------------
def plot_conditions(
    results: Mapping, research: Mapping[str, float], path: str | Path
) -> Path:
    """Captures per episode of every condition with 95% intervals, both
    protocols, and the research's figure as a marker."""
    return plot_interval_bars(
        list(results["conditions"]),
        [
            ("paired", "tab:blue", results["conditions"]),
            ("common opponent", "tab:orange", results["conditions_common_opponent"]),
        ],
        path,
        title="Exp 6: captures per episode (95% CI)",
        ylabel="captures per episode",
        markers=("research", research),
    )


def _stage_result(out: Path, name: str) -> dict:
    path = out / "stages" / name / "stage.json"
    return json.loads(path.read_text())["result"] if path.is_file() else {}


# -- the page ------------------------------------------------------------------------
def _sources_table(calibration: Mapping) -> str:
    """HTML table: accuracy at steps 1, 3 and the last, and mean ECE, of every
    belief source in the calibration stage's result."""
    rows = []
    for name, source in calibration.items():
        if not isinstance(source, Mapping) or "accuracy_by_step" not in source:
            continue
        acc = source["accuracy_by_step"]
        cells = [
            name,
            f"{acc[0]:.2f}",
            f"{acc[min(2, len(acc) - 1)]:.2f}",
            f"{acc[-1]:.2f}",
            f"{float(np.mean(source['ece_by_step'])):.3f}",
        ]
        rows.append("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in cells))
    if not rows:
        return ""
    return (
        '<table id="sources"><thead><tr><th>belief source</th><th>accuracy, step 1'
        "</th><th>step 3</th><th>last step</th><th>mean ECE</th></tr></thead>"
        "<tbody>" + "</tr>".join(rows) + "</tr></tbody></table>"
    )


def report_html(
    results: Mapping,
    research: Mapping,
    reruns: Mapping,
    missing: Sequence[str],
    images: Sequence[tuple[str, Path]],
    calibration: Mapping | None = None,
) -> str:
    """One self-contained page: the table, the ordering checks, every image."""
    header, rows = table_rows(results, research, reruns)
    esc = html.escape
    table = html_table("conditions", header, rows)
    checks = zip(
        ordering_checks(results["conditions"]),
        ordering_checks(results["conditions_common_opponent"]),
        strict=True,
    )
    check_rows = "".join(
        f"<tr><td>{esc(s)}</td><td>{holds_mark(a)}</td><td>{holds_mark(b)}</td></tr>"
        for (s, a), (_, b) in checks
    )
    accuracy = results["belief_accuracy_by_step"]
    ece = results["ece_by_step"]
    body = f"""<h1>Exp 6: infer a hidden intent, plan against the belief</h1>
<p>Profile <code>{esc(results["profile"])}</code>, git {esc(results["git_sha"])}.
Captures per episode, mean [95% CI]. Paired: each condition against the prey
co-trained with its predators (the research's protocol); common opponent: every
condition against the prey of all three training conditions.</p>
{table}
<h2>Orderings</h2>
<table id="checks"><thead><tr><th>statement</th><th>paired</th>
<th>common opponent</th></tr></thead><tbody>{check_rows}</tbody></table>
<h2>Online belief ({esc(ONLINE_BELIEF)})</h2>
<p>Accuracy {accuracy[0]:.2f} after 1 step, {accuracy[-1]:.2f} after
{len(accuracy)}; mean ECE {float(np.mean(ece)):.3f}.</p>
{_sources_table(calibration or {})}
<p>Learned world models, position RMSE 5 steps ahead: {
        esc(", ".join(f"{k} {_number(v)}" for k, v in results["wm_rmse_5step"].items()))
    }.{f" Not built: {esc(', '.join(missing))}." if missing else ""}</p>
{figures_html(images)}
"""
    return html_page(f"mopa: Exp 6, hidden intent ({results['profile']})", body)


def write_report(
    results: Mapping,
    out: Path,
    research: Mapping[str, float] = RESEARCH,
    reruns: Mapping[str, Mapping[str, float]] = RERUNS,
    missing: Sequence[str] = MISSING_CONDITIONS,
) -> list[Path]:
    """Write the plots, the GIF, ``details.json`` and ``report.html`` into ``out``
    (reading the stage files under ``out/stages``); returns the paths."""
    out = Path(out)
    written = [plot_conditions(results, research, out / CONDITIONS_PNG)]
    written.append(
        plot_calibration_by_step(
            results["belief_accuracy_by_step"],
            results["ece_by_step"],
            out / CALIBRATION_PNG,
            title=f"Online belief ({ONLINE_BELIEF}): accuracy and ECE by step",
        )
    )
    calibration = _stage_result(out, "calibration")
    images = [
        ("Captures per episode, both protocols", out / CONDITIONS_PNG),
        ("Belief accuracy and ECE by step", out / CALIBRATION_PNG),
    ]
    if ONLINE_SOURCE in calibration:
        bins = calibration[ONLINE_SOURCE]["reliability"]
        nan = lambda v: [math.nan if x is None else x for x in v]  # noqa: E731
        written.append(
            plot_reliability_diagram(
                nan(bins["confidence"]),
                nan(bins["accuracy"]),
                bins["count"],
                out / RELIABILITY_PNG,
                title=f"Online belief ({ONLINE_BELIEF}), every step",
            )
        )
        images.append(("Reliability diagram", out / RELIABILITY_PNG))
    gif = out / "stages" / "gif" / GIF
    if gif.is_file():
        shutil.copyfile(gif, out / GIF)
        written.append(out / GIF)
        images.append(("Belief planner vs its prey, with the belief", out / GIF))
    details = {
        name: _stage_result(out, name)
        for name in (
            "encoders",
            "calibration",
            "world_models",
            "eval_paired",
            "eval_common",
        )
    }
    written.append(write_json(out / DETAILS, details))
    page = report_html(results, research, reruns, missing, images, calibration)
    written.append(atomic_write(out / REPORT, lambda file: file.write(page.encode())))
    return written
