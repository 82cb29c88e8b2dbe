"""``mopa experiment wargame_intent``: the quick profile end to end (files, the
results schema, counts that add up, a verdict that follows from the intervals;
the quick budget learns nothing, so no win rate is checked), the soft-belief
game's observation layout, that the online belief reads Blue's observations and
never the hidden type, and the statistics by hand."""

import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from mopa.errors import InvalidParameterError
from mopa.experiments import run_experiment
from mopa.experiments.wargame_intent import (
    CONDITIONS,
    NUM_TYPES,
    PLANNERS,
    PROFILES,
    TRAINED,
    WargameIntentConfig,
    classifier_config,
)
from mopa.opponent.battalion_belief import (
    MOTION_FEATURES,
    NUM_FEATURES,
    belief_features,
    classifier_input,
    prefix_examples,
    row_classifier_logits_fn,
)
from mopa.opponent.beliefs import init_prefix_belief, update_prefix_belief
from mopa.opponent.encoders import init_params as init_classifier
from mopa.planning.battalion_blue import (
    FAMILY,
    choose_plan,
    family_game,
    probe_family,
    training_segments,
)
from mopa.report.wargame_report import plan_verdict, verdict

QUICK = PROFILES["quick"]


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("wargame_intent") / "run"
    results = run_experiment("wargame_intent", "quick", out)
    return out, results


@pytest.mark.slow
def test_quick_run_writes_its_files(quick_run):
    out, results = quick_run
    for name in (
        "results.json",
        "config.json",
        "meta.json",
        "results.md",
        "wargame_intent_belief.png",
    ):
        assert (out / name).is_file() and (out / name).stat().st_size > 0, name
    described = json.loads((out / "config.json").read_text())
    assert described["experiment"] == "wargame_intent"
    assert described["preset"] == "quick"
    written = json.loads((out / "results.json").read_text())
    assert written["conditions"] == results["conditions"]
    markdown = (out / "results.md").read_text()
    assert verdict(results) in markdown
    assert plan_verdict(results) in markdown
    for name in CONDITIONS:
        assert f"{results['conditions'][name]['wins']} |" in markdown
    for name in TRAINED:
        assert (out / "stages" / "train" / f"{name}.msgpack").stat().st_size > 0


@pytest.mark.slow
def test_quick_results_schema_and_counts(quick_run):
    _, results = quick_run
    episodes = QUICK.num_seeds * QUICK.eval_episodes
    assert results["family"] == list(FAMILY)
    assert results["num_seeds"] == QUICK.num_seeds
    assert set(results["conditions"]) == set(CONDITIONS)
    for name in CONDITIONS:
        c = results["conditions"][name]
        assert c["wins"] + c["draws"] + c["losses"] == c["n_episodes"] == episodes
        assert c["win_rate"] == pytest.approx(c["wins"] / episodes)
        lo, hi = c["win_rate_ci95"]
        assert 0.0 <= lo <= c["win_rate"] <= hi <= 1.0
        assert len(c["seed_win_rates"]) == QUICK.num_seeds
        assert np.mean(c["seed_win_rates"]) == pytest.approx(c["win_rate"])
        lo, hi = c["return"]["ci95"]
        assert lo <= c["return"]["mean"] <= hi
        per_type = results["per_type"][name]
        assert set(per_type) <= set(FAMILY)
        assert sum(s["n_episodes"] for s in per_type.values()) == episodes
        assert sum(s["wins"] for s in per_type.values()) == c["wins"]
    blind_hi = results["conditions"]["blind"]["win_rate_ci95"][1]
    aware_lo = results["conditions"]["aware"]["win_rate_ci95"][0]
    assert results["aware_beats_blind"] == (aware_lo > blind_hi)
    assert results["aware_minus_blind"]["n_pairs"] == episodes
    belief = results["belief"]
    rows = QUICK.belief_rows
    assert belief["steps"] == [r * QUICK.belief_stride for r in range(rows)]
    for key in ("accuracy_by_step", "ece_by_step", "heldout_accuracy_by_step"):
        values = np.asarray(belief[key], np.float64)
        assert values.shape == (rows,)
        finite = values[np.isfinite(values)]
        assert finite.size > 0 and np.all((finite >= 0) & (finite <= 1))
    # Every evaluation episode gives the belief its first row (step 0).
    assert belief["n_episodes_by_step"][0] == episodes
    assert belief["temperature"] > 0
    for name in TRAINED:
        assert len(results["training"][name]["final_return_per_seed"]) == (
            QUICK.num_seeds
        )
    assert set(results["timing_s"]) == {
        "train",
        "belief",
        "evaluate",
        "family_probe",
        "plan_belief",
        "plan_evaluate",
    }
    probe = results["family_probe"]
    assert probe["types"] == list(FAMILY)
    rates = np.add(probe["win_rate"], probe["draw_rate"]) + probe["loss_rate"]
    np.testing.assert_allclose(rates, 1.0)
    assert set(probe["best_plan_by_win_rate"].values()) <= set(probe["plans"])
    # Knowing the type can only help a Blue choosing among the same plans.
    assert probe["best_plan_per_type_win_rate"] >= probe["best_single_plan_win_rate"]
    assert results["warm_start"] == QUICK.warm_start
    planning = results["planning"]
    assert planning["blind_plan"] in probe["plans"]
    for name in PLANNERS:
        c = planning["conditions"][name]
        assert c["wins"] + c["draws"] + c["losses"] == episodes
    lo = planning["conditions"]["aware_planner"]["win_rate_ci95"][0]
    hi = planning["conditions"]["blind_planner"]["win_rate_ci95"][1]
    assert planning["beats"] == (lo > hi)
    assert len(planning["belief"]["accuracy_by_step"]) == QUICK.belief_rows


