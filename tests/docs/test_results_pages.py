"""The results pages and RESULTS.md's summary are rendered from the committed
result folders: the committed files equal what ``mopa docs render`` writes, a
number changed in a results.json changes them, and every claim's criterion
decides as worked out by hand."""

import json
import shutil
from pathlib import Path

import pytest

from mopa.cli.main import main
from mopa.errors import InvalidParameterError
from mopa.report import docs, site
from mopa.report.claims import CLAIMS, PAGES

ROOT = Path(__file__).resolve().parents[2]


def test_the_committed_pages_are_what_the_folders_render():
    stale = site.stale_files(ROOT)
    assert stale == [], f"run `mopa docs render`: {stale} differ from results/"


@pytest.fixture(scope="module")
def copy(tmp_path_factory) -> Path:
    """The repository's results, narratives, pages and RESULTS.md, copied."""
    root = tmp_path_factory.mktemp("repo")
    shutil.copytree(ROOT / "results", root / "results")
    shutil.copytree(ROOT / "docs", root / "docs")
    shutil.copy(ROOT / "RESULTS.md", root / "RESULTS.md")
    return root


def test_one_number_changed_in_a_results_json_makes_the_pages_differ(copy, capsys):
    path = copy / "results" / "intent" / "results.json"
    original = path.read_text()
    results = json.loads(original)
    results["conditions"]["belief_planner"]["mean"] = 1.0  # well above 1.5x blind
    blind = results["conditions"]["unaware"]["mean"]
    path.write_text(json.dumps(results))
    try:
        assert set(site.stale_files(copy)) == {
            Path("docs/results/intent.md"),
            Path("docs/results/index.md"),
            Path("RESULTS.md"),
        }
        assert main(["docs", "render", "--root", str(copy), "--check"]) == 1
        assert "differs: RESULTS.md" in capsys.readouterr().out
        # The claim that read it now fails: 1.00 is not 1.5x the blind predators.
        written = site.render_all(copy)[Path("RESULTS.md")]
        (row,) = [
            line
            for line in written.splitlines()
            if "belief planner >= 1.5x the intent-blind" in line and "`intent`" in line
        ]
        assert f"{1.0 / blind:.2f}x (1.00 / {blind:.2f})" in row
        assert "**not met**" in row
    finally:
        path.write_text(original)
    assert site.stale_files(copy) == []


def test_any_number_changed_in_a_results_json_changes_its_page(copy):
    """Even a figure no table shows: the page names the file's digest."""
    path = copy / "results" / "exp3" / "results.json"
    original = path.read_text()
    results = json.loads(original)
    results["captures"]["iql_greedy"]["iql_greedy"]["seed_means"][0] += 0.01
    path.write_text(json.dumps(results, indent=1))
    try:
        assert Path("docs/results/exp3.md") in site.stale_files(copy)
    finally:
        path.write_text(original)


def _written_at(root: Path, folder: str) -> str:
    """The short commit the folder's figures were written at (its meta.json)."""
    meta = json.loads((root / "results" / folder / "meta.json").read_text())
    return meta["git_sha"][:7]


def test_a_verify_record_is_shown_and_its_absence_says_not_verified(copy):
    page = Path("docs/results/lemol.md")
    committed = copy / "results" / "lemol" / "verify.json"
    kept = committed.read_bytes() if committed.exists() else None
    committed.unlink(missing_ok=True)
    assert "`mopa verify results/lemol`: not verified." in site.render_all(copy)[page]
    record = {
        "command": "mopa experiment lemol --profile default",
        "written_at": _written_at(copy, "lemol"),
        "git_sha": "abcdef0123456789",
        "git_dirty": False,
        "cpu": {"model": "AMD EPYC", "isa": ["avx2", "avx512f"]},
        "date": "2030-01-02T03:04:05+00:00",
        "compared": 606,
        "matched": 606,
        "not_compared": 3,
        "passed": True,
        "first_failure": None,
        "rerun_wall_s": 117.0,
    }
    (copy / "results" / "lemol" / "verify.json").write_text(json.dumps(record))
    try:
        text = site.render_all(copy)[page]
        assert (
            "**passed**, 606 of 606 figures at `abcdef0` (AMD EPYC, AVX-512), "
            "2030-01-02" in text
        )
        # A record of figures the folder no longer holds (written at another
        # commit) is not shown as the folder's verification.
        record["written_at"] = "0000000"
        (copy / "results" / "lemol" / "verify.json").write_text(json.dumps(record))
        text = site.render_all(copy)[page]
        assert "`mopa verify results/lemol`: not verified." in text
    finally:
        committed.unlink()
        if kept is not None:
            committed.write_bytes(kept)


