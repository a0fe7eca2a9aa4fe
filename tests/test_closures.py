"""Closed kinematic chains: loop-closure kinematics, the five constrained-dynamics solvers,
Baumgarte stabilisation, assembly, redundant and singular constraints, gradients.

Independent references: finite differences for Phi_q and gamma, the frame Jacobians of
``mbjax.kinematics`` for the loop wrenches, the dense KKT solve for the other solvers, and a
one-degree-of-freedom Lagrange derivation of the four-bar in SymPy integrated with SciPy.
Compilation dominates the time, so each test compiles one program that checks many cases.
"""

from __future__ import annotations

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mbjax
from mbjax import constraints as C
from mbjax.configuration import integrate_from
from mbjax.constraints.closed_chain import constrained_dynamics_from
from mbjax.constraints.closure_kinematics import jacobian_from, loop_kinematics_from, residual_from
from mbjax.constraints.solvers import solve
from mbjax.dynamics.crba import mass_matrix_from
from mbjax.dynamics.rnea import rnea_from
from mbjax.kinematics import frame_jacobian_from, tree_kinematics
from random_models import assert_close, random_rotation, random_unit, richardson

# ------------------------------------------------------------------ a spatial mechanism
def spatial_mechanism(seed=0):
    """Two chains using every tree joint type (nq != nv) and two free bodies, closed by one cut
    joint of each type: 27 independent rows on 31 velocity coordinates."""
    rng = np.random.default_rng(seed)
    b = mbjax.ModelBuilder("spatial_loops")

    def body(name, parent, joint, **kw):
        m = rng.uniform(0.5, 2.0)
        b.add_body(name, parent=parent, joint=joint, rotation=random_rotation(rng),
                   translation=rng.uniform(-0.4, 0.4, 3), mass=m, com=rng.uniform(-0.2, 0.2, 3),
                   inertia=np.diag(rng.uniform(0.05, 0.1, 3)) * m, **kw)

    body("a0", None, "free")
    body("a1", "a0", "spherical")
    body("a2", "a1", "universal", axis=(1, 0, 0), axis2=(0, 1, 0))
    body("a3", "a2", "revolute", axis=random_unit(rng))
    body("c0", None, "planar")
    body("c1", "c0", "cylindrical", axis=random_unit(rng))
    body("c2", "c1", "prismatic", axis=random_unit(rng))
    body("c3", "c2", "continuous", axis=random_unit(rng))
    body("d1", None, "free")
    body("d2", None, "free")
    model = b.build()
    lb = C.LoopClosureBuilder(model)
    pairs = dict(weld=("a3", "d1"), prismatic=("c3", "d2"), revolute=("a3", None), universal=(None, "c3"),
                 spherical=("a2", "c2"), cylindrical=("d2", "a1"))
    for kind, (frame_a, frame_b) in pairs.items():
        axis = random_unit(rng)
        axis2 = np.cross(axis, random_unit(rng))
        lb.add_loop(kind, kind, frame_a, frame_b, rotation_a=random_rotation(rng),
                    translation_a=rng.uniform(-0.3, 0.3, 3), rotation_b=random_rotation(rng),
                    translation_b=rng.uniform(-0.3, 0.3, 3), axis=axis, axis2=axis2 / np.linalg.norm(axis2))
    return model, lb.build()


def random_states(model, n, seed):
    rng = np.random.default_rng(seed)
    qs = jax.vmap(lambda k: mbjax.random_configuration(model, k))(jax.random.split(jax.random.PRNGKey(seed), n))
    return qs, rng.normal(size=(n, model.nv)), rng.normal(size=(n, model.nv))


