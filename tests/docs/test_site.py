"""The documentation site, built as CI builds it (``mkdocs build --strict``) and
served from a local HTTP server, in headless Chromium: every page loads with no
console error and no failed request, the search finds a known API name, and every
plot on a results page has loaded."""

import contextlib
import functools
import http.server
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from mopa.report.claims import PAGES
from tests.browser import WIDTH, headless_chromium, image_widths

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("site")
    built = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert built.returncode == 0, built.stderr[-3000:]
    return out


@contextlib.contextmanager
def served(folder: Path) -> Iterator[str]:
    """``folder`` served over HTTP on a free port of 127.0.0.1; its base URL."""
    handler = functools.partial(
        _QuietHandler, directory=str(folder)
    )  # the search index is fetched, so the site is not opened from file://
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args) -> None:
        pass


def site_pages(site: Path) -> list[str]:
    """Every page's path relative to the site's root (``api/mopa.envs/``)."""
    return sorted(
        str(p.parent.relative_to(site)) + "/" if p.parent != site else ""
        for p in site.rglob("index.html")
        if "assets" not in p.parts
    )


@pytest.fixture(scope="module")
def browsing(site) -> Iterator[tuple[str, object, list[str]]]:
    """``(base URL, a Chromium tab, the errors it has seen)``: the site served,
    one browser for the module; every console error, uncaught exception and
    failed request of the tab is kept."""
    with served(site) as base, headless_chromium() as browser:
        tab = browser.new_page(viewport={"width": WIDTH, "height": 900})
        errors: list[str] = []
        tab.on(
            "console",
            lambda m: errors.append(f"{tab.url}: {m.text}") if m.type == "error" else 0,
        )
        tab.on("pageerror", lambda e: errors.append(f"{tab.url}: {e}"))
        # A request cut short by opening the next page is not the page's fault;
        # a missing file answers 404, and its image shows 0 wide (checked below).
        tab.on(
            "requestfailed",
            lambda r: (
                0
                if r.failure == "net::ERR_ABORTED"
                else errors.append(f"{r.url}: {r.failure}")
            ),
        )
        tab.on(
            "response",
            lambda r: errors.append(f"{r.url}: {r.status}") if r.status >= 400 else 0,
        )
        yield base, tab, errors


def visit(tab, url: str) -> int:
    """Open ``url`` and wait for its load event; the response's status."""
    response = tab.goto(url)
    tab.wait_for_load_state("load")
    return 0 if response is None else response.status


def search(tab, query: str, tries: int = 6) -> list[str]:
    """The result links of ``query`` typed into the site's search box. The theme
    builds its index in a web worker after the page loads, and a query typed
    before the index is ready can stay unanswered on a busy machine, so the query
    is typed again until results come (each try waits 20 s)."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeoutError

    box, found = (
        tab.locator(".md-search__input"),
        tab.locator(".md-search-result__item a"),
    )
    for _ in range(tries):
        box.fill("")
        box.fill(query)
        try:
            found.first.wait_for(state="attached", timeout=20_000)
            break
        except PlaywrightTimeoutError:
            continue
    return [found.nth(i).get_attribute("href") for i in range(found.count())]


@pytest.mark.slow
def test_every_page_loads_without_console_errors(site, browsing):
    base, tab, errors = browsing
    pages = site_pages(site)
    # The nav's pages are all there: tutorials, concepts, API, each results page.
    for expected in ("tutorials/population/", "concepts/experiments/"):
        assert expected in pages
    for page in PAGES:
        assert f"results/{page.slug}/" in pages
    assert sum(p.startswith("api/mopa.") for p in pages) >= 10
    for page in pages:
        assert visit(tab, base + page) == 200, page
        assert tab.locator("h1").count() >= 1, page
    assert errors == []


@pytest.mark.slow
def test_the_search_finds_a_known_api_name(browsing):
    base, tab, errors = browsing
    visit(tab, base)
    links = search(tab, "play_tournament")
    assert any("api/mopa.eval/" in link for link in links), (links, errors)
    assert errors == []


def test_every_plot_on_a_results_page_has_loaded(browsing):
    base, tab, errors = browsing
    plots = {}
    for page in PAGES:
        visit(tab, f"{base}results/{page.slug}/")
        sources = tab.eval_on_selector_all(
            "article img", "images => images.map(i => i.getAttribute('src'))"
        )
        widths = image_widths(tab)
        assert all(width > 0 for width in widths), (page.slug, widths)
        plots[page.slug] = sum("figures/" in src for src in sources)
    # Every PNG of every folder on a page is shown on it.
    for page in PAGES:
        expected = sum(
            len(list((ROOT / "results" / f.name).glob("*.png"))) for f in page.folders
        )
        assert plots[page.slug] == expected, page.slug
    assert sum(plots.values()) > 20
    assert errors == []
