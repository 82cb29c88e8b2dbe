"""The one validation path (types, finiteness, ranges, sizes) and the output-path
checks, as the configs, the game parameters and the commands use them."""

import dataclasses
import math

import jax.numpy as jnp
import numpy as np
import pytest

from mopa.algos.iql.config import IQLConfig
from mopa.core import checks
from mopa.core.checks import check_fields, check_value
from mopa.core.files import check_output_file, check_output_folder
from mopa.envs import make
from mopa.errors import InvalidParameterError, PathError
from mopa.league import TrainingConfig
from mopa.league.curriculum import CurriculumStage


@pytest.mark.parametrize(
    ("value", "kind", "expected"),
    [
        (3, int, 3),
        (2e6, int, 2_000_000),  # JSON's whole-number floats are counts too
        (np.int64(5), int, 5),
        (1, float, 1),
        (0.5, float, 0.5),
        (True, bool, True),
        ("iql", str, "iql"),
        ([64, 64], tuple[int, ...], (64, 64)),
        (
            [["a", 1], ["b", [1]]],
            tuple[tuple[str, object], ...],
            (("a", 1), ("b", [1])),
        ),
        ({"b": 2, "a": 1}, tuple[tuple[str, int], ...], (("a", 1), ("b", 2))),
        (None, int | None, None),
        (7, int | None, 7),
        ("L5", int | str, "L5"),
    ],
)
def test_values_that_fit_their_annotation_are_normalised(value, kind, expected):
    checked = check_value("field", value, kind)
    assert checked == expected and type(checked) is type(expected)


@pytest.mark.parametrize(
    ("value", "kind", "message"),
    [
        ("fast", float, "field must be a number, got 'fast'"),
        (math.nan, float, "field must be finite, got nan"),
        (-math.inf, float, "field must be finite, got -inf"),
        (True, float, "field must be a number, got True"),
        (1.5, int, "field must be a whole number, got 1.5"),
        (math.inf, int, "field must be a whole number, got inf"),
        (True, int, "field must be a whole number, got True"),
        ("3", int, "field must be a whole number, got '3'"),
        (1, bool, "field must be true or false, got 1"),
        (5, str, "field must be a string, got 5"),
        (64, tuple[int, ...], "field must be a list of whole numbers, got 64"),
        ([64, "a"], tuple[int, ...], "field[1] must be a whole number, got 'a'"),
        ([["a"]], tuple[tuple[str, int], ...], "field[0] must be a list of 2"),
        (1.5, int | str, "field must be a whole number or a string, got 1.5"),
    ],
)
def test_values_that_do_not_fit_are_refused_with_the_field_named(value, kind, message):
    with pytest.raises(InvalidParameterError) as error:
        check_value("field", value, kind)
    assert str(error.value).startswith(message)


def test_arrays_are_accepted_for_parameters_when_finite():
    values = jnp.array([1.0, 2.0])
    assert check_value("p", values, float, arrays=True) is values
    with pytest.raises(
        InvalidParameterError, match=r"p must be finite, got \[1.0, nan\]"
    ):
        check_value("p", np.array([1.0, np.nan]), float, arrays=True)
    with pytest.raises(InvalidParameterError, match="p must be whole numbers"):
        check_value("p", np.array([1.5]), int, arrays=True)
    with pytest.raises(InvalidParameterError, match="must be true or false"):
        check_value("p", np.array([1, 0]), bool, arrays=True)
    with pytest.raises(InvalidParameterError, match="an array of numbers"):
        checks.check_numeric_array("p", [[1.0, "a"]])
    with pytest.raises(InvalidParameterError, match=r"\(a 32-bit number\)"):
        checks.check_fits_32_bits("p", 2**40)
    checks.check_fits_32_bits("p", np.float64(3e38))  # float32's largest is 3.4e38


def test_a_config_checks_and_normalises_every_field():
    @dataclasses.dataclass(frozen=True, kw_only=True)
    class Toy:
        count: int = 1
        rate: float = 0.1
        widths: tuple[int, ...] = (8,)
        stages: tuple[CurriculumStage, ...] = ()

        def __post_init__(self):
            check_fields(self)

    toy = Toy(count=4.0, widths=[16, 32], stages=[{"name": "1v1"}])
    assert toy.count == 4 and isinstance(toy.count, int)
    assert toy.widths == (16, 32)
    assert toy.stages == (CurriculumStage(name="1v1"),)
    with pytest.raises(InvalidParameterError, match="rate must be finite, got inf"):
        Toy(rate=math.inf)
    with pytest.raises(InvalidParameterError, match="unknown CurriculumStage field"):
        Toy(stages=[{"name": "a", "level": 2}])


def test_the_training_configs_refuse_bad_values_before_any_work():
    with pytest.raises(InvalidParameterError, match="lr must be a number, got 'fast'"):
        IQLConfig(lr="fast")
    with pytest.raises(InvalidParameterError, match=r"seed must be <= 2\*\*32 - 1"):
        IQLConfig(seed=2**32)
    # 1e30 steps: 3.9e27 updates of 256 steps; their metrics would not fit.
    with pytest.raises(InvalidParameterError, match="total_steps is too large"):
        IQLConfig(total_steps=10**30)
    with pytest.raises(InvalidParameterError, match="ent_coef must be finite"):
        TrainingConfig(ent_coef=math.nan)
    config = TrainingConfig(game_kwargs={"num_blue": 2}, hidden=[32.0])
    assert config.game_kwargs == (("num_blue", 2),) and config.hidden == (32,)


