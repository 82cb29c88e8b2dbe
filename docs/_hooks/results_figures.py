"""mkdocs hook: serve each result folder's plots on the site.

The plots stay where the experiments wrote them (``results/FOLDER/*.png``); the
results pages (``docs/results/*.md``, written by ``mopa docs render``) show them
as ``figures/FOLDER/NAME.png``, which this hook adds to the site from there.
"""

from __future__ import annotations

from pathlib import Path

from mkdocs.structure.files import File

ROOT = Path(__file__).resolve().parents[2]


def on_files(files, config):
    for plot in sorted((ROOT / "results").glob("*/*.png")):
        uri = f"results/figures/{plot.parent.name}/{plot.name}"
        files.append(File.generated(config, uri, abs_src_path=str(plot)))
    return files
