"""mkdocs hook: the docstrings' Sphinx roles as plain code.

mopa's docstrings name other objects as Sphinx does (``:func:`~mopa.eval.evaluate```),
which mkdocstrings shows as written. This hook shows each as the object's name in
code (the last part where the name starts with ``~``, as Sphinx does).
"""

from __future__ import annotations

import re

ROLE = re.compile(
    r":(?:class|func|meth|attr|data|mod|obj|exc):<code>(~?)([\w.\s]+?)</code>"
)


def _name(match: re.Match) -> str:
    short, name = match.groups()
    name = re.sub(r"\s+", "", name)  # a name the docstring wrapped
    return f"<code>{name.rsplit('.', 1)[-1] if short else name}</code>"


def on_page_content(html, page, config, files):
    return ROLE.sub(_name, html)
