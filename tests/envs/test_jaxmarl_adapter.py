"""The JaxMARL adapter: ``make("jaxmarl:<id>")`` steps exactly as JaxMARL's
``step_env`` does, with agents grouped into teams, padded observations, and
JaxMARL's ``done`` split honestly into terminated and truncated."""

import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from mopa.envs import AutoReset, make, random_policy, rollout
from mopa.envs.jaxmarl_adapter import JaxMarlEnv, JaxMarlEnvWithGlobalState
from mopa.envs.spaces import Box, Discrete
from mopa.errors import (
    InvalidActionError,
    InvalidParameterError,
    MopaError,
    UnknownNameError,
)

jaxmarl = pytest.importorskip("jaxmarl")
from jaxmarl.environments.multi_agent_env import MultiAgentEnv  # noqa: E402
from jaxmarl.environments.multi_agent_env import State as JaxMarlState  # noqa: E402
from jaxmarl.environments.spaces import Box as JaxMarlBox  # noqa: E402
from jaxmarl.environments.spaces import Discrete as JaxMarlDiscrete  # noqa: E402

NUM_STATES = 240
NUM_STEPS = 30  # past the end of a JaxMARL MPE episode (26 transitions)


def transitions(env, num=NUM_STATES):
    """One step of the adapter and of JaxMARL's ``step_env`` from the same states,
    keys and random actions. The states are resets with the step counter set to
    0, 1, ..., 29, 0, ... (JaxMARL's MPE episodes end after 26 transitions).
    Returns ``(steps, adapter outputs, JaxMARL outputs)`` as NumPy."""
    reference = env.jaxmarl_env
    policy = random_policy(env)

    def one(key, step):
        key_reset, key_act, key_step = jax.random.split(key, 3)
        _, state = env.reset(key_reset, None)
        state = state.replace(step=step.astype(state.step.dtype))
        actions = policy(key_act, None, None)
        out = env.step(key_step, state, actions, None)
        ref_out = reference.step_env(
            jax.random.key_data(key_step), state, env.to_jaxmarl_actions(actions)
        )
        return out, ref_out

    keys = jax.random.split(jax.random.key(0), num)
    steps = jnp.arange(num) % NUM_STEPS
    return np.asarray(steps), *jax.device_get(jax.jit(jax.vmap(one))(keys, steps))


@pytest.mark.parametrize(
    "env_id, kwargs, teams",
    [
        ("MPE_simple_adversary_v3", {}, {"adversary": 1, "agent": 2}),
        ("MPE_simple_tag_v3", {"num_adversaries": 2}, {"adversary": 2, "agent": 1}),
        ("switch_riddle", {}, {"agent": 3}),
    ],
)
@pytest.mark.slow
def test_step_equals_jaxmarl_step_env(env_id, kwargs, teams):
    env, params = make("jaxmarl:" + env_id, **kwargs)
    assert params is None
    assert dict(zip(env.team_names, env.team_sizes, strict=True)) == teams
    steps, adapter, reference = transitions(env)
    obs, state, rewards, terminated, truncated, _ = adapter
    ref_obs, ref_state, ref_rew, ref_dones, _ = reference
    for leaf, ref_leaf in zip(
        jax.tree.leaves(state), jax.tree.leaves(ref_state), strict=True
    ):
        np.testing.assert_array_equal(leaf, ref_leaf)
    for t, agents in enumerate(env.team_agents):
        assert obs[t].dtype == rewards[t].dtype == jnp.float32
        for j, agent in enumerate(agents):
            np.testing.assert_array_equal(obs[t][:, j], ref_obs[agent])
            np.testing.assert_array_equal(rewards[t][:, j], ref_rew[agent])
    np.testing.assert_array_equal(terminated | truncated, ref_dones["__all__"])
    assert np.std(rewards[0]) > 0  # rewards are not all equal
    if env_id.startswith("MPE"):
        # JaxMARL's MPE episodes end by time, after 26 transitions: truncated.
        assert not np.any(terminated)
        np.testing.assert_array_equal(truncated, steps >= 25)
    else:  # the riddle ends by rule (terminated) or after 6 steps (truncated)
        np.testing.assert_array_equal(truncated, steps + 1 >= 6)
        assert np.any(terminated) and not np.any(terminated & truncated)


