"""The scikit-learn metric wrappers agree with scikit-learn called directly on
fixtures, separate what should separate, and are deterministic given a seed."""

import numpy as np
import pytest
from sklearn.cluster import KMeans
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import adjusted_rand_score, normalized_mutual_info_score
from sklearn.mixture import GaussianMixture
from sklearn.model_selection import StratifiedGroupKFold, cross_val_score
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from mopa.errors import InvalidParameterError
from mopa.opponent import metrics


@pytest.fixture(scope="module")
def blobs():
    """Three Gaussian blobs in 4-D (centres N(0, 8^2), unit noise), 60 points each,
    grouped into episodes of 5 consecutive points."""
    rng = np.random.default_rng(0)
    centres = 8.0 * rng.standard_normal((3, 4))
    labels = np.repeat(np.arange(3), 60)
    features = centres[labels] + rng.standard_normal((180, 4))
    groups = np.arange(180) // 5
    return features, labels, groups


def test_probe_matches_sklearn_cross_validation(blobs):
    features, labels, groups = blobs
    noisy = features + 3.0 * np.random.default_rng(1).standard_normal(features.shape)
    ours = metrics.probe_accuracy(noisy, labels, groups, num_folds=4, seed=3)
    direct = cross_val_score(
        make_pipeline(StandardScaler(), LogisticRegression(max_iter=2000)),
        noisy,
        labels,
        groups=groups,
        cv=StratifiedGroupKFold(4, shuffle=True, random_state=3),
    ).mean()
    assert ours == pytest.approx(direct, abs=1e-12)
    assert 0.4 < ours < 1.0  # noisy: informative but not perfect
    assert metrics.probe_accuracy(features, labels, groups, num_folds=4) == 1.0
    # Pure noise features: near chance (1/3).
    noise = np.random.default_rng(2).standard_normal((180, 4))
    assert metrics.probe_accuracy(noise, labels, groups, num_folds=4) < 0.5


def test_probe_split(blobs):
    features, labels, _ = blobs
    train = np.arange(180) % 3 != 0
    accuracy = metrics.probe_accuracy_split(
        features[train], labels[train], features[~train], labels[~train]
    )
    assert accuracy == 1.0


@pytest.mark.parametrize("method", ["kmeans", "gmm"])
def test_cluster_scores_match_sklearn(blobs, method):
    features, labels, _ = blobs
    scores = metrics.cluster_scores(features, labels, 3, method=method, seed=4)
    if method == "kmeans":
        model = KMeans(3, n_init=10, random_state=4)
    else:
        model = GaussianMixture(3, n_init=5, random_state=4)
    assignments = model.fit_predict(features)
    np.testing.assert_array_equal(scores.assignments, assignments)
    assert scores.ari == adjusted_rand_score(labels, assignments)
    assert scores.nmi == normalized_mutual_info_score(labels, assignments)
    assert scores.ari > 0.95 and scores.nmi > 0.95  # well-separated blobs
    again = metrics.cluster_scores(features, labels, 3, method=method, seed=4)
    np.testing.assert_array_equal(again.assignments, scores.assignments)


def test_cluster_scores_by_hand():
    # Labels (0, 0, 1, 1) against clusters that swap names: a perfect partition,
    # ARI = NMI = 1. Against (0, 1, 0, 1) (independent): ARI = -0.5, NMI = 0.
    features = np.array([[0.0], [0.1], [10.0], [10.1]])
    scores = metrics.cluster_scores(features, [1, 1, 0, 0], 2, seed=0)
    assert scores.ari == pytest.approx(1.0) and scores.nmi == pytest.approx(1.0)
    scores = metrics.cluster_scores(features, [0, 1, 0, 1], 2, seed=0)
    assert scores.ari == pytest.approx(-0.5) and scores.nmi == pytest.approx(0.0)


def test_gmm_bic_finds_three_blobs(blobs):
    features, _, _ = blobs
    result = metrics.gmm_bic(features, range(1, 5), seed=5)
    assert result.num_components == (1, 2, 3, 4)
    assert result.best == 3
    direct = GaussianMixture(2, n_init=3, random_state=5).fit(features).bic(features)
    assert result.bic[1] == pytest.approx(direct)
    assert result.bic[0] - result.bic[2] > 100  # a large drop from k = 1


def test_bad_arguments_are_named(blobs):
    features, labels, groups = blobs
    with pytest.raises(InvalidParameterError, match="method"):
        metrics.cluster_scores(features, labels, 3, method="dbscan")
    with pytest.raises(InvalidParameterError, match="groups"):
        metrics.probe_accuracy(features, labels, groups[:10])
    with pytest.raises(InvalidParameterError, match="num_folds"):
        metrics.probe_accuracy(features, labels, num_folds=1)
    with pytest.raises(InvalidParameterError, match="features"):
        metrics.gmm_bic(features[:, 0])