def test_claims_name_folders_on_pages_and_unique_ids():
    on_pages = {folder.name for page in PAGES for folder in page.folders}
    assert {claim.folder for claim in CLAIMS} <= on_pages
    assert len({claim.id for claim in CLAIMS}) == len(CLAIMS)
    # Every page's folders have claims, and every folder exists.
    assert {claim.folder for claim in CLAIMS} == on_pages
    assert all((ROOT / "results" / name).is_dir() for name in on_pages)


def test_the_summary_is_at_most_300_lines_and_lists_every_claim():
    text = (ROOT / "RESULTS.md").read_text()
    assert len(text.splitlines()) <= 300
    for claim in CLAIMS:
        assert claim.text in text, claim.id


RESULTS = {
    "a": {"mean": 3.0, "ci95": [2.5, 3.5]},
    "b": {"mean": 1.5, "ci95": [1.0, 2.0]},
    "c": {"mean": 2.2, "ci95": [1.9, 3.1]},
    "steps": [0.5, 0.25, 0.75],
    "flag": True,
}


def test_measures_read_and_show_the_figures():
    # 3.0 / 1.5 = 2.0
    assert docs.Ratio("a", "b").read(RESULTS).text == "2.00x (3.00 / 1.50)"
    assert docs.mean("a").read(RESULTS).interval == (2.5, 3.5)
    assert docs.mean("a").read(RESULTS).text == "3.00 [2.50, 3.50]"
    # (0.5 + 0.25 + 0.75) / 3 = 0.5
    assert docs.MeanOf("steps").read(RESULTS).value == pytest.approx(0.5)
    assert docs.MinOf("steps", ".2f").read(RESULTS).text == "0.25 (0.50 / 0.25 / 0.75)"
    assert docs.Value("steps.-1").read(RESULTS).value == 0.75
    half = docs.Value("a.mean", half_width="b.mean").read(RESULTS)  # 3.0 +- 1.5
    assert half.interval == (1.5, 4.5)
    # A negative that rounds to zero shows as zero; -0.06 rounds to -0.1.
    assert docs.Value("a.mean", "+.1f").read({"a": {"mean": -0.04}}).text == "+0.0"
    assert docs.Value("a.mean", "+.1f").read({"a": {"mean": -0.06}}).text == "-0.1"
    assert docs.Value("a.mean", ".0%").read({"a": {"mean": 0.344}}).text == "34%"
    with pytest.raises(InvalidParameterError, match="no 'a.median'"):
        docs.Value("a.median").read(RESULTS)


def test_criteria_decide_as_worked_out_by_hand():
    a, b, c = (docs.mean(k).read(RESULTS) for k in "abc")
    assert docs.AtLeast(3.0).met(a, RESULTS) and not docs.AtLeast(3.01).met(a, RESULTS)
    assert docs.AtMost(1.5).met(b, RESULTS) and not docs.AtMost(1.49).met(b, RESULTS)
    assert docs.IntervalAbove(2.4).met(a, RESULTS)
    assert not docs.IntervalAbove(2.5).met(a, RESULTS)
    assert docs.IntervalBelow(2.1).met(b, RESULTS)
    assert docs.NotBelow(2.0).met(b, RESULTS) and not docs.NotBelow(2.1).met(b, RESULTS)
    # a's interval [2.5, 3.5] lies above b's [1.0, 2.0]; c's [1.9, 3.1] meets both.
    assert docs.Exceeds(docs.mean("b"), "b").met(a, RESULTS)
    assert not docs.Exceeds(docs.mean("a"), "a").met(c, RESULTS)
    assert docs.Exceeds(docs.mean("b"), "b", apart=False).met(c, RESULTS)
    assert docs.Under(docs.mean("a"), "a").met(b, RESULTS)
    assert not docs.Under(docs.mean("c"), "c").met(b, RESULTS)
    assert docs.Under(docs.mean("a"), "a", apart=False).met(c, RESULTS)
    flag = docs.Value("flag").read(RESULTS)
    assert flag.text == "yes" and docs.IsTrue().met(flag, RESULTS)
    # A recorded finding holds whatever the claim's own figure; every one of AllOf.
    assert docs.Recorded("flag", "flagged").met(b, RESULTS)
    assert not docs.Recorded("a.mean", "a is true").met(a, RESULTS)  # 3.0, no bool
    both = docs.AllOf((docs.AtLeast(3.0), docs.Recorded("flag", "flagged")))
    assert both.met(a, RESULTS) and not both.met(b, RESULTS)
    assert both.text == ">= 3, flagged"


