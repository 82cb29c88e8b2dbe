"""The one 95%-interval helper: its two methods on hand-computed values, the
sample axis, a single sample, a difference of two independent means, and a bad
method named."""

import numpy as np
import pytest

from mopa.errors import InvalidParameterError
from mopa.eval.intervals import (
    difference_interval,
    half_width,
    mean_interval,
    proportion_difference,
    wilson_interval,
)


def test_normal_and_student_t_half_widths():
    values = np.array([1.0, 2.0, 3.0])  # sample std 1
    assert half_width(values) == pytest.approx(1.96 / np.sqrt(3))
    # t_{0.975, 2} = 4.302653
    assert half_width(values, method="t") == pytest.approx(4.302653 / np.sqrt(3))


def test_mean_interval_pools_every_value():
    values = np.array([[0.0, 2.0], [4.0, 6.0]])  # mean 3, sample std 2.582
    out = mean_interval(values)
    half = 1.96 * np.std([0.0, 2.0, 4.0, 6.0], ddof=1) / 2.0
    assert out["mean"] == 3.0
    assert out["ci95"] == pytest.approx([3.0 - half, 3.0 + half])


def test_the_sample_axis_and_a_single_sample():
    # Two samples per column; column 0 has sample std sqrt(2), t_{0.975, 1} = 12.706.
    values = np.array([[1.0, 10.0], [3.0, 10.0]])
    np.testing.assert_allclose(
        half_width(values, method="t", axis=0), [12.706205, 0.0], rtol=1e-6
    )
    np.testing.assert_array_equal(half_width(values[:1]), [0.0, 0.0])
    assert mean_interval([2.5]) == {"mean": 2.5, "ci95": [2.5, 2.5]}


def test_a_bad_method_is_named():
    with pytest.raises(InvalidParameterError, match="method must be one of"):
        half_width([1.0, 2.0], method="bootstrap")


def test_difference_of_independent_means_adds_errors_in_quadrature():
    a = np.array([1.0, 2.0, 3.0])  # mean 2, half-width 1.96 / sqrt(3)
    b = np.array([[0.0, 2.0], [4.0, 6.0]])  # mean 3, pooled
    out = difference_interval(a, b)
    half = np.hypot(1.96 / np.sqrt(3), 1.96 * np.std([0, 2, 4, 6], ddof=1) / 2.0)
    assert out["mean"] == -1.0
    assert out["ci95"] == pytest.approx([-1.0 - half, -1.0 + half])


def test_wilson_interval_hand_values():
    # 5/10: centre 0.5; half = 1.96 sqrt(0.025 + 1.96^2 / 400) / (1 + 1.96^2 / 10)
    #     = 1.96 * 0.18601 / 1.38415 = 0.26340
    low, high = wilson_interval(5, 10)
    assert low == pytest.approx(0.23659, abs=1e-4)
    assert high == pytest.approx(0.76341, abs=1e-4)
    # 0/10: centre = (1.96^2 / 20) / 1.38415 = 0.13877 = half -> [0, 0.27755]
    low, high = wilson_interval(0, 10)
    assert low == 0.0
    assert high == pytest.approx(0.27755, abs=1e-4)
    # Newcombe (1998), method 10, example 56/70 - 48/80: 0.2 [0.0524, 0.3339]
    drop = proportion_difference(56, 70, 48, 80)
    assert drop["diff"] == pytest.approx(0.2)
    np.testing.assert_allclose(drop["ci95"], [0.0524, 0.3339], atol=1e-4)
    with pytest.raises(InvalidParameterError):
        wilson_interval(3, 2)
