"""Evaluation: play policies against each other and measure them."""

from mopa.eval.evaluate import evaluate

__all__ = ["evaluate"]
