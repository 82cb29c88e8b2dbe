"""LeMOL: config checks, trajectory padding for truncated backpropagation, the
agent's inputs, and the opponent model beating a uniform predictor of a learning
opponent's moves after a small budget (the run of ``conftest.small_run``)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from mopa.algos.lemol import LeMOLConfig, make_lemol
from mopa.algos.lemol.model import prediction_scores
from mopa.algos.lemol.train import _trajectories
from mopa.errors import InvalidParameterError
from tests.algos.lemol.small import SMALL


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"good_policy": "lemol"}, "cannot both be lemol"),
        ({"scenario": "adversary"}, "lemol models one opponent"),
        ({"num_adversaries": 2}, "lemol models one opponent"),
        ({"chunk_length": 0}, "chunk_length must be > 0"),
        ({"omlr": -1.0}, "omlr must be > 0"),
        ({"n_opp_cycles": 0}, "n_opp_cycles must be > 0"),
        (
            {"num_envs": 3, "num_episodes": 30, "replay_buffer_capacity": 300},
            r"num_traj_to_train \(8\) must be a multiple of num_envs \(3\)",
        ),
        ({"opponent_model": "gru"}, "opponent_model must be lstm or bc"),
        ({"bad_policy": "dqn"}, "bad_policy must be one of maddpg, m3ddpg, lemol"),
    ],
)
def test_bad_configs_name_the_field(fields, message):
    with pytest.raises(InvalidParameterError, match=message):
        LeMOLConfig(**fields)


def test_focal_team_and_sizes():
    assert LeMOLConfig().focal_team == 0 and LeMOLConfig().uses_model
    config = LeMOLConfig(good_policy="lemol", bad_policy="mmmaddpg")
    assert config.focal_team == 1 and config.team_policies == ("m3ddpg", "lemol")
    plain = LeMOLConfig(bad_policy="maddpg")
    assert plain.focal_team == 0 and not plain.uses_model
    # 40 episodes x 25 steps, one update per 2 steps: 500 updates, 1000 steps,
    # covered by 20 chunks of 50.
    assert (SMALL.updates_per_playout, SMALL.num_chunks) == (500, 20)
    assert LeMOLConfig(chunk_length=64, num_episodes=4).num_chunks == 2  # 100 steps


def test_trajectories_are_time_ordered_per_game_and_padded():
    """A record ``[U=3, F=2, E=2]`` of step numbers becomes, per game, steps 0..5
    in order, padded to 8 with ``valid`` false on the padding."""
    step = jnp.arange(6.0).reshape(3, 2, 1, 1) + jnp.array([0.0, 100.0])[:, None]
    obs = jnp.broadcast_to(step, (3, 2, 2, 1))  # game g holds 100 g + t
    actions = jnp.broadcast_to(step, (3, 2, 2, 5))
    traj = _trajectories((obs, actions), steps=6, padded=8)
    assert traj.obs.shape == (2, 8, 1) and traj.actions.shape == (2, 8, 5)
    np.testing.assert_array_equal(traj.obs[0, :, 0], [0, 1, 2, 3, 4, 5, 0, 0])
    np.testing.assert_array_equal(traj.obs[1, :6, 0], 100 + np.arange(6))
    np.testing.assert_array_equal(traj.valid[1], [True] * 6 + [False] * 2)


def test_prediction_scores_by_hand():
    """Predicting move 2 with probability 0.5 when 2 is played: cross-entropy
    log 2; the uniform predictor's log 5; accuracy 1. Continuous: predicting
    (0.5, 1, 0, 0, 0) for (0, 1, 0, 0, 1) costs 0.25 + 1 = 1.25; predicting 0.5
    everywhere costs 5 x 0.25 = 1.25."""
    pred = jnp.array([0.1, 0.2, 0.5, 0.1, 0.1])
    scores = prediction_scores(pred, jax.nn.one_hot(2, 5), discrete=True)
    np.testing.assert_allclose(scores["om_loss"], np.log(2), rtol=1e-5)
    np.testing.assert_allclose(scores["om_uniform_loss"], np.log(5), rtol=1e-6)
    assert scores["om_accuracy"] == 1.0
    scores = prediction_scores(
        jnp.array([0.5, 1.0, 0.0, 0.0, 0.0]),
        jnp.array([0.0, 1.0, 0.0, 0.0, 1.0]),
        discrete=False,
    )
    np.testing.assert_allclose(scores["om_loss"], 1.25)
    np.testing.assert_allclose(scores["om_uniform_loss"], 1.25)
    assert "om_accuracy" not in scores


@pytest.mark.slow
def test_opponent_model_beats_a_uniform_predictor(small_run):
    """Online predictions of each fresh opponent's moves (made by the model
    trained on earlier cycles): chance in cycle 0 (an untrained model, opponents
    that start near-uniform), then clearly better than the uniform predictor
    (accuracy 0.2, cross-entropy log 5 = 1.609): accuracy above 0.3 in the last
    two cycles, cross-entropy 0.1 below in the last (seen: accuracy 0.37-0.50,
    cross-entropy 1.37 and 1.41)."""
    with np.load(small_run / "run" / "metrics.npz") as metrics:
        accuracy = metrics["cycle/om_accuracy"]  # [seed, cycle]
        loss = metrics["cycle/om_loss"]
        uniform = metrics["cycle/om_uniform_loss"]
        train_loss = metrics["cycle/om_train_loss"]
    assert accuracy.shape == (SMALL.num_seeds, SMALL.n_opp_cycles)
    np.testing.assert_allclose(uniform, np.log(5), rtol=1e-6)
    assert np.all(np.abs(accuracy[:, 0] - 0.2) < 0.08), accuracy
    assert np.all(accuracy[:, -2:] > 0.3), accuracy
    assert np.all(loss[:, -1] < uniform[:, -1] - 0.1), loss
    # Training on the stored trajectories fits them better than chance too.
    assert np.all(train_loss[:, -1] < np.log(5) - 0.2), train_loss


def test_the_lemol_agent_reads_the_prediction():
    """The focal (adversary) agent's actor and critic take the 5-vector
    prediction as extra input, the opponent's do not; the store holds
    ``num_traj_to_train`` opponent trajectories of a play-out's 1000 steps, padded
    to whole chunks. (Shapes only: nothing runs.)"""
    carry = jax.eval_shape(make_lemol(SMALL).init, jax.random.key(0))
    adversary, good = carry.learners
    kernel = lambda p: p["params"]["Trunk_0"]["Dense_0"]["kernel"].shape  # noqa: E731
    assert kernel(adversary.actor) == (8 + 5, 32)  # push adversary obs + prediction
    assert kernel(adversary.critic) == (8 + 19 + 2 * 5 + 5, 32)
    assert kernel(good.actor) == (19, 32)
    assert kernel(good.critic) == (8 + 19 + 2 * 5, 32)
    assert carry.store.data.obs.shape == (4, 20 * 50, 19)
    assert carry.store.data.valid.shape == (4, 1000)


def test_without_a_lemol_agent_there_is_no_model():
    config = LeMOLConfig(bad_policy="m3ddpg", num_episodes=4)
    carry = jax.eval_shape(make_lemol(config).init, jax.random.key(0))
    assert carry.model_params == () and carry.store == ()
    adversary, _ = carry.learners
    assert adversary.actor["params"]["Trunk_0"]["Dense_0"]["kernel"].shape[0] == 8
