"""Experiment stages: reused when their config is unchanged, redone when it
changed, resumed in place when interrupted, run together when independent, and
reused through the runner."""

import dataclasses
import json
import threading

import jax
import jax.numpy as jnp
import pytest

from mopa.cli.main import main
from mopa.core import compile_cache
from mopa.core.compile_cache import bound_compiled_programs, memory_mappings
from mopa.core.stages import STAGE_FILE, Stages, file_fingerprint, fingerprint
from mopa.experiments import register_experiment
from tests.concurrency import CALLS, DEVICE_COUNTS, run_stress


def test_fingerprint_ignores_key_order_and_sees_values():
    assert fingerprint({"a": 1, "b": [2, 3]}) == fingerprint({"b": [2, 3], "a": 1})
    assert fingerprint({"a": 1}) != fingerprint({"a": 2})


def test_finished_stage_is_reused_and_changed_config_redone(tmp_path):
    calls = []

    def work(folder):
        calls.append(folder)
        (folder / "model.txt").write_text(f"run {len(calls)}")
        return {"value": len(calls)}

    stages = Stages(tmp_path)
    assert stages.run("train", {"lr": 1}, work) == {"value": 1}
    again = Stages(tmp_path)
    assert again.run("train", {"lr": 1}, work) == {"value": 1}
    assert len(calls) == 1 and again.reused == ["train"]
    assert again.timing_s["train"] == stages.timing_s["train"]
    # A changed config redoes the stage in an emptied folder.
    (tmp_path / "train" / "stale.txt").write_text("old")
    assert Stages(tmp_path).run("train", {"lr": 2}, work) == {"value": 2}
    assert not (tmp_path / "train" / "stale.txt").exists()
    assert (tmp_path / "train" / "model.txt").read_text() == "run 2"
    stored = json.loads((tmp_path / "train" / STAGE_FILE).read_text())
    assert stored["config"] == {"lr": 2} and stored["result"] == {"value": 2}
    # force redoes it even with the same config.
    assert Stages(tmp_path).run("train", {"lr": 2}, work, force=True) == {"value": 3}


def test_a_reader_of_a_rewritten_file_is_redone(tmp_path):
    """An earlier stage that reruns rewrites its file at the same path; a later
    stage keyed on the file's fingerprint reruns, one keyed on the path would not."""

    def data(value):
        def work(folder):
            path = folder / "data.txt"
            path.write_text(value)
            return {"path": str(path)}

        return work

    def read(path):
        return lambda folder: {"read": open(path).read()}

    for value in ("one", "two"):
        stages = Stages(tmp_path)
        path = stages.run("data", {"value": value}, data(value))["path"]
        by_content = stages.run("probe", {"data": file_fingerprint(path)}, read(path))
        by_path = stages.run("probe_by_path", {"data": path}, read(path))
        assert by_content == {"read": value}
    assert by_path == {"read": "one"}  # stale: why stages read fingerprints


def test_interrupted_stage_keeps_its_folder_to_resume(tmp_path):
    def crash(folder):
        (folder / "partial.txt").write_text("half")
        raise RuntimeError("killed")

    with pytest.raises(RuntimeError):
        Stages(tmp_path).run("train", {"lr": 1}, crash)
    seen = []
    result = Stages(tmp_path).run(
        "train",
        {"lr": 1},
        lambda folder: seen.append((folder / "partial.txt").read_text()) or 7,
    )
    assert result == 7 and seen == ["half"]
    # ...but an interrupted stage of another config starts afresh.
    with pytest.raises(RuntimeError):
        Stages(tmp_path).run("other", {"lr": 1}, crash)
    assert Stages(tmp_path).run(
        "other", {"lr": 9}, lambda folder: sorted(p.name for p in folder.iterdir())
    ) == ["stage_config.json"]


def test_independent_stages_run_together_and_are_stored_each(tmp_path):
    # Each stage waits for the other at a barrier: run one after the other, the
    # first would wait alone and break it.
    barrier = threading.Barrier(2, timeout=30)
    calls = []

    def work(value):
        def fn(folder):
            calls.append(value)
            barrier.wait()
            (folder / "out.txt").write_text(str(value))
            return {"value": value}

        return fn

    jobs = [("b_second", {"v": 2}, work(2)), ("a_first", {"v": 1}, work(1))]
    stages = Stages(tmp_path)
    assert stages.run_together(jobs) == [{"value": 2}, {"value": 1}]
    assert list(stages.timing_s) == ["b_second", "a_first"]  # the order given
    assert all(wall > 0 for wall in stages.timing_s.values())
    assert (tmp_path / "a_first" / "out.txt").read_text() == "1"
    # A later run reuses both, calling neither.
    again = Stages(tmp_path)
    assert again.run_together(jobs) == [{"value": 2}, {"value": 1}]
    assert sorted(calls) == [1, 2] and again.reused == ["b_second", "a_first"]
    with pytest.raises(ValueError, match="repeat"):
        stages.run_together([jobs[0], jobs[0]])


