"""The learned world models: configs name their bad fields; a small training run
of each model lowers its loss and predicts one step far better than standing
still; the learned-dynamics game with the true physics reproduces ``tag_intent``
step for step and a planner through it scores exactly as through the game; a
planner rolls through a learned model under jit; files round-trip."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from mopa.bench.compute import program_flops
from mopa.envs import make
from mopa.envs.pursuit import PREDATOR, PREY
from mopa.errors import CheckpointError, InvalidParameterError
from mopa.planning import (
    IntentConditionedModel,
    IntentModelParams,
    LookaheadConfig,
    LookaheadParams,
    LookaheadPlayer,
    PolicyOpponentModel,
)
from mopa.players import PolicyPlayer
from mopa.policy import PolicySpec, init_params
from mopa.worldmodel import (
    EpisodeData,
    JEPAWorldConfig,
    LearnedDynamicsEnv,
    LearnedDynamicsParams,
    SimulatorDynamics,
    SSMConfig,
    config_from_dict,
    constant_rmse_by_step,
    dynamics_of,
    generate_episodes,
    load_world_model,
    make_train,
    rmse_by_step,
    rollout,
    save_world_model,
    select_episodes,
    split_features,
    state_features,
)
from mopa.worldmodel.jepa import decode as jepa_decode
from mopa.worldmodel.jepa import encode as jepa_encode
from mopa.worldmodel.jepa import init_params as jepa_init
from mopa.worldmodel.jepa import latent_step as jepa_latent_step
from mopa.worldmodel.jepa import module as jepa_module
from mopa.worldmodel.networks import LatentWorldModel
from mopa.worldmodel.ssm import ensemble_step

N = 4  # three predators and one prey
SMALL = dict(num_agents=N, hidden=(64, 64), batch_size=64, num_updates=300)
K = 2  # the steps of every error measured here (one compiled program each)


def spec(kind, num_agents, obs_size, hidden=(16,)):
    return PolicySpec(
        kind=kind,
        num_agents=num_agents,
        obs_size=obs_size,
        num_actions=5,
        hidden=hidden,
    )


@pytest.fixture(scope="module")
def game():
    return make("tag_intent", predator_intent_obs=True)


@pytest.fixture(scope="module")
def episodes(game):
    """``(train, test)`` episodes of random predators and prey."""
    env, params = game
    players = (
        PolicyPlayer(spec("random", 3, env.predator_obs_size)),
        PolicyPlayer(spec("random", 1, env.prey_obs_size)),
    )
    data = generate_episodes(env, params, players, ((), ()), jax.random.key(0), 96)
    return select_episodes(data, slice(0, 80)), select_episodes(data, slice(80, 96))


@pytest.fixture(scope="module")
def trained(episodes):
    """Each model trained briefly: ``{kind: (config, params, metrics)}``."""
    train, _ = episodes
    out = {}
    for config in (
        SSMConfig(**SMALL, num_members=3),
        JEPAWorldConfig(**SMALL, rollout_steps=2),
    ):
        params, metrics = jax.jit(make_train(config))(jax.random.key(1), train)
        out[config.kind] = (config, params, jax.device_get(metrics))
    return out


# -- configs ---------------------------------------------------------------------
@pytest.mark.parametrize(
    ("cls", "field", "value"),
    [
        (SSMConfig, "num_agents", 0),
        (SSMConfig, "num_members", 0),
        (SSMConfig, "hidden", ()),
        (SSMConfig, "activation", "swish"),
        (SSMConfig, "rollout_steps", 0),
        (SSMConfig, "learning_rate", -1.0),
        (JEPAWorldConfig, "latent_size", 0),
        (JEPAWorldConfig, "ema_decay", 1.5),
        (JEPAWorldConfig, "variance_weight", -1.0),
        (JEPAWorldConfig, "predictor_hidden", (0,)),
    ],
)
def test_config_errors_name_the_field(cls, field, value):
    kwargs = {"num_agents": N, field: value}
    with pytest.raises(InvalidParameterError, match=field):
        cls(**kwargs)


def test_configs_round_trip_through_dicts():
    for config in (SSMConfig(num_agents=N, hidden=(8,)), JEPAWorldConfig(num_agents=2)):
        assert config_from_dict(config.to_dict()) == config
    with pytest.raises(InvalidParameterError, match="kind"):
        config_from_dict({"kind": "rnn", "num_agents": 2})
    with pytest.raises(InvalidParameterError, match="depth"):
        config_from_dict({"kind": "ssm", "num_agents": 2, "depth": 3})


@pytest.mark.slow
def test_training_data_too_short_is_refused(episodes):
    train, _ = episodes
    config = SSMConfig(num_agents=N, rollout_steps=30)
    with pytest.raises(InvalidParameterError, match="too short"):
        make_train(config)(jax.random.key(0), train)
    with pytest.raises(InvalidParameterError, match="num_agents"):
        make_train(SSMConfig(num_agents=3))(jax.random.key(0), train)


# -- data and the zero-error model -----------------------------------------------
def test_features_round_trip_and_the_true_physics_has_zero_error(game, episodes):
    env, params = game
    _, test = episodes
    pos, vel = split_features(test.state)
    np.testing.assert_array_equal(state_features(pos, vel), test.state)
    simulator = SimulatorDynamics(env)
    errors = rmse_by_step(simulator, params, test, k=K)
    np.testing.assert_allclose(errors, 0.0, atol=1e-5)
    # Random players move: standing still is a poor prediction, worse with k.
    constant = np.asarray(constant_rmse_by_step(test, k=5))
    assert constant[0] > 0.01 and np.all(np.diff(constant) > 0)


def test_rmse_by_step_equals_a_plain_loop(game, episodes):
    """Step 2's error of the true physics slowed down (damping 0.5), computed by
    a Python loop over starts."""
    env, params = game
    _, test = episodes
    simulator = SimulatorDynamics(env)
    slowed = params.replace(damping=jnp.float32(0.5))
    two_steps = jax.jit(
        lambda x, a: rollout(simulator, slowed, jax.random.key(0), x, a)[-1]
    )
    squared = []
    for m in range(test.state.shape[0]):
        for t in range(test.state.shape[1] - 2):
            x = two_steps(test.state[m, t], test.actions[m, t : t + 2])
            gap = split_features(x)[0] - split_features(test.state[m, t + 2])[0]
            squared.append(np.sum(np.asarray(gap) ** 2, -1))
    expected = np.sqrt(np.mean(squared))
    got = rmse_by_step(simulator, slowed, test, k=K)[-1]
    np.testing.assert_allclose(got, expected, rtol=1e-5)
    assert expected > 1e-3


# -- training --------------------------------------------------------------------
def _mean_state_rmse(train, test):
    """One-step position RMSE of predicting the training data's mean state."""
    mean = jnp.mean(train.state.reshape(-1, train.state.shape[-1]), 0)
    gap = split_features(test.state[:, 1:])[0] - split_features(mean)[0]
    return float(jnp.sqrt(jnp.mean(jnp.sum(gap**2, -1))))


