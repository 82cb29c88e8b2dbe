"""The PettingZoo adapter: PettingZoo's own API tests on every registered game, and
agreement, step by step, with the mopa game it wraps."""

import dataclasses
import importlib
import logging
import sys
import warnings

import gymnasium
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from pettingzoo.test import (
    api_test,
    parallel_api_test,
    parallel_seed_test,
    state_test,
)
from pettingzoo.utils.conversions import parallel_to_aec

import mopa.envs
from mopa.envs import Box, Env
from mopa.envs.pettingzoo import MopaParallelEnv, to_pettingzoo
from mopa.errors import InvalidActionError, InvalidParameterError


@dataclasses.dataclass(frozen=True)
class NoiseGame(Env):
    """Test-only game unlike pursuit: one team of two agents with continuous
    actions, observations drawn from the step's key (so the key schedule shows),
    reward = the action's first component, termination after ``num_steps``."""

    name: str = "noise"
    team_names = ("walker",)
    team_sizes = (2,)

    def observation_space(self, team: int) -> Box:
        return Box(0.0, 1.0, (3,))

    def action_space(self, team: int) -> Box:
        return Box(-1.0, 1.0, (2,))

    @property
    def default_params(self) -> dict:
        return {"num_steps": jnp.asarray(3)}

    def _reset(self, key, params):
        state = (jnp.zeros((), jnp.int32), jax.random.uniform(key, (2, 3)))
        return self.observe(state, params), state

    def _step(self, key, state, actions, params):
        state = (state[0] + 1, jax.random.uniform(key, (2, 3)))
        info = {"step": state[0], "walker_noise": state[1][:, 0]}
        terminated = state[0] >= params["num_steps"]
        rewards = (actions[0][:, 0],)
        return self.observe(state, params), state, rewards, terminated, False, info

    def observe(self, state, params):
        return (state[1],)


TAG_AGENTS = ["predator_0", "predator_1", "predator_2", "prey_0"]


def team_obs_by_agent(obs):
    """``{agent: obs}`` from a pursuit game's ``(predator [3, D], prey [1, D])``."""
    return {agent: np.asarray(obs[0][i]) for i, agent in enumerate(TAG_AGENTS[:3])} | {
        "prey_0": np.asarray(obs[1][0])
    }


def noop_actions(penv):
    return dict.fromkeys(penv.agents, 0)


def random_actions(penv, rng):
    """Uniform actions for every live agent, with a mix of Python and NumPy ints
    (uniform float32 vectors for games with continuous actions)."""
    space = penv.action_space(penv.agents[0])
    if isinstance(space, gymnasium.spaces.Box):
        return {
            agent: rng.uniform(space.low, space.high).astype(np.float32)
            for agent in penv.agents
        }
    return {
        agent: int(a) if i % 2 else a
        for i, agent in enumerate(penv.agents)
        for a in [rng.integers(0, penv.action_space(agent).n)]
    }


@pytest.mark.slow
@pytest.mark.parametrize("name", mopa.envs.registered_envs())
def test_parallel_api_test_passes_without_warnings(name):
    env, params = mopa.envs.make(name)
    penv = to_pettingzoo(env)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        parallel_api_test(penv, num_cycles=int(params.max_steps) + 5)
    complaints = [str(w.message) for w in caught if "pettingzoo" in w.filename]
    assert complaints == []
    # The test played whole episodes: it stops when every agent is done.
    assert penv.agents == []


@pytest.mark.slow
@pytest.mark.parametrize("name", mopa.envs.registered_envs())
def test_spaces_contain_every_observation_of_an_episode(name):
    env, params = mopa.envs.make(name)
    penv = to_pettingzoo(env, params)
    rng = np.random.default_rng(0)
    obs, _ = penv.reset(seed=1)
    steps = 0
    while True:
        assert set(obs) == set(penv.agents)
        for agent, o in obs.items():
            assert penv.observation_space(agent).contains(o), agent
            assert o.dtype == np.float32
        if hasattr(env, "global_state"):
            assert penv.state_space.contains(penv.state())
        else:  # PettingZoo's convention for games without a global state
            with pytest.raises(NotImplementedError, match="defines no global_state"):
                penv.state()
        obs, rewards, terminations, *_ = penv.step(random_actions(penv, rng))
        steps += 1
        assert all(type(r) is float for r in rewards.values())
        if not penv.agents:
            break
    # The episode ran to the step limit unless the game ended it by its own rules.
    assert steps == int(params.max_steps) or all(terminations.values())
    # The final observation is returned too, and also lies in the spaces.
    assert all(penv.observation_space(a).contains(o) for a, o in obs.items())


