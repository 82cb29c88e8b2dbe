"""``mopa pola`` and ``mopa pola-exact``: every accepted flag changes the
computation or the output."""

import dataclasses
import json
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from mopa.algos.pola.sampled import Learner, SampledConfig
from mopa.cli.main import build_parser, main
from mopa.cli.pola import SAMPLED_FLAGS, exact_config, sampled_config

NEW_VALUES = {
    "env": "coin", "n_update": 7, "inner_steps": 3, "outer_steps": 5, "lr_in": 0.2,
    "lr_out": 0.02, "lr_v": 0.03, "inner_beta": 0.5, "outer_beta": 0.7,
    "batch_size": 12, "rollout_len": 9, "contrib_factor": 1.5, "gae_lambda": 0.9,
    "hidden_size": 8, "layers_before_gru": 2, "opp_model_steps": 3,
    "opp_model_data_batches": 4, "om_lr_p": 0.05, "om_lr_v": 0.06,
}  # fmt: skip


def parse(argv):
    return build_parser().parse_args(argv)


@pytest.mark.parametrize("flag", [f for f, _ in SAMPLED_FLAGS] + ["opp_model"])
def test_each_sampled_flag_sets_its_config_field(flag):
    base = sampled_config(parse(["pola"]))
    argv = ["pola", f"--{flag}"] + (
        [] if flag == "opp_model" else [str(NEW_VALUES[flag])]
    )
    config = sampled_config(parse(argv))
    changed = {
        f.name
        for f in dataclasses.fields(config)
        if getattr(config, f.name) != getattr(base, f.name)
    }
    assert changed == {flag}
    assert getattr(config, flag) == (True if flag == "opp_model" else NEW_VALUES[flag])


def test_presets_and_bad_presets(capsys):
    config = sampled_config(
        parse(["pola", "--preset", "coin-pola_om-cpu", "--lr_in", "0.5"])
    )
    assert config.env == "coin" and config.opp_model and config.lr_in == 0.5
    assert main(["pola", "--preset", "ipd-sos-cpu"]) == 2
    assert "unknown preset 'ipd-sos-cpu'" in capsys.readouterr().err
    assert main(["pola", "--batch_size", "0"]) == 2
    assert "batch_size must be >= 1" in capsys.readouterr().err
    assert main(["pola", "--checkpoint_every", "-1"]) == 2
    assert "--checkpoint_every must be >= 0" in capsys.readouterr().err
    assert main(["pola", "--print_every", "0"]) == 2
    assert "--print_every must be >= 1" in capsys.readouterr().err


TINY = dict(
    env="ipd",
    n_update=1,
    inner_steps=1,
    outer_steps=1,
    batch_size=4,
    rollout_len=3,
    hidden_size=2,
    opp_model_data_batches=1,
)


def leaves_differ(a, b):
    return any(
        not np.allclose(x, y)
        for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b), strict=True)
    )


