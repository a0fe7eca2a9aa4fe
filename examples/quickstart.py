"""mbjax quick start: dynamics of the Franka Panda arm, jitted, batched and differentiated.

Needs example-robot-data for the URDF (``pip install example-robot-data``, or mbjax's test
extra ``pip install -e ".[test]"``).

Run ``python examples/quickstart.py [--quick] [--out DIR]`` (``--quick`` changes nothing: the run
is already quick).
"""

import time

from _common import Example  # first: float64 before any JAX array exists

import jax
import jax.numpy as jnp

import mbjax

example = Example(__doc__, quick=None)

# --- load a robot -------------------------------------------------------------------------
model = mbjax.load_example_robot("panda")  # the fingers' mimic joint loads as an independent joint
print(model)
print("joints in q order:", model.joint_names)

key = jax.random.PRNGKey(0)
kq, kv, ka = jax.random.split(key, 3)
q = mbjax.random_configuration(model, kq)  # (nq,), within the position limits
qd = jax.random.normal(kv, (model.nv,))
qdd = jax.random.normal(ka, (model.nv,))

# --- the core algorithms ------------------------------------------------------------------
tau = mbjax.rnea(model, q, qd, qdd)  # inverse dynamics: M(q) qdd + h(q, qd)
M = mbjax.crba(model, q)  # joint-space mass matrix (nv, nv)
qdd_back = mbjax.aba(model, q, qd, tau)  # forward dynamics recovers qdd
print("tau =", tau)
round_trip = float(jnp.max(jnp.abs(qdd_back - qdd)))
print("max |aba(rnea(qdd)) - qdd| =", round_trip)
h = mbjax.nonlinear_effects(model, q, qd)
print("max |M qdd + h - tau|      =", float(jnp.max(jnp.abs(M @ qdd + h - tau))))
example.record(aba_rnea_round_trip=round_trip)

# --- kinematics ---------------------------------------------------------------------------
R, p = mbjax.frame_placement(model, q, "panda_hand_tcp")
J = mbjax.frame_jacobian(model, q, "panda_hand_tcp", reference="local_world_aligned")  # (6, nv)
print("tool centre point at", p, "; Jacobian shape", J.shape)
print("tool velocity (linear, angular) =", J @ qd)
print("centre of mass", mbjax.center_of_mass(model, q))

# --- jit and vmap: a batch of forward dynamics ----------------------------------------------
batch = 1024
keys = jax.random.split(jax.random.PRNGKey(1), batch)
qs = jax.vmap(lambda k: mbjax.random_configuration(model, k))(keys)
qds = jnp.zeros((batch, model.nv))
taus = jnp.zeros((batch, model.nv))
batched_aba = jax.jit(jax.vmap(mbjax.aba, in_axes=(None, 0, 0, 0)))  # model shared, states batched
batched_aba(model, qs, qds, taus).block_until_ready()  # compile
t0 = time.perf_counter()
qdds = batched_aba(model, qs, qds, taus).block_until_ready()
print(f"batched aba: {batch} states in {1e3 * (time.perf_counter() - t0):.2f} ms -> {qdds.shape}")
example.record(batched_aba_shape=qdds.shape)


# --- grad: through the dynamics, with respect to the state and to the model ---------------
def sag(q):
    """Squared joint accelerations of the unpowered arm at rest in q: how fast it sags."""
    qdd = mbjax.aba(model, q, jnp.zeros(model.nv), jnp.zeros(model.nv))
    return jnp.sum(qdd**2)


dsag_dq = jax.jit(jax.grad(sag))(q)
print("d(sag)/dq =", dsag_dq)


def gravity_torque_norm(m):
    return jnp.sum(mbjax.generalized_gravity(m, q) ** 2)


dmodel = jax.jit(jax.grad(gravity_torque_norm))(model)  # gradients w.r.t. the model are Models too
print("d|g(q)|^2 / d(link masses) =", dmodel.mass)
