"""MAPPO's critic input: mopa's private global state (the default) or the
research's world state of every agent's observation."""

from __future__ import annotations

import jax
import numpy as np
import pytest

from mopa.algos import MAPPOConfig
from mopa.algos.common import setup_run
from mopa.algos.mappo.train import make_critic_inputs, make_train, make_trainer
from mopa.errors import InvalidParameterError

TINY = dict(env="tag_intent", total_steps=2048, num_envs=8, num_steps=64)


def _inputs_for_two_intents(critic_input: str):
    """Predator critic inputs of one game state under intents 0 and 2."""
    config = MAPPOConfig(**TINY, critic_input=critic_input)
    run = setup_run(config)
    env, params = run.base_env, run.env_params
    critic_inputs = make_critic_inputs(config, env, params, {})
    _, state = env.reset(jax.random.key(0), params)
    rows = []
    for intent in (0, 2):
        moved = state.replace(intent=np.int32(intent))
        rows.append(np.asarray(critic_inputs(0, moved, env.observe(moved, params))))
    return env, params, state, rows


def test_the_research_critic_sees_the_intent_and_mopas_does_not():
    env, params, state, (state_0, state_2) = _inputs_for_two_intents("state")
    # Off: the game's global state then the predators' own observations, exactly.
    expected = np.concatenate(
        [env.global_state(state, params), env.observe(state, params)[0].reshape(-1)]
    )
    np.testing.assert_array_equal(state_0, expected)
    np.testing.assert_array_equal(state_0, state_2)  # blind to the intent
    assert state_0.shape == (env.global_state_size + 3 * env.predator_obs_size,)
    _, _, _, (world_0, world_2) = _inputs_for_two_intents("all_obs")
    # On: 3 predators x 16 + the prey's 14 and its intent one-hot (4).
    assert world_0.shape == (3 * 16 + 14 + 4,)
    np.testing.assert_array_equal(world_0[-4:], [1, 0, 0, 0])
    np.testing.assert_array_equal(world_2[-4:], [0, 0, 1, 0])
    np.testing.assert_array_equal(world_0[:-4], world_2[:-4])


@pytest.mark.parametrize(
    ("critic_input", "sizes"),
    [
        # global state (21) + own observations: 3 predators x 16, 1 prey x 18
        ("state", (21 + 48, 21 + 18)),
        # every agent's observation: 3 x 16 + 18, the same for both teams
        ("all_obs", (66, 66)),
    ],
)
@pytest.mark.slow
def test_critic_input_size(critic_input, sizes):
    trainer = make_trainer(MAPPOConfig(**TINY, critic_input=critic_input))
    carry = trainer.init(jax.random.key(0))
    for team, size in enumerate(sizes):
        layer = carry.learners[str(team)].critic_params["params"]["Trunk_0"]["Dense_0"]
        assert layer["kernel"].shape[0] == size, team


@pytest.mark.slow
def test_default_critic_reproduces_the_run_before_the_option():
    """A tiny default run gives the value losses recorded (on CPU) with the code
    before ``critic_input`` existed."""
    config = MAPPOConfig(**TINY, hidden=(16, 16))
    assert config.critic_input == "state"
    metrics = jax.jit(make_train(config))(jax.random.key(0)).metrics
    np.testing.assert_allclose(
        metrics["value_loss/predator"],
        [10.946168, 0.01331772, 2.9963174, 5.4311943],
        rtol=1e-4,
    )
    world = jax.jit(make_train(config.replace(critic_input="all_obs")))
    changed = world(jax.random.key(0)).metrics["value_loss/predator"]
    assert not np.allclose(changed, metrics["value_loss/predator"], rtol=1e-3)


def test_bad_critic_inputs():
    with pytest.raises(InvalidParameterError, match="critic_input must be one of"):
        MAPPOConfig(critic_input="world")
    with pytest.raises(InvalidParameterError, match="needs algo='mappo'"):
        MAPPOConfig(algo="ippo", critic_input="all_obs")