def test_loop_kinematics_and_solvers_on_every_joint_type():
    """Phi_q and gamma match finite differences, the loop wrenches reproduce Phi_q^T lam
    through the bodies' frame Jacobians, and the five solvers agree to 1e-9 (qdd and lam)."""
    model, cl = spatial_mechanism()
    assert cl.nc == 27 and model.nv == 31 and model.nq != model.nv
    qs, qds, taus = random_states(model, 3, seed=4)
    h = 1e-3
    steps = jnp.asarray([h, -h, 2 * h, -2 * h])

    def check(q, qd, tau):  # unchecked internals: the public functions' runtime checks are callbacks
        tk = tree_kinematics(model, q)
        lk = loop_kinematics_from(model, cl, tk, q, qd)
        phi_at = lambda v: residual_from(model, cl, tree_kinematics(model, integrate_from(model, q, v)))  # noqa: E731
        # Phi(q (+) s e_k) for every coordinate k and step s; Phi(q (+) s qd)
        cols = jax.vmap(lambda s: jax.vmap(lambda e: phi_at(s * e))(jnp.eye(model.nv)))(steps)
        line = jax.vmap(lambda s: phi_at(s * qd))(steps)
        ref = constrained_dynamics_from(model, cl, q, qd, tau, None, C.ClosureSolver())
        M, f = mass_matrix_from(model, tk), tau - rnea_from(model, tk, q, qd, jnp.zeros_like(qd))
        # damping 1e-15: the damped solve is within ~damping cond(A M^-1 A^T) of the exact one
        results = {m: solve(m, M, f, lk.jacobian, lk.gamma, 1e-10, 1e-15) for m in C.METHODS}
        # wrench identity: Phi_q^T lam = sum_i (J_b - J_a)^T f_i, world-frame wrenches at the origin
        Ra, pa, Rb, pb = C.closure_kinematics.joint_frame_poses(model, cl, tk)
        f_world = mbjax.spatial.transform_force(Rb, pb, ref.wrench)
        frames = jnp.asarray([model.frame_index(n) for n in model.body_names])
        J = jax.vmap(lambda f: frame_jacobian_from(model, tk, f, "world"))(frames)
        J = jnp.concatenate([J, jnp.zeros((1, 6, model.nv))])  # row -1: the world
        a, b = (np.asarray([pair[k] for pair in cl.bodies]) for k in (0, 1))
        gen_force = jnp.einsum("lkv,lk->v", J[b] - J[a], f_world)
        tau_rnea = rnea_from(model, tk, q, qd, ref.qdd)
        return lk, cols, line, ref, results, tau_rnea, gen_force

    lk, cols, line, ref, results, tau_rnea, gen_force = jax.jit(jax.vmap(check))(qs, qds, taus)
    d1 = lambda x: (x[:, 0] - x[:, 1]) / (2 * h)  # noqa: E731
    d2 = lambda x: (x[:, 2] - x[:, 3]) / (4 * h)  # noqa: E731
    jac_fd = richardson(d1(cols), d2(cols))  # (n, nv, nc)
    assert_close(lk.jacobian, jnp.swapaxes(jac_fd, 1, 2), 1e-8, what="Phi_q vs finite differences")
    dd1 = (line[:, 0] + line[:, 1] - 2 * lk.phi) / h**2
    dd2 = (line[:, 2] + line[:, 3] - 2 * lk.phi) / (2 * h) ** 2
    assert_close(-lk.gamma, richardson(dd1, dd2), 1e-6, what="gamma vs second differences")
    assert_close(lk.phi_dot, jnp.einsum("ncv,nv->nc", lk.jacobian, qds), 1e-12, what="Phi_dot")
    # away from singularities: Phi_q well conditioned (the random loops are open, which is fine)
    assert min(np.linalg.svd(np.asarray(a), compute_uv=False)[-1] / np.linalg.norm(a, 2) for a in lk.jacobian) > 1e-3
    for m in C.METHODS:
        assert_close(results[m][0], ref.qdd, 1e-9, what=f"qdd {m} vs constrained_forward_dynamics")
        assert_close(results[m][1], ref.multipliers, 1e-9, what=f"multipliers {m} vs constrained_forward_dynamics")
    A, lam = lk.jacobian, ref.multipliers
    assert_close(gen_force, jnp.einsum("ncv,nc->nv", A, lam), 1e-10, what="loop wrenches")
    # the equations of motion: M qdd + h = tau + Phi_q^T lam (from rnea) and Phi_q qdd = gamma
    for k in range(len(qs)):
        assert_close(tau_rnea[k], taus[k] + A[k].T @ lam[k], 1e-10, what="dynamics (rnea)")
        assert_close(A[k] @ ref.qdd[k], lk.gamma[k], 1e-10, what="acceleration constraint")


