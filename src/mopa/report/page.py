"""The pieces of a self-contained HTML report page: a page with mopa's report
style, tables, and figures embedded as data URIs (no file beside the page); and
:func:`demote_headings`, to nest one markdown text in another."""

from __future__ import annotations

import base64
import html
import re
from collections.abc import Sequence
from pathlib import Path


def data_uri(path: Path) -> str:
    """A PNG or GIF file as a ``data:`` URI."""
    mime = "image/gif" if path.suffix == ".gif" else "image/png"
    return f"data:{mime};base64," + base64.b64encode(path.read_bytes()).decode()


def html_table(
    table_id: str, header: Sequence[str], rows: Sequence[Sequence[str]]
) -> str:
    """A table with id ``table_id``, its header and rows escaped."""
    esc = html.escape
    return (
        f'<table id="{table_id}"><thead><tr>'
        + "".join(f"<th>{esc(h)}</th>" for h in header)
        + "</tr></thead><tbody>"
        + "".join(
            "<tr>" + "".join(f"<td>{esc(c)}</td>" for c in row) + "</tr>"
            for row in rows
        )
        + "</tbody></table>"
    )


def figures_html(images: Sequence[tuple[str, Path]]) -> str:
    """Every ``(caption, path)`` image as an embedded figure with its caption."""
    esc = html.escape
    return "".join(
        f'<figure><img alt="{esc(caption)}" src="{data_uri(path)}">'
        f"<figcaption>{esc(caption)}</figcaption></figure>"
        for caption, path in images
    )


def html_page(title: str, body: str, font_px: int = 14) -> str:
    """A whole page: ``title`` (escaped) and ``body`` (HTML) in the report style,
    table cells at ``font_px`` pixels."""
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<title>{html.escape(title)}</title>
<style>
body {{ font-family: sans-serif; max-width: 1000px; margin: 2em auto; }}
table {{ border-collapse: collapse; margin: 1em 0; }}
th, td {{ border: 1px solid #ccc; padding: 4px 8px; font-size: {font_px}px; }}
th {{ background: #f0f0f0; }}
figure {{ display: inline-block; margin: 1em; vertical-align: top; }}
img {{ max-width: 900px; }}
</style></head><body>
{body}</body></html>
"""


def demote_headings(markdown: str, levels: int) -> str:
    """``markdown`` with every heading ``levels`` deeper (outside code blocks)."""
    lines, fenced = [], False
    for line in markdown.splitlines():
        if line.startswith("```"):
            fenced = not fenced
        if not fenced and re.match(r"#+ ", line):
            line = "#" * levels + line
        lines.append(line)
    return "\n".join(lines)
