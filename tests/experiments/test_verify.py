"""``mopa verify``: the comparison rules, and the command end to end on a small
real experiment (the exact IPD of ``pola-fig3``, quick profile)."""

import json
import math
import re

import pytest

from mopa.cli.main import main
from mopa.experiments.verify import (
    FLOAT_RTOL,
    TIMING_BAND,
    compare_benchmark,
    compare_results,
    flatten,
    is_provenance,
    is_timing,
)


def test_flatten_names_every_leaf_by_its_path():
    tree = {"a": {"b": [1, {"c": 2.5}]}, "d": None}
    assert flatten(tree) == {"a.b.0": 1, "a.b.1.c": 2.5, "d": None}


def test_timings_are_recognised_by_name():
    for path in (
        "wall_s",
        "stage_wall_s.train",
        "timing_s.eval_paired",
        "training.cw.compile_s",
        "pola_om.cpu_s_per_outer_step_per_seed",
        "tournament_wall_s",
    ):
        assert is_timing(path), path
    for path in ("captures", "run.adv_eps_s", "env_steps_per_seed", "steering_rate"):
        assert not is_timing(path), path


def test_the_commit_that_ran_is_shown_not_compared():
    assert is_provenance("git_sha") and is_provenance("run.git_sha")
    assert not is_provenance("git_sha_count") and not is_provenance("label")
    committed = {"git_sha": "aaa", "x": 1.0}
    for compare in (compare_results, compare_benchmark):
        rows = compare(committed, {"git_sha": "bbb", "x": 1.0})
        assert [(c.path, c.kind, c.ok) for c in rows] == [
            ("git_sha", "commit", True),
            ("x", "float" if compare is compare_results else "measurement", True),
        ]
    # A figure still fails beside it.
    rows = compare_results(committed, {"git_sha": "bbb", "x": 2.0})
    assert [c.path for c in rows if not c.ok] == ["x"]


def test_integers_and_text_match_exactly_floats_within_the_tolerance():
    committed = {"n": 600, "label": "iql", "flag": True, "x": 0.5, "t": {"wall_s": 3.0}}
    # x moves by a tenth of the tolerance, the time by a factor of two
    near = {**committed, "x": 0.5 * (1 + FLOAT_RTOL / 10), "t": {"wall_s": 6.0}}
    assert all(c.ok for c in compare_results(committed, near))
    kinds = {c.path: c.kind for c in compare_results(committed, near)}
    assert kinds == {
        "n": "int",
        "label": "text",
        "flag": "bool",
        "x": "float",
        "t.wall_s": "timing",
    }
    for changed in (
        {"n": 601},
        {"label": "mappo"},
        {"flag": False},
        {"flag": 1},  # a count where a flag stood
        {"x": 0.5 * (1 + 10 * FLOAT_RTOL)},
        {"x": None},
    ):
        rows = compare_results(committed, {**committed, **changed})
        assert [c.path for c in rows if not c.ok] == list(changed), changed
    bad = compare_results(committed, {**committed, "x": 0.5001})
    (row,) = [c for c in bad if not c.ok]
    assert math.isclose(row.difference, 0.0001, rel_tol=1e-9)


def test_nan_matches_nan_and_missing_or_extra_figures_fail():
    rows = compare_results({"a": math.nan}, {"a": math.nan})
    assert rows[0].ok
    assert not compare_results({"a": math.nan}, {"a": 0.0})[0].ok
    rows = compare_results({"a": 1, "b": [1, 2]}, {"a": 1, "b": [1], "c": 3})
    assert [(c.path, c.kind) for c in rows if not c.ok] == [
        ("b.1", "missing"),
        ("c", "extra"),
    ]


def test_benchmark_measurements_match_within_the_band_the_rest_exactly():
    committed = [
        {"env": "tag", "batch": 64, "steps_per_s": 1e6, "load_before": 1.0},
        {"env": "tag", "batch": 1024, "steps_per_s": 2e6, "load_before": 1.0},
    ]
    slower = [{**row, "load_before": 9.0} for row in committed]
    slower[0]["steps_per_s"] = 1e6 / (TIMING_BAND * 0.99)
    rows = compare_benchmark(committed, slower)
    assert all(c.ok for c in rows)
    assert {c.path: c.kind for c in rows}["0.steps_per_s"] == "measurement"
    assert {c.path: c.kind for c in rows}["0.load_before"] == "machine"
    for changed in (
        {"steps_per_s": 1e6 / (TIMING_BAND * 1.01)},  # lost its speed
        {"steps_per_s": 1e6 * TIMING_BAND * 1.01},
        {"steps_per_s": math.nan},
        {"batch": 65},  # measured something else
        {"env": "tag_intent"},
    ):
        rerun = [{**committed[0], **changed}, committed[1]]
        (bad,) = [c.path for c in compare_benchmark(committed, rerun) if not c.ok]
        assert bad == f"0.{next(iter(changed))}", changed


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    out = tmp_path_factory.mktemp("verify") / "fig3"
    assert (
        main(["experiment", "pola-fig3", "--profile", "quick", "--out", str(out)]) == 0
    )
    return out