def test_assembly_and_velocity_projection():
    """Regularised Gauss-Newton closes all 27 loop rows from random configurations (far
    guesses: a third seed stalls in a local minimum of |Phi|^2, as any local method can), the
    quaternions stay unit, and the velocity projection lands in ker Phi_q, idempotently."""
    model, cl = spatial_mechanism(seed=3)
    qs, qds, _ = random_states(model, 3, seed=4)
    qs, qds = qs[:2], qds[:2]  # random configurations, |Phi| ~ 5: 39 and 64 steps

    def run(q, qd):
        q1 = C.assemble(model, cl, q)
        qd1 = C.project_velocity(model, cl, q1, qd)
        tk = tree_kinematics(model, q1)
        return q1, qd1, residual_from(model, cl, tk), jacobian_from(model, cl, tk), C.project_velocity(model, cl, q1, qd1)

    q1, qd1, phi, A, qd2 = jax.jit(jax.vmap(run))(qs, qds)
    assert np.max(np.abs(phi)) <= 1e-12
    assert_close(jnp.einsum("ncv,nv->nc", A, qd1), np.zeros(phi.shape), 0.0, atol=1e-12, what="A qd")
    assert_close(qd2, qd1, 1e-13, what="projection is idempotent")
    # the correction qd - qd1 lies in the row space of A (orthogonal projection)
    corr = qds - qd1
    coef = jnp.linalg.lstsq(jnp.swapaxes(A[0], 0, 1), corr[0])[0]
    assert_close(A[0].T @ coef, corr[0], 1e-10, what="correction in range(A^T)")
    norms = [np.linalg.norm(q1[k, s:s + 4]) for k in range(2) for s in (3, 7)]  # a0 free, a1 spherical
    assert np.max(np.abs(np.asarray(norms) - 1.0)) < 1e-12


# ------------------------------------------------------------------------ the four-bar
LENGTHS = dict(ground=1.0, crank=0.4, coupler=1.0, rocker=0.8)
MASSES = (1.0, 2.0, 1.5)
GUESS = jnp.array([1.0, -0.6, 1.8])


def four_bar_lagrange(q0, ts):
    """Crank, coupler and rocker angles by Lagrange's equations for the crank angle theta:
    the loop equations give d(phi2, phi3)/d theta, SymPy the generalized mass m(theta) and
    potential V(theta), and ``m thdd + m'(theta) thd^2 / 2 + V'(theta) = 0`` is integrated
    by SciPy (DOP853, tolerance 1e-13), from rest."""
    sp = pytest.importorskip("sympy", reason="SymPy (in the test extra) derives the reference")
    from scipy.integrate import solve_ivp

    th, p2, p3 = sp.symbols("theta phi2 phi3")
    l0, l1, l2, l3 = (sp.nsimplify(LENGTHS[k]) for k in ("ground", "crank", "coupler", "rocker"))
    g = sp.Rational(981, 100)

    def e(a):
        return sp.Matrix([sp.cos(a), sp.sin(a)])

    A, D = l1 * e(th), sp.Matrix([l0, 0])
    loop = A + l2 * e(p2) - D - l3 * e(p3)
    k = -loop.jacobian([p2, p3]).LUsolve(loop.diff(th))  # d(phi2, phi3)/d theta
    coords, rates = (th, p2, p3), (1, k[0], k[1])

    def total(f):  # d/d theta along the closed loop
        return sum(f.diff(c) * r for c, r in zip(coords, rates))

    coms = (A / 2, A + l2 / 2 * e(p2), D + l3 / 2 * e(p3))
    mass, V = 0, 0
    for m, c, w, l in zip(MASSES, coms, rates, (l1, l2, l3)):
        m = sp.nsimplify(m)
        v = c.applyfunc(total)
        mass += m * v.dot(v) + m * l**2 / 12 * w**2
        V += m * g * c[1]
    f = sp.lambdify(coords, [mass, total(mass), total(V), k[0], k[1]], "math")

    def rhs(t, y):
        m, dm, dV, k2, k3 = f(*y[:3])
        return [y[3], k2 * y[3], k3 * y[3], -(0.5 * dm * y[3] ** 2 + dV) / m]

    y0 = [float(q0[0]), float(q0[0] + q0[1]), float(q0[2]), 0.0]
    sol = solve_ivp(rhs, (0.0, float(ts[-1])), y0, method="DOP853", rtol=1e-13, atol=1e-13, t_eval=np.asarray(ts))
    return sol.y[:3].T  # absolute angles (theta, phi2, phi3)


@eqx.filter_jit
def simulate(model, closures, q0, qd0, t1, alpha, beta, tol):
    """Dopri8 with tolerance ``tol`` to ``t1``, saving 61 states; Baumgarte (alpha, beta)."""
    field = C.constrained_vector_field(model, closures, alpha=alpha, beta=beta)
    ts = t1 * jnp.linspace(0.0, 1.0, 61)
    sol = diffrax.diffeqsolve(diffrax.ODETerm(field), diffrax.Dopri8(), 0.0, t1, 1e-3, (q0, qd0),
                              saveat=diffrax.SaveAt(ts=ts), max_steps=20000,
                              stepsize_controller=diffrax.PIDController(rtol=tol, atol=tol))
    residual = jax.vmap(lambda q: C.loop_residual(model, closures, q))(sol.ys[0])
    return ts, sol.ys, residual


