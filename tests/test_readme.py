"""The README's two set-up commands: one runs the main job, one the tests, and CI
runs exactly the latter."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def setup_commands() -> list[str]:
    readme = (ROOT / "README.md").read_text()
    section = readme.split("## Set up", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```bash\n(.+?)\n```", section, flags=re.S)


def test_readme_has_exactly_two_setup_commands():
    main_job, tests = setup_commands()
    assert main_job.startswith("python3 -m venv .venv") and main_job.endswith(
        "mopa reproduce intent"
    )
    assert tests.startswith("python3 -m venv .venv") and "pytest" in tests
    assert 'pip install -e ".[dev]"' in main_job and 'pip install -e ".[dev]"' in tests


def test_ci_runs_ruff_then_the_readme_test_command():
    script = (ROOT / ".ci" / "run").read_text().splitlines()
    _, tests = setup_commands()
    assert tests in script
    ruff = next(i for i, line in enumerate(script) if "ruff check" in line)
    assert ruff < script.index(tests)
    # The documentation site is built, strictly, between the two.
    (site,) = [i for i, line in enumerate(script) if "mkdocs build" in line]
    assert ruff < site < script.index(tests) and "--strict" in script[site]


def first_example() -> str:
    """The python block of the README's "A first example"."""
    readme = (ROOT / "README.md").read_text()
    section = readme.split("## A first example", 1)[1].split("\n## ", 1)[0]
    (block,) = re.findall(r"```python\n(.+?)\n```", section, flags=re.S)
    return block


def test_readme_first_example_runs_and_plans_the_best_scored_moves(capsys):
    import jax
    import numpy as np

    namespace = {"__name__": "readme_first_example"}
    exec(compile(first_example(), "README.md (A first example)", "exec"), namespace)
    printed = capsys.readouterr().out
    obs, rewards, plan = namespace["obs"], namespace["rewards"], namespace["plan"]
    assert [o.shape for o in obs] == [(3, 16), (1, 18)]
    assert [r.shape for r in rewards] == [(3,), (1,)]
    actions, scores = np.asarray(plan.actions), np.asarray(plan.scores)
    assert actions.shape == (3,) and scores.shape == (3, 5)
    assert np.all(np.isfinite(scores))
    np.testing.assert_array_equal(actions, np.argmax(scores, -1))
    assert printed.strip().endswith("(3, 5)")
    # The same call again gives the same plan (same key, no hidden state).
    again = namespace["decide"](
        namespace["plan_params"],
        jax.random.key(3),
        namespace["state"],
        obs[0],
        namespace["carry"],
        namespace["reset"],
    )
    np.testing.assert_array_equal(np.asarray(again.scores), scores)


def test_readme_is_at_most_150_lines():
    assert len((ROOT / "README.md").read_text().splitlines()) <= 150
