"""The co-training loop's report (``mopa cotrain``): ``results.md``, the
per-generation curves (``generations.png``) and ``report.html``, one
self-contained page (images embedded as base64)."""

from __future__ import annotations

import html
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
from matplotlib.figure import Figure

from mopa.core.files import atomic_write
from mopa.report.figures import save_png
from mopa.report.intent_report import interval_cell, markdown_table
from mopa.report.page import figures_html, html_page, html_table

REPORT = "report.html"
GENERATIONS_PNG = "generations.png"
CURVES = (
    (("score_vs_held_out",), "{metric} vs held-out reds"),
    (("score_vs_population",), "{metric} vs red's population"),
    (("exploitability", "score_vs_best_response"), "{metric} vs its best response"),
    (("score_vs_newest",), "{metric} vs the newest reds"),
    (
        ("belief_on_newest_red", "intent_accuracy"),
        "belief: the newest red's intent found",
    ),
    (
        ("belief_on_newest_red", "member_accuracy"),
        "belief: the newest red's member found",
    ),
)
"""``(path into a generation's results, title)`` of every curve; ``{metric}`` is
the league's score of blue (results.json's ``metric``: ``captures`` in the pursuit
games, ``blue_win`` in the battalion)."""
EARLIER_CURVES = (
    (("belief_on_newest_red", "accuracy"), "belief accuracy on the newest red"),
)
"""Curves of results written before the loop fitted the population model (tables
in ``results.md`` only)."""


def _cell(generation: Mapping, path: tuple[str, ...]) -> Mapping | None:
    value: Any = generation
    for key in path:
        value = None if value is None else value.get(key)
    return value


def series(results: Mapping) -> dict[str, list[Mapping]]:
    """Every blue's generations, the planning blue's planners and the policy they
    roll out as blues of their own (``plan (lookahead)``, ``plan (mcts)``, ``plan
    (rollout)``, beside ``plan``, the distilled policy). Results written before
    the loop evaluated several planners hold one, ``plan (planner)``."""
    out: dict[str, list[Mapping]] = {}
    for blue, generations in results["lineages"].items():
        out[blue] = generations
        for row in _planners(generations[0]) if generations else ():
            out[f"{blue} ({row})"] = [
                {"generation": g["generation"], **_planners(g)[row]}
                for g in generations
            ]
    return out


def _planners(generation: Mapping) -> Mapping:
    """The planning blue's rows of one generation by name (``planner``, the one
    planner of results written before the loop evaluated several)."""
    if "planners" in generation:
        return generation["planners"]
    return {"planner": generation["planner"]} if "planner" in generation else {}


def _rating_name(blue: str, generation: int) -> str:
    """The league's name of a :func:`series` blue at ``generation``."""
    name, _, row = blue.partition(" (")
    return f"blue:{name}_g{generation}" + (f"_{row[:-1]}" if row else "")


def _title(results: Mapping, title: str) -> str:
    return title.format(metric=results["metric"])


def command(results: Mapping) -> str:
    """The command that writes these results."""
    return f"mopa cotrain --profile {results['profile']} --out DIR"


# -- results.md ----------------------------------------------------------------------
def final_rows(results: Mapping) -> tuple[list[str], list[list[str]]]:
    """The last generation of every blue: its score against each red set, its best
    response's return and blue's rating."""
    header = [
        "blue",
        "vs red's population",
        "vs held-out reds",
        "vs its best response",
        "best response's return",
        "rating (Bradley-Terry, Elo scale)",
    ]
    players = results["ratings"]["players"]
    rows = []
    for blue, generations in series(results).items():
        last = generations[-1]
        rating = players[_rating_name(blue, last["generation"])]
        low, high = rating["ci95"]
        rows.append(
            [
                blue,
                interval_cell(last["score_vs_population"]),
                interval_cell(last["score_vs_held_out"]),
                interval_cell(last["exploitability"]["score_vs_best_response"]),
                interval_cell(last["exploitability"]["best_response_return"]),
                f"{rating['rating']:.0f} [{low:.0f}, {high:.0f}]",
            ]
        )
    return header, rows


def curve_rows(
    results: Mapping, path: tuple[str, ...]
) -> tuple[list[str], list[list[str]]]:
    """One curve as a table: a row per blue, a column per generation."""
    lineages = series(results)
    count = len(next(iter(lineages.values())))
    header = ["blue", *(f"g{g}" for g in range(count))]
    rows = [
        [blue, *(interval_cell(_cell(g, path)) for g in generations)]
        for blue, generations in lineages.items()
        if any(_cell(g, path) is not None for g in generations)
    ]
    return header, rows