def test_switch_riddle_tell_terminates_and_the_step_limit_truncates():
    """Switch riddle ends when the agent in the room says TELL (action 2), a rule:
    terminated; or after max_steps = 6 steps: truncated."""
    env, _ = make("jaxmarl:switch_riddle")
    assert env.jaxmarl_env.max_steps == 6
    step = jax.jit(env.step)
    _, state = env.reset(jax.random.key(1), None)
    tell = (jnp.full((3,), 2, jnp.int32),)
    _, _, rewards, terminated, truncated, _ = step(jax.random.key(2), state, tell, None)
    assert bool(terminated) and not bool(truncated)
    assert float(rewards[0][0]) == -1.0  # told before everyone had been in the room
    wait = (jnp.zeros((3,), jnp.int32),)
    ends = []
    for i in range(6):
        _, state, _, terminated, truncated, _ = step(
            jax.random.key(3 + i), state, wait, None
        )
        ends.append((bool(terminated), bool(truncated)))
    assert ends == [(False, False)] * 5 + [(False, True)]


def test_names_that_do_not_group_give_one_team_per_agent():
    """coin_game's agents are called "0" and "1"; its int8 observations are cast."""
    env, _ = make("jaxmarl:coin_game")
    assert env.team_names == ("0", "1") and env.team_sizes == (1, 1)
    obs, _ = env.reset(jax.random.key(0), None)
    assert obs[0].shape == (1, 36) and obs[0].dtype == jnp.float32
    assert float(jnp.sum(obs[0])) > 0


class Scouts(MultiAgentEnv):
    """A test-only JaxMARL game with heterogeneous agents: two scouts (one sees 2
    numbers, the other 3) and a base with a continuous action. It ends by rule
    when both scouts choose action 1, and by time after ``max_steps``."""

    def __init__(self, scout_actions=(2, 2)):
        super().__init__(num_agents=3)
        self.agents = ["scout_0", "scout_1", "base_0"]
        self.max_steps = 4
        self.action_spaces = {
            "scout_0": JaxMarlDiscrete(scout_actions[0]),
            "scout_1": JaxMarlDiscrete(scout_actions[1]),
            "base_0": JaxMarlBox(-1.0, 1.0, (2,)),
        }

    def reset(self, key):
        state = JaxMarlState(done=jnp.zeros((), bool), step=jnp.zeros((), jnp.int32))
        return self.get_obs(state), state

    def get_obs(self, state):
        s = state.step.astype(jnp.float32)
        return {
            "scout_0": jnp.array([s, 1.0]),
            "scout_1": jnp.array([s, 2.0, 3.0]),
            "base_0": jnp.full((2, 2), s),
        }

    def step_env(self, key, state, actions):
        quit_now = (actions["scout_0"] == 1) & (actions["scout_1"] == 1)
        step = state.step + 1
        done = quit_now | (step >= self.max_steps)
        state = JaxMarlState(done=done, step=step)
        rewards = {
            "scout_0": jnp.float32(1.0),
            "scout_1": jnp.float32(2.0),
            "base_0": jnp.sum(actions["base_0"]),
        }
        dones = {a: done for a in self.agents} | {"__all__": done}
        return self.get_obs(state), state, rewards, dones, {}


class ScoutsWithWorld(Scouts):
    """Scouts with a world state (as SMAX has)."""

    def get_world_state(self, state):
        return jnp.stack([state.step, 2 * state.step]).astype(jnp.float32)


def test_teams_padding_and_spaces_of_heterogeneous_agents():
    env = JaxMarlEnv(Scouts(), "scouts")
    assert env.team_names == ("scout", "base") and env.team_sizes == (2, 1)
    assert env.observation_space(0).shape == (3,)  # padded to the larger scout
    assert env.observation_space(1).shape == (4,)  # [2, 2] flattened
    assert env.action_space(0) == Discrete(2)
    assert env.action_space(1) == Box(-1.0, 1.0, (2,))
    obs, state = env.reset(jax.random.key(0), None)
    np.testing.assert_array_equal(obs[0], [[0.0, 1.0, 0.0], [0.0, 2.0, 3.0]])
    actions = (jnp.array([1, 0], jnp.int32), jnp.array([[0.5, 0.25]]))
    obs, state, rewards, terminated, truncated, _ = jax.jit(env.step)(
        jax.random.key(1), state, actions, None
    )
    np.testing.assert_array_equal(obs[0], [[1.0, 1.0, 0.0], [1.0, 2.0, 3.0]])
    np.testing.assert_array_equal(rewards[0], [1.0, 2.0])
    np.testing.assert_array_equal(rewards[1], [0.75])
    assert not bool(terminated | truncated)
    with pytest.raises(InvalidActionError, match="shape"):
        env.step(jax.random.key(4), state, (jnp.zeros(3, jnp.int32), actions[1]), None)