@pytest.mark.slow
def test_each_config_field_changes_the_computation():
    """Every SampledConfig field the CLI sets changes what a tiny learner computes."""
    key = jax.random.key(0)
    tiny = {**TINY, "inner_steps": 2}  # the inner KL has no gradient at step 1

    # Run op by op (tiny sizes): compiling each changed config took minutes.
    def lookahead(**changes):
        learner = Learner(SampledConfig(**{**tiny, **changes}))
        a = learner.init(key)
        with jax.disable_jit():
            return learner.lookahead(key, 0, a[0].policy, a[1].policy, a[1].value)

    def outer(**changes):
        learner = Learner(SampledConfig(**{**tiny, **changes}))
        a = learner.init(key)
        start = jax.tree.map(lambda x: x + 0.3, a[0].policy)
        with jax.disable_jit():
            return learner.outer_gradient(
                key, 0, a[0].policy, start, a[0].value, a[1].policy, a[1].value
            )[0]

    def loop_lengths(fn, **changes):
        # The lengths of the loops in the traced program (tracing, no compiling).
        learner = Learner(SampledConfig(**{**tiny, "opp_model": True, **changes}))
        a = learner.init(key)
        jaxpr = str(jax.make_jaxpr(fn(learner, a))())
        return [int(n) for n in re.findall(r"length=(\d+)", jaxpr)]

    def update(learner, a):
        return lambda: learner.agent_update(key, 0, a[0], a[1].policy, a[1].value)

    def model(learner, a):
        return lambda: learner.fit_opponent_model(key, 0, a[0], a[1].policy)

    base = lookahead()
    for field in ("lr_in", "inner_beta", "inner_steps", "contrib_factor", "gae_lambda"):
        assert leaves_differ(base, lookahead(**{field: NEW_VALUES[field]})), field
    assert leaves_differ(outer(), outer(outer_beta=NEW_VALUES["outer_beta"]))
    assert 7 in loop_lengths(update, outer_steps=7)
    assert 7 not in loop_lengths(update)
    assert 7 in loop_lengths(model, opp_model_steps=7)
    assert 7 in loop_lengths(model, opp_model_data_batches=7)
    assert 7 not in loop_lengths(model)
    # Step sizes set the optimisers: one Adam step moves a parameter by the rate.
    learner = Learner(SampledConfig(**tiny))
    rates = {"lr_out": 0.02, "lr_v": 0.03, "om_lr_p": 0.05, "om_lr_v": 0.06}
    changed = Learner(SampledConfig(**{**tiny, **rates}))
    optimisers = ("policy_opt", "value_opt", "model_policy_opt", "model_value_opt")
    for name, value in zip(optimisers, rates.values(), strict=True):
        for lrn, expected in ((learner, None), (changed, value)):
            opt = getattr(lrn, name)
            step, _ = opt.update(jnp.ones(1), opt.init(jnp.zeros(1)))
            if expected is not None:
                assert float(step[0]) == pytest.approx(-expected, rel=1e-4), name
            else:
                assert float(step[0]) != pytest.approx(-value, rel=1e-4), name
    # Shapes: batch, rollout length, widths, depth and the game.
    learner = Learner(SampledConfig(**{**TINY, "batch_size": 12, "rollout_len": 9}))
    a = learner.init(key)
    assert learner.play(key, (a[0].policy, a[1].policy)).actions.shape == (9, 12, 2)
    shapes = lambda p: [x.shape for x in jax.tree.leaves(p)]  # noqa: E731
    for field in ("hidden_size", "layers_before_gru"):
        a_new = Learner(SampledConfig(**{**TINY, field: NEW_VALUES[field]})).init(key)
        assert shapes(a_new[0].policy) != shapes(a[0].policy), field
    coin = Learner(SampledConfig(**{**TINY, "env": "coin"}))
    assert coin.obs_size == 36 and coin.num_actions == 4
    # n_update is the number of updates of a run: see the CLI test below.


@pytest.mark.slow
def test_cli_run_flags(tmp_path, capsys):
    argv = [
        "pola",
        "--n_update",
        "2",
        "--outer_steps",
        "1",
        "--inner_steps",
        "1",
        "--batch_size",
        "4",
        "--rollout_len",
        "3",
        "--hidden_size",
        "2",
    ]
    out = tmp_path / "run"
    assert (
        main(
            argv
            + [
                "--seed",
                "3",
                "--print_every",
                "2",
                "--checkpoint_every",
                "1",
                "--save_dir",
                str(out),
            ]
        )
        == 0
    )
    printed = capsys.readouterr().out
    assert printed.count("update ") == 1 and "update 2/2" in printed
    assert sorted(p.name for p in out.iterdir()) == [
        "checkpoint_1.msgpack",
        "checkpoint_2.msgpack",
        "config.json",
        "final.msgpack",
        "meta.json",
        "metrics.json",
    ]
    metrics = json.loads((out / "metrics.json").read_text())
    assert (
        len(metrics) == 2 and json.loads((out / "config.json").read_text())["seed"] == 3
    )
    assert (
        main(
            argv
            + ["--seed", "4", "--print_every", "1", "--save_dir", str(tmp_path / "b")]
        )
        == 0
    )
    assert capsys.readouterr().out.count("update ") == 2
    other = json.loads((tmp_path / "b" / "metrics.json").read_text())
    assert other[-1]["vs_each_other"] != metrics[-1]["vs_each_other"]
    assert not any(p.name.startswith("checkpoint") for p in (tmp_path / "b").iterdir())


