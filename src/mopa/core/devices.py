"""CPU cores as XLA devices, so independent seeds run on separate threads.

XLA runs one computation on one CPU device, and a run's small per-step operations
leave most of a multi-core CPU idle. Exposing the cores as several CPU devices lets
the training driver shard the seed axis over them
(:func:`mopa.algos.driver.seed_sharding`); on a 2-core machine three seeds on
three devices train about twice as fast as on one. The ``mopa`` command calls
:func:`use_cpu_devices` before any JAX work; library users can do the same, or set
``jax_num_cpu_devices`` themselves.
"""

from __future__ import annotations

import os

import jax
import jaxlib

_JAXLIB = tuple(int(part) for part in jaxlib.__version__.split(".")[:2])

QUICK_COMPILE_FLAGS = (
    "--xla_backend_optimization_level=0",
    *(("--xla_cpu_use_fusion_emitters=false",) if _JAXLIB < (0, 11) else ()),
)
"""XLA's quickest CPU compilation: no backend optimisation passes and the older loop
emitters. Small programs compile about three times faster and run somewhat slower
(the same numbers up to float rounding): the right trade when compilation is most
of the time, as in a quick profile or a test. jaxlib 0.11's XLA has no older
emitters and aborts on their flag, so there only the first flag is set."""

CPU_DEVICES = 8
"""CPU devices requested: more than the seeds of any preset, so every seed gets
its own thread (devices beyond the seed count stay idle)."""


def dividing_devices(size: int, devices: list | None = None) -> list:
    """The most devices (of ``jax.devices()`` by default) that split an axis of
    ``size`` evenly: the devices a run's seeds, or a tournament's episodes, are
    spread over."""
    devices = jax.devices() if devices is None else devices
    count = max(d for d in range(1, min(size, len(devices)) + 1) if not size % d)
    return list(devices[:count])


def use_cpu_devices(count: int = CPU_DEVICES) -> bool:
    """Expose ``count`` CPU devices unless the user already chose (the
    ``JAX_NUM_CPU_DEVICES`` variable or XLA's
    ``--xla_force_host_platform_device_count`` flag) or JAX has already started.

    Returns:
        Whether the setting was applied.
    """
    if "JAX_NUM_CPU_DEVICES" in os.environ:
        return False
    if "xla_force_host_platform_device_count" in os.environ.get("XLA_FLAGS", ""):
        return False
    try:
        jax.config.update("jax_num_cpu_devices", count)
    except RuntimeError:  # JAX already ran something: too late to change
        return False
    return True


def use_quick_compile() -> bool:
    """Make XLA compile with :data:`QUICK_COMPILE_FLAGS` (through ``XLA_FLAGS``)
    unless the user already set either flag. XLA reads its flags when it first
    compiles, so this only takes effect if called before the process's first JAX
    computation (the ``mopa`` command calls it for quick profiles).

    Returns:
        Whether the flags were added.
    """
    current = os.environ.get("XLA_FLAGS", "")
    if any(flag.split("=")[0] in current for flag in QUICK_COMPILE_FLAGS):
        return False
    os.environ["XLA_FLAGS"] = " ".join([current, *QUICK_COMPILE_FLAGS]).strip()
    return True