def test_one_team_per_agent_when_a_group_mixes_action_spaces():
    env = JaxMarlEnv(Scouts(scout_actions=(2, 3)), "scouts")
    assert env.team_names == ("scout_0", "scout_1", "base_0")
    assert env.team_sizes == (1, 1, 1)
    assert env.observation_space(0).shape == (2,)


@pytest.mark.parametrize(
    "done_as, rule_end, time_end",
    [
        ("auto", (True, False), (False, True)),
        ("terminated", (True, False), (True, False)),
        ("truncated", (False, True), (False, True)),
    ],
)
def test_rule_and_time_ends_reported_by_done_as(done_as, rule_end, time_end):
    """(terminated, truncated) of a rule end (both scouts quit on the 1st step)
    and of a time end (the 4th step of 4)."""
    env = JaxMarlEnv(Scouts(), "scouts", done_as=done_as)
    _, state = env.reset(jax.random.key(0), None)
    base = jnp.zeros((1, 2))
    quit_now = (jnp.array([1, 1], jnp.int32), base)
    out = env.step(jax.random.key(1), state, quit_now, None)
    assert (bool(out[3]), bool(out[4])) == rule_end
    stay = (jnp.array([0, 1], jnp.int32), base)
    ends = []
    for i in range(4):
        _, state, _, terminated, truncated, _ = env.step(
            jax.random.key(i), state, stay, None
        )
        ends.append((bool(terminated), bool(truncated)))
    assert ends == [(False, False)] * 3 + [time_end]


def test_vmap_jit_and_auto_reset_rollout():
    """Batched, jitted, auto-reset rollouts: episodes of 4 steps chain, and the
    same key gives the same trajectory."""
    env = JaxMarlEnv(Scouts(), "scouts")
    policy = random_policy(env)
    traj = rollout(AutoReset(env), None, policy, jax.random.key(0), 10, 3)
    assert traj.obs[0].shape == (3, 10, 2, 3) and traj.actions[1].shape == (3, 10, 1, 2)
    assert traj.rewards[1].shape == (3, 10, 1)
    done = np.asarray(traj.info["done"])
    assert done.any() and int(np.asarray(traj.state.step).max()) <= 3
    np.testing.assert_array_equal(
        np.asarray(traj.state.step)[
            done[:, :-1].nonzero()[0], done[:, :-1].nonzero()[1] + 1
        ],
        0,
    )  # a fresh episode after every end
    again = rollout(AutoReset(env), None, policy, jax.random.key(0), 10, 3)
    for a, b in zip(jax.tree.leaves(traj), jax.tree.leaves(again), strict=True):
        np.testing.assert_array_equal(a, b)


def test_global_state_is_jaxmarl_world_state():
    env = JaxMarlEnvWithGlobalState(ScoutsWithWorld(), "scouts")
    _, state = env.reset(jax.random.key(0), None)
    state = state.replace(step=jnp.asarray(3))
    assert env.global_state_size == 2
    np.testing.assert_array_equal(jax.jit(env.global_state)(state, None), [3.0, 6.0])
    smax, _ = make("jaxmarl:SMAX")
    assert smax.team_names == ("ally", "enemy") and smax.team_sizes == (5, 5)
    assert smax.global_state_size == 120  # SMAX's world state for 5 v 5
    plain, _ = make("jaxmarl:MPE_simple_adversary_v3")
    assert not hasattr(plain, "global_state")


def test_errors_are_one_clear_line(monkeypatch):
    with pytest.raises(UnknownNameError, match="jaxmarl:MPE_simple_push_v3"):
        make("jaxmarl:MPE_simple_psuh_v3")
    with pytest.raises(InvalidParameterError, match="only supports 2 landmarks"):
        make("jaxmarl:MPE_simple_push_v3", num_landmarks=3)
    with pytest.raises(InvalidParameterError, match="done_as must be one of"):
        make("jaxmarl:MPE_simple_push_v3", done_as="maybe")
    with pytest.raises(MopaError, match="not one array per agent"):
        make("jaxmarl:storm")
    monkeypatch.setitem(sys.modules, "jaxmarl", None)  # as if not installed
    with pytest.raises(MopaError, match=r"install it with pip install") as error:
        make("jaxmarl:MPE_simple_push_v3")
    assert "\n" not in str(error.value)
