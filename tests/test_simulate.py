"""mbjax.simulate against independent references: Euler-angle chains for the quaternion and
(cos, sin) joints, conservation laws, closed-form error dynamics of computed-torque control,
an analytic event time, a 1e-12 reference solution, and central finite differences.

Each test compiles one simulation program per model and reuses it (times and tolerances are
traced arrays), to keep the file's compile time small.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mbjax
from mbjax.simulation import (
    ComputedTorque, FeedForward, PD, Setpoint, joint_limit_event, simulate,
)

from random_models import assert_close, richardson

ROOT = Path(__file__).resolve().parents[1]
HAS_MPL = importlib.util.find_spec("matplotlib") is not None


def euler_zyx(a):
    """R = Rz(a0) Ry(a1) Rx(a2) (NumPy)."""
    cz, sz, cy, sy, cx, sx = np.cos(a[0]), np.sin(a[0]), np.cos(a[1]), np.sin(a[1]), np.cos(a[2]), np.sin(a[2])
    Rz = np.array([[cz, -sz, 0], [sz, cz, 0], [0, 0, 1]])
    Ry = np.array([[cy, 0, sy], [0, 1, 0], [-sy, 0, cy]])
    Rx = np.array([[1, 0, 0], [0, cx, -sx], [0, sx, cx]])
    return Rz @ Ry @ Rx


def quat(R):
    """Unit quaternion (w, x, y, z) of a rotation matrix (w > 0 branch; fine for |angle| < pi)."""
    w = 0.5 * np.sqrt(1.0 + np.trace(R))
    return np.array([w, (R[2, 1] - R[1, 2]) / (4 * w), (R[0, 2] - R[2, 0]) / (4 * w), (R[1, 0] - R[0, 1]) / (4 * w)])


INERTIAS = {"base": (2.0, np.diag([0.3, 0.2, 0.1])), "ball": (1.0, np.diag([0.05, 0.04, 0.02])),
            "wheel": (0.5, np.diag([0.01, 0.02, 0.01]))}


def manifold_models():
    """The same three bodies joined by free, spherical and continuous joints (A) and by chains of
    prismatic and revolute joints with massless intermediate bodies (B: Euler angles z-y-x)."""
    A = mbjax.ModelBuilder("manifold")
    B = mbjax.ModelBuilder("euler_chain")
    A.add_body("base", joint="free", mass=INERTIAS["base"][0], com=(0.1, 0, 0), inertia=INERTIAS["base"][1])
    parent = None
    for k, axis in enumerate(np.eye(3)):
        B.add_body(f"p{k}", parent=parent, joint="prismatic", axis=axis)
        parent = f"p{k}"
    for k, axis in enumerate(((0, 0, 1), (0, 1, 0), (1, 0, 0))):
        last = k == 2
        B.add_body("base" if last else f"r{k}", parent=parent, joint="revolute", axis=axis,
                   mass=INERTIAS["base"][0] if last else 0.0, com=(0.1, 0, 0) if last else (0, 0, 0),
                   inertia=INERTIAS["base"][1] if last else None)
        parent = "base" if last else f"r{k}"
    A.add_body("ball", parent="base", joint="spherical", translation=(0, 0, -0.4), mass=1.0, com=(0, 0.05, -0.3),
               inertia=INERTIAS["ball"][1])
    for k, axis in enumerate(((0, 0, 1), (0, 1, 0), (1, 0, 0))):
        last = k == 2
        B.add_body("ball" if last else f"s{k}", parent="base" if k == 0 else f"s{k - 1}", joint="revolute",
                   axis=axis, translation=(0, 0, -0.4) if k == 0 else (0, 0, 0), mass=1.0 if last else 0.0,
                   com=(0, 0.05, -0.3) if last else (0, 0, 0), inertia=INERTIAS["ball"][1] if last else None)
    for M, j in ((A, "continuous"), (B, "revolute")):
        M.add_body("wheel", parent="ball", joint=j, axis=(0, 1, 0), translation=(0, 0, -0.6), mass=0.5,
                   com=(0.0, 0.0, -0.1), inertia=INERTIAS["wheel"][1])
    return A.build(), B.build()


def test_quaternion_and_unit_complex_joints_match_euler_angle_chains():
    """Free, spherical and continuous joints integrated through their quaternions and (cos, sin)
    pairs follow the same motion as the equivalent chains of 1-DoF joints, to 1e-9."""
    A, B = manifold_models()
    rng = np.random.default_rng(0)
    qB = np.concatenate([[0.1, -0.2, 0.3], rng.uniform(-0.4, 0.4, 3), rng.uniform(-0.4, 0.4, 3), [0.7]])
    qdB = rng.normal(0, 1.0, B.nv)
    # the same state in A's coordinates: poses of the bodies, body-frame twist of the base,
    # relative angular velocity of the ball in its own frame, rate of the wheel angle
    vB = np.asarray(mbjax.body_velocities(B, qB, qdB))  # local frames
    ib, il = B.body_index("base"), B.body_index("ball")
    R_rel = euler_zyx(qB[6:9])
    w_rel = vB[il, 3:] - R_rel.T @ vB[ib, 3:]
    qA = np.concatenate([qB[:3], quat(euler_zyx(qB[3:6])), quat(R_rel), [np.cos(qB[9]), np.sin(qB[9])]])
    qdA = np.concatenate([vB[ib], w_rel, qdB[9:]])
    ts = jnp.linspace(0.0, 1.5, 16)
    kw = dict(solver=diffrax.Dopri8(), rtol=1e-12, atol=1e-12, saveat=ts)
    tA = simulate(A, qA, qdA, 0.0, 1.5, energy=True, momentum=True, **kw)
    tB = simulate(B, qB, qdB, 0.0, 1.5, **kw)
    poses = jax.vmap(mbjax.forward_kinematics, (None, 0))
    RA, pA = poses(A, tA.q)
    RB, pB = poses(B, tB.q)
    idx = [B.body_index(n) for n in ("base", "ball", "wheel")]
    assert_close(RA, RB[:, idx], 1e-9, what="body orientations")
    assert_close(pA, pB[:, idx], 1e-9, what="body positions")
    # returned configurations are on the manifold to rounding
    for sl in (slice(3, 7), slice(7, 11), slice(11, 13)):
        assert np.abs(np.linalg.norm(tA.q[:, sl], axis=1) - 1).max() < 1e-14
    # conserved: energy, horizontal linear momentum, vertical angular momentum (gravity along -z)
    E = np.asarray(tA.energy)
    assert np.abs(E - E[0]).max() <= 1e-9 * np.abs(E).max()
    h = np.asarray(tA.momentum)[:, [0, 1, 5]]
    assert np.abs(h - h[0]).max() <= 1e-9 * np.abs(h).max()


def test_computed_torque_error_dynamics_and_pd_regulation():
    """Computed torque with the exact model makes each joint error a damped oscillator,
    e'' + kd e' + kp e = 0, whose closed form the simulation matches to 1e-9. A PD law
    brings a spherical joint's quaternion to its set point (error taken on SO(3))."""
    model = mbjax.load_bundled("double_pendulum")
    kp, kd = 16.0, 8.0  # critically damped: e(t) = (e0 + (e0' + 4 e0) t) exp(-4 t)
    q_ref = jnp.array([0.3, -0.5])
    ctc = ComputedTorque(model, kp, kd, Setpoint(q_ref, jnp.zeros(2)))
    q0, qd0 = jnp.array([1.0, 0.5]), jnp.array([0.5, -1.0])
    ts = jnp.linspace(0.0, 2.0, 9)
    tr = simulate(model, q0, qd0, 0.0, 2.0, tau=ctc, rtol=1e-12, atol=1e-12, saveat=ts)
    e0, de0 = q_ref - q0, -qd0
    t = np.asarray(ts)[:, None]
    e = (e0 + (de0 + 4.0 * e0) * t) * np.exp(-4.0 * t)
    assert_close(q_ref - tr.q, e, 1e-9, scale=1.0, what="tracking error")

    b = mbjax.ModelBuilder("ball", gravity=(0, 0, 0))
    b.add_body("ball", joint="spherical", mass=1.0, com=(0, 0, -0.2), inertia=np.diag([0.02, 0.03, 0.01]))
    ball = b.build()
    target = jnp.array([np.cos(0.6), np.sin(0.6) * 0.6, np.sin(0.6) * 0.8, 0.0])
    pd = PD(ball, 4.0, 3.0, Setpoint(target, jnp.zeros(3)))
    tr = simulate(ball, mbjax.neutral(ball), jnp.zeros(3), 0.0, 20.0, tau=pd, saveat=jnp.array([20.0]))
    assert np.abs(np.asarray(mbjax.difference(ball, tr.q[-1], target))).max() < 1e-6