@pytest.mark.slow
def test_cli_ctrl_c_saves_the_updates_done(tmp_path, capsys, monkeypatch):
    import signal

    from mopa.algos.pola import sampled

    real_update = sampled.jitted_update
    calls = []

    def update_then_interrupt(*args):
        out = real_update(*args)
        calls.append(1)
        if len(calls) == 1:
            signal.raise_signal(signal.SIGINT)  # as Ctrl-C during update 1
        return out

    monkeypatch.setattr(sampled, "jitted_update", update_then_interrupt)
    argv = ["pola", "--n_update", "2", "--outer_steps", "1", "--inner_steps", "1",
            "--batch_size", "4", "--rollout_len", "3", "--hidden_size", "2",
            "--save_dir", str(tmp_path / "run")]  # fmt: skip
    # The same learner as the test above, so the same compiled update.
    handler = signal.getsignal(signal.SIGINT)
    assert main(argv) == 130
    assert len(calls) == 1  # update 1 finished, update 2 never started
    assert "interrupted after 1 of 2 updates" in capsys.readouterr().out
    out = tmp_path / "run"
    assert sorted(p.name for p in out.iterdir()) == [
        "config.json", "interrupted_1.msgpack", "meta.json", "metrics.json"
    ]  # fmt: skip
    assert len(json.loads((out / "metrics.json").read_text())) == 1
    assert json.loads((out / "meta.json").read_text())["interrupted_after_updates"] == 1
    assert signal.getsignal(signal.SIGINT) is handler  # restored


EXACT_CHANGES = {
    "--using_nn": ("policy", "mlp"), "--ill_condition": ("policy", "precond"),
    "--nn_hidden_size 4": ("hidden_size", 4), "--num_epochs 3": ("num_epochs", 3),
    "--lr_policies_inner 0.3": ("lr_inner", 0.3),
    "--lr_policies_outer 0.2": ("lr_outer", 0.2), "--inner_steps 2": ("inner_steps", 2),
    "--base_cf_no_scale 1.6": ("contrib_factor", 1.6), "--gamma 0.9": ("gamma", 0.9),
    "--std 0.5": ("std", 0.5), "--outer_beta 0.4": ("outer_beta", 0.4),
    "--prox_threshold 1e-6": ("prox_threshold", 1e-6),
    "--prox_outer_max_iters 9": ("prox_max_iters", 9),
}  # fmt: skip


@pytest.mark.parametrize("flag", EXACT_CHANGES)
def test_each_exact_flag_sets_its_config_field(flag):
    base = exact_config(parse(["pola-exact", "--actual_update"]))
    config = exact_config(parse(["pola-exact", "--actual_update", *flag.split()]))
    field, value = EXACT_CHANGES[flag]
    assert getattr(config, field) == value != getattr(base, field)


def test_exact_method_flags_and_errors(capsys):
    assert exact_config(parse(["pola-exact"])).method == "lola_taylor"
    assert exact_config(parse(["pola-exact", "--actual_update"])).method == "lola"
    pola = exact_config(parse(["pola-exact", "--actual_update", "--outer_exact_prox"]))
    assert pola.method == "pola"
    for bad in (
        ["--n_agents", "3"],
        ["--init_state_representation", "1"],
        ["--outer_exact_prox"],
        ["--using_nn", "--ill_condition"],
        ["--repeats", "0"],
    ):
        assert main(["pola-exact", *bad]) == 2
        assert capsys.readouterr().err.startswith("mopa: error:")


@pytest.mark.slow
def test_exact_run_flags(capsys):
    argv = [
        "pola-exact",
        "--actual_update",
        "--outer_exact_prox",
        "--outer_beta",
        "0.1",
        "--lr_policies_inner",
        "5",
        "--lr_policies_outer",
        "0.3",
        "--num_epochs",
        "2",
        "--base_cf_no_scale",
        "1.6",
        "--repeats",
        "3",
    ]
    assert (
        main(
            argv
            + [
                "--set_seed",
                "--seed",
                "2",
                "--print_every",
                "1",
                "--print_prox_loops_info",
            ]
        )
        == 0
    )
    first = capsys.readouterr().out
    assert first.count("epoch ") == 2 and first.count("prox iterations") == 2
    assert "seed 2" in first and '"repeats": 3' in first
    assert main(argv + ["--set_seed", "--seed", "2", "--print_every", "2"]) == 0
    second = capsys.readouterr().out
    assert second.count("epoch ") == 1 and "prox iterations" not in second
    assert main(argv + ["--set_seed", "--seed", "5", "--print_every", "2"]) == 0
    third = capsys.readouterr().out
    assert (
        "seed 5" in third and third.split("epoch 2:")[1] != second.split("epoch 2:")[1]
    )
    # Without --set_seed the seed is drawn at random.
    assert main(argv + ["--seed", "2", "--print_every", "2"]) == 0
    header = capsys.readouterr().out.splitlines()[0]
    # The drawn seed may start with the digit 2; it must not be the number 2.
    assert re.search(r"\bseed (\d+)", header).group(1) != "2", header
