"""A report or a page opened in headless Chromium (Debian's ``chromium``, driven by
Playwright), for the tests of every ``report.html`` and of the documentation site:
:func:`headless_chromium` and :func:`report_page` skip the test where either is
missing, and :func:`assert_plots_unclipped` checks that every
embedded plot lies whole on the page with nothing drawn at its edges."""

from __future__ import annotations

import contextlib
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

WIDTH = 1280
"""The viewport's width in pixels (a laptop screen)."""


def chromium() -> str | None:
    """The path of Debian's Chromium, or ``None``."""
    for name in ("chromium", "chromium-browser"):
        path = shutil.which(name)
        if path:
            return path
    return None


@contextlib.contextmanager
def headless_chromium() -> Iterator:
    """A Playwright browser: Debian's Chromium, headless (skips the test where
    either is missing)."""
    executable = chromium()
    if executable is None:
        pytest.skip("Debian's chromium is not installed (apt-get install chromium)")
    sync_api = pytest.importorskip(
        "playwright.sync_api", reason="playwright is not installed in the venv"
    )
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=executable, headless=True, args=["--no-sandbox"]
        )
        try:
            yield browser
        finally:
            browser.close()


@contextlib.contextmanager
def report_page(report: Path) -> Iterator:
    """A Playwright page showing ``report`` at :data:`WIDTH` x 900, loaded."""
    with headless_chromium() as browser:
        page = browser.new_page(viewport={"width": WIDTH, "height": 900})
        page.goto(Path(report).resolve().as_uri())
        page.wait_for_load_state("load")
        yield page


def image_widths(page) -> list[int]:
    """Natural width of every image on ``page`` (0 for one that did not load)."""
    return page.eval_on_selector_all(
        "img", "images => images.map(i => i.complete ? i.naturalWidth : 0)"
    )


def assert_plots_unclipped(page, count: int) -> None:
    """``count`` PNG plots on ``page``, each whole on the page, shown at most at its
    own size, with no drawn pixel in a 4-pixel band at its edges (a title's first
    letters, say, cut off where the image ends); and no horizontal scrolling."""
    assert page.evaluate("document.documentElement.scrollWidth") <= WIDTH
    plots = page.eval_on_selector_all("img[src^='data:image/png']", _EDGES)
    assert len(plots) == count
    for plot in plots:
        assert plot["left"] >= 0 and plot["right"] <= WIDTH, plot
        assert 0 < plot["width"] <= plot["naturalWidth"], plot
        assert plot["inkAtEdges"] == 0, plot


_EDGES = """images => images.map(image => {
    const box = image.getBoundingClientRect();
    const canvas = document.createElement("canvas");
    canvas.width = image.naturalWidth;
    canvas.height = image.naturalHeight;
    const context = canvas.getContext("2d");
    context.drawImage(image, 0, 0);
    const pixels = context.getImageData(0, 0, canvas.width, canvas.height).data;
    const band = 4;  // pixels; the saved margin is 10 at 100 dpi
    let ink = 0;
    for (let y = 0; y < canvas.height; y++) {
        for (let x = 0; x < canvas.width; x++) {
            const inside = x >= band && x < canvas.width - band
                && y >= band && y < canvas.height - band;
            const k = 4 * (y * canvas.width + x);
            if (!inside && (pixels[k] < 255 || pixels[k + 1] < 255
                            || pixels[k + 2] < 255)) {
                ink++;
            }
        }
    }
    return {left: box.left, right: box.right, width: box.width,
            naturalWidth: image.naturalWidth, inkAtEdges: ink};
})"""
