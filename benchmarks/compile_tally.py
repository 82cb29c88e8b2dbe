"""A pytest plugin that splits each test's time into JAX's compilation phases.

It listens to JAX's monitoring events (tracing to a jaxpr, lowering to StableHLO,
XLA's backend compilation, compilation-cache hits) and writes, per test worker,
``{"tests": {node id: {event: seconds, event + "#n": count, "wall": seconds}},
"byname": {"<file>|<function>": [compilations, seconds]}}`` to
``$COMPILE_TALLY_DIR/tally_<worker>.json`` (default: the working folder). What
remains of a test's wall time beyond the three phases is execution, Python and
file work. Used for the suite-time tables of BENCHMARKS.md::

    PYTHONPATH=benchmarks python -m pytest -q -n 2 --dist loadfile -p compile_tally
"""

from __future__ import annotations

import collections
import json
import os
import time
from pathlib import Path

import jax.monitoring
import pytest

BACKEND_COMPILE = "/jax/core/compile/backend_compile_duration"

_current = ["<collection>"]
_tests: dict = collections.defaultdict(lambda: collections.defaultdict(float))
_by_name: dict = collections.defaultdict(lambda: [0, 0.0])


def _on_duration(event: str, duration: float, **kwargs) -> None:
    _tests[_current[0]][event] += duration
    _tests[_current[0]][event + "#n"] += 1
    if event == BACKEND_COMPILE:
        entry = _by_name[f"{_current[0].split('::')[0]}|{kwargs.get('fun_name')}"]
        entry[0] += 1
        entry[1] += duration


jax.monitoring.register_event_duration_secs_listener(_on_duration)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    _current[0] = item.nodeid
    start = time.perf_counter()
    yield
    _tests[item.nodeid]["wall"] += time.perf_counter() - start


def pytest_sessionfinish(session):
    folder = Path(os.environ.get("COMPILE_TALLY_DIR", "."))
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    (folder / f"tally_{worker}.json").write_text(
        json.dumps({"tests": _tests, "byname": _by_name})
    )