def test_joint_limit_event_time():
    """A straight double pendulum spinning in zero gravity turns at a constant rate, so it reaches
    the limit at (upper - q0) / rate; the event locates that time to 1e-10. (A recorded residual:
    the elbow angle, which stays zero.)"""
    model = mbjax.load_bundled("double_pendulum")
    model = eqx.tree_at(lambda m: (m.gravity, m.upper), model, (jnp.zeros(3), jnp.array([1.0, 2.0])))
    rate = 0.7
    tr = simulate(model, jnp.zeros(2), jnp.array([rate, 0.0]), 0.0, 5.0, event=joint_limit_event(model),
                  rtol=1e-10, atol=1e-10, residual=lambda m, q, qd: q[1:])
    assert bool(tr.event)
    assert tr.residual.shape == (tr.ts.shape[0], 1)
    assert np.abs(np.asarray(tr.residual)[np.asarray(tr.valid)]).max() < 1e-12  # the arm stays straight
    t_hit = 1.0 / rate
    valid = np.asarray(tr.valid)
    assert abs(float(tr.ts[valid][-1]) - t_hit) < 1e-10
    assert abs(float(tr.q[valid][-1, 0]) - 1.0) < 1e-10
    saved = np.linspace(0.0, 5.0, 201)
    assert valid.sum() == (saved < t_hit).sum() + 1  # saved rows stop at the event, then the event state
    with pytest.raises(ValueError, match="finite"):
        joint_limit_event(eqx.tree_at(lambda m: m.upper, model, jnp.array([1.0, jnp.inf])))