def model_rows(results: Mapping) -> tuple[list[str], list[list[str]]]:
    """Every fitted model of red: its members, how its intents were learned and
    how often the labels were red's true intents (an evaluation)."""
    header = [
        "blue",
        "generation",
        "members",
        "intents",
        "labels right",
        "relabelled by EM (per round)",
    ]
    rows = []
    for blue, generations in results["lineages"].items():
        for g in generations:
            model = g.get("model")
            if not model or "members" not in model:  # no population model
                continue
            accuracy = model.get("label_accuracy")
            rows.append(
                [
                    blue,
                    str(g["generation"]),
                    str(len(model["members"])),
                    str(model.get("intent_labels") or "-"),
                    "-" if accuracy is None else f"{accuracy:.2f}",
                    ", ".join(f"{x:.2f}" for x in model.get("em_relabelled", []))
                    or "-",
                ]
            )
    return header, rows


def style_rows(results: Mapping) -> tuple[list[str], list[list[str]]]:
    """Every style model of red (results written before the loop fitted the
    population model: red's styles found by a VAE and k-means): how many styles,
    and how they match red's identities and intents (adjusted Rand index,
    purity)."""
    header = [
        "blue",
        "generation",
        "styles",
        "ARI vs red identity (purity)",
        "ARI vs red's intent (purity)",
    ]
    rows = []
    for blue, generations in results["lineages"].items():
        for g in generations:
            model = g.get("model")
            if not model or "num_styles" not in model:
                continue
            cells = [
                f"{score['ari']:.2f} ({score['purity']:.2f})" if score else "-"
                for score in (model["against_identities"], model.get("against_intents"))
            ]
            rows.append([blue, str(g["generation"]), str(model["num_styles"]), *cells])
    return header, rows


def improvement_rows(results: Mapping) -> tuple[list[str], list[list[str]]]:
    """Every blue's score against the held-out reds at the last generation less
    generation 0's, paired episode by episode (none in results written before the
    loop paired its generations)."""
    header = ["blue", "last generation less generation 0 (paired)"]
    rows = []
    for blue, by_row in results.get("improvement", {}).items():
        for row, cell in by_row.items():
            name = blue if row == "blue" else f"{blue} ({row})"
            rows.append([name, _signed_cell(cell)])
    return header, rows


STAGE_KINDS = (
    ("family_", "red's family (co-training runs, scripted clones)"),
    ("blue_blind_g0", "generation 0's blind blue"),
    ("blue_model_g0", "generation 0's model blue"),
    ("model_", "blue's models of red"),
    ("blue_", "blues of generation 1 on"),
    ("distill_", "the planner's distillations"),
    ("red_", "best responses"),
    ("eval_", "evaluations (planners included)"),
)
"""Stage names' prefixes, in matching order, and what they are."""


def stage_time_rows(results: Mapping) -> tuple[list[str], list[list[str]]]:
    """Wall seconds of the run's stages by kind (as first run; a reused stage
    counts its first run's time)."""
    totals: dict[str, list[float]] = {}
    for name, seconds in results.get("timing_s", {}).items():
        kind = next((k for k, _ in STAGE_KINDS if name.startswith(k)), "other")
        totals.setdefault(kind, []).append(float(seconds))
    labels = dict(STAGE_KINDS)
    header = ["stages", "count", "wall seconds"]
    rows = [
        [labels.get(kind, kind), str(len(totals[kind])), f"{sum(totals[kind]):.0f}"]
        for kind in [*labels, "other"]
        if kind in totals
    ]
    if rows:
        every = [x for values in totals.values() for x in values]
        rows.append(["all", str(len(every)), f"{sum(every):.0f}"])
    return header, rows


def _signed_cell(cell: Mapping) -> str:
    low, high = cell["ci95"]
    return f"{cell['mean']:+.2f} [{low:+.2f}, {high:+.2f}]"


def criteria_rows(results: Mapping) -> tuple[list[str], list[list[str]]]:
    """The last generation's comparisons: ratio of means, intervals apart (none in
    results written before the loop compared its blues)."""
    header = ["comparison", "a", "b", "a / b", "95% intervals apart"]
    rows = [
        [
            name,
            f"{c['a']:.2f}",
            f"{c['b']:.2f}",
            "-" if c["ratio"] is None else f"{c['ratio']:.2f}",
            "yes" if c["intervals_apart"] else "no",
        ]
        for name, c in results.get("criteria", {}).items()
    ]
    return header, rows


