"""Opponent encoders: the VAE's ELBO rises on a toy set, the JEPA target is an EMA
of the context encoder and gets no gradient, the classifier separates a toy set,
and save/load gives identical encodings."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from mopa.errors import CheckpointError, InvalidParameterError
from mopa.opponent import encoders as enc
from mopa.opponent import representations as rep

occupancy = jax.jit(rep.occupancy, static_argnums=1)


def _blobs(key, num_per_blob=128, size=4, spread=0.3):
    """Two Gaussian blobs at +-1 in ``size`` dimensions and their labels."""
    noise = spread * jax.random.normal(key, (2 * num_per_blob, size))
    labels = jnp.repeat(jnp.arange(2), num_per_blob)
    centres = jnp.where(labels[:, None] == 0, 1.0, -1.0)
    return centres + noise, labels


@pytest.fixture(scope="module")
def vae():
    config = enc.VAEConfig(
        input_size=4, hidden=(16,), latent_size=2, num_updates=300, batch_size=32,
        learning_rate=3e-3, decoder_std=0.5, kl_warmup=100,
    )  # fmt: skip
    x, _ = _blobs(jax.random.key(0))
    params, metrics = jax.jit(enc.make_train(config))(jax.random.key(1), x)
    return config, params, metrics, x


def test_kl_weight_warms_up_linearly():
    config = enc.VAEConfig(input_size=1, beta=2.0, kl_warmup=4)
    # beta * min(1, (update + 1) / 4): 0.5, 1.0, 1.5, 2.0, then 2.0.
    weights = [float(enc.kl_weight(config, jnp.int32(u))) for u in range(6)]
    assert weights == pytest.approx([0.5, 1.0, 1.5, 2.0, 2.0, 2.0])
    flat = enc.VAEConfig(input_size=1, beta=0.5, kl_warmup=0)
    assert float(enc.kl_weight(flat, jnp.int32(0))) == 0.5


@pytest.mark.slow
def test_vae_elbo_rises_on_two_blobs(vae):
    config, params, metrics, x = vae
    elbo = np.asarray(metrics["elbo"])
    assert elbo[-50:].mean() > elbo[:10].mean() + 5.0
    initial = enc.init_params(config, jax.random.split(jax.random.key(1))[0])
    key = jax.random.key(5)
    trained = float(jnp.mean(enc.vae_elbo(config, params, x, key)))
    untrained = float(jnp.mean(enc.vae_elbo(config, initial, x, key)))
    assert trained > untrained + 5.0
    assert np.all(np.asarray(metrics["kl"]) >= 0)
    np.testing.assert_allclose(metrics["beta"][:2], [0.01, 0.02], rtol=1e-6)
    # The posterior means of the two blobs land apart.
    mean, logvar = enc.vae_encode(config, params, x)
    assert mean.shape == logvar.shape == (256, 2)
    gap = jnp.linalg.norm(mean[:128].mean(0) - mean[128:].mean(0))
    assert float(gap) > 1.0
    np.testing.assert_array_equal(enc.encode(config, params, x), mean)


def test_vae_terms_match_a_hand_computed_kl(vae):
    config, params, _, x = vae
    nll, kl = enc.vae_terms(config, params, x[:3], jax.random.key(0))
    mean, logvar = enc.vae_encode(config, params, x[:3])
    m, v = np.asarray(mean, np.float64), np.asarray(logvar, np.float64)
    np.testing.assert_allclose(
        kl, 0.5 * np.sum(np.exp(v) + m**2 - 1 - v, -1), rtol=1e-4
    )
    assert nll.shape == (3,)


@pytest.fixture(scope="module")
def jepa_setup():
    config = enc.JEPAConfig(
        input_size=16, hidden=(8,), latent_size=4, predictor_hidden=(8,),
        ema_decay=0.9, batch_size=8, learning_rate=1e-2,
    )  # fmt: skip
    positions = jax.random.uniform(jax.random.key(2), (6, 12, 2), minval=-1, maxval=1)
    make_data = functools.partial(
        enc.make_jepa_data, grid_size=4, cuts=(4, 8), target_length=4
    )
    data = jax.jit(make_data)(positions)
    return config, data, positions


def test_jepa_pairs_are_prefix_and_following_window(jepa_setup):
    _, data, positions = jepa_setup
    assert data.context.shape == (12, 16) and data.readout.shape == (12, 2)
    # Pair 1 is trajectory 0 cut at t = 8.
    np.testing.assert_allclose(
        data.context[1], occupancy(positions[0], 4, 0, 8).reshape(-1), atol=1e-6
    )
    np.testing.assert_allclose(
        data.target[1], occupancy(positions[0], 4, 8, 12).reshape(-1), atol=1e-6
    )
    np.testing.assert_allclose(data.readout[1], positions[0, -1])


@pytest.mark.slow
def test_jepa_target_is_an_ema_of_the_context_encoder(jepa_setup):
    config, data, _ = jepa_setup
    state = enc.jepa_init(config, jax.random.key(3))
    encoder = lambda variables: variables["params"]["encoder"]  # noqa: E731
    # The target starts as a copy of the context encoder.
    jax.tree.map(np.testing.assert_array_equal, encoder(state.target_params),
                 encoder(state.params))  # fmt: skip
    expected = encoder(state.params)
    update = jax.jit(lambda s, b: enc.jepa_update(config, s, b))
    for i in range(3):
        batch = jax.tree.map(lambda a: a[4 * i : 4 * i + 4], data)  # noqa: B023
        before = state.params
        state, metrics = update(state, batch)
        # target_k = 0.9 target_(k-1) + 0.1 encoder_k, by hand.
        expected = jax.tree.map(lambda t, o: 0.9 * t + 0.1 * o, expected,
                                encoder(state.params))  # fmt: skip
        changed = jax.tree.map(lambda a, b: bool(jnp.any(a != b)), before, state.params)
        assert all(jax.tree.leaves(changed))
    jax.tree.map(
        lambda got, want: np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-7),
        encoder(state.target_params), expected,
    )  # fmt: skip
    assert int(state.update) == 3 and np.isfinite(float(metrics["loss"]))


def test_jepa_target_gets_no_gradient_and_no_optimiser_state(jepa_setup):
    config, data, _ = jepa_setup
    state = enc.jepa_init(config, jax.random.key(3))
    # Move the target away from the online encoder so its gradient would not vanish
    # by symmetry.
    target = jax.tree.map(lambda a: a + 0.1, state.target_params)
    grads = jax.jit(
        jax.grad(lambda t: enc.jepa_loss(config, state.params, t, data)[0])
    )(target)
    assert all(float(jnp.max(jnp.abs(g))) == 0.0 for g in jax.tree.leaves(grads))
    # The readout's loss reaches the readout only: the encoder gets no gradient.
    readout_grads = jax.jit(
        jax.grad(lambda p: enc.jepa_loss(config, p, target, data)[1]["readout"])
    )(state.params)["params"]
    assert all(float(jnp.max(jnp.abs(g))) == 0.0
               for g in jax.tree.leaves(readout_grads["encoder"]))  # fmt: skip
    assert float(jnp.max(jnp.abs(readout_grads["readout"]["kernel"]))) > 0
    # The optimiser holds moments for the online variables only.
    adam = state.opt_state[0]
    assert isinstance(adam, optax.ScaleByAdamState)
    assert jax.tree.structure(adam.mu) == jax.tree.structure(state.params)


def test_jepa_training_lowers_its_loss_and_reads_arrival(jepa_setup):
    config, data, _ = jepa_setup
    config = enc.config_from_dict({**config.to_dict(), "num_updates": 200})
    params, metrics = jax.jit(enc.make_train(config))(jax.random.key(4), data)
    loss = np.asarray(metrics["loss"])
    assert loss[-20:].mean() < loss[:20].mean()
    arrival = enc.predict_arrival(config, params, data.context)
    assert arrival.shape == (12, 2)
    assert enc.encode(config, params, data.context[0]).shape == (4,)


@pytest.fixture(scope="module")
def classifier():
    config = enc.ClassifierConfig(
        input_size=4, hidden=(16,), num_classes=2, num_updates=150, batch_size=32,
        learning_rate=1e-2, label_smoothing=0.1,
    )  # fmt: skip
    x, labels = _blobs(jax.random.key(6), spread=0.5)
    data = enc.ClassifierData(x, labels)
    params, metrics = jax.jit(enc.make_train(config))(jax.random.key(7), data)
    return config, params, metrics


def test_classifier_separates_a_toy_set(classifier):
    config, params, metrics = classifier
    x, labels = _blobs(jax.random.key(8), spread=0.5)  # held out
    proba = enc.predict_proba(config, params, x)
    np.testing.assert_allclose(proba.sum(-1), 1.0, rtol=1e-6)
    accuracy = float(jnp.mean(jnp.argmax(proba, -1) == labels))
    assert accuracy >= 0.97
    assert float(metrics["accuracy"][-20:].mean()) >= 0.95
    # Label smoothing 0.1 caps confidence near 0.95.
    assert float(proba.max()) < 0.99


def test_prefix_data_holds_every_prefix_length():
    positions = jax.random.uniform(jax.random.key(9), (3, 10, 2), minval=-1, maxval=1)
    make_data = functools.partial(
        enc.make_prefix_data, grid_size=4, prefix_lengths=(2, 10)
    )
    data = jax.jit(make_data)(positions, jnp.array([0, 1, 0]))
    assert data.x.shape == (6, 16)
    np.testing.assert_array_equal(data.labels, [0, 0, 1, 1, 0, 0])
    np.testing.assert_allclose(
        data.x[3], occupancy(positions[1], 4, 0, 10).reshape(-1), atol=1e-6
    )
    np.testing.assert_allclose(
        data.x[4], occupancy(positions[2], 4, 0, 2).reshape(-1), atol=1e-6
    )


@pytest.mark.slow
def test_recent_positions_follow_the_occupancy_and_repeat_the_first_step():
    positions = jnp.arange(20.0).reshape(10, 2)
    # Steps [1, 4) of the prefix of length 4; before step 0, step 0 repeats.
    np.testing.assert_array_equal(
        rep.recent_positions(positions, 4, 3), [2, 3, 4, 5, 6, 7]
    )
    np.testing.assert_array_equal(
        rep.recent_positions(positions, 2, 3), [0, 1, 0, 1, 2, 3]
    )
    data = enc.make_prefix_data(
        positions[None] / 20, jnp.array([1]), grid_size=2, prefix_lengths=(2, 7),
        recent=3,
    )  # fmt: skip
    assert data.x.shape == (2, 4 + 6)
    np.testing.assert_allclose(
        data.x[1, :4], occupancy(positions / 20, 2, 0, 7).reshape(-1), atol=1e-6
    )
    np.testing.assert_allclose(data.x[1, 4:], positions[4:7].reshape(-1) / 20)
    jepa = enc.make_jepa_data(
        positions[None] / 20, grid_size=2, cuts=(3,), target_length=2, recent=3
    )
    # Context: occupancy of [0, 3), steps 0-2; target: occupancy of [3, 5),
    # the three steps before 5.
    np.testing.assert_allclose(jepa.context[0, 4:], positions[0:3].reshape(-1) / 20)
    np.testing.assert_allclose(
        jepa.target[0, :4], occupancy(positions / 20, 2, 3, 5).reshape(-1), atol=1e-6
    )
    np.testing.assert_allclose(jepa.target[0, 4:], positions[2:5].reshape(-1) / 20)
    with pytest.raises(InvalidParameterError, match="recent"):
        enc.make_prefix_data(
            positions[None], jnp.array([0]), grid_size=2, prefix_lengths=(2,),
            recent=-1,
        )  # fmt: skip


def test_save_load_round_trip_gives_identical_encodings(
    vae, classifier, jepa_setup, tmp_path
):
    config, data, _ = jepa_setup
    jepa_params = enc.init_params(config, jax.random.key(0))
    cases = [
        (vae[0], vae[1], vae[3]),
        (classifier[0], classifier[1], vae[3]),
        (config, jepa_params, data.context),
    ]
    for i, (cfg, params, x) in enumerate(cases):
        path = enc.save_encoder(tmp_path / f"{cfg.kind}.msgpack", cfg, params, {"i": i})
        loaded_config, loaded = enc.load_encoder(path)
        assert loaded_config == cfg
        np.testing.assert_array_equal(
            enc.encode(loaded_config, loaded, x), enc.encode(cfg, params, x)
        )
    np.testing.assert_array_equal(
        enc.predict_arrival(config, enc.load_encoder(path)[1], data.context),
        enc.predict_arrival(config, jepa_params, data.context),
    )


def test_bad_encoder_files_and_configs_give_clear_errors(vae, tmp_path):
    config, params, _, _ = vae
    with pytest.raises(CheckpointError, match="no encoder file"):
        enc.load_encoder(tmp_path / "missing.msgpack")
    corrupt = tmp_path / "corrupt.msgpack"
    corrupt.write_bytes(b"\xc1\xc1 definitely not msgpack")
    with pytest.raises(CheckpointError, match="not a"):
        enc.load_encoder(corrupt)
    bigger = enc.config_from_dict({**config.to_dict(), "latent_size": 3})
    with pytest.raises(InvalidParameterError, match="has shape"):
        enc.save_encoder(tmp_path / "bad.msgpack", bigger, params)
    with pytest.raises(InvalidParameterError, match="latent_size"):
        enc.VAEConfig(input_size=4, latent_size=0)
    with pytest.raises(InvalidParameterError, match="ema_decay"):
        enc.JEPAConfig(input_size=4, ema_decay=1.5)
    with pytest.raises(InvalidParameterError, match="likelihood"):
        enc.VAEConfig(input_size=4, likelihood="poisson")
    with pytest.raises(InvalidParameterError, match="input_size"):
        enc.make_train(config)(jax.random.key(0), jnp.zeros((8, 5)))
