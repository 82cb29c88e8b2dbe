"""A frozen pool: a team that does not learn, played by a member drawn from a
population of checkpoints at the start of every episode."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from mopa.algos import MAPPOConfig, run_training
from mopa.algos.common import (
    POOL_PREFIX,
    frozen_pool,
    frozen_pool_act_fn,
    frozen_pool_weighted,
    pool_items,
    setup_run,
    team_infos,
    weighted_pool_source,
)
from mopa.cli.main import main
from mopa.core.checkpoint import write_policy_checkpoint
from mopa.envs import make
from mopa.errors import CheckpointError, InvalidParameterError
from mopa.policy import PolicySpec, init_params

PREY = PolicySpec(kind="actor", num_agents=1, obs_size=14, num_actions=5, hidden=(8,))


def _fixed_action_params(spec: PolicySpec, action: int):
    """An actor that takes ``action`` whatever it sees (its logits a constant)."""
    params = jax.tree.map(jnp.zeros_like, init_params(spec, jax.random.key(0)))
    bias = jnp.zeros((spec.num_actions,)).at[action].set(30.0)
    params["params"]["Dense_0"]["bias"] = bias
    return params


def _write(path, spec, actions, env="tag"):
    """A checkpoint whose prey seeds take ``actions`` (one fixed action each)."""
    stacked = jax.tree.map(
        lambda *x: jnp.stack(x), *[_fixed_action_params(spec, a) for a in actions]
    )
    return write_policy_checkpoint(
        path,
        algo="mappo",
        env=env,
        env_overrides={},
        config={},
        meta={},
        teams={"prey": (spec.to_dict(), stacked)},
    )


@pytest.fixture
def pool_source(tmp_path):
    """Members 0, 1 (first file, two seeds) and 2 (second file): actions 1, 2, 3."""
    first = _write(tmp_path / "a.policy", PREY, [1, 2])
    second = _write(tmp_path / "b.policy", PREY, [3])
    return f"{POOL_PREFIX}{first},{second}"


def _prey_info():
    env, _ = make("tag")
    return team_infos(env)[1]


def test_every_seed_of_every_file_is_a_member_in_order(pool_source):
    spec, params = frozen_pool(pool_source, "tag", _prey_info())
    assert spec == PREY
    biases = np.asarray(params["params"]["Dense_0"]["bias"])
    assert biases.shape == (3, 5)
    assert biases.argmax(-1).tolist() == [1, 2, 3]


def test_a_member_is_drawn_per_game_at_each_episode_start_and_kept(pool_source):
    spec, params = frozen_pool(pool_source, "tag", _prey_info())
    act = jax.jit(frozen_pool_act_fn(spec, params))
    games, steps = 600, 6
    obs = jnp.zeros((games, 1, 14))
    hidden = jnp.zeros((games, 1, spec.carry_size + 1))
    key = jax.random.key(3)
    taken = []
    for t in range(steps):  # episodes of 3 steps: a new draw at steps 0 and 3
        first = jnp.full((games,), t % 3 == 0)
        actions, hidden, _ = act(jax.random.fold_in(key, t), obs, first, hidden)
        taken.append(np.asarray(actions[:, 0]))
        assert np.array_equal(np.asarray(hidden[:, 0, -1]) + 1, taken[-1])
    taken = np.stack(taken, 1)  # [games, steps]
    # Within an episode the member (so its action) is kept ...
    for start in (0, 3):
        episode = taken[:, start : start + 3]
        assert (episode == episode[:, :1]).all()
    # ... each member is drawn about a third of the time ...
    counts = np.bincount(taken[:, 0], minlength=5)[1:4] / games
    assert np.all(np.abs(counts - 1 / 3) < 0.07), counts
    # ... and the next episode draws again, independently.
    changed = np.mean(taken[:, 0] != taken[:, 3])
    assert abs(changed - 2 / 3) < 0.08, changed


def test_weights_are_shared_by_a_checkpoints_seeds(tmp_path):
    first = _write(tmp_path / "a.policy", PREY, [1, 2])
    second = _write(tmp_path / "b.policy", PREY, [3])
    source = weighted_pool_source([first, second], [3.0, 1.0])
    assert pool_items(source) == [(str(first), 3.0), (str(second), 1.0)]
    _, params, weights = frozen_pool_weighted(source, "tag", _prey_info())
    # first: 3 / 4 shared by its two seeds; second: 1 / 4.
    np.testing.assert_allclose(weights, [0.375, 0.375, 0.25])
    assert np.asarray(params["params"]["Dense_0"]["bias"]).shape == (3, 5)
    # A checkpoint without a weight weighs 1; no weight at all is uniform.
    _, _, weights = frozen_pool_weighted(
        f"{POOL_PREFIX}{first}@2,{second}", "tag", _prey_info()
    )
    np.testing.assert_allclose(weights, [1 / 3, 1 / 3, 1 / 3])
    _, _, weights = frozen_pool_weighted(
        f"{POOL_PREFIX}{first},{second}", "tag", _prey_info()
    )
    assert weights is None
    # Weight 0 leaves a checkpoint out of the source.
    assert pool_items(weighted_pool_source([first, second], [0.0, 1.0])) == [
        (str(second), 1.0)
    ]


def test_a_weighted_pool_draws_members_in_proportion(pool_source):
    spec, params = frozen_pool(pool_source, "tag", _prey_info())
    weights = np.array([0.6, 0.0, 0.4])
    act = jax.jit(frozen_pool_act_fn(spec, params, weights))
    games = 4000
    actions, hidden, _ = act(
        jax.random.key(5),
        jnp.zeros((games, 1, 14)),
        jnp.ones((games,), bool),
        jnp.zeros((games, 1, spec.carry_size + 1)),
    )
    counts = np.bincount(np.asarray(actions[:, 0]), minlength=5)[1:4] / games
    # member 0 plays action 1, member 1 (weight 0) never, member 2 action 3
    assert counts[1] == 0.0
    assert abs(counts[0] - 0.6) < 0.03 and abs(counts[2] - 0.4) < 0.03, counts


def test_a_greedy_source_plays_the_actors_mode(tmp_path):
    """An actor preferring action 2 a little (logit 0.5 over four 0s): sampled it
    plays 2 about a third of the time; behind ``greedy:`` always."""
    params = jax.tree.map(jnp.zeros_like, init_params(PREY, jax.random.key(0)))
    params["params"]["Dense_0"]["bias"] = jnp.zeros((5,)).at[2].set(0.5)
    path = write_policy_checkpoint(
        tmp_path / "mild.policy",
        algo="mappo",
        env="tag",
        env_overrides={},
        config={},
        meta={},
        teams={"prey": (PREY.to_dict(), jax.tree.map(lambda x: x[None], params))},
    )
    games = 2000
    for source in (f"{POOL_PREFIX}{path}", str(path)):
        shares = []
        for prefix in ("", "greedy:"):
            config = MAPPOConfig(
                env="tag",
                total_steps=256,
                num_envs=8,
                num_steps=32,
                num_seeds=1,
                frozen=(("prey", prefix + source),),
                hidden=(16,),
            )
            run = setup_run(config)
            act = jax.jit(run.frozen_fns[1])
            hidden = jnp.zeros((games, 1, run.frozen_carry[1]))
            actions, _, _ = act(
                jax.random.key(1),
                jnp.zeros((games, 1, 14)),
                jnp.ones((games,), bool),
                hidden,
            )
            shares.append(float(np.mean(np.asarray(actions) == 2)))
        sampled, greedy = shares
        assert abs(sampled - np.exp(0.5) / (np.exp(0.5) + 4)) < 0.04, sampled
        assert greedy == 1.0


@pytest.mark.slow
def test_a_learner_trains_against_a_pool(pool_source):
    config = MAPPOConfig(
        env="tag",
        total_steps=4_096,
        num_envs=8,
        num_steps=32,
        num_seeds=1,
        frozen=(("prey", pool_source),),
        hidden=(16,),
        num_chunks=1,
    )
    run = setup_run(config)
    assert run.hidden_sizes({0: PREY}) == (0, 1)  # the prey carry the member
    result = run_training(config)
    assert set(result.policies) == {"predator"}
    assert result.summary["final"]["episodes"]["mean"] > 0


def test_bad_pools_are_named(tmp_path, pool_source):
    info = _prey_info()
    with pytest.raises(InvalidParameterError, match="lists no checkpoint"):
        frozen_pool(POOL_PREFIX + " , ", "tag", info)
    for weight in ("0", "-1", "nan", "heavy"):
        with pytest.raises(InvalidParameterError, match="must be a positive number"):
            frozen_pool(f"{pool_source}@{weight}", "tag", info)
    with pytest.raises(InvalidParameterError, match="every weight is 0"):
        weighted_pool_source(["a.policy"], [0.0])
    with pytest.raises(InvalidParameterError, match="one weight per path"):
        weighted_pool_source(["a.policy"], [1.0, 2.0])
    spec, params = frozen_pool(pool_source, "tag", info)
    with pytest.raises(InvalidParameterError, match="weights must be"):
        frozen_pool_act_fn(spec, params, np.array([1.0, 1.0]))
    wider = _write(
        tmp_path / "wide.policy",
        PolicySpec(kind="actor", num_agents=1, obs_size=14, num_actions=5, hidden=(9,)),
        [0],
    )
    with pytest.raises(CheckpointError, match="share one network"):
        frozen_pool(f"{pool_source},{wider}", "tag", info)
    other_game = _write(tmp_path / "other.policy", PREY, [0], env="adversary")
    with pytest.raises(CheckpointError, match="trained on 'adversary'"):
        frozen_pool(f"{POOL_PREFIX}{other_game}", "tag", info)
    with pytest.raises(CheckpointError, match="no 'predator' policy"):
        frozen_pool(pool_source, "tag", team_infos(make("tag")[0])[0])


@pytest.mark.slow
def test_the_cli_trains_against_a_pool_and_names_a_bad_one(
    tmp_path, pool_source, capsys
):
    common = [
        "train",
        "--algo=mappo",
        "--env=tag",
        "--set=total_steps=2048",
        "--set=num_envs=8",
        "--set=num_steps=16",
        "--set=num_seeds=1",
        "--set=num_chunks=1",
        "--quiet",
    ]
    out = tmp_path / "run"
    assert main([*common, f"--frozen=prey={pool_source}", f"--out={out}"]) == 0
    capsys.readouterr()
    missing = f"{POOL_PREFIX}{tmp_path / 'missing.policy'}"
    bad = tmp_path / "bad"
    assert main([*common, f"--frozen=prey={missing}", f"--out={bad}"]) == 2
    assert not bad.exists()
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "missing.policy" in err[0], err