@pytest.mark.parametrize("name", ["panda", "talos_reduced"])
def test_accuracy_against_tight_reference(name):
    """Posture control (PD on the actuated joints, gains scaled by the joint inertias; talos
    falls freely meanwhile): the solution at rtol = atol = 1e-6 is within 1e-5 of a 1e-12
    reference, measured as the step-size controller does, |y - y_ref| / (1 + |y_ref|).

    The URDFs' joint damping acts (talos: 1 N m s/rad on light joints, a stiff term); there
    Tsit5 at 1e-6 is 1.4e-5 from the reference and Dopri8 7.9e-7, so the check uses Dopri8."""
    model = mbjax.load_example_robot(name)
    floating = model.joint_types[0] == "free"
    q_ref = mbjax.neutral(model)
    inertia = jnp.diagonal(mbjax.crba(model, q_ref)).at[:6].multiply(0.0 if floating else 1.0)
    pd = PD(model, 25.0 * inertia, 7.0 * inertia, Setpoint(q_ref, jnp.zeros(model.nv)))
    q0 = mbjax.integrate(model, q_ref, 0.3 * jax.random.normal(jax.random.PRNGKey(2), (model.nv,)))
    qd0 = jax.random.normal(jax.random.PRNGKey(3), (model.nv,))
    ts = jnp.linspace(0.0, 1.0, 11)
    # without joint stops: the random start puts panda's fingers past their limits, and the
    # check is of the solver's accuracy on the rigid-body dynamics
    runs = [simulate(model, q0, qd0, 0.0, 1.0, tau=pd, rtol=tol, atol=tol, saveat=ts, solver=diffrax.Dopri8(),
                     limits=False) for tol in (1e-6, 1e-12)]
    for x, x_ref in ((runs[0].q, runs[1].q), (runs[0].qd, runs[1].qd)):
        err = np.abs(np.asarray(x - x_ref)) / (1.0 + np.abs(np.asarray(x_ref)))
        assert err.max() <= 1e-5, err.max()


