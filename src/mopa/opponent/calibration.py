"""How good and how honest a belief is: accuracy, calibration and proper scores.

For predicted distributions ``probs [N, K]`` over K strategies and true labels
``[N]``:

* :func:`accuracy` and :func:`accuracy_by_step` (beliefs ``[N, T, K]``: one
  accuracy per step of the trajectory);
* :func:`expected_calibration_error` (Guo et al., 2017, "On Calibration of Modern
  Neural Networks", eq. 3): predictions are binned by confidence (the top
  probability) into ``num_bins`` equal-width bins of ``[0, 1]``, bin ``b`` holding
  confidences in ``((b - 1) / B, b / B]`` (a confidence of 0 goes to the first),
  and ``ECE = sum_b |B_b| / N * |acc(B_b) - conf(B_b)|``; :func:`ece_by_step`;
* :func:`reliability_diagram`: the per-bin confidence, accuracy and count behind
  the ECE (plotted by :func:`mopa.report.calibration.plot_reliability_diagram`);
* :func:`brier_score`: the multi-class Brier score (Brier, 1950),
  ``mean_n sum_k (p_nk - y_nk)^2`` in ``[0, 2]``; for two classes it is twice the
  binary ``mean (p - y)^2`` of ``sklearn.metrics.brier_score_loss`` (which for
  ``K > 2`` computes this same multi-class score);
* :func:`negative_log_likelihood`: ``mean -log p_{n, y_n}`` (scikit-learn's
  ``log_loss``), probabilities clipped at ``eps``;
* temperature scaling (Guo et al., 2017, section 4.2): :func:`fit_temperature`
  finds the scalar ``T`` minimising the NLL of ``softmax(logits / T)`` on held-out
  data (host-side, scipy's bounded Brent search over ``log T``);
  :func:`temperature_scale` applies it.

Everything except :func:`fit_temperature`, :func:`calibration_by_step` and
:func:`calibration_by_row` (JSON-able tables of several beliefs' figures) is pure
``jnp`` and jittable (``num_bins`` static).
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from mopa.errors import InvalidParameterError


class ReliabilityDiagram(NamedTuple):
    """Per-bin statistics of a reliability diagram (``B`` bins)."""

    bin_edges: jax.Array  # [B + 1] from 0 to 1
    confidence: jax.Array  # [B] mean confidence in each bin (NaN if empty)
    accuracy: jax.Array  # [B] accuracy in each bin (NaN if empty)
    count: jax.Array  # [B] predictions in each bin


def accuracy(probs: jax.Array, labels: jax.Array) -> jax.Array:
    """Fraction of rows of ``probs [N, K]`` whose argmax is the label ``[N]``."""
    probs, labels = _check(probs, labels)
    return jnp.mean(jnp.argmax(probs, -1) == labels)


def accuracy_by_step(beliefs: jax.Array, labels: jax.Array) -> jax.Array:
    """Accuracy at every step ``[T]`` of beliefs ``[N, T, K]`` (labels ``[N]``)."""
    beliefs, labels = _check_by_step(beliefs, labels)
    return jnp.mean(jnp.argmax(beliefs, -1) == labels[:, None], 0)


def reliability_diagram(
    probs: jax.Array, labels: jax.Array, num_bins: int = 15
) -> ReliabilityDiagram:
    """Confidence, accuracy and count per equal-width confidence bin.

    Args:
        probs: ``[N, K]`` predicted distributions.
        labels: ``[N]`` true classes.
        num_bins: ``B``, equal-width bins over ``[0, 1]``.
    """
    probs, labels = _check(probs, labels)
    if num_bins < 1:
        raise InvalidParameterError(f"num_bins must be >= 1, got {num_bins}")
    confidence = jnp.max(probs, -1)
    correct = (jnp.argmax(probs, -1) == labels).astype(jnp.float32)
    # Bin b holds ((b - 1) / B, b / B]; confidence 0 joins the first bin.
    bins = jnp.clip(
        jnp.ceil(confidence * num_bins).astype(jnp.int32) - 1, 0, num_bins - 1
    )
    count = jax.ops.segment_sum(jnp.ones_like(confidence), bins, num_bins)
    conf_sum = jax.ops.segment_sum(confidence, bins, num_bins)
    correct_sum = jax.ops.segment_sum(correct, bins, num_bins)
    safe = jnp.maximum(count, 1.0)
    return ReliabilityDiagram(
        bin_edges=jnp.linspace(0.0, 1.0, num_bins + 1),
        confidence=jnp.where(count > 0, conf_sum / safe, jnp.nan),
        accuracy=jnp.where(count > 0, correct_sum / safe, jnp.nan),
        count=count,
    )


def expected_calibration_error(
    probs: jax.Array, labels: jax.Array, num_bins: int = 15
) -> jax.Array:
    """The expected calibration error ``[]``; see the module docstring.

    Args:
        probs: ``[N, K]`` predicted distributions.
        labels: ``[N]`` true classes.
        num_bins: equal-width confidence bins.
    """
    diagram = reliability_diagram(probs, labels, num_bins)
    gap = jnp.abs(jnp.nan_to_num(diagram.accuracy - diagram.confidence))
    return jnp.sum(diagram.count * gap) / jnp.sum(diagram.count)


def ece_by_step(beliefs: jax.Array, labels: jax.Array, num_bins: int = 15) -> jax.Array:
    """Expected calibration error at every step ``[T]`` of beliefs ``[N, T, K]``."""
    beliefs, labels = _check_by_step(beliefs, labels)
    return jax.vmap(
        lambda probs: expected_calibration_error(probs, labels, num_bins),
        in_axes=1,
    )(beliefs)


def brier_score(probs: jax.Array, labels: jax.Array) -> jax.Array:
    """Multi-class Brier score ``mean_n sum_k (p_nk - onehot(y_n)_k)^2`` ``[]``."""
    probs, labels = _check(probs, labels)
    onehot = jax.nn.one_hot(labels, probs.shape[-1])
    return jnp.mean(jnp.sum((probs - onehot) ** 2, -1))


def negative_log_likelihood(
    probs: jax.Array, labels: jax.Array, eps: float = 1e-12
) -> jax.Array:
    """Mean ``-log p(label)`` ``[]`` with probabilities clipped to ``[eps, 1]``."""
    probs, labels = _check(probs, labels)
    chosen = jnp.take_along_axis(probs, labels[:, None], -1)[:, 0]
    return -jnp.mean(jnp.log(jnp.clip(chosen, eps, 1.0)))


def logits_nll(logits: jax.Array, labels: jax.Array) -> jax.Array:
    """Mean ``-log softmax(logits)[label]`` ``[]`` (exact, no clipping)."""
    logits, labels = _check(logits, labels)
    log_probs = jax.nn.log_softmax(logits, -1)
    return -jnp.mean(jnp.take_along_axis(log_probs, labels[:, None], -1))


def temperature_scale(logits: jax.Array, temperature: float | jax.Array) -> jax.Array:
    """``softmax(logits / temperature)`` over the last axis."""
    return jax.nn.softmax(logits / temperature, -1)


def fit_temperature(
    logits: Any, labels: Any, bounds: tuple[float, float] = (1e-2, 1e2)
) -> float:
    """The temperature ``T`` minimising the NLL of ``softmax(logits / T)``.

    A bounded scalar search (scipy's Brent method) over ``log T``; the NLL of a
    temperature-scaled softmax is smooth in ``log T`` and, for fixed logits,
    typically unimodal. Host-side: call it on held-out data, outside ``jit``.

    Args:
        logits: ``[N, K]`` held-out logits (any scores: ``-distance^2`` for a
            readout belief).
        labels: ``[N]`` true classes.
        bounds: ``(low, high)`` search interval of ``T``, ``0 < low < high``.

    Returns:
        The fitted temperature (a float).
    """
    from scipy.optimize import minimize_scalar

    low, high = bounds
    if not 0 < low < high:
        raise InvalidParameterError(f"bounds must satisfy 0 < low < high, got {bounds}")
    logits, labels = _check(jnp.asarray(logits, jnp.float32), labels)
    nll = jax.jit(lambda log_t: logits_nll(logits / jnp.exp(log_t), labels))
    result = minimize_scalar(
        lambda log_t: float(nll(jnp.float32(log_t))),
        bounds=(np.log(low), np.log(high)),
        method="bounded",
        options={"xatol": 1e-5},
    )
    return float(np.exp(result.x))


def calibration_by_step(
    beliefs: Any, labels: Any, num_bins: int
) -> dict[str, dict[str, Any]]:
    """Every belief's accuracy and ECE at every step, and its reliability
    diagram over all steps: ``{name: {"accuracy_by_step", "ece_by_step",
    "reliability": {"confidence", "accuracy", "count"}}}`` (lists; an empty bin's
    confidence and accuracy ``None``).

    Args:
        beliefs: ``{name: [N, T, K]}`` the belief acted on at every step of each
            trajectory.
        labels: ``[N]`` the true strategies.
        num_bins: confidence bins.
    """
    labels = jnp.asarray(labels)
    out = {}
    for name, belief in beliefs.items():
        K = belief.shape[-1]
        diagram = reliability_diagram(
            belief.reshape(-1, K), jnp.repeat(labels, belief.shape[1]), num_bins
        )
        out[name] = {
            "accuracy_by_step": np.asarray(accuracy_by_step(belief, labels)).tolist(),
            "ece_by_step": np.asarray(ece_by_step(belief, labels, num_bins)).tolist(),
            "reliability": {
                "confidence": _nan_to_none(diagram.confidence),
                "accuracy": _nan_to_none(diagram.accuracy),
                "count": np.asarray(diagram.count).tolist(),
            },
        }
    return out


def _nan_to_none(values: Any) -> list:
    return [None if not math.isfinite(v) else float(v) for v in np.asarray(values)]


def calibration_by_row(
    beliefs: np.ndarray, valid: np.ndarray, labels: np.ndarray, num_bins: int
) -> dict[str, list[float]]:
    """Accuracy, ECE and the number of episodes at every belief row, counting
    only the episodes still played at each (``NaN`` and 0 where none is).

    Args:
        beliefs: ``[M, R, K]`` the belief after each row.
        valid: ``[M, R]`` whether the episode was still being played at that row.
        labels: ``[M]`` the true types.
    """
    out: dict[str, list[float]] = {"accuracy": [], "ece": [], "n_episodes": []}
    for r in range(beliefs.shape[1]):
        keep = np.asarray(valid[:, r], bool)
        if not keep.any():
            out["accuracy"].append(float("nan"))
            out["ece"].append(float("nan"))
            out["n_episodes"].append(0)
            continue
        probs, y = jnp.asarray(beliefs[keep, r]), jnp.asarray(labels[keep])
        out["accuracy"].append(float(accuracy(probs, y)))
        out["ece"].append(float(expected_calibration_error(probs, y, num_bins)))
        out["n_episodes"].append(int(keep.sum()))
    return out


def _check(probs: Any, labels: Any) -> tuple[jax.Array, jax.Array]:
    probs = jnp.asarray(probs)
    labels = jnp.asarray(labels)
    if probs.ndim != 2 or labels.shape != probs.shape[:1]:
        raise InvalidParameterError(
            f"probs must be [N, K] and labels [N], got shapes {tuple(probs.shape)} "
            f"and {tuple(labels.shape)}"
        )
    if not jnp.issubdtype(labels.dtype, jnp.integer):
        raise InvalidParameterError(f"labels must be integers, got {labels.dtype}")
    return probs, labels


def _check_by_step(beliefs: Any, labels: Any) -> tuple[jax.Array, jax.Array]:
    beliefs = jnp.asarray(beliefs)
    labels = jnp.asarray(labels)
    if beliefs.ndim != 3 or labels.shape != beliefs.shape[:1]:
        raise InvalidParameterError(
            f"beliefs must be [N, T, K] and labels [N], got shapes "
            f"{tuple(beliefs.shape)} and {tuple(labels.shape)}"
        )
    if not jnp.issubdtype(labels.dtype, jnp.integer):
        raise InvalidParameterError(f"labels must be integers, got {labels.dtype}")
    return beliefs, labels
