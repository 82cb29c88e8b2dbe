"""``mopa verify``: the comparison rules, and the command end to end on a small
real experiment (the exact IPD of ``pola-fig3``, quick profile)."""

import json
import math

import pytest

from mopa.cli.main import main
from mopa.experiments.verify import (
    FLOAT_RTOL,
    compare_results,
    flatten,
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
    # the rerun went to the scratch folder, the committed files are untouched
    assert (tmp_path / "rerun" / "results.json").is_file()
    assert {p.name: p.read_bytes() for p in written.iterdir() if p.is_file()} == before


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