@pytest.mark.slow
def test_training_the_ensemble_beats_standing_still(trained, episodes):
    _, test = episodes
    config, params, metrics = trained["ssm"]
    loss = np.asarray(metrics["loss"])
    assert loss.shape == (config.num_updates,)
    assert loss[-30:].mean() < 0.5 * loss[:10].mean()
    one_step = float(rmse_by_step(dynamics_of(config), params, test, k=K)[0])
    constant = float(constant_rmse_by_step(test, k=1)[0])
    assert one_step < 0.25 * constant, (one_step, constant)


@pytest.mark.slow
def test_training_the_jepa_lowers_its_losses_and_reads_positions(trained, episodes):
    """The JEPA's prediction and readout losses fall, and its decoded positions
    beat the untrained model and the data's mean state by far."""
    train, test = episodes
    config, params, metrics = trained["jepa_world"]
    for name in ("loss", "prediction", "readout"):
        values = np.asarray(metrics[name])
        assert values[-30:].mean() < 0.7 * values[:10].mean(), name
    one_step = float(rmse_by_step(dynamics_of(config), params, test, k=K)[0])
    untrained = jepa_init(config, jax.random.key(0), params["norm"])
    fresh = float(rmse_by_step(dynamics_of(config), untrained, test, k=K)[0])
    assert one_step < 0.75 * fresh
    assert one_step < 0.75 * _mean_state_rmse(train, test)


