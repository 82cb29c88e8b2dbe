"""Meta-game Nash and NashConv, the spread proxy, the curriculum scheduler and
weight transfer."""

import jax
import numpy as np
import pytest

from mopa.league.curriculum import (
    BATTALION_TEAM_STAGES,
    CurriculumScheduler,
    transfer_weights,
)
from mopa.league.nash import (
    exploitability_proxy,
    meta_nash,
    nash_conv,
    population_nash_conv,
)
from mopa.policy import PolicySpec, init_params

RPS = np.array([[0.0, -1.0, 1.0], [1.0, 0.0, -1.0], [-1.0, 1.0, 0.0]])


def test_rock_paper_scissors_nash_conv():
    uniform = np.full(3, 1 / 3)
    assert nash_conv(RPS, uniform, uniform) == pytest.approx(0.0, abs=1e-12)
    rock = np.array([1.0, 0.0, 0.0])
    # Column best-responds to rock with paper (+1 for it), row to rock with paper
    # (+1): NashConv = (1 - 0) + (0 - (-1)) = 2.
    assert nash_conv(RPS, rock, rock) == pytest.approx(2.0)
    equilibrium = meta_nash(RPS)
    np.testing.assert_allclose(equilibrium.row, uniform, atol=1e-8)
    np.testing.assert_allclose(equilibrium.column, uniform, atol=1e-8)
    assert equilibrium.value == pytest.approx(0.0, abs=1e-9)


def test_meta_nash_of_a_dominated_population():
    # Policy 0 beats everyone: the equilibrium plays it alone, value 0 (mirror).
    payoff = np.array([[0.0, 0.6, 0.8], [-0.6, 0.0, 0.2], [-0.8, -0.2, 0.0]])
    equilibrium, uniform_conv = population_nash_conv(payoff)
    np.testing.assert_allclose(equilibrium.row, [1, 0, 0], atol=1e-8)
    assert nash_conv(payoff, equilibrium.row, equilibrium.column) == pytest.approx(
        0.0, abs=1e-9
    )
    assert uniform_conv > 0.5


def test_proxy_is_a_spread_not_exploitability():
    # Losing every game to everyone scores 0: the proxy measures spread only.
    assert exploitability_proxy(np.zeros(4)) == 0.0
    # (1 - wr) = [0.2, 0.4, 0.9]: max 0.9 - mean 0.5 = 0.4
    assert exploitability_proxy(np.array([0.8, 0.6, 0.1])) == pytest.approx(0.4)


def test_scheduler_promotes_through_every_stage():
    scheduler = CurriculumScheduler(
        BATTALION_TEAM_STAGES, promote_threshold=0.7, win_rate_window=10
    )
    assert scheduler.stage_label == "1v1" and scheduler.env_kwargs() == {
        "num_blue": 1,
        "num_red": 1,
    }
    for _ in range(9):
        scheduler.record_episode(True)
    assert not scheduler.should_promote()  # the window is not full
    scheduler.record_episode(False)
    assert scheduler.win_rate() == pytest.approx(0.9)
    assert scheduler.should_promote()
    assert scheduler.promote(step=123).name == "2v1"
    assert scheduler.win_rate() == 0.0 and not scheduler.should_promote()
    for _ in range(10):
        scheduler.record_episode(True)
    scheduler.promote()
    assert scheduler.is_final_stage and scheduler.stage_label == "2v2"
    for _ in range(10):
        scheduler.record_episode(True)
    assert not scheduler.should_promote()
    with pytest.raises(RuntimeError):
        scheduler.promote()
    state = scheduler.state_dict()
    restored = CurriculumScheduler(BATTALION_TEAM_STAGES, 0.7, 10)
    restored.load_state_dict(state)
    assert restored.stage_label == "2v2" and restored.total_episodes == 30
    assert [p["to"] for p in restored.promotions] == ["2v1", "2v2"]
    assert restored.metrics()["curriculum/win_rate"] == 1.0


def test_transfer_weights_reports_loaded_and_skipped():
    small = PolicySpec(
        kind="actor", num_agents=1, obs_size=17, num_actions=18, hidden=(32,)
    )
    large = PolicySpec(
        kind="actor", num_agents=2, obs_size=17, num_actions=18, hidden=(32,)
    )
    source = init_params(small, jax.random.key(0))
    target = init_params(large, jax.random.key(1))
    moved, report = transfer_weights(source, target)
    # The input layer sees 17 + 1 vs 17 + 2 inputs: skipped; the rest loads.
    assert len(report["skipped"]) == 1 and "kernel" in report["skipped"][0]
    assert len(report["loaded"]) == len(jax.tree.leaves(target)) - 1
    first_kernel = report["skipped"][0]
    for path, leaf in jax.tree_util.tree_flatten_with_path(moved)[0]:
        name = jax.tree_util.keystr(path)
        want = target if name == first_kernel else source
        want_leaf = dict(
            (jax.tree_util.keystr(p), x)
            for p, x in jax.tree_util.tree_flatten_with_path(want)[0]
        )[name]
        np.testing.assert_array_equal(leaf, want_leaf)