def test_four_bar_matches_lagrange_and_stays_closed_with_baumgarte():
    model, cl = C.four_bar(**LENGTHS, masses=MASSES)
    q0 = C.assemble(model, cl, GUESS)
    qd0 = jnp.zeros(3)
    f64 = lambda x: jnp.asarray(x, jnp.float64)  # noqa: E731
    ts, (q, _), res = simulate(model, cl, q0, qd0, f64(5.0), f64(0.0), f64(0.0), f64(1e-12))
    ref = four_bar_lagrange(q0, ts)
    ours = np.stack([q[:, 0], q[:, 0] + q[:, 1], q[:, 2]], 1)
    assert np.ptp(ref[:, 0]) > 3.0  # a large swing
    assert np.max(np.abs(ours - ref)) <= 1e-7, np.max(np.abs(ours - ref))
    # 60 s with critically damped Baumgarte stabilisation (time constant 0.1 s)
    alpha, beta = C.critical(0.1)
    _, _, res = simulate(model, cl, q0, qd0, f64(60.0), f64(alpha), f64(beta), f64(1e-10))
    assert np.max(np.abs(res)) <= 1e-8, np.max(np.abs(res))


def test_redundant_closure_svd_and_damped_match_the_independent_constraints():
    """The five-row revolute closure of the planar four-bar has rank 2: SVD and damped give
    the motion of the two-row model; KKT, Schur and null space report the rank problem."""
    model, planar = C.four_bar(**LENGTHS, masses=MASSES)
    _, full = C.four_bar(**LENGTHS, masses=MASSES, planar_closure=False)
    q = C.assemble(model, planar, GUESS)
    qd = C.project_velocity(model, planar, q, jnp.array([2.0, 0.0, 0.0]))
    tau = jnp.array([0.5, -0.2, 0.1])
    assert np.linalg.matrix_rank(np.asarray(C.loop_jacobian(model, full, q)), tol=1e-10) == 2
    ref = C.constrained_forward_dynamics(model, planar, q, qd, tau, method="kkt")
    for m in ("svd", "damped"):
        r = C.constrained_forward_dynamics(model, full, q, qd, tau, method=m)
        assert_close(r.qdd, ref.qdd, 1e-9, what=f"redundant {m}")
        # the same pin force: planar rows = x, y forces of the full closure's wrench
        assert_close(r.wrench[:, :3], ref.wrench[:, :3], 1e-8, what=f"pin force {m}")
    for m in ("kkt", "schur", "nullspace"):
        with pytest.raises(Exception, match="method='svd' or method='damped'"):
            C.constrained_forward_dynamics(model, full, q, qd, tau, method=m).qdd.block_until_ready()


def test_change_point_singularity():
    """A parallelogram four-bar at its change point (all links collinear): Phi_q loses rank,
    KKT reports it, SVD and damped give finite accelerations that satisfy the constraints."""
    model, cl = C.four_bar(ground=1.0, crank=0.5, coupler=1.0, rocker=0.5)
    q = jnp.zeros(3)  # crank, coupler, rocker along x
    qd = jnp.array([1.0, -1.0, 1.0])  # parallelogram motion: the coupler translates

    def run(q, qd):  # one program for all checks
        tk = tree_kinematics(model, q)
        lk = loop_kinematics_from(model, cl, tk, q, qd)
        M, f = mass_matrix_from(model, tk), -rnea_from(model, tk, q, qd, jnp.zeros_like(qd))
        return lk, [solve(m, M, f, lk.jacobian, lk.gamma, 1e-10, 1e-12) for m in ("svd", "damped")]

    lk, results = jax.jit(run)(q, qd)
    assert np.max(np.abs(lk.phi)) < 1e-15 and np.max(np.abs(lk.phi_dot)) < 1e-15
    s = np.linalg.svd(np.asarray(lk.jacobian), compute_uv=False)
    assert s[-1] < 1e-12 * s[0]
    with pytest.raises(Exception, match="rank-deficient"):
        C.constrained_forward_dynamics(model, cl, q, qd, jnp.zeros(3), method="kkt").qdd.block_until_ready()
    for m, (qdd, lam) in zip(("svd", "damped"), results):
        assert np.all(np.isfinite(qdd)) and np.all(np.isfinite(lam))
        assert_close(lk.jacobian @ qdd, lk.gamma, 1e-9, atol=1e-9, what=f"constraint at the change point ({m})")