def test_ensemble_members_differ_and_sampling_reports_disagreement(trained, game):
    env, params = game
    config, model_params, _ = trained["ssm"]
    members = model_params["members"]
    leaves = jax.tree.leaves(members)
    assert all(leaf.shape[0] == config.num_members for leaf in leaves)
    _, state = env.reset(jax.random.key(5), params)
    x = state_features(state.pos, state.vel)
    action = jnp.array([1, 2, 3, 4], jnp.int32)
    mean = dynamics_of(config, "mean")
    sample = dynamics_of(config, "sample")

    @jax.jit
    def both(key):
        stepped, disagreement = mean.advance(model_params, key, x, action)
        draws = jax.vmap(lambda k: sample.advance(model_params, k, x, action)[0])(
            jax.random.split(key, 32)
        )
        return stepped, disagreement, draws

    stepped, disagreement, draws = both(jax.random.key(6))
    assert stepped.shape == x.shape and float(disagreement) > 0
    assert len(np.unique(np.asarray(draws[:, 0]))) > 1
    np.testing.assert_allclose(jnp.mean(draws, 0), stepped, atol=0.05)
    with pytest.raises(InvalidParameterError, match="member"):
        dynamics_of(config, "max")


@pytest.mark.slow
def test_a_sampled_member_is_computed_alone_with_the_ensembles_numbers(trained, game):
    """``"sample"`` steps with the drawn member's network: the ensemble's
    prediction of that member (to float rounding: XLA may fuse the members'
    layers into one product) under nested vmaps with weights per seed; and when
    the disagreement is not used the step costs one member's network, not the
    ensemble's."""
    env, params = game
    config, model_params, _ = trained["ssm"]
    sample = dynamics_of(config, "sample")
    keys = jax.random.split(jax.random.key(7), 6)
    _, states = jax.vmap(env.reset, in_axes=(0, None))(keys, params)
    x = state_features(states.pos, states.vel)  # [6, F]
    action = jax.random.randint(jax.random.key(8), (6, N), 0, 5)
    seeds = jax.tree.map(lambda w: jnp.stack([w, 1.01 * w]), model_params)

    def drawn(p, key, x, action):
        e = jax.random.randint(key, (), 0, config.num_members)
        return ensemble_step(config, p, x, action)[e]

    step = lambda p, k, x, a: sample.advance(p, k, x, a)[0]  # noqa: E731
    nested = (0, None, None, None), (None, 0, 0, 0)
    nest = lambda fn: jax.jit(jax.vmap(jax.vmap(fn, nested[1]), nested[0]))  # noqa: E731
    stepped = np.asarray(nest(step)(seeds, keys, x, action))
    np.testing.assert_allclose(
        stepped, nest(drawn)(seeds, keys, x, action), rtol=1e-5, atol=1e-6
    )
    assert len({tuple(row) for row in stepped[0, :, :2]}) == 6

    key = jax.random.key(9)
    one = program_flops(step, model_params, key, x[0], action[0])
    every = program_flops(
        lambda p, k, x, a: ensemble_step(config, p, x, a),
        model_params,
        key,
        x[0],
        action[0],
    )
    assert one < 1.2 * every / config.num_members, (one, every)


def test_jepa_inference_on_rows_equals_the_models_methods(trained, game):
    """The JEPA's encode, latent step and readout (computed on rows under vmap)
    give the numbers of ``LatentWorldModel``'s methods bit for bit, under nested
    vmaps with weights per seed and shared."""
    env, params = game
    config, model_params, _ = trained["jepa_world"]
    net = jepa_module(config)
    keys = jax.random.split(jax.random.key(10), 6)
    _, states = jax.vmap(env.reset, in_axes=(0, None))(keys, params)
    x = state_features(states.pos, states.vel).reshape(2, 3, -1)  # [2, 3, F]
    action = jax.random.randint(jax.random.key(11), (2, 3, N), 0, 5)
    seeds = jax.tree.map(lambda w: jnp.stack([w, 0.99 * w]), model_params)

    def ours(p, x, action):
        z = jepa_encode(config, p, x)
        return z, jepa_latent_step(config, p, z, action), jepa_decode(config, p, z)

    def methods(p, x, action):
        apply = functools.partial(net.apply, p["online"])
        xn = (x - p["norm"]["x_mean"]) / p["norm"]["x_std"]
        z = apply(xn, method=LatentWorldModel.encode)
        onehot = jax.nn.one_hot(action, config.num_actions).reshape(-1)
        read = apply(z, method=LatentWorldModel.read)
        return (
            z,
            apply(z, onehot, method=LatentWorldModel.step),
            p["norm"]["x_mean"] + p["norm"]["x_std"] * read,
        )

    for weights, axes in ((seeds, 0), (model_params, None)):
        got, expected = (
            jax.jit(jax.vmap(jax.vmap(fn, (None, 0, 0)), (axes, 0, 0)))(
                weights, x, action
            )
            for fn in (ours, methods)
        )
        for a, b in zip(got, expected, strict=True):
            np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


