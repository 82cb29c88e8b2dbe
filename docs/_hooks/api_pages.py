"""mkdocs hook: one API reference page per module the nav lists.

A nav entry ``api/mopa.NAME.md`` with no such file becomes a page holding the
module's reference (``::: mopa.NAME``, rendered by mkdocstrings), so adding a
module to the reference is one line of ``mkdocs.yml``.
"""

from __future__ import annotations

import re

from mkdocs.structure.files import File

PAGE = re.compile(r"^api/(mopa(?:\.\w+)*)\.md$")


def _entries(nav):
    for item in nav if isinstance(nav, list) else [nav]:
        if isinstance(item, dict):
            for value in item.values():
                yield from _entries(value)
        elif isinstance(item, list):
            yield from _entries(item)
        elif isinstance(item, str):
            yield item


def on_files(files, config):
    for entry in _entries(config["nav"] or []):
        match = PAGE.match(entry)
        if match and files.get_file_from_path(entry) is None:
            module = match.group(1)
            content = f"::: {module}\n    options:\n      heading_level: 1\n"
            files.append(File.generated(config, entry, content=content))
    return files