def test_trajectory_gradient_matches_finite_differences():
    """Reverse-mode d/dp of a loss on a 0.5 s slider-crank trajectory (50 semi-implicit Euler
    steps of the constrained vector field, Baumgarte) with respect to the link masses, the
    pin placement and the initial crank speed, against central differences."""
    model, cl = C.slider_crank()
    q0 = C.assemble(model, cl, jnp.array([0.5, -0.7, 1.0]))
    alpha, beta = C.critical(0.05)
    params = (model.mass, cl.translation_a, jnp.asarray(3.0, jnp.float64))  # not weakly typed

    def loss(params):
        mass, pin, speed = params
        m = eqx.tree_at(lambda m: m.mass, model, mass)
        c = eqx.tree_at(lambda c: c.translation_a, cl, pin)
        field = C.constrained_vector_field(m, c, alpha=alpha, beta=beta)

        def step(state, _):
            q, qd = state
            qd = qd + 0.01 * field(0.0, (q, qd), None)[1]
            return (mbjax.integrate(m, q, 0.01 * qd), qd), None

        qd0 = C.project_velocity(m, c, q0, jnp.array([speed, 0.0, 0.0]))
        (q, qd), _ = jax.lax.scan(step, (q0, qd0), None, length=50)
        return jnp.sum(q**2) + 0.1 * jnp.sum(qd**2)

    value_and_grad = jax.jit(jax.value_and_grad(loss))  # one compilation for both
    grad = value_and_grad(params)[1]
    rng = np.random.default_rng(0)
    direction = jax.tree_util.tree_map(lambda x: jnp.asarray(rng.normal(size=np.shape(x))), params)
    h = 1e-4
    f = [value_and_grad(jax.tree_util.tree_map(lambda p, d: p + s * d, params, direction))[0]
         for s in (h, -h, 2 * h, -2 * h)]
    fd = richardson((f[0] - f[1]) / (2 * h), (f[2] - f[3]) / (4 * h))
    ad = sum(jnp.vdot(g, d) for g, d in zip(jax.tree_util.tree_leaves(grad), jax.tree_util.tree_leaves(direction)))
    assert_close(ad, fd, 1e-7, what="directional derivative")
    assert np.all(np.isfinite(np.concatenate([np.ravel(g) for g in jax.tree_util.tree_leaves(grad)])))


# ----------------------------------------------------------------------- bad input
def test_builder_and_input_errors():
    model, cl = C.four_bar()
    lb = C.LoopClosureBuilder(model)
    with pytest.raises(ValueError, match="unknown loop joint type"):
        lb.add_loop("x", "hinge", "crank", "rocker")
    with pytest.raises(ValueError, match="directions"):
        lb.add_loop("x", "spherical", "crank", "rocker", directions=("rx",))
    with pytest.raises(ValueError, match="to itself"):
        lb.add_loop("x", "weld", "crank", "crank")
    with pytest.raises(ValueError, match="perpendicular"):
        lb.add_loop("x", "universal", "crank", "rocker", axis=(1, 0, 0), axis2=(1, 1, 0))
    with pytest.raises(KeyError, match="coupler"):
        lb.add_loop("x", "weld", "couplr", None)
    with pytest.raises(ValueError, match="no loop closures"):
        lb.build()
    with pytest.raises(ValueError, match="unknown constrained-dynamics method"):
        C.constrained_forward_dynamics(model, cl, jnp.zeros(3), jnp.zeros(3), jnp.zeros(3), method="lu")
    slider, slider_cl = C.slider_crank()
    weld = C.LoopClosureBuilder(slider).add_loop("w", "weld", "rod", None).build()
    with pytest.raises(ValueError, match="necessarily redundant"):
        C.constrained_forward_dynamics(slider, weld, jnp.zeros(3), jnp.zeros(3), jnp.zeros(3))
    wide = C.LoopClosureBuilder(slider).add_loop("w", "weld", "slider", None).build()
    small = mbjax.ModelBuilder("one").add_body("b", joint="revolute", mass=1.0, inertia=np.eye(3)).build()
    with pytest.raises(ValueError, match="LoopClosureBuilder"):
        C.constrained_forward_dynamics(small, wide, jnp.zeros(1), jnp.zeros(1), jnp.zeros(1))