# -- the learned-dynamics game -----------------------------------------------------
def test_true_physics_game_reproduces_the_game(game):
    """With the true physics as its model, the wrapper's steps equal the game's:
    observations, state, rewards, flags and info, over a whole scanned episode."""
    env, params = game
    wm_env = LearnedDynamicsEnv(env, SimulatorDynamics(env))
    wm_params = LearnedDynamicsParams(params, params)

    @jax.jit
    def play(key):
        key_reset, key_steps = jax.random.split(key)
        _, state = env.reset(key_reset, params)

        def step(carry, key_t):
            real, model = carry
            key_act, key_env = jax.random.split(key_t)
            actions = (
                jax.random.randint(key_act, (3,), 0, 5),
                jax.random.randint(jax.random.fold_in(key_act, 1), (1,), 0, 5),
            )
            a = env.step(key_env, real, actions, params)
            b = wm_env.step(key_env, model, actions, wm_params)
            return (a[1], b[1]), (a, b)

        keys = jax.random.split(key_steps, int(params.max_steps))
        return jax.lax.scan(step, (state, state), keys)[1]

    real, model = play(jax.random.key(7))
    assert set(model[-1]) == set(real[-1]) | {"disagreement"}
    model_info = {k: v for k, v in model[-1].items() if k != "disagreement"}
    jax.tree.map(
        lambda x, y: np.testing.assert_allclose(x, y, rtol=1e-6, atol=1e-6),
        (*real[:-1], real[-1]),
        (*model[:-1], model_info),
    )
    assert float(jnp.sum(real[-1]["prey_intent"])) >= 0.0
    np.testing.assert_array_equal(model[-1]["disagreement"], 0.0)


def test_learned_game_steps_with_the_right_shapes(trained, game):
    env, params = game
    _, state = env.reset(jax.random.key(8), params)
    actions = (jnp.array([0, 1, 2], jnp.int32), jnp.array([4], jnp.int32))
    real = env.step(jax.random.key(9), state, actions, params)
    for kind in ("ssm", "jepa_world"):
        config, model_params, _ = trained[kind]
        wm_env = LearnedDynamicsEnv(env, dynamics_of(config))
        wm_params = LearnedDynamicsParams(params, model_params)
        out = jax.jit(wm_env.step)(jax.random.key(9), state, actions, wm_params)
        jax.tree.map(
            lambda x, y: (x.shape, x.dtype) == (y.shape, y.dtype) or pytest.fail(),
            out[:-1],
            real[:-1],
        )
        assert out[1].step == 1 and bool(jnp.all(jnp.isfinite(out[1].pos)))
        # The learned step lands near the physics' (the JEPA decodes coarsely).
        gap = float(jnp.abs(out[1].pos - real[1].pos).max())
        assert gap < {"ssm": 0.1, "jepa_world": 1.0}[kind], (kind, gap)
    assert wm_env == LearnedDynamicsEnv(env, dynamics_of(config))
    assert hash(wm_env) == hash(LearnedDynamicsEnv(env, dynamics_of(config)))
    with pytest.raises(InvalidParameterError, match="LearnedDynamicsParams"):
        wm_env.reset(jax.random.key(0), params)


def _planner(env, predator, prey, mode="per_agent"):
    return LookaheadPlayer(
        env=env,
        team=PREDATOR,
        config=LookaheadConfig(num_rollouts=2, horizon=2, mode=mode),
        opponent_model=IntentConditionedModel(PolicyOpponentModel(prey, PREY), 4),
        own_spec=predator,
        reward_fn=lambda state, rewards, info: info["captures"],
        leaf_fn=None,
    )


@pytest.fixture(scope="module")
def planners(game):
    env, params = game
    predator = spec("q", 3, env.predator_obs_size)
    prey = spec("q", 1, env.prey_obs_size)
    weights = (
        init_params(predator, jax.random.key(10)),
        init_params(prey, jax.random.key(11)),
    )
    obs, state = env.reset(jax.random.key(12), params)
    uniform = jnp.full((4,), 0.25)

    def lookahead_params(env_params):
        return LookaheadParams(
            env_params, weights[0], IntentModelParams(weights[1], uniform)
        )

    return predator, prey, lookahead_params, state, obs[PREDATOR]