def test_gradients_match_finite_differences():
    """d(final state)/d(initial state, feed-forward knot torques, link mass) through a 2 s
    simulation of the double pendulum, with both adjoints, against Richardson-extrapolated
    central differences, to 1e-5 relative."""
    model = mbjax.load_bundled("double_pendulum")
    knots_t = jnp.linspace(0.0, 2.0, 5)
    knots = 0.2 * jax.random.normal(jax.random.PRNGKey(4), (5, 2))
    w = jax.random.normal(jax.random.PRNGKey(5), (4,))
    # the mass scale is not weakly typed (jnp.asarray(1.0) is), like its copies shifted along a
    # random direction: every evaluation runs the one checkpointed program, not a recompilation
    params = (jnp.array([0.3, -0.2]), jnp.array([0.2, -0.4]), knots, jnp.asarray(1.0, jnp.float64))

    def loss(params, adjoint):
        q0, qd0, u, scale = params
        m = eqx.tree_at(lambda m: m.mass, model, model.mass.at[1].multiply(scale))
        tr = simulate(m, q0, qd0, 0.0, 2.0, tau=FeedForward.from_knots(knots_t, u), adjoint=adjoint,
                      rtol=1e-12, atol=1e-12, saveat=diffrax.SaveAt(t1=True), limits=False)  # it passes +-pi
        return jnp.dot(w, jnp.concatenate([tr.q[-1], tr.qd[-1]]))

    adjoints = {
        "checkpoint": diffrax.RecursiveCheckpointAdjoint(),
        "backsolve": diffrax.BacksolveAdjoint(
            stepsize_controller=diffrax.PIDController(rtol=jnp.asarray(1e-12), atol=jnp.asarray(1e-12))),
    }
    value_and_grad = {k: jax.jit(jax.value_and_grad(lambda p, a=a: loss(p, a))) for k, a in adjoints.items()}
    directions = []
    for k, key in enumerate(jax.random.split(jax.random.PRNGKey(6), len(params))):  # one per argument group
        d = [jnp.zeros_like(p) for p in params]
        d[k] = jax.random.normal(key, jnp.shape(params[k]))
        directions.append(tuple(d))

    def fd(d, h):  # the values come from the checkpointed program: no third compilation
        shift = lambda s: jax.tree.map(lambda p, v: p + s * v, params, d)  # noqa: E731
        return (value_and_grad["checkpoint"](shift(h))[0] - value_and_grad["checkpoint"](shift(-h))[0]) / (2 * h)

    expected = np.array([richardson(fd(d, 1e-4), fd(d, 2e-4)) for d in directions])
    for name, vg in value_and_grad.items():
        g = vg(params)[1]
        got = np.array([sum(jnp.vdot(a, b) for a, b in zip(jax.tree.leaves(g), jax.tree.leaves(d)))
                        for d in directions])
        rel = np.abs(got - expected) / np.abs(expected)
        assert rel.max() <= 1e-5, (name, got, expected)


SHARDING_SCRIPT = textwrap.dedent("""
    import equinox as eqx, jax, jax.numpy as jnp
    jax.config.update("jax_enable_x64", True)
    import diffrax, mbjax
    from mbjax.simulation import PD, Setpoint, simulate_batch
    assert jax.device_count() == 4
    model = mbjax.load_bundled("double_pendulum")
    B = 8
    q0 = jax.random.uniform(jax.random.PRNGKey(0), (B, 2), minval=-1, maxval=1)
    qd0 = jnp.zeros((B, 2))
    models = jax.vmap(lambda s: eqx.tree_at(lambda m: m.mass, model, model.mass * s))(jnp.linspace(0.5, 1.5, B))
    gains = jax.vmap(lambda k: PD(model, k, 1.0, Setpoint(jnp.zeros(2), jnp.zeros(2))))(jnp.linspace(0, 5, B))
    kw = dict(batch_model=True, batch_tau=True, tau=gains, saveat=jnp.linspace(0, 1, 5),
              stepsize_controller=diffrax.PIDController(rtol=1e-10, atol=1e-10))
    plain = simulate_batch(models, q0, qd0, 0.0, 1.0, **kw)
    sharded = simulate_batch(models, q0, qd0, 0.0, 1.0, shard=True, **kw)
    assert len(sharded.q.sharding.device_set) == 4, sharded.q.sharding
    print("SHARDED-ERR", float(jnp.max(jnp.abs(plain.q - sharded.q))), float(jnp.max(jnp.abs(plain.qd - sharded.qd))))
    # the members differ: each has its own mass scale, gain and start
    print("SPREAD", float(jnp.min(jnp.abs(plain.q[1:, -1, 0] - plain.q[:-1, -1, 0]))))
""")