def test_stages_together_can_be_turned_off(tmp_path, monkeypatch):
    monkeypatch.setenv("MOPA_STAGES_TOGETHER", "0")
    events = []

    def work(name):
        def fn(folder):
            events.append(("start", name, threading.current_thread().name))
            events.append(("end", name, threading.current_thread().name))
            return name

        return fn

    stages = Stages(tmp_path)
    jobs = [("one", {}, work("one")), ("two", {}, work("two"))]
    assert stages.run_together(jobs) == ["one", "two"]
    main = threading.main_thread().name
    assert events == [
        ("start", "one", main),
        ("end", "one", main),
        ("start", "two", main),
        ("end", "two", main),
    ]
    assert list(stages.timing_s) == ["one", "two"]


def test_a_failing_stage_run_together_leaves_the_other_stored(tmp_path):
    def fail(folder):
        raise RuntimeError("the evaluation broke")

    def fine(folder):
        return {"ok": True}

    stages = Stages(tmp_path)
    with pytest.raises(RuntimeError, match="the evaluation broke"):
        stages.run_together([("broken", {}, fail), ("fine", {}, fine)])
    assert not (tmp_path / "broken" / STAGE_FILE).exists()
    assert json.loads((tmp_path / "fine" / STAGE_FILE).read_text())["result"] == {
        "ok": True
    }
    again = Stages(tmp_path)
    assert again.run_together([("broken", {}, fine), ("fine", {}, fail)]) == [
        {"ok": True},
        {"ok": True},
    ]
    assert again.reused == ["fine"]


def test_bad_stage_name():
    with pytest.raises(ValueError, match="stage name"):
        Stages(None).run("../x", {}, lambda folder: 0)


@dataclasses.dataclass(frozen=True, kw_only=True)
class TwoStageConfig:
    scale: int = 2


_CALLS = []


def two_stages(config, seeds, progress, stages):
    data = stages.run(
        "data", {"n": 3}, lambda folder: _CALLS.append("data") or [1, 2, 3]
    )
    total = stages.run(
        "fit",
        {"scale": config.scale, "data": data},
        lambda folder: _CALLS.append("fit") or config.scale * sum(data),
    )
    return {"total": total, "reused": list(stages.reused)}


register_experiment(
    "test-stages",
    two_stages,
    {"quick": TwoStageConfig(scale=1), "default": TwoStageConfig()},
    "default",
    markdown_fn=lambda results: f"| total |\n|---|\n| {results['total']} |\n",
)


def test_runner_reuses_stages_between_runs(tmp_path, capsys):
    _CALLS.clear()
    assert main(["experiment", "test-stages", "--out", str(tmp_path)]) == 0
    first = json.loads((tmp_path / "results.json").read_text())
    assert first == {"total": 12, "reused": []} and _CALLS == ["data", "fit"]
    assert (tmp_path / "results.md").read_text().endswith("| 12 |\n")
    assert main(["experiment", "test-stages", "--out", str(tmp_path)]) == 0
    assert json.loads((tmp_path / "results.json").read_text())["reused"] == [
        "data",
        "fit",
    ]
    assert _CALLS == ["data", "fit"]
    # Another profile into the same folder redoes only the stage whose config changed.
    assert (
        main(
            ["experiment", "test-stages", "--profile", "quick", "--out", str(tmp_path)]
        )
        == 0
    )
    assert json.loads((tmp_path / "results.json").read_text()) == {
        "total": 6,
        "reused": ["data"],
    }
    assert _CALLS == ["data", "fit", "fit"]
    assert "reused" in capsys.readouterr().out


@pytest.mark.slow
@pytest.mark.parametrize("num_devices", DEVICE_COUNTS)
def test_stages_together_never_hang(num_devices):
    """Three stages run together, each a tournament against a prey that solves
    linear systems at every step, 20 times in a process with ``num_devices`` CPU
    devices, each time under a watchdog: every time the same numbers, each stage
    its own (the three hung while the solve was a batched LAPACK kernel; see
    :mod:`mopa.core.linalg`)."""
    assert run_stress("stages", num_devices) == (
        f"stages: {CALLS} calls of 3 stages together on {num_devices} CPU "
        "device(s), the same numbers every call"
    )


def test_a_stage_drops_the_compiled_programs_near_the_mapping_limit(
    tmp_path, monkeypatch
):
    """Past the share of the kernel's limit on memory mappings, a stage that ran
    drops JAX's compiled programs (a reused one does not); below it they stay. A
    program compiled again gives the same numbers."""
    count, limit = memory_mappings()
    assert 0 < count < limit
    add = jax.jit(lambda x: x * 3.0 + 1.0)

    def stage(folder):
        return float(add(jnp.float32(2.0)))

    stages = Stages(tmp_path)
    assert stages.run("below", {"a": 1}, stage) == 7.0
    assert add._cache_size() == 1  # half the limit is far off
    monkeypatch.setattr(compile_cache, "MAPPINGS_SHARE", 0.0)
    assert stages.run("past", {"a": 2}, stage) == 7.0
    assert add._cache_size() == 0
    add(jnp.float32(2.0))
    assert stages.run("past", {"a": 2}, stage) == 7.0  # reused: nothing dropped
    assert add._cache_size() == 1
    assert not bound_compiled_programs(share=1.0)
    assert bound_compiled_programs(share=0.0) and add._cache_size() == 0
    assert float(add(jnp.float32(2.0))) == 7.0
