"""Exp 2: the angular-step measure on hand-built trajectories, and ``mopa
experiment exp2`` end to end on its quick profile (files and the results schema;
the quick budget learns nothing, so no numbers)."""

import json

import jax.numpy as jnp
import numpy as np
import pytest

from mopa.envs import make
from mopa.eval.intervals import bootstrap_mean
from mopa.experiments import run_experiment
from mopa.experiments.exp2 import VARIANTS, Exp2Config
from mopa.opponent.data import load_dataset
from mopa.opponent.representations import angular_steps, episode_angular_steps


def _circle(centre, radius, omega, num_steps, phase=0.0):
    """``[T, 2]`` positions on a circle, turning ``omega`` rad per step."""
    angle = phase + omega * np.arange(num_steps)
    return np.stack(
        [centre[0] + radius * np.cos(angle), centre[1] + radius * np.sin(angle)], -1
    ).astype(np.float32)


def test_a_counter_clockwise_circle_turns_its_angular_speed_each_step():
    # 0.1 rad per step around the origin, radius 0.4: every step is +0.1 exactly.
    steps = angular_steps(jnp.asarray(_circle((0, 0), 0.4, 0.1, 25)), jnp.zeros((1, 2)))
    assert steps.shape == (24,)
    np.testing.assert_allclose(steps, 0.1, atol=1e-5)


def test_a_clockwise_circle_is_negative():
    steps = angular_steps(
        jnp.asarray(_circle((0, 0), 0.4, -0.25, 10)), jnp.zeros((1, 2))
    )
    np.testing.assert_allclose(steps, -0.25, atol=1e-5)


def test_steps_are_taken_around_the_nearest_centre():
    # A clockwise orbit of radius 0.2 around the obstacle at (0.5, 0.5): measured
    # around that obstacle every step is -0.15, although the orbit also moves
    # around the origin (where the angle turned differs).
    obstacles = jnp.asarray([[0.5, 0.5], [-0.5, 0.5], [-0.5, -0.5], [0.5, -0.5]])
    orbit = jnp.asarray(_circle((0.5, 0.5), 0.2, -0.15, 40, phase=1.0))
    np.testing.assert_allclose(angular_steps(orbit, obstacles), -0.15, atol=1e-5)
    around_origin = angular_steps(orbit, jnp.zeros((1, 2)))
    assert not np.allclose(around_origin, -0.15, atol=1e-3)


def test_a_straight_radial_run_and_standing_still_turn_nothing():
    radial = jnp.asarray(np.linspace([0.1, 0.1], [0.9, 0.9], 12), jnp.float32)
    np.testing.assert_allclose(angular_steps(radial, jnp.zeros((1, 2))), 0.0, atol=1e-6)
    still = jnp.full((5, 2), 0.3)
    np.testing.assert_allclose(angular_steps(still, jnp.zeros((1, 2))), 0.0)


def test_episode_steps_read_each_episode_around_its_own_centres():
    # Two episodes, opposite directions, each with its own centre.
    episodes = np.stack(
        [_circle((0.5, 0.5), 0.3, 0.05, 25), _circle((-0.5, 0.5), 0.3, -0.05, 25)]
    )
    centres = np.asarray([[[0.5, 0.5]], [[-0.5, 0.5]]])
    steps = episode_angular_steps(episodes, centres)
    assert steps.shape == (2, 24)
    np.testing.assert_allclose(steps.mean(1), [0.05, -0.05], atol=1e-5)


def test_bootstrap_interval_holds_the_mean_and_collapses_on_constant_rows():
    rng = np.random.default_rng(0)
    values = rng.normal(0.01, 0.3, size=(200, 24))
    groups = np.repeat([0, 1], 100)
    low, high = bootstrap_mean(values, groups, 500, 0)
    assert low < values.mean() < high
    # The standard error of the mean over 4,800 steps (rows independent): ~0.0043.
    assert 0.01 < high - low < 0.03
    assert bootstrap_mean(np.full((10, 3), 0.2), np.zeros(10), 50, 0) == pytest.approx(
        [0.2, 0.2]
    )


def test_config_names_a_bad_field():
    with pytest.raises(Exception, match="test_fraction"):
        Exp2Config(test_fraction=0.0)
    with pytest.raises(Exception, match="encoder_seeds"):
        Exp2Config(encoder_seeds=0)


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("exp2") / "run"
    run_experiment("exp2", "quick", out)
    return out


@pytest.mark.slow
def test_quick_run_writes_files_and_schema(quick_run):
    for name in (
        "results.json",
        "results.md",
        "config.json",
        "exp2_behaviour.png",
        "exp2_mean_dangle.png",
    ):
        assert (quick_run / name).is_file(), name
    results = json.loads((quick_run / "results.json").read_text())
    assert set(results["mean_dangle"]) == set(VARIANTS)
    for name in VARIANTS:
        mean = results["mean_dangle"][name]
        low, high = results["mean_dangle_ci95"][name]
        assert isinstance(mean, float) and abs(mean) <= np.pi
        assert low <= mean <= high
        assert len(results["mean_dangle_by_seed"][name]) == 1
        assert results["num_episodes"][name] == 12
        assert sum(results["histogram"]["counts"][name]) == 12 * 24
    assert isinstance(results["vae_ari"], float) and -1.0 <= results["vae_ari"] <= 1.0
    assert results["vae"]["num_checkpoints"] == 3
    assert results["vae"]["num_train"] + results["vae"]["num_test"] == 36
    text = (quick_run / "results.md").read_text()
    assert "VAE ARI against the variant" in text and "-0.0108" in text


@pytest.mark.slow
def test_captures_count_the_predators_catches_in_the_episodes(quick_run):
    results = json.loads((quick_run / "results.json").read_text())
    captures = results["captures_per_episode"]
    dataset = load_dataset(quick_run / "stages" / "data" / "dataset.npz")
    rewards = dataset.episodes("rewards.predator")  # [N, T, P]
    # Every predator is paid the same, a whole number of capture rewards.
    np.testing.assert_array_equal(rewards, rewards[..., :1].repeat(3, -1))
    per_episode = rewards[:, :, 0].sum(1) / make("tag_static")[1].capture_reward
    np.testing.assert_allclose(per_episode, np.round(per_episode), atol=1e-4)
    variant = dataset.episode_labels("policy_id")
    for index, name in enumerate(VARIANTS):
        mean = captures["mean"][name]
        assert mean == pytest.approx(per_episode[variant == index].mean())
        low, high = captures["ci95"][name]
        assert 0.0 <= low <= mean <= high
        assert captures["by_seed"][name] == [pytest.approx(mean)]
    text = (quick_run / "results.md").read_text()
    assert "predators' captures per episode" in text and "| 2.8 |" in text