def test_agents_spaces_and_metadata_of_tag():
    env, _ = mopa.envs.make("tag")
    penv = to_pettingzoo(env)
    assert penv.possible_agents == TAG_AGENTS
    assert penv.agents == []
    assert penv.metadata == {
        "name": "tag",
        "render_modes": ["rgb_array"],
        "is_parallelizable": True,
    }
    assert penv.game is env
    assert int(penv.params.max_steps) == 25
    for agent, size in zip(TAG_AGENTS, [16, 16, 16, 14], strict=True):
        space = penv.observation_space(agent)
        assert isinstance(space, gymnasium.spaces.Box)
        assert space.shape == (size,)
        assert space.dtype == np.float32
        assert penv.observation_space(agent) is space
        action_space = penv.action_space(agent)
        assert action_space == gymnasium.spaces.Discrete(5)
        assert penv.action_space(agent) is action_space
    # Each agent has its own space objects (seeding one leaves the others alone).
    assert penv.action_space("predator_0") is not penv.action_space("predator_1")
    assert penv.state_space.shape == (env.global_state_size,)
    obs, infos = penv.reset(seed=0)
    assert penv.agents == TAG_AGENTS
    assert list(obs) == TAG_AGENTS
    assert infos == {agent: {} for agent in TAG_AGENTS}
    with pytest.raises(KeyError, match="wolf_0"):
        penv.observation_space("wolf_0")


def test_tag_episode_lasts_max_steps_and_is_truncated_on_the_last():
    env, params = mopa.envs.make("tag")
    penv = to_pettingzoo(env, params)
    penv.reset(seed=0)
    truncated_steps, terminated_steps, steps = [], [], 0
    while penv.agents:
        _, _, terminations, truncations, _ = penv.step(noop_actions(penv))
        steps += 1
        assert set(truncations) == set(TAG_AGENTS)
        assert len(set(truncations.values())) == 1  # all agents end together
        if truncations["prey_0"]:
            truncated_steps.append(steps)
        if any(terminations.values()):
            terminated_steps.append(steps)
    assert steps == int(params.max_steps) == 25
    assert truncated_steps == [25]
    assert terminated_steps == []
    with pytest.raises(RuntimeError, match="reset"):
        penv.step(dict.fromkeys(TAG_AGENTS, 0))
    penv.reset(seed=1)
    assert penv.agents == TAG_AGENTS


