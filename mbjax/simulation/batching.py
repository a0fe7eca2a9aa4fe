"""Batches of simulations: ``vmap`` over initial states, controllers and model parameters, and
sharding of a batch across devices with ``jax.sharding``.

**Scaling out.** A batch is an array (or pytree) with a leading batch axis. Placing that axis
across devices (``shard_batch``) is all it takes: ``jax.jit`` compiles one SPMD program, each
device integrates its slice, and diffrax's while loop runs until every member is done (the
only cross-device communication is that "all done?" reduction). The same code scales from
CPU threads (``XLA_FLAGS=--xla_force_host_platform_device_count=N``) to several GPUs (every
``jax.devices()``), and to many hosts: call ``jax.distributed.initialize()`` at start-up on
every host, build the mesh over the global ``jax.devices()``, give each host its slice of the
batch with ``jax.make_array_from_process_local_data(sharding, local_batch)``, and run the same
``simulate_batch`` call on every host. Choose B a multiple of the device count.
"""

from __future__ import annotations

import equinox as eqx
import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from .integration import simulate

#: name of the mesh axis that holds the batch
BATCH_AXIS = "batch"


def batch_mesh(devices=None) -> Mesh:
    """A one-dimensional mesh over ``devices`` (default: all of ``jax.devices()``)."""
    devices = jax.devices() if devices is None else devices
    return Mesh(np.asarray(devices), (BATCH_AXIS,))


def shard_batch(tree, mesh: Mesh | None = None):
    """Place the leading (batch) axis of every array in ``tree`` across the devices of ``mesh``.

    The batch size must be a multiple of the number of devices.
    """
    mesh = batch_mesh() if mesh is None else mesh
    sharding = NamedSharding(mesh, PartitionSpec(BATCH_AXIS))
    n = mesh.devices.size

    def place(x):
        if x.shape[0] % n:
            raise ValueError(f"a batch of {x.shape[0]} cannot be split evenly across {n} devices; "
                             f"use a batch size that is a multiple of {n}")
        return jax.device_put(x, sharding)

    return jax.tree.map(lambda x: place(x) if eqx.is_array(x) else x, tree)


def simulate_batch(model, q0, qd0, t0=0.0, t1=1.0, *, tau=None, batch_model=False, batch_tau=False,
                   mesh: Mesh | None = None, shard: bool = False, **kwargs):
    """:func:`simulate` for a batch of initial states ``q0`` (B, nq), ``qd0`` (B, nv).

    **Arguments:**

    - ``batch_model``: ``model`` is a batch of models (every array leaf has a leading axis
      B, e.g. masses of B variants; build one with ``jax.vmap`` or ``jax.tree.map(jnp.stack, ...)``).
    - ``batch_tau``: the controller (or torque array) is batched the same way (e.g. B gain
      sets); otherwise one controller drives every member.
    - ``shard``: split the batch across the devices of ``mesh`` (default: all devices).
    - other keyword arguments go to :func:`simulate` (solver, tolerances, saveat, ...).

    **Returns:** a :class:`Trajectory` whose fields have a leading batch axis.
    """
    batched = (model if batch_model else None, q0, qd0, tau if batch_tau else None)
    if shard:
        batched = shard_batch(batched, mesh)
    bmodel, q0, qd0, btau = batched
    model = bmodel if batch_model else model
    tau = btau if batch_tau else tau

    def one(model, q0, qd0, tau):
        return simulate(model, q0, qd0, t0, t1, tau=tau, **kwargs)

    in_axes = (0 if batch_model else None, 0, 0, 0 if batch_tau else None)
    return eqx.filter_vmap(one, in_axes=in_axes)(model, q0, qd0, tau)