def test_sharded_batch_equals_unsharded():
    """vmap over initial states, model parameters and controller gains, sharded across 4 host
    devices (a subprocess with XLA_FLAGS=--xla_force_host_platform_device_count=4), equals the
    unsharded batch to 1e-12."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    env["XLA_FLAGS"] = "--xla_force_host_platform_device_count=4 --xla_backend_optimization_level=0"
    proc = subprocess.run([sys.executable, "-c", SHARDING_SCRIPT], capture_output=True, text=True, env=env,
                          timeout=600, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-4000:]
    errs = [float(x) for x in proc.stdout.split("SHARDED-ERR")[1].split()[:2]]
    assert max(errs) <= 1e-12, errs
    assert float(proc.stdout.split("SPREAD")[1].split()[0]) > 1e-6


def test_cli_simulate_and_plot(capsys, tmp_path):
    """``mbjax simulate`` conserves the double pendulum's energy at its default tolerance and
    plots the run (Trajectory.plot, mbjax.plotting)."""
    from mbjax import cli

    out = tmp_path / "run.png"
    argv = ["simulate", "double_pendulum", "--duration", "1", "--quiet"]
    assert cli.main(argv + (["--plot", str(out)] if HAS_MPL else [])) == 0
    text = capsys.readouterr().out
    assert float(text.split("largest relative drift")[1].split()[0]) < 1e-7
    if HAS_MPL:
        assert out.stat().st_size > 0


def test_bad_input_errors():
    model = mbjax.load_bundled("double_pendulum")
    with pytest.raises(ValueError, match=r"qd has shape \(3,\)"):
        simulate(model, jnp.zeros(2), jnp.zeros(3))
    with pytest.raises(TypeError, match="method must be"):
        simulate(model, jnp.zeros(2), jnp.zeros(2), method=3)


def test_joint_damping_and_springs_act():
    """A damped joint spring (no gravity) decays as the closed-form oscillator
    I q'' + d q' + k (q - q_ref) = 0 says."""
    inertia, d, k, q_ref = 0.5, 0.3, 2.0, 0.2
    b = mbjax.ModelBuilder("oscillator", gravity=(0.0, 0.0, 0.0))
    b.add_body("wheel", joint="revolute", axis=(0, 0, 1), mass=1.0, inertia=np.diag([0.3, 0.3, inertia]),
               damping=d, stiffness=k, spring_reference=q_ref)
    model = b.build()
    ts = jnp.linspace(0.0, 3.0, 7)
    traj = simulate(model, jnp.array([1.0]), jnp.zeros(1), 0.0, 3.0, rtol=1e-11, atol=1e-11, saveat=ts)
    zeta, w0 = d / (2 * np.sqrt(k * inertia)), np.sqrt(k / inertia)
    wd = w0 * np.sqrt(1 - zeta**2)
    t = np.asarray(ts)
    x0 = 1.0 - q_ref
    exact = q_ref + x0 * np.exp(-zeta * w0 * t) * (np.cos(wd * t) + zeta * w0 / wd * np.sin(wd * t))
    np.testing.assert_allclose(np.asarray(traj.q[:, 0]), exact, rtol=0, atol=1e-8)


@pytest.mark.parametrize("solver", [diffrax.Heun(), diffrax.Midpoint(), diffrax.Ralston(), diffrax.Bosh3(),
                                    diffrax.Tsit5(), diffrax.Dopri5(), diffrax.Dopri8()], ids=lambda s: type(s).__name__)
def test_explicit_runge_kutta_step_matches_diffrax(solver):
    """``runge_kutta.explicit_step`` (the trajectory optimiser's fixed steps) against diffrax's own
    step of the same tableau, from a fresh start: the state after the step and its forward-mode
    derivative along the state and the vector field's parameter agree to rounding (first same as
    last methods skip their last stage, whose weight is zero)."""
    from mbjax.simulation.runge_kutta import explicit_step

    def f(t, y, k):
        x, v = y
        return v, -k * jnp.sin(x) + 0.3 * t * v - 0.1 * v * jnp.abs(v)

    def diffrax_step(y, k):  # its stages in a plain loop: forward-mode differentiable
        term, lax = diffrax.ODETerm(f), eqx.tree_at(lambda s: s.scan_kind, solver, "lax", is_leaf=lambda x: x is None)
        state = lax.init(term, 0.2, 0.25, y, k)
        return lax.step(term, 0.2, 0.25, y, k, state, made_jump=False)[0]

    y = (jnp.array([0.3, -1.2, 2.0]), jnp.array([0.5, 0.0, -1.5]))
    dy = (jnp.array([1.0, 0.2, -0.3]), jnp.array([0.0, 0.7, 0.1]))
    ours = jax.jvp(lambda y, k: explicit_step(solver.tableau, f, 0.2, 0.05, y, k), (y, 9.81), (dy, 0.5))
    theirs = jax.jvp(diffrax_step, (y, 9.81), (dy, 0.5))
    for a, b in zip(jax.tree_util.tree_leaves(ours), jax.tree_util.tree_leaves(theirs)):
        assert_close(a, b, rtol=0, atol=1e-14)
    moved = ours[0][0] - y[0]  # the step is not trivial
    assert float(jnp.min(jnp.abs(moved))) > 1e-3
