"""A planar four-bar closed by a full spatial revolute joint: redundant constraints.

In space a revolute cut joint removes five relative motions, but in a planar linkage three of
them (out-of-plane translation and tilts) hold by construction: the 5 x 3 constraint
Jacobian has rank 2 and the multipliers are not unique. The dense KKT solve refuses it with a
clear error; the SVD solve (Mufti 1983 Eq. A-7 ... A-12, minimum-norm multipliers) and the
damped solve give the motion of the same linkage modelled with the two independent rows.

Run ``python examples/redundant_loop.py [--quick] [--out DIR]`` (``--quick``: 1 s instead of
5 s). With matplotlib it saves a plot, ``redundant_loop.png``.
"""

from _common import Example  # first: float64 before any JAX array exists

import diffrax
import jax
import jax.numpy as jnp
import numpy as np

from mbjax import constraints as C

example = Example(__doc__, quick="1 s instead of 5 s")
duration = 1.0 if example.quick else 5.0
model, planar = C.four_bar()
_, redundant = C.four_bar(planar_closure=False)
q0 = C.assemble(model, planar, jnp.array([1.0, -0.6, 1.8]))
qd0 = jnp.zeros(model.nv)
A = np.asarray(C.loop_jacobian(model, redundant, q0))
rank = np.linalg.matrix_rank(A, tol=1e-10)
print(f"{redundant}: Phi_q is {A.shape[0]} x {A.shape[1]} of rank {rank}")
try:
    C.constrained_forward_dynamics(model, redundant, q0, qd0, qd0, method="kkt")
except ValueError as e:
    print("kkt:", e)

ts = jnp.linspace(0.0, duration, 201)
runs = {}
for label, closures, method in (("independent rows, kkt", planar, "kkt"),
                                ("redundant, svd", redundant, "svd"), ("redundant, damped", redundant, "damped")):
    field = C.constrained_vector_field(model, closures, method=method)
    sol = jax.jit(lambda y0: diffrax.diffeqsolve(
        diffrax.ODETerm(field), diffrax.Dopri8(), 0.0, duration, 1e-3, y0, saveat=diffrax.SaveAt(ts=ts),
        stepsize_controller=diffrax.PIDController(rtol=1e-11, atol=1e-11), max_steps=100_000))((q0, qd0))
    runs[label] = np.asarray(sol.ys[0])
ref = runs["independent rows, kkt"]
difference = {label: np.max(np.abs(qs - ref)) for label, qs in runs.items()}
for label in runs:
    print(f"{label:>22}: max |q - q_independent| = {difference[label]:.2e} rad")
example.record(duration=duration, jacobian_shape=A.shape, jacobian_rank=rank, difference_from_independent=difference)


def figure(plt):
    """Joint angles, and how far the redundant solves are from the independent one."""
    fig, (ax1, ax2) = plt.subplots(2, 1, sharex=True, figsize=(7, 5.5))
    for i, name in enumerate(("crank", "coupler (relative)", "rocker")):
        ax1.plot(ts, ref[:, i], label=name)
    ax1.set_ylabel("joint angle [rad]")
    ax1.legend()
    for label in ("redundant, svd", "redundant, damped"):
        ax2.semilogy(ts, np.maximum(np.max(np.abs(runs[label] - ref), axis=1), 1e-17), label=label)
    ax2.set_ylabel("max |q - q_independent| [rad]")
    ax2.set_xlabel("time [s]")
    ax2.legend()
    return fig


example.figure("redundant_loop.png", figure)
