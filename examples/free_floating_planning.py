"""Plan a joint motion that turns a satellite to a target attitude and brings the arm back.

With zero momentum the base turns at w_0 = -[H_0^-1 H_0m]_w phid (Wilde et al. 2018, Eq. 21), so the
attitude after a closed joint path depends on the path (a non-holonomic system). Here the path
is optimised by gradient descent (optax) through that reduced kinematics:

- three joints (2, 3, 4) follow phi_j = phi0_j + sum_k (a_jk (1 - cos k s) + b_jk sin k s) with
  the timing s(t) = 2 pi t/T - sin(2 pi t/T): the path is closed and starts and ends at rest
  for any coefficients (a cosine-only series would retrace its own path and enclose nothing);
- the base attitude at T comes from integrating q' = G(q) qd with qd the joint-space velocity
  of (base_velocity(q, phid), phid), RK4 with fixed steps (differentiable, cheap);
- loss = |log(R_target^T R_0(T))|^2 (+ a small penalty on a).

The plan is then checked by an independent full-dynamics simulation (mbjax.simulate with the
momentum formulation and a computed-torque controller tracking the planned joints): the base
must reach the target attitude within 1e-3 rad. The gradient of the loss is also compared
with central finite differences.

Run ``python examples/free_floating_planning.py [--quick] [--out DIR]`` (``--quick``: 50 RK4 steps
and 120 Adam steps instead of 400 and 300, verified at tolerance 1e-8 instead of 1e-11). With
matplotlib it saves a plot, ``free_floating_planning.png``.
"""

from _common import Example  # first: float64 before any JAX array exists

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax

import mbjax

T = 10.0
PHI0 = jnp.array([0.0, 0.6, 0.0, -1.2, 0.0, 0.6, 0.0])
JOINTS = jnp.array([1, 2, 3])  # joints 2, 3 and 4 move
HARMONICS = 2
TARGET = jnp.array([0.0, 0.0, 0.05])  # target base rotation vector (rad): 2.9 deg of yaw

model = mbjax.load_bundled("space_robot")
q_start = jnp.concatenate([jnp.array([0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0]), PHI0])


def path(a, t):
    """Arm angles (7,) at time t for coefficients a (3, HARMONICS, 2): cosine and sine parts."""
    u = 2 * jnp.pi * t / T
    ks = jnp.arange(1, HARMONICS + 1) * (u - jnp.sin(u))
    offsets = jnp.sum(a[..., 0] * (1 - jnp.cos(ks)) + a[..., 1] * jnp.sin(ks), axis=-1)
    return PHI0.at[JOINTS].add(offsets)


class Planned(eqx.Module):
    """The planned path as a controller reference: (phi, phid, phidd) at t."""

    a: jax.Array

    def __call__(self, t):
        phid = lambda s: jax.jvp(lambda r: path(self.a, r), (s,), (jnp.ones_like(s),))[1]  # noqa: E731
        return path(self.a, t), phid(t), jax.jvp(phid, (t,), (jnp.ones_like(t),))[1]


def rates(q, t, a):
    """q' along the plan with zero momentum: the base moves as Eq. (21) says."""
    phid = Planned(a)(t)[1]
    qn = mbjax.normalize(model, q)  # RK4's stages leave the unit sphere by O(dt^5)
    xd = jnp.concatenate([mbjax.base_velocity(model, qn, phid), phid])
    return mbjax.configuration_rate(model, q, mbjax.from_floating(model, qn, xd))


def final_configuration(a, steps):
    """The configuration at T along the plan, from ``steps`` RK4 steps."""
    dt = T / steps

    def rk4(q, i):
        t = i * dt
        k1 = rates(q, t, a)
        k2 = rates(q + 0.5 * dt * k1, t + 0.5 * dt, a)
        k3 = rates(q + 0.5 * dt * k2, t + 0.5 * dt, a)
        k4 = rates(q + dt * k3, t + dt, a)
        return q + dt / 6 * (k1 + 2 * k2 + 2 * k3 + k4), None

    q, _ = jax.lax.scan(rk4, q_start, jnp.arange(steps))
    return mbjax.normalize(model, q)


def attitude_error(q):
    """Rotation vector (3,) from the target attitude to the base attitude of q."""
    target = mbjax.spatial.quat_exp(TARGET)
    return mbjax.spatial.quat_log(mbjax.spatial.quat_multiply(mbjax.spatial.quat_conjugate(target), q[3:7]))


def loss(a, steps):
    """The planning loss and, as auxiliary output, the planned final configuration."""
    q = final_configuration(a, steps)
    return jnp.sum(attitude_error(q) ** 2) + 1e-6 * jnp.sum(a**2), q