def results_markdown(results: Mapping) -> str:
    lines = [
        "# Co-training: red adapts, blue improves, re-models and plans",
        "",
        f"Profile `{results['profile']}` (`{command(results)}`). Blue's "
        f"{_title(results, '{metric}')} per episode, mean [95% interval over "
        "episodes] (higher is better for blue; the score against its best response "
        "measures how exploitable it is).",
        "",
        "## The last generation",
        "",
        *markdown_table(*final_rows(results)),
        "",
    ]
    for path, title in (*CURVES, *EARLIER_CURVES):
        header, rows = curve_rows(results, path)
        if rows:
            lines += [f"## {_title(results, title)}", "", *markdown_table(header, rows)]
            lines.append("")
    for title, (header, rows) in (
        ("Improvement against the held-out reds", improvement_rows(results)),
        ("The last generation's comparisons", criteria_rows(results)),
        ("Blue's models of red", model_rows(results)),
        ("Styles found without labels", style_rows(results)),
        ("Where the time went", stage_time_rows(results)),
    ):
        if rows:
            lines += [f"## {title}", "", *markdown_table(header, rows), ""]
    return "\n".join(lines)


# -- curves and the page -------------------------------------------------------------
def plot_generations(results: Mapping, path: str | Path) -> Path:
    """Every curve of :data:`CURVES` against the generation, one line per blue
    with its 95% band."""
    figure = Figure(figsize=(13.0, 6.6))
    axes = figure.subplots(2, 3).ravel()
    for ax, (curve, title) in zip(axes, CURVES, strict=True):
        for index, (blue, generations) in enumerate(series(results).items()):
            points = [(g["generation"], _cell(g, curve)) for g in generations]
            points = [(x, c) for x, c in points if c is not None]
            if not points:
                continue
            x = np.array([x for x, _ in points])
            cells = [c for _, c in points]
            mean = np.array([c["mean"] for c in cells])
            low = np.array([c["ci95"][0] for c in cells])
            high = np.array([c["ci95"][1] for c in cells])
            color = f"C{index}"  # one colour per blue in every panel
            ax.plot(x, mean, marker="o", label=blue, color=color)
            ax.fill_between(x, low, high, alpha=0.2, color=color)
        ax.set_xlabel("generation")
        ax.set_title(_title(results, title), fontsize=10)
        ax.set_xticks(range(len(next(iter(results["lineages"].values())))))
    per_episode = _title(results, "{metric} per episode")
    axes[0].set_ylabel(per_episode)
    axes[3].set_ylabel(per_episode)
    axes[4].set_ylabel("share of episodes")
    axes[0].legend(fontsize=7)
    figure.tight_layout()
    return save_png(figure, path, dpi=100)


def report_html(results: Mapping, images: list[tuple[str, Path]], sha: str) -> str:
    """One self-contained page: the last generation, every curve as a table, the
    styles, the ratings and the curves."""
    esc = html.escape
    tables = [html_table("final", *final_rows(results))]
    for index, (path, title) in enumerate(CURVES):
        header, rows = curve_rows(results, path)
        if rows:
            tables.append(f"<h2>{esc(_title(results, title))}</h2>")
            tables.append(html_table(f"curve{index}", header, rows))
    for key, title, (header, rows) in (
        (
            "improvement",
            "Improvement against the held-out reds",
            improvement_rows(results),
        ),
        ("criteria", "The last generation's comparisons", criteria_rows(results)),
        ("models", "Blue's models of red", model_rows(results)),
        ("timing", "Where the time went", stage_time_rows(results)),
    ):
        if rows:
            tables += [f"<h2>{esc(title)}</h2>", html_table(key, header, rows)]
    players = results["ratings"]["players"]
    ratings = [
        [
            name,
            f"{p['rating']:.0f}",
            f"[{p['ci95'][0]:.0f}, {p['ci95'][1]:.0f}]",
            f"{p['elo']:.0f}",
        ]
        for name, p in players.items()
    ]
    body = f"""<h1>Co-training: red adapts, blue improves, re-models it and answers</h1>
<p>Profile <code>{esc(results["profile"])}</code>, git {esc(sha)}. Command:
<code>{esc(command(results))}</code>. Blue's
{esc(_title(results, "{metric}"))} per episode, mean [95% interval over episodes];
the score against blue's own best response measures how exploitable it is (lower:
more exploitable).</p>
<h2>The last generation</h2>
{"".join(tables)}
{figures_html(images)}
<h2>Ratings</h2>
<p>{esc(results["ratings"]["rule"])}, every blue and red checkpoint of the league;
Elo in the order played beside it (the league's store).</p>
{html_table("ratings", ["player", "rating", "95% interval", "Elo"], ratings)}
"""
    return html_page(f"mopa: co-training ({results['profile']})", body, font_px=13)


def write_report(results: Mapping, out: Path) -> list[Path]:
    """Write ``generations.png`` and ``report.html`` into ``out``; returns the
    paths. The page names the commit recorded in ``out/meta.json``."""
    out = Path(out)
    meta = out / "meta.json"
    sha = json.loads(meta.read_text()).get("git_sha", "?") if meta.is_file() else "?"
    curves = plot_generations(results, out / GENERATIONS_PNG)
    page = report_html(results, [("Per-generation curves", curves)], str(sha))
    report = atomic_write(out / REPORT, lambda file: file.write(page.encode()))
    return [curves, report]