def test_game_parameters_take_the_same_path():
    with pytest.raises(InvalidParameterError, match="intent_reward must be a number"):
        make("tag_intent", intent_reward="nan")
    with pytest.raises(InvalidParameterError, match="intent_reward must be finite"):
        make("tag_intent", intent_reward=math.nan)
    with pytest.raises(InvalidParameterError, match="fixed_obstacles must be true"):
        make("tag", fixed_obstacles=1)
    with pytest.raises(InvalidParameterError, match="tag is too large"):
        make("tag", num_predators=10**8)
    _, params = make("tag_intent", intent_reward=2, resource_placement="corners")
    assert float(params.intent_reward) == 2.0 and int(params.resource_placement) == 1
    # A vmapped sweep's array of values is a parameter too.
    _, params = make("tag", capture_reward=np.array([1.0, 5.0], np.float32))
    np.testing.assert_array_equal(params.capture_reward, [1.0, 5.0])


def test_sizes_must_fit_the_machine():
    memory = checks.host_memory_bytes()
    assert memory > 2**28  # a quarter of a GiB at least
    checks.check_fits_memory("x", memory // 2, "half the memory")
    with pytest.raises(InvalidParameterError, match="x is too large: y would take"):
        checks.check_fits_memory("x", 2 * memory, "y")
    checks.check_count("n", 2**31 - 1)
    with pytest.raises(InvalidParameterError, match=r"n must be <= 2\*\*31 - 1"):
        checks.check_count("n", 2**31)
    with pytest.raises(InvalidParameterError, match="n must be >= 0, got -1"):
        checks.check_count("n", -1, low=0)


def test_output_paths_are_checked_without_creating_anything(tmp_path):
    (tmp_path / "file.txt").write_text("x")
    (tmp_path / "folder").mkdir()
    before = sorted(p.name for p in tmp_path.rglob("*"))
    assert check_output_folder(tmp_path / "new" / "run", "--out") == (
        tmp_path / "new" / "run"
    )
    check_output_folder(tmp_path / "folder", "--out")
    check_output_file(tmp_path / "file.txt", "--json")  # replaced atomically
    check_output_file(tmp_path / "new" / "rows.json", "--json")
    for check, path, message in [
        (check_output_folder, "file.txt", "--out {p}/file.txt is a file, not a folder"),
        (check_output_file, "folder", "--out {p}/folder is a folder, not a file"),
        (check_output_folder, "file.txt/run", "{p}/file.txt is a file, not a folder"),
        (check_output_file, "file.txt/a.json", "{p}/file.txt is a file, not a folder"),
    ]:
        with pytest.raises(PathError) as error:
            check(tmp_path / path, "--out")
        assert message.format(p=tmp_path) in str(error.value)
    with pytest.raises(PathError, match="--out /proc/mopa/run: cannot write in /proc"):
        check_output_folder("/proc/mopa/run", "--out")
    assert sorted(p.name for p in tmp_path.rglob("*")) == before


@pytest.mark.parametrize(
    ("helper", "inside", "outside", "interval"),
    [
        (checks.check_unit, (0.0, 0.5, 1.0), (-0.1, 1.5, math.nan), "[0, 1]"),
        (checks.check_probability, (0.01, 0.5, 0.99), (0.0, 1.0, math.nan), "(0, 1)"),
        (checks.check_fraction, (0.0, 0.5, 0.99), (-0.1, 1.0, math.nan), "[0, 1)"),
        (checks.check_discount, (0.01, 0.5, 1.0), (0.0, 1.01, math.nan), "(0, 1]"),
    ],
)
def test_each_interval_helper_keeps_its_ends_and_names_them(
    helper, inside, outside, interval
):
    for value in inside:
        helper("x", value)
    for value in outside:
        with pytest.raises(InvalidParameterError) as error:
            helper("x", value)
        assert str(error.value) == f"x must be in {interval}, got {value}"
    for value in ("0.5", True, None, [0.5], np.ones(2)):
        with pytest.raises(InvalidParameterError, match="^x must be a number, got "):
            helper("x", value)
    helper("x", np.float32(0.5))  # a scalar of any numeric type is a number
    helper("x", jnp.asarray(0.5))


def test_every_range_check_of_a_config_names_the_same_interval_the_same_way():
    # a discount of the planners, a GAE lambda, an EMA decay and a held-out share:
    # each config refuses through the one interval check, with one wording
    from mopa.algos.pola.sampled import SampledConfig
    from mopa.experiments.exp2 import Exp2Config
    from mopa.planning import LookaheadConfig

    cases = [
        (lambda: LookaheadConfig(gamma=1.5), "gamma must be in [0, 1], got 1.5"),
        (
            lambda: SampledConfig(gae_lambda=2.0),
            "gae_lambda must be in [0, 1], got 2.0",
        ),
        (lambda: SampledConfig(gamma=0.0), "gamma must be in (0, 1], got 0.0"),
        (
            lambda: Exp2Config(test_fraction=1.0),
            "test_fraction must be in (0, 1), got 1.0",
        ),
    ]
    for build, message in cases:
        with pytest.raises(InvalidParameterError) as error:
            build()
        assert str(error.value) == message
