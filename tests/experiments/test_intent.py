"""The hidden-intent experiment end to end (``mopa reproduce intent --profile
quick``): the files it writes, the ``results.json`` schema of the issue, stage
reuse on a second run, and the self-contained report (read as text, and rendered
in a headless browser where Debian's chromium and Playwright are installed).
The quick profile's numbers are not checked: its budgets are tiny."""

import base64
import json
import re
import shutil

import pytest

from mopa.cli.main import main
from mopa.experiments import run_experiment
from mopa.experiments.intent import PROFILES
from mopa.experiments.intent_conditions import CONDITIONS
from mopa.report.intent_report import MISSING_CONDITIONS
from tests.browser import assert_plots_unclipped, image_widths, report_page

STAGES = (
    "train_unaware",
    "train_oracle",
    "train_belief",
    "encoders",
    "calibration",
    "world_models",
    "eval_paired",
    "eval_common",
    "gif",
)
IMAGES = ("conditions.png", "belief_calibration.png", "reliability.png")
GIF = "belief_planner.gif"
SCHEMA_KEYS = {
    "profile",
    "conditions",
    "conditions_common_opponent",
    "belief_accuracy_by_step",
    "ece_by_step",
    "wm_rmse_5step",
    "timing_s",
    "versions",
    "git_sha",
}


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory):
    """One quick-profile run through the CLI (shared by the tests here)."""
    out = tmp_path_factory.mktemp("intent") / "quick"
    assert main(["reproduce", "intent", "--profile", "quick", "--out", str(out)]) == 0
    return out


def _check_condition_table(table: dict, num_seeds: int) -> None:
    assert list(table) == list(CONDITIONS)
    for name, row in table.items():
        assert set(row) == {"mean", "ci95", "n_episodes", "n_seeds"}, name
        assert isinstance(row["mean"], float)
        lo, hi = row["ci95"]
        assert lo <= row["mean"] <= hi
        assert isinstance(row["n_episodes"], int) and row["n_episodes"] >= 1
        assert row["n_seeds"] == num_seeds


@pytest.mark.slow
def test_quick_run_writes_the_files_and_the_schema(quick_run):
    for name in ("results.json", "results.md", "report.html", GIF, *IMAGES):
        assert (quick_run / name).is_file(), name
        assert (quick_run / name).stat().st_size > 0, name
    results = json.loads((quick_run / "results.json").read_text())
    assert set(results) == SCHEMA_KEYS
    assert results["profile"] == "quick"
    quick = PROFILES["quick"]
    _check_condition_table(results["conditions"], quick.num_seeds)
    _check_condition_table(results["conditions_common_opponent"], quick.num_seeds)
    for name in MISSING_CONDITIONS:
        assert name not in results["conditions"]
    # Every paired row plays eval_episodes per seed.
    for row in results["conditions"].values():
        assert row["n_episodes"] == quick.eval_episodes * quick.num_seeds
    for key in ("belief_accuracy_by_step", "ece_by_step"):
        values = results[key]
        assert len(values) == 25
        assert all(0.0 <= v <= 1.0 for v in values)
    assert set(results["wm_rmse_5step"]) == {"ssm", "jepa"}
    assert all(v > 0 for v in results["wm_rmse_5step"].values())
    assert set(results["timing_s"]) == set(STAGES)
    assert all(v >= 0 for v in results["timing_s"].values())
    assert {"jax", "flax", "numpy"} <= set(results["versions"])
    assert isinstance(results["git_sha"], str)
    markdown = (quick_run / "results.md").read_text()
    assert "| condition | mopa paired |" in markdown
    for name in MISSING_CONDITIONS:
        assert name in markdown
    # The GIF has one frame per step of the episode.
    import imageio.v3 as iio

    frames = iio.imread(quick_run / GIF, index=None)
    assert frames.shape[0] >= 2 and frames.shape[-1] in (3, 4)


@pytest.mark.slow
def test_a_second_run_reuses_every_stage(quick_run, tmp_path):
    out = tmp_path / "again"
    shutil.copytree(quick_run, out)
    before = json.loads((out / "results.json").read_text())
    lines = []
    results = run_experiment("intent", "quick", out, progress=lines.append)
    for stage in STAGES:
        assert f"[{stage}] reused (finished earlier with this config)" in lines
    assert not any(line.endswith("running") for line in lines)
    assert results["conditions"] == before["conditions"]
    assert results["timing_s"] == before["timing_s"]


@pytest.mark.slow
def test_report_html_holds_the_table_and_every_image(quick_run):
    page = (quick_run / "report.html").read_text()
    table = re.search(r'<table id="conditions">.*?</table>', page, re.S)
    assert table is not None
    for name in CONDITIONS:
        assert f"<td>{name}</td>" in table.group(0)
    sources = re.findall(
        r'<img alt="[^"]*" src="data:image/(png|gif);base64,([^"]+)"', page
    )
    assert len(sources) == len(IMAGES) + 1
    embedded = {base64.b64decode(data) for _, data in sources}
    for name in (*IMAGES, GIF):
        assert (quick_run / name).read_bytes() in embedded, name
    assert 'src="http' not in page and "src='http" not in page  # self-contained


@pytest.mark.slow
def test_report_renders_in_a_headless_browser(quick_run):
    with report_page(quick_run / "report.html") as page:
        rows = page.locator("#conditions tbody tr")
        assert rows.count() == len(CONDITIONS)
        assert page.locator("#conditions").is_visible()
        widths = image_widths(page)
        assert len(widths) == len(IMAGES) + 1
        assert all(width > 0 for width in widths), widths
        assert_plots_unclipped(page, len(IMAGES))