def test_placeholders_render_values_and_name_what_is_missing():
    record = docs.Record("x", RESULTS, {}, {}, None, ())
    claim = docs.Claim("x.ratio", "x", "a over b", "-", docs.Ratio("a", "b"))
    text = "{{ claim:x.ratio }} and {{ x:a.mean }} and {{ x:steps.1:.3f }}"
    assert (
        docs.fill_placeholders(text, {"x": record}, [claim])
        == "2.00x (3.00 / 1.50) and 3.00 and 0.250"
    )
    with pytest.raises(InvalidParameterError, match="no claim 'x.other'"):
        docs.fill_placeholders("{{ claim:x.other }}", {"x": record}, [claim])
    with pytest.raises(InvalidParameterError, match="folder 'y' is not on this page"):
        docs.fill_placeholders("{{ y:a.mean }}", {"x": record}, [claim])


def test_processor_and_commit_are_named_as_meta_json_records_them():
    xeon = {
        "model": "Intel(R) Xeon(R) Processor",
        "isa": ["avx2", "avx512f", "amx_tile"],
    }
    assert docs.processor_text(xeon) == "Intel Xeon Processor, AVX-512, AMX"
    assert (
        docs.processor_text({"model": "AMD EPYC", "isa": ["avx2"]}) == "AMD EPYC, AVX2"
    )
    emulated = {"model": "AMD EPYC", "isa": ["avx2"], "listed_isa": ["avx2", "avx512f"]}
    assert (
        docs.processor_text(emulated)
        == "AMD EPYC, AVX2, emulated or masked (the host with AVX-512)"
    )
    assert docs.processor_text(None) == "not recorded"
    assert (
        docs.commit_text({"git_sha": "0123456789abc", "git_dirty": False}) == "0123456"
    )
    assert docs.commit_text({"git_sha": "0123456789abc-dirty"}) == "0123456-dirty"
    assert docs.commit_text({}) == "not recorded"
    portable = {"machine": {"cpu": xeon}, "numerics": {"mode": "portable"}}
    assert docs.written_on(portable) == "Intel Xeon Processor, AVX-512, AMX; portable"
    # folders written before the mode was kept computed natively
    assert docs.written_on({"machine": {"cpu": xeon}}).endswith("; native")


def test_every_verification_is_a_row_of_the_folders_table(copy):
    page = Path("docs/results/lemol.md")
    committed = copy / "results" / "lemol" / "verify.json"
    kept = committed.read_bytes() if committed.exists() else None
    earlier = {
        "written_at": _written_at(copy, "lemol"),
        "git_sha": "1111111aaaa",
        "git_dirty": False,
        "cpu": {"model": "Intel(R) Xeon(R) Processor", "isa": ["avx2"], "l1d_kib": 32},
        "numerics": "portable",
        "date": "2030-01-01T00:00:00+00:00",
        "compared": 10,
        "matched": 8,
        "passed": False,
        "first_failure": "a.b",
        "failures": ["a.b", "c"],
    }
    latest = {
        **earlier,
        "git_sha": "2222222bbbb",
        "cpu": {"model": "AMD EPYC", "isa": ["avx512f"], "l1d_kib": 48},
        "date": "2030-02-01T00:00:00+00:00",
        "matched": 10,
        "passed": True,
        "first_failure": None,
        "failures": [],
        "history": [earlier],
    }
    committed.write_text(json.dumps(latest))
    try:
        text = site.render_all(copy)[page]
        assert "Every verification of these figures:" in text
        assert (
            "| **failed** | Intel Xeon Processor, AVX2, L1d 32 KiB | portable | "
            "2030-01-01 | `1111111` | 8 of 10 | `a.b`, `c` |" in text
        )
        assert (
            "| **passed** | AMD EPYC, AVX-512, L1d 48 KiB | portable | 2030-02-01 | "
            "`2222222` | 10 of 10 | none |" in text
        )
    finally:
        committed.unlink()
        if kept is not None:
            committed.write_bytes(kept)


def test_a_draws_folder_row_shows_each_draws_figure_and_verdict():
    def tree(value):
        return {"x": {"mean": value, "ci95": [value - 0.5, value + 0.5]}}

    pooled = {**tree(2.0), "draws": [tree(1.0), tree(3.0)], "draw_seeds": [0, 1]}
    meta = {"git_sha": "0123456789", "numerics": {"mode": "portable"}}
    record = docs.Record("d", pooled, {}, meta, None, ())
    judged = docs.Claim("d.x", "d", "x at least 1.5", "-", docs.mean("x"),
                        docs.AtLeast(1.5))  # fmt: skip
    row = docs.claim_row(judged, record, ("mopa", "verdict", "processor"))
    assert row == (
        "| 2.00 [1.50, 2.50]; by draw 1.00, 3.00 | **met** pooled; by draw not met, "
        "met | not recorded; portable |"
    )
    reported = docs.Claim("d.y", "d", "x", "-", docs.mean("x"))
    assert docs.claim_row(reported, record, ("verdict",)) == "| reported |"
