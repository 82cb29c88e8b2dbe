"""The online residual: its MAP fit, its prequential evidence, its buffer, and the
planner's model built on it."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.optimize import minimize

from mopa.errors import InvalidParameterError
from mopa.opponent.online import (
    OnlineResidualConfig,
    fit_residual,
    floored_base,
    free_log_probs,
    free_weight,
    init_online_residual,
    observe_residual,
    residual_features,
    residual_log_probs,
    residual_weight,
)
from mopa.planning import (
    IntentConditionedModel,
    IntentModelParams,
    OnlineResidualModel,
    OnlineResidualParams,
    PolicyOpponentModel,
    predictive_logits,
    residual_params,
)
from mopa.policy import PolicySpec, init_params

A, D = 3, 4


def _config(**kw):
    return OnlineResidualConfig(num_actions=A, obs_size=D, **kw)


def _moves(key, n, true_weights, base_logits):
    """``n`` observations and moves of an opponent playing ``softmax(base +
    phi W)`` (base logits fixed, the features of a unit normal observation)."""
    key_obs, key_act = jax.random.split(key)
    obs = jax.random.normal(key_obs, (n, D))
    config = _config()
    logits = floored_base(config, base_logits) + residual_features(config, obs) @ (
        true_weights
    )
    actions = jax.random.categorical(key_act, logits)
    return obs, actions


def test_no_moves_is_the_floored_base():
    config = _config(prior=0.3)
    state = init_online_residual(config)
    assert float(residual_weight(state)) == pytest.approx(0.3)
    base = jnp.array([[2.0, 0.0, -jnp.inf]])
    got = residual_log_probs(config, state.weights, base, jnp.ones((1, D)))
    # softmax(base) = [e^2, 1, 0] / (e^2 + 1); floored by 0.05 / 3 each.
    p = np.array([np.e**2, 1.0, 0.0]) / (np.e**2 + 1)
    np.testing.assert_allclose(np.exp(got[0]), 0.95 * p + 0.05 / 3, rtol=1e-6)


@pytest.mark.slow
def test_newton_fit_reaches_the_map_of_a_general_optimiser():
    config = _config(prior_precision=0.5, newton_steps=8)
    key = jax.random.key(0)
    true = jax.random.normal(key, (D + 1, A))
    obs, actions = _moves(jax.random.fold_in(key, 1), 40, true, jnp.zeros(A))
    features = residual_features(config, obs)
    base = floored_base(config, jnp.zeros((40, A)))
    mask = jnp.arange(40) < 30  # the last ten are ignored
    got = fit_residual(config, features, base, actions, mask, jnp.zeros((D + 1, A)))

    def loss(flat):
        w = flat.reshape(D + 1, A)
        logits = np.asarray(base[:30]) + np.asarray(features[:30]) @ w
        log_probs = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
        chosen = log_probs[np.arange(30), np.asarray(actions[:30])]
        return -chosen.sum() + 0.25 * np.sum(flat * flat)

    want = minimize(loss, np.zeros((D + 1) * A), method="BFGS", tol=1e-10).x
    np.testing.assert_allclose(np.asarray(got).reshape(-1), want, atol=1e-4)


@pytest.mark.slow
def test_evidence_rises_for_an_opponent_the_base_misdescribes_and_not_otherwise():
    config = _config()
    key = jax.random.key(1)
    base_logits = jnp.zeros(A)  # the base: uniform moves
    strong = 3.0 * jax.random.normal(key, (D + 1, A))
    observe = jax.jit(
        lambda s, o, a: observe_residual(config, s, o[None], a[None], base_logits[None])
    )

    def play(weights, key):
        obs, actions = _moves(key, 60, weights, base_logits)
        state = init_online_residual(config)
        for t in range(60):
            state = observe(state, obs[t], actions[t])
        return state

    learned = play(strong, jax.random.fold_in(key, 2))
    assert float(residual_weight(learned)) > 0.99
    # the fitted correction predicts fresh moves of that opponent better than
    # the base: log(1/3) = -1.099 nats per move
    obs, actions = _moves(jax.random.fold_in(key, 4), 500, strong, base_logits)
    log_probs = residual_log_probs(config, learned.weights, base_logits, obs)
    fresh = float(jnp.mean(log_probs[jnp.arange(500), actions]))
    assert fresh > -1.099 + 0.3
    # an opponent that plays the base: the correction only overfits, and the
    # prequential evidence says so
    plain = play(jnp.zeros((D + 1, A)), jax.random.fold_in(key, 3))
    assert float(residual_weight(plain)) < 0.5


@pytest.mark.slow
def test_the_buffer_keeps_the_latest_capacity_moves():
    config = _config(capacity=4)
    state = init_online_residual(config)
    for t in range(6):
        obs = jnp.full((2, D), float(t))  # two agents per step
        state = observe_residual(
            config, state, obs, jnp.array([t % A, (t + 1) % A]), jnp.zeros((2, A))
        )
    assert int(state.count) == 12
    # slots 0..3 hold moves 8, 9, 10, 11: steps 4, 4, 5, 5
    np.testing.assert_array_equal(state.features[:, 0], [4.0, 4.0, 5.0, 5.0])
    np.testing.assert_array_equal(state.actions, [1, 2, 2, 0])


@pytest.mark.parametrize(
    ("field", "value", "words"),
    [
        ("num_actions", 1, "num_actions must be >= 2"),
        ("drop_obs_tail", D, "drop_obs_tail must be below obs_size"),
        ("prior_precision", 0.0, "prior_precision must be > 0"),
        ("capacity", 0, "capacity must be >= 1"),
        ("epsilon", 0.0, "epsilon"),
        ("prior", 1.0, "prior"),
    ],
)
def test_bad_config_names_the_field(field, value, words):
    kw = {"num_actions": A, "obs_size": D, field: value}
    with pytest.raises(InvalidParameterError, match=words):
        OnlineResidualConfig(**kw)


@pytest.mark.parametrize(
    ("features", "words"),
    [
        (3, "features_fn must be a function"),
        (lambda o: o.sum(), r"to a vector \[K\].*shape \(\)"),
        (lambda o: o.reshape(2, 2), r"shape \(2, 2\)"),
        (lambda o: o[:, 0], "features_fn must take one observation's 4 read entries"),
    ],
)
def test_bad_features_are_refused(features, words):
    with pytest.raises(InvalidParameterError, match=words):
        _config(features_fn=features)


@pytest.mark.slow
def test_features_carry_a_rule_the_raw_observation_does_not():
    """An opponent that moves by the sign of ``o0 * o1`` (no linear function of
    ``o`` predicts it): the correction on ``[o, o0 * o1]`` learns it from 100
    moves, the correction on ``o`` does not."""

    def product(o):
        return jnp.concatenate([o, o[:1] * o[1:2]])

    obs = jax.random.normal(jax.random.key(5), (300, D))
    actions = (obs[:, 0] * obs[:, 1] > 0).astype(jnp.int32)  # move 0 or 1 of 3

    def fresh_log_likelihood(config):
        assert config.num_features == residual_features(config, obs).shape[-1]
        observe = jax.jit(
            lambda s, o, a: observe_residual(
                config, s, o[None], a[None], jnp.zeros((1, A))
            )
        )
        state = init_online_residual(config)
        for t in range(100):
            state = observe(state, obs[t], actions[t])
        log_probs = residual_log_probs(config, state.weights, jnp.zeros(A), obs[100:])
        return float(jnp.mean(log_probs[jnp.arange(200), actions[100:]])), state

    raw, _ = fresh_log_likelihood(_config())
    rich, state = fresh_log_likelihood(_config(features_fn=product))
    assert _config(features_fn=product).num_features == D + 2
    # log(1/3) = -1.10 nats: the raw correction learns only that move 2 never
    # comes (log(1/2) = -0.69 at best); the product's learns the rule
    assert -0.8 < raw < -0.6
    assert rich > -0.4
    assert float(residual_weight(state)) > 0.99


def _misleading_base(n):
    """``n`` observations, an opponent whose move is linear in them, and a base
    confidently wrong in proportion to that rule (its logits minus 4 times the
    opponent's): the correction must outweigh the base where a free fit need
    only learn the rule."""
    obs = jax.random.normal(jax.random.key(9), (n, D))
    rule = obs @ jax.random.normal(jax.random.key(10), (D, A))
    return obs, jnp.argmax(rule, -1), -4.0 * rule


def _observe_all(config, obs, actions, base_logits, n):
    observe = jax.jit(
        lambda s, o, a, b: observe_residual(config, s, o[None], a[None], b[None])
    )
    state = init_online_residual(config)
    for t in range(n):
        state = observe(state, obs[t], actions[t], base_logits[t])
    return state


@pytest.mark.slow
def test_reweighing_discounts_a_confident_base_that_misleads():
    """A base confident and wrong in a way no linear term of the observation
    cancels (its logits a sine of it); the opponent's move is linear in it. With
    ``reweigh_base`` the correction can drop the base and predicts fresh moves
    better (-0.19 nats against -0.39 without; the base alone -1.98)."""
    obs = jax.random.normal(jax.random.key(6), (400, D))
    base_logits = 4.0 * jnp.sin(
        3.0 * obs @ jax.random.normal(jax.random.key(7), (D, A))
    )
    actions = jnp.argmax(obs @ jax.random.normal(jax.random.key(8), (D, A)), -1)

    def fresh_log_likelihood(config):
        state = _observe_all(config, obs, actions, base_logits, 150)
        assert state.weights.shape == (config.num_features, A)
        log_probs = residual_log_probs(
            config, state.weights, base_logits[200:], obs[200:]
        )
        return float(jnp.mean(log_probs[jnp.arange(200), actions[200:]]))

    offset = fresh_log_likelihood(_config())
    reweighed = fresh_log_likelihood(_config(reweigh_base=True))
    assert _config(reweigh_base=True).num_features == D + 1 + A
    base = floored_base(_config(), base_logits[200:])
    assert float(jnp.mean(base[jnp.arange(200), actions[200:]])) < -1.5
    assert -0.6 < offset < -0.25
    assert reweighed > offset + 0.1


def test_without_free_fit_the_free_hypothesis_has_no_weight():
    obs, actions, base_logits = _misleading_base(20)
    state = _observe_all(_config(), obs, actions, base_logits, 20)
    assert float(free_weight(state)) == 0.0
    assert not np.any(np.asarray(state.free_weights))
    assert float(state.free_log_odds) == -np.inf


def test_the_free_fit_is_the_map_of_a_plain_logistic_regression():
    """With ``free_fit`` the second weights are the MAP of the features alone (no
    base offset), as a general optimiser finds it."""
    config = _config(free_fit=True, prior_precision=0.5, newton_steps=8)
    obs, actions, base_logits = _misleading_base(30)
    state = _observe_all(config, obs, actions, base_logits, 30)
    features = np.asarray(residual_features(config, obs))

    def loss(flat):
        logits = features @ flat.reshape(D + 1, A)
        log_probs = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
        chosen = log_probs[np.arange(30), np.asarray(actions)]
        return -chosen.sum() + 0.25 * np.sum(flat * flat)

    want = minimize(loss, np.zeros((D + 1) * A), method="BFGS", tol=1e-10).x
    np.testing.assert_allclose(
        np.asarray(state.free_weights).reshape(-1), want, atol=1e-3
    )
    # and the offset correction is fitted beside it as before
    alone = _observe_all(
        _config(prior_precision=0.5, newton_steps=8), obs, actions, base_logits, 30
    )
    np.testing.assert_allclose(state.weights, alone.weights, rtol=1e-6)
    np.testing.assert_allclose(state.log_odds, alone.log_odds, rtol=1e-6)


def test_the_evidence_picks_the_free_fit_against_a_base_that_misleads():
    """Against the misleading base the free fit predicts fresh moves better than
    the corrected base, and the prequential evidence moves to it; against an
    opponent that plays the base it stays with the base."""
    config = _config(free_fit=True)
    obs, actions, base_logits = _misleading_base(400)
    state = _observe_all(config, obs, actions, base_logits, 150)
    fresh = jnp.arange(200)

    def score(log_probs):
        return float(jnp.mean(log_probs[fresh, actions[200:]]))

    free = score(
        free_log_probs(config, state.free_weights, base_logits[200:], obs[200:])
    )
    corrected = score(
        residual_log_probs(config, state.weights, base_logits[200:], obs[200:])
    )
    assert free > corrected + 0.1
    assert float(free_weight(state)) > 0.99
    # the base's own moves: neither correction earns weight
    plain = jax.random.categorical(jax.random.key(11), base_logits)
    state = _observe_all(config, obs, plain, base_logits, 60)
    assert float(free_weight(state)) < 0.05
    assert float(residual_weight(state)) < 0.5


def test_features_refuse_an_observation_of_the_wrong_width():
    with pytest.raises(InvalidParameterError, match="obs_size 4"):
        residual_features(_config(), jnp.zeros((1, D + 1)))


# -- the planner's model --------------------------------------------------------------
def _intent_model():
    """An opponent of one agent whose observation ends in a 2-entry intent
    one-hot, played by a random-weight actor."""
    spec = PolicySpec(kind="actor", obs_size=D, num_actions=A, num_agents=1)
    params = init_params(spec, jax.random.key(3))
    model = IntentConditionedModel(PolicyOpponentModel(spec, team=1), 2)
    return model, IntentModelParams(params, jnp.array([0.25, 0.75]))


@pytest.mark.slow
def test_intent_predictive_averages_the_intent_out():
    model, params = _intent_model()
    obs = (jnp.zeros((2, 5)), jax.random.normal(jax.random.key(4), (1, D)))
    got = predictive_logits(model, params, obs)
    per = [jax.nn.softmax(model.logits(params, jnp.int32(k), obs)) for k in (0, 1)]
    np.testing.assert_allclose(np.exp(got), 0.25 * per[0] + 0.75 * per[1], rtol=1e-5)


def test_residual_model_imagines_the_base_or_the_correction_by_its_weight():
    base, base_params = _intent_model()
    config = OnlineResidualConfig(num_actions=A, obs_size=D, drop_obs_tail=2)
    model = OnlineResidualModel(base, config, team=1)
    weights = jax.random.normal(jax.random.key(5), (config.num_features, A))
    obs = (jnp.zeros((2, 5)), jax.random.normal(jax.random.key(6), (1, D)))
    key = jax.random.key(7)
    for w, corrected in ((0.0, False), (1.0, True)):
        params = OnlineResidualParams(base_params, weights, jnp.float32(w))
        latent = model.sample_latent(params, key)
        assert bool(latent.corrected) is corrected
        # the base's latent is the one the base alone draws with the same key
        assert int(latent.base) == int(base.sample_latent(base_params, key))
        got = model.logits(params, latent, obs)
        plain = base.logits(base_params, latent.base, obs)
        want = (
            residual_log_probs(config, weights, plain, obs[1]) if corrected else plain
        )
        np.testing.assert_allclose(got, want, rtol=1e-6)


def test_residual_model_imagines_the_free_fit_by_its_weight():
    base, base_params = _intent_model()
    config = OnlineResidualConfig(
        num_actions=A, obs_size=D, drop_obs_tail=2, free_fit=True
    )
    model = OnlineResidualModel(base, config, team=1)
    weights = jax.random.normal(jax.random.key(5), (config.num_features, A))
    free = jax.random.normal(jax.random.key(12), (config.num_features, A))
    obs = (jnp.zeros((2, 5)), jax.random.normal(jax.random.key(6), (1, D)))
    key = jax.random.key(7)
    for w, f in ((1.0, 1.0), (1.0, 0.0), (0.0, 0.0)):
        params = OnlineResidualParams(
            base_params, weights, jnp.float32(w), free, jnp.float32(f)
        )
        latent = model.sample_latent(params, key)
        assert bool(latent.free) is (f == 1.0)
        # the corrected-or-base draw is the one the model without a free fit makes
        assert bool(latent.corrected) is (w == 1.0)
        got = model.logits(params, latent, obs)
        plain = base.logits(base_params, latent.base, obs)
        if f:
            want = free_log_probs(config, free, plain, obs[1])
        elif w:
            want = residual_log_probs(config, weights, plain, obs[1])
        else:
            want = plain
        np.testing.assert_allclose(got, want, rtol=1e-6)
    with pytest.raises(InvalidParameterError, match="free_weights and free_weight"):
        model.sample_latent(OnlineResidualParams(base_params, weights, 1.0), key)


def test_residual_params_carry_both_fits_of_a_batch_of_states():
    """``residual_params`` of states stacked along a leading axis (one per
    predator seed, say) equals each state's own."""
    config = _config(free_fit=True)
    obs, actions, base_logits = _misleading_base(8)
    states = [_observe_all(config, obs, actions, base_logits, n) for n in (2, 8)]
    stacked = jax.tree.map(lambda *x: jnp.stack(x), *states)
    params = residual_params("base", stacked)
    assert params.base_params == "base"
    for i, state in enumerate(states):
        np.testing.assert_allclose(params.weights[i], state.weights)
        np.testing.assert_allclose(params.free_weights[i], state.free_weights)
        assert float(params.residual_weight[i]) == float(residual_weight(state))
        assert float(params.free_weight[i]) == float(free_weight(state))
    assert float(params.free_weight[0]) != float(params.free_weight[1])


def test_residual_model_refuses_a_base_of_other_actions():
    base, _ = _intent_model()
    with pytest.raises(InvalidParameterError, match="num_actions is 5"):
        OnlineResidualModel(
            base, OnlineResidualConfig(num_actions=5, obs_size=D), team=1
        )


def test_predictive_names_a_model_that_cannot_average_its_latent():
    from mopa.planning import FunctionOpponentModel

    model = FunctionOpponentModel(
        lambda p, z, o: jnp.zeros((1, A)), 1, A, latent_fn=lambda p, k: k
    )
    with pytest.raises(InvalidParameterError, match="no predictive_logits"):
        predictive_logits(model, (), (jnp.zeros((1, D)),))


def test_a_deterministic_opponent_is_learned_without_overshooting():
    """An opponent whose move is the argmax of a linear score of wide
    observations: its moves are separable, and a full Newton step from the last
    fit overshoots (weights near 50, the evidence thousands of nats below 0).
    Every step the fit takes lowers its objective, so the weights stay small and
    the correction's prequential evidence over a uniform base rises."""
    config = OnlineResidualConfig(num_actions=5, obs_size=14)
    obs = 2.0 * jax.random.normal(jax.random.key(8), (100, 14))
    score = residual_features(config, obs) @ jax.random.normal(
        jax.random.key(9), (15, 5)
    )
    actions = jnp.argmax(score, -1)
    observe = jax.jit(
        lambda s, o, a: observe_residual(config, s, o[None], a[None], jnp.zeros((1, 5)))
    )
    state = init_online_residual(config)
    for t in range(100):
        state = observe(state, obs[t], actions[t])
    assert float(jnp.abs(state.weights).max()) < 5.0
    assert float(state.log_odds) > 30.0
    assert float(residual_weight(state)) > 0.99