# compiled once: the optimiser's steps, the planned configuration and the gradient check use it
loss_and_grad = jax.jit(jax.value_and_grad(loss, has_aux=True), static_argnums=1)


def main():
    example = Example(__doc__, quick="50 RK4 and 120 Adam steps instead of 400 and 300, verified at tolerance 1e-8 "
                                     "instead of 1e-11")
    steps = 50 if example.quick else 400  # RK4 steps of the planning model
    iterations = 120 if example.quick else 300
    tol = 1e-8 if example.quick else 1e-11  # of the verifying simulation
    try:
        from tqdm import trange
    except ImportError:  # the progress bar is a nicety (pip install mbjax[plot])

        def trange(n, **_):
            return range(n)

    a = 0.2 * jax.random.normal(jax.random.PRNGKey(0), (JOINTS.size, HARMONICS, 2))
    opt = optax.adam(0.02)
    state = opt.init(a)

    @jax.jit
    def update(a, g, state):
        updates, state = opt.update(g, state)
        return optax.apply_updates(a, updates), state

    history = []
    for _ in trange(iterations, desc="planning"):
        (value, _), g = loss_and_grad(a, steps)
        a, state = update(a, g, state)
        history.append(float(value))
    (_, planned), g = loss_and_grad(a, steps)
    planned_error = float(jnp.linalg.norm(attitude_error(planned)))
    print(f"planning: loss {history[0]:.3e} -> {history[-1]:.3e} in {iterations} Adam steps; "
          f"attitude error {planned_error:.2e} rad (planning model)")

    # gradient check: directional derivative against central differences
    direction = jax.random.normal(jax.random.PRNGKey(1), a.shape)
    exact = float(jnp.vdot(g, direction))
    h = 1e-5
    fd = float((loss_and_grad(a + h * direction, steps)[0][0] - loss_and_grad(a - h * direction, steps)[0][0])
               / (2 * h))
    gradient_error = abs(exact - fd) / max(abs(fd), 1e-300)
    print(f"gradient check: autodiff {exact:.8e}, central differences {fd:.8e}, "
          f"relative difference {gradient_error:.1e}")

    # independent check: full dynamics, joints driven by computed torque along the plan
    ts = jnp.linspace(0.0, T, 101)
    traj = mbjax.simulate(model, q_start, jnp.zeros(model.nv), 0.0, T,
                          tau=mbjax.FloatingComputedTorque(model, 100.0, 20.0, Planned(a)), method="momentum",
                          solver=diffrax.Dopri8(), rtol=tol, atol=tol, saveat=ts, max_steps=200_000)
    err = float(jnp.linalg.norm(attitude_error(traj.q[-1])))
    arm = float(jnp.max(jnp.abs(traj.q[-1, 7:] - PHI0)))
    print(f"simulated: base attitude {err:.2e} rad from the target; arm back at its start to {arm:.1e} rad")
    example.record(loss=[history[0], history[-1]], planned_attitude_error=planned_error,
                   gradient_relative_error=gradient_error, simulated_attitude_error=err, arm_return_error=arm)
    assert err < 1e-3, "the plan does not reach the target attitude in simulation"
    assert abs(exact - fd) <= 1e-5 * abs(fd), "gradient does not match finite differences"
    example.figure("free_floating_planning.png", lambda plt: figure(plt, history, ts, traj), dpi=100)


def figure(plt, history, ts, traj):
    """The loss, the planned joint motion and the base attitude, as simulated."""
    rel = jax.vmap(lambda q: mbjax.spatial.quat_log(q[3:7]))(traj.q)
    fig, ax = plt.subplots(1, 3, figsize=(14, 4))
    ax[0].semilogy(history)
    ax[0].set(xlabel="Adam iteration", ylabel="loss", title="planning")
    for j in JOINTS:
        ax[1].plot(ts, np.degrees(traj.q[:, 7 + int(j)]), label=f"joint {int(j) + 1}")
    ax[1].set(xlabel="t (s)", ylabel="angle (deg)", title="planned joint motion (simulated)")
    ax[1].legend()
    for k, name in enumerate("xyz"):
        ax[2].plot(ts, np.degrees(rel[:, k]), label=name)
        ax[2].axhline(np.degrees(TARGET[k]), color=f"C{k}", ls=":")
    ax[2].set(xlabel="t (s)", ylabel="base rotation (deg)", title="base attitude (dotted: target)")
    ax[2].legend()
    return fig


if __name__ == "__main__":
    main()
