"""Team learners: learning on small budgets, JAX hygiene, and the run driver."""

from __future__ import annotations

import jax
import numpy as np
import pytest

from mopa.algos import IQLConfig, MAPPOConfig, run_training
from mopa.algos.iql.train import make_train as make_iql_train
from mopa.algos.mappo.train import make_train as make_mappo_train
from mopa.algos.trainer import seed_keys
from mopa.envs import make
from mopa.eval import evaluate
from mopa.policy import PolicySpec
from tests.algos.signal_game import CHANCE, signal_game

SIGNAL_IQL = dict(
    env="signal",
    num_envs=8,
    num_steps=5,
    buffer_size=2_000,
    batch_size=16,
    learning_starts=400,
    lr=3e-3,
    eps_decay=0.3,
    target_update_interval=20,
    hidden=(32, 32),
    num_chunks=1,
)


@pytest.fixture(scope="module")
def oa_iql_signal():
    """OA-IQL, 2 seeds, on the signal game (optimum: 5 per agent per episode)."""
    config = IQLConfig(algo="oa_iql", total_steps=16_000, num_seeds=2, **SIGNAL_IQL)
    return run_training(config, game=signal_game())


@pytest.mark.slow
def test_iql_reaches_a_fixed_return_on_a_tiny_game(oa_iql_signal):
    final = oa_iql_signal.summary["final"]
    # Epsilon ends at 0.05: the expected return of a perfect greedy learner is
    # 5 x (0.95 + 0.05 / 4) = 4.81; random play scores 5 / 4 = 1.25.
    for team in ("blue", "red"):
        assert final[f"return/{team}"]["mean"] > 4.3, final[f"return/{team}"]


@pytest.mark.slow
def test_iql_learning_rate_decay_changes_the_run_and_still_learns():
    """``anneal_lr`` decays Adam's step linearly: the run differs from the
    constant-rate one on the same keys, and still solves the signal game."""
    runs = {
        anneal: run_training(
            IQLConfig(total_steps=16_000, num_seeds=1, anneal_lr=anneal, **SIGNAL_IQL),
            game=signal_game(),
        )
        for anneal in (False, True)
    }
    constant, decayed = (runs[a].policies for a in (False, True))
    moved = jax.tree.map(
        lambda a, b: float(np.abs(np.asarray(a) - np.asarray(b)).max()),
        {team: params for team, (_, params) in constant.items()},
        {team: params for team, (_, params) in decayed.items()},
    )
    assert max(jax.tree.leaves(moved)) > 1e-3
    for team in ("blue", "red"):
        final = runs[True].summary["final"][f"return/{team}"]["mean"]
        assert final > 4.3, (team, final)


def test_opponent_head_accuracy_rises_above_chance(oa_iql_signal):
    accuracy = oa_iql_signal.metrics["opp_acc/blue"]  # [seed, update]
    early = np.nanmean(accuracy[:, : accuracy.shape[1] // 10])
    late = np.nanmean(accuracy[:, -accuracy.shape[1] // 10 :])
    # Red plays the signal blue sees (up to exploration), so a trained head is far
    # above the chance level of 1/4.
    assert late > CHANCE + 0.5
    assert late > early


def test_greedy_evaluation_of_the_trained_policies(oa_iql_signal):
    env, params = signal_game()
    policies = tuple(
        oa_iql_signal.policies[team] for team in env.team_names
    )  # (spec, params [seed, ...])
    first_seed = tuple((spec, jax.tree.map(lambda x: x[0], p)) for spec, p in policies)
    result = evaluate(env, params, first_seed, jax.random.key(3), num_episodes=64)
    assert result["return/blue"]["mean"] > 4.8
    random = tuple(
        (PolicySpec(kind="random", num_agents=n, obs_size=4, num_actions=4), {})
        for n in env.team_sizes
    )
    baseline = evaluate(env, params, random, jax.random.key(3), num_episodes=64)
    assert baseline["return/blue"]["mean"] < 2.0


@pytest.mark.slow
@pytest.mark.parametrize("algo", ["iql", "mappo"])
def test_vmap_over_seeds_equals_a_loop_and_is_deterministic(algo):
    if algo == "iql":
        config = IQLConfig(  # the recurrent variant (Exp 1)
            algo="oa_iql", rnn=True, total_steps=1_200, num_seeds=2, **SIGNAL_IQL
        )
        train = make_iql_train(config, signal_game())
    else:
        config = MAPPOConfig(
            env="signal",
            total_steps=1_280,
            num_envs=8,
            num_steps=16,
            hidden=(16,),
            num_seeds=2,
        )
        train = make_mappo_train(config, signal_game())
    keys = seed_keys(config)
    batched_train = jax.jit(jax.vmap(train))
    batched = batched_train(keys).metrics
    again = batched_train(keys).metrics
    looped = [jax.jit(train)(k).metrics for k in keys]
    for name, values in batched.items():
        np.testing.assert_array_equal(values, again[name], err_msg=name)
        for seed, metrics in enumerate(looped):
            np.testing.assert_allclose(
                values[seed], metrics[name], rtol=1e-4, atol=1e-5, err_msg=name
            )
    # Different seeds do learn differently.
    assert not np.allclose(batched["return/blue"][0], batched["return/blue"][1])


@pytest.mark.slow
def test_mappo_predators_beat_random_predators_on_tag():
    env, params = make("tag")
    config = MAPPOConfig(
        env="tag",
        total_steps=200_000,
        num_envs=32,
        num_steps=25,
        num_seeds=1,
        frozen=(("prey", "random"),),
        hidden=(64,),
        lr=3e-3,
        num_chunks=1,
    )
    result = run_training(config)
    spec, trained = result.policies["predator"]
    prey = (PolicySpec(kind="random", num_agents=1, obs_size=14, num_actions=5), {})
    predators = (spec, jax.tree.map(lambda x: x[0], trained))
    random = (PolicySpec(kind="random", num_agents=3, obs_size=16, num_actions=5), {})
    key = jax.random.key(11)
    learnt = evaluate(env, params, (predators, prey), key, 200)
    base = evaluate(env, params, (random, prey), key, 200)
    learnt_c = learnt["captures_per_episode"]["mean"]
    base_c = base["captures_per_episode"]["mean"]
    # Random predators catch a random prey about 0.5 times an episode.
    assert base_c < 1.0
    assert learnt_c > base_c + 1.0 and learnt_c > 2 * base_c, (learnt_c, base_c)


@pytest.mark.slow
def test_training_on_a_jaxmarl_environment_through_the_adapter():
    config = MAPPOConfig(
        env="jaxmarl:MPE_simple_adversary_v3",
        total_steps=2_048,
        num_envs=8,
        num_steps=32,
        num_seeds=2,
        hidden=(16,),
        num_chunks=1,
    )
    result = run_training(config)
    assert set(result.policies) == {"adversary", "agent"}
    spec, params = result.policies["agent"]
    assert spec.num_agents == 2 and spec.num_actions == 5
    for name in ("return/adversary", "return/agent", "value_loss/agent"):
        values = result.metrics[name]
        assert values.shape == (2, 8) and np.isfinite(values).all(), name
    # The adversary is paid for closeness to the goal: its returns are negative
    # distances, the good agents' include minus the adversary's.
    assert (result.metrics["return/adversary"] < 0).all()