@pytest.mark.slow
def test_planner_through_the_true_physics_scores_as_through_the_game(game, planners):
    env, params = game
    predator, prey, lookahead_params, state, obs = planners
    carry, reset = jnp.zeros((3, 0)), jnp.ones((3,), bool)
    key = jax.random.key(13)
    real = jax.jit(_planner(env, predator, prey).plan)(
        lookahead_params(params), key, state, obs, carry, reset
    )
    wm_env = LearnedDynamicsEnv(env, SimulatorDynamics(env))
    through = jax.jit(_planner(wm_env, predator, prey).plan)(
        lookahead_params(LearnedDynamicsParams(params, params)),
        key,
        state,
        obs,
        carry,
        reset,
    )
    assert real.scores.shape == (3, 5)
    np.testing.assert_allclose(through.scores, real.scores, rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(through.actions, real.actions)


@pytest.mark.slow
def test_planner_rolls_through_a_learned_model_with_a_seed_axis(
    trained, game, planners
):
    """A tournament gives every parameter a seed axis: the model's weights ride
    in the game's parameters, so the planner is vmapped over them and jitted
    (the ensemble drawing a member per step; the JEPA's game steps under jit in
    the test above)."""
    env, params = game
    predator, prey, lookahead_params, state, obs = planners
    carry, reset = jnp.zeros((3, 0)), jnp.ones((3,), bool)
    for kind in ("ssm", "jepa_world"):
        config, model_params, _ = trained[kind]
        wm_env = LearnedDynamicsEnv(env, dynamics_of(config, "sample"))
        planner = _planner(wm_env, predator, prey)
        seeded = jax.tree.map(
            lambda x: jnp.stack([x, x]),
            lookahead_params(LearnedDynamicsParams(params, model_params)),
        )
        act = jax.jit(jax.vmap(planner.act, in_axes=(0, None, None, None, None, None)))
        actions, _ = act(seeded, jax.random.key(14), state, obs, carry, reset)
        assert actions.shape == (2, 3) and actions.dtype == jnp.int32
        np.testing.assert_array_equal(actions[0], actions[1])
        assert bool(jnp.all((actions >= 0) & (actions < 5)))


# -- files -----------------------------------------------------------------------
def test_save_and_load_round_trip(trained, episodes, tmp_path):
    _, test = episodes
    for kind, (config, params, _) in trained.items():
        path = save_world_model(
            tmp_path / f"{kind}.msgpack", config, params, {"rmse_5step": 0.1}
        )
        loaded_config, loaded, metadata = load_world_model(path)
        assert loaded_config == config and metadata == {"rmse_5step": 0.1}
        jax.tree.map(np.testing.assert_array_equal, loaded, params)
        np.testing.assert_array_equal(
            rmse_by_step(dynamics_of(loaded_config), loaded, test, k=K),
            rmse_by_step(dynamics_of(config), params, test, k=K),
        )
    config, params, _ = trained["ssm"]
    other = SSMConfig(**{**SMALL, "hidden": (32,)}, num_members=3)
    with pytest.raises(InvalidParameterError, match="do not fit"):
        save_world_model(tmp_path / "bad.msgpack", other, params)
    (tmp_path / "junk.msgpack").write_bytes(b"not msgpack")
    with pytest.raises(CheckpointError):
        load_world_model(tmp_path / "junk.msgpack")
    with pytest.raises(CheckpointError, match="no world model"):
        load_world_model(tmp_path / "missing.msgpack")


def test_episode_data_from_a_dataset_matches_the_game(game, episodes):
    """Velocities read from observations are the state's and actions are in team
    order: step t's action moves state t to state t + 1 under the true physics."""
    env, params = game
    data, _ = episodes
    assert isinstance(data, EpisodeData)
    assert data.state.shape == (80, 25, 16) and data.actions.shape == (80, 25, 4)
    simulator = SimulatorDynamics(env)
    stepped = jax.jit(
        jax.vmap(
            jax.vmap(lambda x, a: simulator.advance(params, jax.random.key(0), x, a)[0])
        )
    )(data.state[:, :-1], data.actions[:, :-1])
    np.testing.assert_allclose(stepped, data.state[:, 1:], atol=1e-5)