def test_episode_matches_the_mopa_game():
    """The adapter and the game, driven by the documented keys
    (``key_reset, key_steps = split(key(seed))``, then ``key_steps, key_step =
    split(key_steps)`` per step) and the same actions, agree everywhere.
    ``tag_resources`` has per-prey infos as well as the shared ``captures``."""
    env, params = mopa.envs.make("tag_resources", capture_reward=7.0)
    penv = to_pettingzoo(env, params)
    reset_fn, step_fn = jax.jit(env.reset), jax.jit(env.step)
    global_state_fn = jax.jit(env.global_state)
    seed = 11
    key_reset, key_steps = jax.random.split(jax.random.key(seed))
    obs, state = reset_fn(key_reset, params)
    penv_obs, _ = penv.reset(seed=seed)
    assert list(penv_obs) == TAG_AGENTS
    for agent, o in team_obs_by_agent(obs).items():
        np.testing.assert_allclose(penv_obs[agent], o, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(
        penv.state(), global_state_fn(state, params), rtol=1e-6, atol=1e-6
    )

    rng = np.random.default_rng(seed)
    for t in range(int(params.max_steps)):
        actions = random_actions(penv, rng)
        team_actions = (
            np.array([actions[a] for a in TAG_AGENTS[:3]], np.int32),
            np.array([actions["prey_0"]], np.int32),
        )
        key_steps, key_step = jax.random.split(key_steps)
        obs, state, rewards, terminated, truncated, info = step_fn(
            key_step, state, team_actions, params
        )
        penv_obs, penv_rewards, terminations, truncations, infos = penv.step(actions)
        for agent, o in team_obs_by_agent(obs).items():
            np.testing.assert_allclose(penv_obs[agent], o, rtol=1e-6, atol=1e-6)
        expected_rewards = dict(
            zip(TAG_AGENTS, np.concatenate([rewards[0], rewards[1]]), strict=True)
        )
        assert penv_rewards == pytest.approx(expected_rewards, abs=1e-5)
        assert all(v == bool(terminated) for v in terminations.values())
        assert all(v == bool(truncated) for v in truncations.values())
        assert bool(truncated) == (t == int(params.max_steps) - 1)
        for agent in TAG_AGENTS:
            assert infos[agent]["captures"] == float(info["captures"])
        prey_info = infos["prey_0"]
        assert prey_info["prey_collect"] == pytest.approx(
            float(info["prey_collect"][0])
        )
        assert prey_info["prey_capture"] == pytest.approx(
            float(info["prey_capture"][0])
        )
        assert "prey_collect" not in infos["predator_0"]
        # Every predator is paid capture_reward (7) per capture this step.
        assert penv_rewards["predator_0"] == pytest.approx(
            7.0 * infos["predator_0"]["captures"]
        )
        np.testing.assert_allclose(
            penv.state(), global_state_fn(state, params), rtol=1e-6, atol=1e-6
        )
    assert penv.agents == []


def test_a_one_team_continuous_game_follows_the_key_schedule():
    game = NoiseGame()
    params = game.default_params
    penv = to_pettingzoo(game)
    assert penv.possible_agents == ["walker_0", "walker_1"]
    assert penv.action_space("walker_1") == gymnasium.spaces.Box(-1.0, 1.0, (2,))
    seed = 4
    key_reset, key_steps = jax.random.split(jax.random.key(seed))
    (expected,), _ = game.reset(key_reset, params)
    obs, _ = penv.reset(seed=seed)
    np.testing.assert_array_equal(obs["walker_1"], expected[1])
    for t in range(3):
        key_steps, key_step = jax.random.split(key_steps)
        expected = jax.random.uniform(key_step, (2, 3))
        obs, rewards, terminations, truncations, infos = penv.step(
            {"walker_0": [0.5, -0.5], "walker_1": np.array([-0.25, 0.0])}
        )
        np.testing.assert_array_equal(obs["walker_0"], expected[0])
        np.testing.assert_array_equal(obs["walker_1"], expected[1])
        assert rewards == {"walker_0": 0.5, "walker_1": -0.25}
        assert terminations == dict.fromkeys(["walker_0", "walker_1"], t == 2)
        assert truncations == dict.fromkeys(["walker_0", "walker_1"], False)
        assert infos["walker_1"] == {
            "step": t + 1,
            "walker_noise": pytest.approx(float(expected[1, 0])),
        }
    assert penv.agents == []
    penv.reset(seed=0)
    with pytest.raises(InvalidActionError, match="must be floats"):
        penv.step({"walker_0": [1, 0], "walker_1": [0, 0]})
    with pytest.raises(InvalidActionError, match="shape"):
        penv.step({"walker_0": 0.5, "walker_1": 0.5})
    with pytest.raises(NotImplementedError, match="global_state"):
        penv.state()
    assert not hasattr(penv, "state_space")
    parallel_api_test(to_pettingzoo(game), num_cycles=5)


def test_team_infos_go_to_that_team_only():
    # With one predator and one prey both teams have size 1: the name decides.
    env, _ = mopa.envs.make("tag", num_predators=1)
    penv = to_pettingzoo(env)
    penv.reset(seed=0)
    *_, infos = penv.step({"predator_0": 0, "prey_0": 0})
    assert set(infos["predator_0"]) == {"captures", "intent"}
    assert set(infos["prey_0"]) == {
        "captures",
        "intent",
        "prey_boundary",
        "prey_capture",
        "prey_collect",
        "prey_intent",
        "prey_shaping",
    }


def test_same_seed_same_episode_and_different_seeds_differ():
    env, _ = mopa.envs.make("tag")
    first, second = to_pettingzoo(env), to_pettingzoo(env)
    obs_a, _ = first.reset(seed=5)
    obs_b, _ = second.reset(seed=5)
    obs_c, _ = second.reset(seed=6)
    for agent in TAG_AGENTS:
        np.testing.assert_array_equal(obs_a[agent], obs_b[agent])
    assert not np.allclose(obs_a["prey_0"], obs_c["prey_0"])
    unseeded = [second.reset()[0]["prey_0"] for _ in range(2)]
    assert not np.allclose(unseeded[0], unseeded[1])
    # PettingZoo's own determinism check over a whole episode.
    parallel_seed_test(lambda: to_pettingzoo(env), num_cycles=30)


def test_bad_actions_raise_and_leave_the_game_unchanged():
    env, _ = mopa.envs.make("tag")
    penv = to_pettingzoo(env)
    penv.reset(seed=0)
    penv.step(noop_actions(penv))
    state_before = penv.state()
    good = noop_actions(penv)

    with pytest.raises(InvalidActionError, match=r"missing actions for \['prey_0'\]"):
        penv.step({a: 0 for a in TAG_AGENTS[:3]})
    with pytest.raises(ValueError, match=r"unknown or finished agents \['wolf_0'\]"):
        penv.step(good | {"wolf_0": 1})
    with pytest.raises(InvalidActionError, match="out of range"):
        penv.step(good | {"predator_1": 5})
    with pytest.raises(InvalidActionError, match="out of range"):
        penv.step(good | {"prey_0": -1})
    with pytest.raises(InvalidActionError, match="must be integers"):
        penv.step(good | {"prey_0": 1.0})
    with pytest.raises(InvalidActionError, match="must be a dict"):
        penv.step([0, 0, 0, 0])

    np.testing.assert_array_equal(penv.state(), state_before)
    assert penv.agents == TAG_AGENTS
    _, rewards, *_ = penv.step(good)
    assert set(rewards) == set(TAG_AGENTS)


def test_invalid_construction_and_calls_before_reset():
    env, params = mopa.envs.make("tag")
    with pytest.raises(ValueError, match="render_mode"):
        to_pettingzoo(env, render_mode="human")
    with pytest.raises(InvalidParameterError, match="dt"):
        to_pettingzoo(env, params.replace(dt=-1.0))
    penv = to_pettingzoo(env)
    with pytest.raises(RuntimeError, match="reset"):
        penv.step({})
    with pytest.raises(RuntimeError, match="reset"):
        penv.state()


def test_render_draws_the_current_state():
    from mopa.report.render import render_state

    env, params = mopa.envs.make("tag")
    penv = to_pettingzoo(env, params, render_mode="rgb_array")
    penv.reset(seed=3)
    before = penv.render()
    penv.step(noop_actions(penv))
    frame = penv.render()
    assert frame.shape == (400, 400, 3) and frame.dtype == np.uint8
    # The frame is the renderer's drawing of the state after the step.
    np.testing.assert_array_equal(frame, render_state(env, penv._state, params))
    assert int(penv._state.step) == 1
    assert not np.array_equal(frame, before)

    silent = to_pettingzoo(env)
    silent.reset(seed=3)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert silent.render() is None
    assert any("render_mode" in str(w.message) for w in caught)
    silent.close()


def test_no_recompilation_across_episodes_and_adapters(caplog):
    env, _ = mopa.envs.make("tag")
    warm = to_pettingzoo(env)
    warm.reset(seed=0)
    warm.step(noop_actions(warm))

    # Same structure, other parameter values: the compiled reset/step are reused.
    env_b, params_b = mopa.envs.make("tag", capture_reward=3.0, dt=0.05)
    penv = to_pettingzoo(env_b, params_b)
    rng = np.random.default_rng(0)
    with caplog.at_level(logging.WARNING), jax.log_compiles():
        for seed in range(2):
            penv.reset(seed=seed)
            while penv.agents:
                penv.step(random_actions(penv, rng))
    compiles = [
        r.getMessage()
        for r in caplog.records
        if r.getMessage().startswith("Compiling")
        and ("_step_game" in r.getMessage() or "_reset_game" in r.getMessage())
    ]
    assert compiles == []


def test_pettingzoo_aec_and_state_tests_pass_with_only_advisory_warnings():
    env, _ = mopa.envs.make("tag")
    aec = parallel_to_aec(to_pettingzoo(env))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        api_test(aec, num_cycles=30)
        state_test(parallel_to_aec(to_pettingzoo(env)), to_pettingzoo(env))
    assert isinstance(aec.unwrapped, MopaParallelEnv)
    # Pursuit observations are unbounded and differ in size between teams, as in
    # PettingZoo's own simple_tag; PettingZoo flags both and nothing else.
    complaints = {str(w.message) for w in caught if "pettingzoo" in w.filename}
    assert complaints == {
        "Agent's minimum observation space value is -infinity. This is probably "
        "too low.",
        "Agent's maximum observation space value is infinity. This is probably "
        "too high",
        "Agents have different observation space sizes",
        "Observations are different shapes",
        "Environment's minimum state space value is -infinity. This is probably "
        "too low.",
        "Environment's maximum state space value is infinity. This is probably "
        "too high",
    }


def test_missing_pettingzoo_gives_an_install_hint(monkeypatch):
    monkeypatch.setitem(sys.modules, "pettingzoo", None)
    monkeypatch.delitem(sys.modules, "mopa.envs.pettingzoo")
    with pytest.raises(ImportError, match=r'pip install "mopa\[pettingzoo\]"'):
        importlib.import_module("mopa.envs.pettingzoo")