def test_online_belief_reads_observations_never_the_type():
    env, params = family_game()
    _, state = env.reset(jax.random.key(7), params)
    (obs,) = env.observe(state, params)
    features = belief_features(obs[0], params)
    assert features.shape == (NUM_FEATURES,)
    np.testing.assert_allclose(features[:17], obs[0])
    # Red's map position, recovered from Blue's distance and bearing.
    np.testing.assert_allclose(
        features[17:],
        [state.x[1] / params.map_width, state.y[1] / params.map_height],
        atol=1e-5,
    )
    # Another hidden type, everything else equal: the same belief update.
    c_config = classifier_config(QUICK)
    logits_fn = row_classifier_logits_fn(
        c_config, init_classifier(c_config, jax.random.key(0))
    )
    beliefs = []
    for red in FAMILY[:2]:
        other = state.replace(red_type=jnp.asarray(FAMILY.index(red) + 6, jnp.int32))
        (seen,) = env.observe(other, params)
        start = init_prefix_belief(QUICK.belief_rows, NUM_FEATURES, NUM_TYPES)
        beliefs.append(
            update_prefix_belief(start, belief_features(seen[0], params), logits_fn)
        )
    np.testing.assert_array_equal(beliefs[0].belief, beliefs[1].belief)
    assert int(env.true_intent(state.replace(red_type=jnp.asarray(6)))) == 0


def test_prefix_examples_mask_rows_past_each_prefix():
    F, M = NUM_FEATURES, len(MOTION_FEATURES)
    rows = np.zeros((2, 3, F), np.float32)
    rows[:, :, 0] = [[1, 2, 3], [4, 5, 6]]  # Blue's x: not a motion feature
    rows[:, :, 17] = [[0.10, 0.15, 0.30], [0.5, 0.4, 0.3]]  # Red's x
    data = prefix_examples(rows, np.array([2, 3]), np.array([4, 1]))
    # Episode 0 gives prefixes of 1 and 2 rows, episode 1 of 1, 2 and 3.
    assert (
        data.x.shape
        == (5, 3 * (F + M) + 1)
        == (5, WargameIntentConfig(belief_rows=3).belief_input_size)
    )
    np.testing.assert_array_equal(data.labels, [4, 4, 1, 1, 1])
    x = np.asarray(data.x)
    prefix, motion, fraction = x[:, : 3 * F], x[:, 3 * F : -1], x[:, -1]
    np.testing.assert_allclose(fraction, [1 / 3, 2 / 3, 1 / 3, 2 / 3, 1.0])
    # Rows past the prefix are zeros.
    np.testing.assert_allclose(prefix[1].reshape(3, F)[:, 0], [1, 2, 0])
    np.testing.assert_allclose(prefix[4].reshape(3, F)[:, 17], [0.5, 0.4, 0.3])
    # Motion: Red's x change from the row before, times 10 (column 1 of the
    # motion block); the first row and rows past the prefix read 0.
    red_x = motion.reshape(5, 3, M)[:, :, MOTION_FEATURES.index(17)]
    np.testing.assert_allclose(red_x[0], [0, 0, 0], atol=1e-6)
    np.testing.assert_allclose(red_x[1], [0, 0.5, 0], atol=1e-5)
    np.testing.assert_allclose(red_x[4], [0, -1.0, -1.0], atol=1e-5)
    # The classifier reads the same input online.
    np.testing.assert_allclose(
        classifier_input(jnp.asarray(rows[1]), jnp.asarray(3)), x[4], atol=1e-6
    )