def test_verify_passes_on_an_untouched_folder(written, capsys, tmp_path):
    before = {p.name: p.read_bytes() for p in written.iterdir() if p.is_file()}
    capsys.readouterr()
    assert main(["verify", str(written), "--scratch", str(tmp_path / "rerun")]) == 0
    out = capsys.readouterr().out
    results = json.loads((written / "results.json").read_text())
    count = len(flatten(results))
    assert f"{count} of {count} figures match" in out
    assert out.rstrip().endswith("verified")
    # the rerun went to the scratch folder, the committed files are untouched and
    # the outcome is recorded beside them
    assert (tmp_path / "rerun" / "results.json").is_file()
    after = {p.name: p.read_bytes() for p in written.iterdir() if p.is_file()}
    record = json.loads(after.pop("verify.json"))
    assert after == before
    assert f"recorded in {written / 'verify.json'}" in out
    assert record["passed"] is True and record["first_failure"] is None
    assert record["compared"] == record["matched"] == count
    assert record["not_compared"] == 0
    meta = json.loads((written / "meta.json").read_text())
    assert record["written_at"] == meta["git_sha"]
    assert record["cpu"] == meta["machine"]["cpu"]  # the same machine here
    assert record["command"] == "mopa experiment pola-fig3 --profile quick"
    assert record["verified_by"] == (
        f"mopa verify {written} --scratch {tmp_path / 'rerun'}"
    )
    assert record["date"][:2] == "20" and record["rerun_wall_s"] > 0
    # --no-record keeps none
    (written / "verify.json").unlink()
    assert main(["verify", str(written), "--no-record"]) == 0
    assert not (written / "verify.json").exists()


def test_verify_fails_naming_a_number_edited_in_results(written, capsys, tmp_path):
    folder = tmp_path / "edited"
    folder.mkdir()
    for name in ("config.json", "meta.json"):
        (folder / name).write_bytes((written / name).read_bytes())
    results = json.loads((written / "results.json").read_text())
    path, value = next(
        (p, v)
        for p, v in flatten(results).items()
        if isinstance(v, float) and v > 0 and not is_timing(p)
    )
    edited = json.dumps(results).replace(json.dumps(value), json.dumps(value + 0.01), 1)
    (folder / "results.json").write_text(edited)
    assert [
        p for p, v in flatten(json.loads(edited)).items() if v != flatten(results)[p]
    ] == [path]
    capsys.readouterr()
    assert main(["verify", str(folder)]) == 1
    out = capsys.readouterr().out
    assert f"FAILED: 1 figures differ, first {path}" in out
    record = json.loads((folder / "verify.json").read_text())
    assert record["passed"] is False and record["first_failure"] == path
    assert record["matched"] == record["compared"] - 1
    (line,) = [row for row in out.splitlines() if row.startswith(path + " ")]
    assert line.endswith("DIFFERS")


def test_verify_refuses_a_config_the_preset_no_longer_has(written, capsys, tmp_path):
    folder = tmp_path / "drifted"
    folder.mkdir()
    for name in ("results.json", "meta.json"):
        (folder / name).write_bytes((written / name).read_bytes())
    described = json.loads((written / "config.json").read_text())
    field = next(iter(described["config"]))
    described["config"][field] = "something else"
    (folder / "config.json").write_text(json.dumps(described))
    capsys.readouterr()
    assert main(["verify", str(folder)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("mopa: error:")
    assert f"at {field} = 'something else'" in err[0]


def test_verify_reruns_a_benchmark_from_its_recorded_command(tmp_path, capsys):
    rows_path = tmp_path / "bench" / "bench_env.json"
    argv = ["bench", "env", "--envs", "tag", "--batches", "64", "--steps", "50000"]
    argv += ["--repeats", "3", "--no-jaxmarl", "--json", str(rows_path)]
    assert main(argv) == 0
    meta = json.loads(rows_path.with_name("bench_env.meta.json").read_text())
    assert meta["config"]["argv"] == argv
    assert meta["machine"]["cpu"]["isa"] is not None
    capsys.readouterr()
    assert main(["verify", str(rows_path), "--scratch", str(tmp_path / "rerun")]) == 0
    out = capsys.readouterr().out
    assert re.search(r"0\.steps_per_s .* ok \(x\d+\.\d\d\)", out), out
    assert out.rstrip().endswith("verified")
    assert (tmp_path / "rerun" / "bench_env.json").is_file()
    record = json.loads(rows_path.with_name("bench_env.verify.json").read_text())
    assert record["passed"] is True and record["command"] == "mopa " + " ".join(argv)
    # a row that measured something else fails, by name
    rows = json.loads(rows_path.read_text())
    rows[0]["batch"] = 65
    rows_path.write_text(json.dumps(rows))
    assert main(["verify", str(rows_path), "--failures-only"]) == 1
    out = capsys.readouterr().out
    assert "FAILED: 1 figures differ, first 0.batch" in out
    # the rerun must not overwrite the committed rows
    assert main(["verify", str(rows_path), "--scratch", str(rows_path.parent)]) == 2
    assert "must not overwrite the committed rows" in capsys.readouterr().err


def test_verify_refuses_a_benchmark_without_its_command(tmp_path, capsys):
    (tmp_path / "old.json").write_text("[]")
    (tmp_path / "old.meta.json").write_text('{"config": {"command": "bench env"}}')
    assert main(["verify", str(tmp_path / "old.json")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("mopa: error: ") and "records no mopa bench command" in err
