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
    (("exploitability", "score_vs_best_response"), "{metric} vs its best response"),
    (("score_vs_held_out",), "{metric} vs held-out reds"),
    (("score_vs_population",), "{metric} vs red's population"),
    (("belief_on_newest_red", "accuracy"), "belief accuracy on the newest red"),
)
"""``(path into a generation's results, title)`` of every curve; ``{metric}`` is
the league's score of blue (results.json's ``metric``: ``captures`` in the pursuit
games, ``blue_win`` in the battalion)."""


def _cell(generation: Mapping, path: tuple[str, ...]) -> Mapping | None:
    value: Any = generation
    for key in path:
        value = None if value is None else value.get(key)
    return value


def series(results: Mapping) -> dict[str, list[Mapping]]:
    """Every blue's generations, the planning blue's planner as a blue of its own
    (``plan (planner)``, beside ``plan``, its distillation)."""
    out: dict[str, list[Mapping]] = {}
    for blue, generations in results["lineages"].items():
        out[blue] = generations
        if generations and "planner" in generations[0]:
            out[f"{blue} (planner)"] = [
                {"generation": g["generation"], **g["planner"]} for g in generations
            ]
    return out


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
        name = blue.replace(" (planner)", "")
        planner = "_planner" if name != blue else ""
        rating = players[f"blue:{name}_g{last['generation']}{planner}"]
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


def style_rows(results: Mapping) -> tuple[list[str], list[list[str]]]:
    """Every fitted style model: how many styles, and how they match red's
    identities and intents (adjusted Rand index, purity)."""
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
            if not g["model"]:
                continue
            cells = [
                f"{score['ari']:.2f} ({score['purity']:.2f})" if score else "-"
                for score in (
                    g["model"]["against_identities"],
                    g["model"].get("against_intents"),
                )
            ]
            rows.append(
                [blue, str(g["generation"]), str(g["model"]["num_styles"]), *cells]
            )
    return header, rows


def results_markdown(results: Mapping) -> str:
    lines = [
        "# Co-training: red adapts, blue re-models",
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
    for path, title in CURVES:
        header, rows = curve_rows(results, path)
        if rows:
            lines += [f"## {_title(results, title)}", "", *markdown_table(header, rows)]
            lines.append("")
    header, rows = style_rows(results)
    if rows:
        lines += ["## Styles found without labels", "", *markdown_table(header, rows)]
        lines.append("")
    return "\n".join(lines)


# -- curves and the page -------------------------------------------------------------
def plot_generations(results: Mapping, path: str | Path) -> Path:
    """Every curve of :data:`CURVES` against the generation, one line per blue
    with its 95% band."""
    figure = Figure(figsize=(9.0, 6.6))
    axes = figure.subplots(2, 2).ravel()
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
    axes[2].set_ylabel(per_episode)
    axes[3].set_ylabel("share of episodes")
    axes[0].legend(fontsize=8)
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
    header, rows = style_rows(results)
    if rows:
        tables += [
            "<h2>Styles found without labels</h2>",
            html_table("styles", header, rows),
        ]
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
    body = f"""<h1>Co-training: red adapts, blue re-models it and answers</h1>
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