def test_choose_plan_by_hand():
    # Two plans, three types: plan 0 wins 0.9, 0.1, 0.5; plan 1 wins 0.4 each.
    table = jnp.asarray([[0.9, 0.1, 0.5], [0.4, 0.4, 0.4]])
    # Flat belief: 1.5 / 3 = 0.5 against 0.4, plan 0.
    assert int(choose_plan(table, jnp.full(3, 1 / 3))) == 0
    # Sure of type 1: 0.1 against 0.4, plan 1.
    assert int(choose_plan(table, jnp.asarray([0.0, 1.0, 0.0]))) == 1
    # 0.3 x 0.9 + 0.7 x 0.1 = 0.34 against 0.4, plan 1.
    assert int(choose_plan(table, jnp.asarray([0.3, 0.7, 0.0]))) == 1


def test_config_names_the_bad_field():
    with pytest.raises(InvalidParameterError, match="belief_rows"):
        WargameIntentConfig(belief_rows=0)
    with pytest.raises(InvalidParameterError, match="alpha_low"):
        WargameIntentConfig(alpha_low=0.8, alpha_high=0.2)
    with pytest.raises(InvalidParameterError, match="warm_start"):
        WargameIntentConfig(warm_start=1.0)


def test_training_segments_cut_at_the_warm_start():
    # 768 updates in 8 chunks of 96; the warm start ends at 384, a chunk border.
    assert training_segments(768, 8, 384) == [(96 * i, 96) for i in range(8)]
    # 10 updates in chunks of 4, 3, 3; a warm start of 5 cuts the second chunk.
    assert training_segments(10, 3, 5) == [(0, 4), (4, 1), (5, 2), (7, 3)]
    assert training_segments(10, 3, 0) == [(0, 4), (4, 3), (7, 3)]
    # Every update is played once, in order.
    for warm in range(11):
        segments = training_segments(10, 4, warm)
        starts = [first for first, _ in segments]
        assert starts == sorted(starts) and sum(n for _, n in segments) == 10
        assert all(first + n <= warm or first >= warm for first, n in segments)


def test_the_family_calls_for_different_plans():
    # Scripted Blues, 60 episodes per plan and type: attacking at once wins more
    # against the flankers and the feint; waiting and then attacking wins more
    # against the rush and the hold; the stand-off must be chased (a Blue that
    # holds its position draws).
    probe = probe_family(60, 0)
    win = dict(zip(probe["plans"], np.asarray(probe["win_rate"]), strict=True))
    draw = dict(zip(probe["plans"], np.asarray(probe["draw_rate"]), strict=True))
    now, later = win["close to 50 m"], win["hold, close to 50 m from step 200"]
    for k, red in enumerate(FAMILY):
        if red in ("rush", "hold"):
            assert later[k] >= now[k] + 0.15, red
        elif red == "standoff":
            assert draw["hold position"][k] >= 0.9
            assert win["close to 120 m"][k] >= 0.5
        else:
            assert now[k] >= later[k] + 0.1, red
    gain = probe["best_plan_per_type_win_rate"] - probe["best_single_plan_win_rate"]
    assert gain >= 0.05
