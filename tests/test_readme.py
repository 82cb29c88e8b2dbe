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
