"""The documentation site's generated files, rendered from the committed result
folders (``mopa docs render``): every results page of :data:`mopa.report.claims.
PAGES` and RESULTS.md's summary, with the claims of :data:`mopa.report.claims.
CLAIMS` (the measures, criteria and page layout are :mod:`mopa.report.docs`).

:func:`render_all` returns every generated file's text; :func:`stale_files` the
committed files that differ from it (the test suite fails on any), and
:func:`write_all` writes them::

    from mopa.report import site

    site.write_all(".")  # docs/results/*.md and RESULTS.md's summary
    assert site.stale_files(".") == []
"""

from __future__ import annotations

from pathlib import Path

from mopa.errors import InvalidParameterError
from mopa.report.claims import CLAIMS, PAGES
from mopa.report.docs import (
    NARRATIVE,
    REFERENCE,
    REFERENCE_PAGE,
    RESULTS_PAGES,
    SUMMARY_BEGIN,
    SUMMARY_END,
    SUMMARY_FILE,
    processors_text,
    read_folder,
    render_page,
    render_summary,
)


def render_all(root: str | Path = ".") -> dict[Path, str]:
    """Every generated file's text, by its path relative to ``root``: each
    results page and RESULTS.md with its summary region filled.

    Raises:
        InvalidParameterError: a folder, narrative or RESULTS.md's markers are
            missing, or a claim reads a path its folder lacks.
    """
    root = Path(root)
    names = sorted({f.name for page in PAGES for f in page.folders})
    records = {name: read_folder(root, name) for name in names}
    unknown = sorted({c.folder for c in CLAIMS} - set(records))
    if unknown:
        raise InvalidParameterError(f"claims name folders on no page: {unknown}")
    files: dict[Path, str] = {}
    for page in PAGES:
        narrative_path = root / NARRATIVE / f"{page.slug}.md"
        if not narrative_path.exists():
            raise InvalidParameterError(f"{narrative_path} is missing")
        on_page = {f.name: records[f.name] for f in page.folders}
        files[RESULTS_PAGES / f"{page.slug}.md"] = render_page(
            page, on_page, CLAIMS, narrative_path.read_text()
        )
    summary = render_summary(PAGES, records, CLAIMS)
    if (root / "results" / REFERENCE).is_dir():
        reference = read_folder(root, REFERENCE)
        narrative_path = root / NARRATIVE / f"{REFERENCE}.md"
        if not narrative_path.exists():
            raise InvalidParameterError(f"{narrative_path} is missing")
        files[RESULTS_PAGES / f"{REFERENCE}.md"] = render_page(
            REFERENCE_PAGE, {REFERENCE: reference}, (), narrative_path.read_text()
        )
        summary += "\n\n" + processors_text(reference)
    files[RESULTS_PAGES / "index.md"] = "\n".join(
        [
            "<!-- Written by `mopa docs render` from results/: edit "
            "mopa.report.claims, then run it again. -->",
            "",
            "# Results",
            "",
            "Every experiment's headline claims, one row each, read from the "
            "committed result folders (`results/NAME`: `results.json` for the "
            "figures, `meta.json` for the commit and processor that wrote them, "
            "`verify.json` for the last `mopa verify` of the folder). Each "
            "experiment's page has its tables and plots.",
            "",
            render_summary(PAGES, records, CLAIMS, link_prefix=""),
            "",
        ]
    )
    files[SUMMARY_FILE] = _replace_summary((root / SUMMARY_FILE).read_text(), summary)
    return files


def _replace_summary(text: str, summary: str) -> str:
    if text.count(SUMMARY_BEGIN) != 1 or text.count(SUMMARY_END) != 1:
        raise InvalidParameterError(
            f"{SUMMARY_FILE} must hold the markers {SUMMARY_BEGIN!r} and "
            f"{SUMMARY_END!r} once each"
        )
    head, rest = text.split(SUMMARY_BEGIN)
    _, tail = rest.split(SUMMARY_END)
    return f"{head}{SUMMARY_BEGIN}\n{summary}\n{SUMMARY_END}{tail}"


def stale_files(root: str | Path = ".") -> list[Path]:
    """The generated files whose committed text differs from what
    :func:`render_all` gives (or that are missing), relative to ``root``."""
    root = Path(root)
    stale = []
    for path, text in render_all(root).items():
        target = root / path
        if not target.exists() or target.read_text() != text:
            stale.append(path)
    return stale


def write_all(root: str | Path = ".") -> list[Path]:
    """Write every generated file under ``root``; returns those that changed."""
    from mopa.core.files import atomic_write

    root = Path(root)
    changed = []
    for path, text in render_all(root).items():
        target = root / path
        if target.exists() and target.read_text() == text:
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(target, lambda file, text=text: file.write(text.encode()))
        changed.append(path)
    return changed
