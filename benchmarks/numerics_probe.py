"""Which computations give the same bits on another processor: a digest per kind of
computation a training run is made of, to compare between processors.

Each probe computes one kind of operation on fixed random inputs and prints the
SHA-256 of its result's bytes (first 16 hex digits). Run it on two processors (or
under an emulated one: ``qemu-x86_64 -cpu Haswell-v4 python ...``, whose CPUID
reports that processor's instruction set and caches to XLA, the libraries compiled
into jaxlib, NumPy and OpenBLAS) and compare the digests probe by probe:

- ``canonical_*``: a dense layer's forward product ``[M, K] x [K, N]``;
- ``transposed_*``: ``a.T @ b``, the shape of every weight gradient, with
  contractions of 256 terms and, ``long_*``, longer ones;
- ``batched_matvec``: a vmapped value head's gradient;
- ``mlp_grad_*``: both gradients of a small network with tanh, exp, log-softmax;
- ``elementwise``: tanh, exp, log1p and a softmax on their own (XLA's loops);
- ``numpy_*``: NumPy's float64 ``log``/``exp`` and a linear solve (OpenBLAS).

    python benchmarks/numerics_probe.py [--native] [--label NAME] [--json PATH]

The mode is portable unless ``--native``. ``cpu_features`` in the JSON are what
NumPy detected when it was imported, which under emulation is the emulated
processor (``machine`` in the metadata reads the host's ``/proc/cpuinfo``).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def probes() -> dict[str, str]:
    """Every probe's digest, by name (see the module's docstring)."""
    import hashlib

    import jax
    import jax.numpy as jnp
    import numpy as np

    def digest(value) -> str:
        return hashlib.sha256(np.asarray(value).tobytes()).hexdigest()[:16]

    key = jax.random.key(7)

    def normal(i: int, shape: tuple[int, ...]):
        return jax.random.normal(jax.random.fold_in(key, i), shape)

    out = {}
    forward = jax.jit(lambda a, b: a @ b)
    for m, k, n in ((512, 64, 128), (512, 128, 5), (3072, 128, 128), (64, 300, 48)):
        out[f"canonical_{m}x{k}x{n}"] = digest(
            forward(normal(m, (m, k)), normal(n, (k, n)))
        )
    transposed = jax.jit(lambda a, b: a.T @ b)
    for m in (64, 128, 300, 512):
        for n in (5, 48, 128):
            a, b = normal(m + 1, (256, m)), normal(n + 2, (256, n))
            out[f"transposed_256_{m}x{n}"] = digest(transposed(a, b))
    for k in (300, 440, 1000):
        out[f"long_{k}_64x48"] = digest(
            transposed(normal(k, (k, 64)), normal(k + 3, (k, 48)))
        )

    def value_loss(w, v, x):
        return jnp.mean((jnp.tanh(x @ w) @ v) ** 2)

    w, v, x = (
        normal(20, (3, 300, 64)) / 17,
        normal(21, (3, 64, 1)) / 8,
        normal(22, (3, 700, 300)),
    )
    _, gv = jax.jit(jax.vmap(jax.grad(value_loss, argnums=(0, 1))))(w, v, x)
    out["batched_matvec"] = digest(gv)

    def loss(w1, w2, x):
        h = jnp.tanh(x @ w1)
        h = jax.nn.relu(h * 1.3 + jnp.exp(-h * h))
        return jax.nn.log_softmax(h @ w2).sum() + jnp.log1p(jnp.abs(h)).mean()

    x, w1, w2 = (
        normal(30, (512, 300)),
        normal(31, (300, 128)) / 17,
        normal(32, (128, 5)) / 11,
    )
    g1, g2 = jax.jit(jax.grad(loss, argnums=(0, 1)))(w1, w2, x)
    out["mlp_grad_first_layer"], out["mlp_grad_last_layer"] = digest(g1), digest(g2)
    z = normal(40, (512, 128))
    out["elementwise"] = digest(
        jax.jit(lambda z: jnp.tanh(z) + jnp.exp(-z * z) + jnp.log1p(jnp.abs(z)))(z)
        + jax.nn.softmax(z)
    )
    rng = np.random.default_rng(0)
    values = rng.random(100_000) * 10 + 1e-3
    out["numpy_log_exp"] = digest(np.log(values) + np.exp(-values))
    matrix = rng.standard_normal((64, 64)) + 8 * np.eye(64)
    out["numpy_solve"] = digest(np.linalg.solve(matrix, rng.standard_normal((64, 3))))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--native", action="store_true", help="native numerics")
    parser.add_argument("--label", default="", help="a name for the processor")
    parser.add_argument("--json", type=Path, help="also write the digests here")
    args = parser.parse_args(argv)
    from mopa.core.numerics import numerics_mode, use_portable_numerics

    if not args.native:
        use_portable_numerics()  # before NumPy and JAX are imported
    from numpy._core._multiarray_umath import __cpu_features__

    from mopa.core.runinfo import run_metadata

    digests = probes()
    for name, value in digests.items():
        print(f"{name:28s} {value}")
    if args.json:
        features = sorted(f for f, on in __cpu_features__.items() if on)
        record = {
            "label": args.label,
            "numerics": numerics_mode(),
            "cpu_features": features,
            "digests": digests,
            "meta": run_metadata({"argv": sys.argv[1:]}),
        }
        args.json.write_text(json.dumps(record, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
