"""Calibration metrics: hand-worked values, agreement with scikit-learn, a
calibrated toy (ECE ~ 0) against an overconfident one, temperature scaling that
recovers a known temperature, and the plots."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from sklearn.metrics import brier_score_loss, log_loss

from mopa.errors import InvalidParameterError
from mopa.opponent import calibration as C  # noqa: N812
from mopa.report.calibration import plot_calibration_by_step, plot_reliability_diagram

# Four predictions over two classes, kept off the bin edges of 5 bins of 0.2.
PROBS = np.array([[0.95, 0.05], [0.65, 0.35], [0.25, 0.75], [0.62, 0.38]], np.float32)
LABELS = np.array([0, 1, 1, 0])


def sample_labels(rng, probs):
    cdf = np.cumsum(probs, -1)
    return np.minimum((cdf < rng.random((len(probs), 1))).sum(-1), probs.shape[1] - 1)


def test_ece_and_reliability_by_hand():
    # Confidences 0.95 (bin (0.8, 1]) and 0.65, 0.75, 0.62 (bin (0.6, 0.8]).
    # Bin (0.8, 1]: confidence 0.95, accuracy 1 (predicts 0, label 0), gap 0.05.
    # Bin (0.6, 0.8]: confidence (0.65 + 0.75 + 0.62) / 3 = 0.673333, accuracy 2/3
    #   (wrong, right, right), gap 0.006667.
    # ECE = (1 * 0.05 + 3 * 0.006667) / 4 = 0.0175.
    diagram = C.reliability_diagram(PROBS, LABELS, num_bins=5)
    np.testing.assert_allclose(diagram.count, [0, 0, 0, 3, 1])
    np.testing.assert_allclose(diagram.confidence[3:], [0.673333, 0.95], rtol=1e-5)
    np.testing.assert_allclose(diagram.accuracy[3:], [2 / 3, 1.0], rtol=1e-6)
    assert np.isnan(diagram.confidence[:3]).all()
    np.testing.assert_allclose(diagram.bin_edges, [0, 0.2, 0.4, 0.6, 0.8, 1.0])
    ece = C.expected_calibration_error(PROBS, LABELS, num_bins=5)
    np.testing.assert_allclose(ece, 0.0175, rtol=1e-4)
    assert float(C.accuracy(PROBS, LABELS)) == 0.75


def test_ece_calibrated_toy_is_zero_and_overconfident_is_not():
    # Labels drawn from the stated probabilities: the prediction is calibrated by
    # construction, its ECE only sampling noise. Sharpening the same predictions
    # (p^3, renormalised) makes them overconfident.
    rng = np.random.default_rng(0)
    probs = rng.dirichlet(np.ones(4), 20000).astype(np.float32)
    labels = sample_labels(rng, probs)
    calibrated = float(C.expected_calibration_error(probs, labels, num_bins=10))
    sharp = probs**3 / (probs**3).sum(-1, keepdims=True)
    overconfident = float(C.expected_calibration_error(sharp, labels, num_bins=10))
    assert calibrated < 0.015
    assert overconfident > 0.1


def test_brier_and_nll_agree_with_sklearn():
    # Hand: p = (0.7, 0.2, 0.1), label 0 -> 0.3^2 + 0.2^2 + 0.1^2 = 0.14;
    # NLL = -log 0.7 = 0.356675.
    one = np.array([[0.7, 0.2, 0.1]], np.float32)
    np.testing.assert_allclose(C.brier_score(one, [0]), 0.14, rtol=1e-5)
    np.testing.assert_allclose(C.negative_log_likelihood(one, [0]), 0.356675, rtol=1e-5)

    rng = np.random.default_rng(1)
    probs = rng.dirichlet(np.ones(4), 500)
    labels = rng.integers(0, 4, 500)
    np.testing.assert_allclose(
        C.brier_score(probs, labels),
        brier_score_loss(labels, probs, labels=[0, 1, 2, 3]),
        rtol=1e-5,
    )
    np.testing.assert_allclose(
        C.negative_log_likelihood(probs, labels),
        log_loss(labels, probs, labels=[0, 1, 2, 3]),
        rtol=1e-5,
    )
    # Binary: scikit-learn's binary Brier is mean (p1 - y)^2, half the multi-class
    # sum (p0 - y0)^2 + (p1 - y1)^2 = 2 (p1 - y)^2.
    binary = np.stack([1 - probs[:, 0], probs[:, 0]], -1)
    y = (labels == 0).astype(int)
    np.testing.assert_allclose(
        C.brier_score(binary, y), 2 * brier_score_loss(y, binary[:, 1]), rtol=1e-5
    )
    logits = np.log(probs)
    np.testing.assert_allclose(
        C.logits_nll(logits, labels), log_loss(labels, probs), rtol=1e-5
    )


def test_by_step_metrics():
    # Two episodes, three steps, two classes; labels (0, 1).
    # Step 1: argmax (0, 0) -> accuracy 1/2; step 2: (0, 1) -> 1; step 3: (1, 1) -> 1/2.
    beliefs = np.array(
        [
            [[0.6, 0.4], [0.7, 0.3], [0.45, 0.55]],
            [[0.55, 0.45], [0.3, 0.7], [0.1, 0.9]],
        ],
        np.float32,
    )
    labels = np.array([0, 1])
    np.testing.assert_allclose(C.accuracy_by_step(beliefs, labels), [0.5, 1.0, 0.5])
    # Step 2, one bin: confidence (0.7 + 0.7) / 2 = 0.7, accuracy 1 -> ECE 0.3.
    ece = jax.jit(C.ece_by_step, static_argnums=2)(beliefs, labels, 1)
    np.testing.assert_allclose(ece[1], 0.3, rtol=1e-5)
    for t in range(3):
        np.testing.assert_allclose(
            ece[t], C.expected_calibration_error(beliefs[:, t], labels, 1), rtol=1e-6
        )


def test_temperature_scaling_recovers_a_known_temperature():
    # Labels drawn from softmax(logits / 2): the NLL-optimal temperature is 2.
    rng = np.random.default_rng(2)
    logits = 2.0 * rng.standard_normal((20000, 4)).astype(np.float32)
    probs = np.asarray(C.temperature_scale(jnp.asarray(logits), 2.0))
    labels = sample_labels(rng, probs)
    temperature = C.fit_temperature(logits, labels)
    assert abs(temperature - 2.0) < 0.1
    # Scaling never changes the argmax, and lowers the NLL against T = 1.
    scaled = C.temperature_scale(logits, temperature)
    np.testing.assert_array_equal(np.argmax(scaled, -1), np.argmax(logits, -1))
    assert float(C.negative_log_likelihood(scaled, labels)) < float(
        C.logits_nll(logits, labels)
    )


def test_plots_write_pngs(tmp_path):
    diagram = C.reliability_diagram(PROBS, LABELS, num_bins=5)
    path = plot_reliability_diagram(
        diagram.confidence, diagram.accuracy, diagram.count, tmp_path / "rel.png"
    )
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    path = plot_calibration_by_step(
        [0.4, 0.7, 0.9], [0.1, 0.05, 0.02], tmp_path / "steps.png"
    )
    assert path.stat().st_size > 1000
    with pytest.raises(InvalidParameterError, match="accuracy and ece"):
        plot_calibration_by_step([0.4], [0.1, 0.2], tmp_path / "bad.png")


def test_bad_arguments_are_named():
    with pytest.raises(InvalidParameterError, match="labels"):
        C.brier_score(PROBS, LABELS[:3])
    with pytest.raises(InvalidParameterError, match="num_bins"):
        C.reliability_diagram(PROBS, LABELS, num_bins=0)
    with pytest.raises(InvalidParameterError, match="bounds"):
        C.fit_temperature(PROBS, LABELS, bounds=(2.0, 1.0))
