"""Kane's method with building-block joints (Sayers 1991), checked against
independent computations:

- the satellite's kinematical equations against Eqs. (24) and (29), written out here from the
  paper; Tables 3 and 4 from their printed formulas; Table 2's categories and composite bodies;
- accelerations against mbjax's aba (the satellite and a mixed system through ``to_model``,
  random trees through ``forward_dynamics(method="kane")``);
- lumping fixed children (Eqs. 15-18) and two rotations as one joint versus two joints with a
  massless body between: the same motion;
- M (Eq. 40) and f (Eq. 42) against sympy.physics.mechanics.KanesMethod with the same speeds;
- momentum conservation and the power balance along the motion;
- derivatives with respect to the satellite's inertia parameters against finite differences.
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given

import mbjax
from mbjax.kane import (KaneBuilder, coordinate_rates, composite_bodies, kane_dynamics, kane_kinetic_energy,
                        kane_momentum, kinematical_equations, satellite, state_to_model, to_model)
from mbjax.kane.joints import BuildingBlockJoint, joint_motion, nominal_orientation
from mbjax.kane.sayers_satellite import PARAMETERS, p1
from random_models import (TreeSpec, assert_close, build_batch, hypothesis_settings, richardson,
                           tree_specs)

RTOL = 1e-9
rng = np.random.default_rng(20240602)


def _states(n, nq, scale=1.0):
    return rng.uniform(-scale, scale, (n, nq)), rng.uniform(-1.0, 1.0, (n, nq))


# ----------------------------------------------------------------- Tables 3, 4 and 2
def test_nominal_orientation_table_3():
    d_rot, d_ref = rng.normal(size=3), rng.normal(size=3)
    a = d_rot / np.linalg.norm(d_rot)
    c = np.cross(a, d_ref) / np.linalg.norm(np.cross(a, d_ref))
    # Table 3: i1 = 1: b1 = d_rot, b3 = d_rot x d_ref, b2 = b3 x b1; i1 = 2: b2 = d_rot,
    # b1 = d_rot x d_ref, b3 = b1 x b2; i1 = 3: b3 = d_rot, b2 = d_rot x d_ref, b1 = b2 x b3
    expected = {1: (a, np.cross(c, a), c), 2: (c, a, np.cross(c, a)), 3: (np.cross(c, a), c, a)}
    for i1, cols in expected.items():
        np.testing.assert_allclose(nominal_orientation(i1, d_rot, d_ref), np.stack(cols, 1), atol=1e-15)
        R0 = nominal_orientation(i1, d_rot, d_ref)
        np.testing.assert_allclose(R0.T @ R0, np.eye(3), atol=1e-15)
        assert np.linalg.det(R0) > 0


def test_second_rotation_axis_table_4():
    """The second rotation's axis, expressed in B, for the six (i2, i3) pairs of Table 4."""
    q3 = 0.7
    C3, S3 = np.cos(q3), np.sin(q3)
    table = {(1, 2): (0, C3, -S3), (1, 3): (0, S3, C3), (2, 1): (C3, 0, S3), (2, 3): (-S3, 0, C3),
             (3, 1): (C3, -S3, 0), (3, 2): (S3, C3, 0)}  # (i3, i2): components along b1, b2, b3
    for (i3, i2), expected in table.items():
        i1 = ({1, 2, 3} - {i2, i3}).pop() if i2 != i3 else i2 % 3 + 1
        joint = BuildingBlockJoint(0, (i1, i2, i3))
        R, _, axes = joint_motion(joint, jnp.zeros(3), jnp.zeros((3, 3)), jnp.eye(3), jnp.array([0.3, -0.4, q3]))
        np.testing.assert_allclose(np.asarray(R).T @ np.asarray(axes[1]), expected, atol=1e-15)


def test_satellite_table_2():
    """Categories, composite masses, mass centres and the bus's composite inertia of Table 2."""
    P = PARAMETERS
    sat = satellite()
    assert sat.categories == (("nonrecursive", "nonrecursive"), ("fixed", "rotor"), ("recursive", "recursive"),
                              ("fixed", "rotor"), ("recursive", "recursive"))
    c = composite_bodies(sat)
    np.testing.assert_allclose(c.mass, [P["M_B"] + P["M_C"], P["M_C"], P["M_D"], 0.0, P["M_F"]], rtol=1e-15)
    np.testing.assert_allclose(c.mass_prime, [P["M_B"] + P["M_C"], 0.0, P["M_D"], 0.0, P["M_F"]], rtol=1e-15)
    P1 = p1()
    np.testing.assert_allclose(c.com, [[0, 0, -P1], [0, 0, -P["L2"]], [0, -P["L5"], -P["L6"]], [0, 0, 0],
                                       [0, -P["L8"], 0]], atol=1e-15)
    IB = np.array(P["I_B"])
    shift = P["M_B"] * P1**2 + P["M_C"] * (P["L2"] - P1) ** 2
    np.testing.assert_allclose(c.inertia[0], IB + np.diag([shift, shift, 0.0]), rtol=1e-14)


def test_satellite_kinematical_equations_24_29():
    """q' from the implementation equals Eqs. (24) and (29) as printed, and solves S q' = v."""
    sat = satellite()
    P1 = p1()
    qs, us = _states(64, 10, scale=1.2)

    def paper(q, u):  # Eqs. (24) and (29), transcribed
        C, S = jnp.cos(q), jnp.sin(q)
        C4, C5, C6, S4, S5, S6 = C[3], C[4], C[5], S[3], S[4], S[5]
        u1, u2, u3, u4, u5, u6 = u[:6]
        Z1, Z2 = P1 * u5 + u1, P1 * u4 - u2
        q1 = C5 * (Z1 * C6 + Z2 * S6) + u3 * S5
        q2 = -(Z2 * (C6 * C4 - S6 * S4 * S5) - Z1 * (C6 * S5 * S4 + C4 * S6) + u3 * C5 * S4)
        q3 = u3 * C5 * C4 + Z1 * (-C6 * C4 * S5 + S6 * S4) - Z2 * (C4 * S5 * S6 + C6 * S4)
        q4 = (u4 * C6 - u5 * S6) / C5
        q5 = u5 * C6 + u4 * S6
        q6 = u6 - q4 * S5
        return jnp.concatenate([jnp.stack([q1, q2, q3, q4, q5, q6]), u[6:]])

    def both(q, u):
        S, v = kinematical_equations(sat, q, u)
        qd = paper(q, u)
        return coordinate_rates(sat, q, u), qd, S @ qd - v

    mine, expected, residual = jax.jit(jax.vmap(both))(qs, us)
    scale = np.abs(expected).max(axis=1, keepdims=True)
    assert np.abs(mine - expected).max() / scale.max() < 1e-14, np.abs(mine - expected).max()
    assert np.all(np.abs(mine - expected) <= 4e-15 * scale)
    assert np.abs(residual).max() < 1e-13


# ---------------------------------------------------------- against aba via to_model
def _mixed_system(split_universal=False, gravity=(0.4, -1.1, -9.81)):
    """Every building-block joint form, with welded and rotor children that get lumped."""
    r = np.random.default_rng(7)

    def inertia(m):
        d = m * r.uniform(0.01, 0.05, 3)
        Q = np.linalg.qr(r.normal(size=(3, 3)))[0]
        return Q @ np.diag([d[1] + d[2], d[0] + d[2], d[0] + d[1]]) @ Q.T

    b = KaneBuilder(gravity=gravity)
    b.add_body("base", translations=np.eye(3), rotations=(3, 1, 3), d_rot=r.normal(size=3), d_ref=r.normal(size=3),
               mass=5.0, com=r.uniform(-0.1, 0.1, 3), inertia=inertia(5.0))
    b.add_body("welded", "base", joint_point=r.uniform(-0.3, 0.3, 3), d_rot=r.normal(size=3), d_ref=r.normal(size=3),
               mass=0.7, com=r.uniform(-0.1, 0.1, 3), inertia=inertia(0.7))
    b.add_body("rotor", "base", joint_point=r.uniform(-0.3, 0.3, 3), rotations=(2,), d_rot=r.normal(size=3),
               d_ref=r.normal(size=3), mass=0.9, com=(0.0, 0.05, 0.0), inertia=np.diag([0.02, 0.03, 0.02]))
    b.add_body("cap", "rotor", joint_point=(0.0, 0.1, 0.0), mass=0.2, com=(0.0, 0.02, 0.0),
               inertia=np.diag([0.001, 0.002, 0.003]))
    arm = dict(mass=1.3, com=r.uniform(-0.2, 0.2, 3), inertia=inertia(1.3))
    d_rot, d_ref, jp = r.normal(size=3), r.normal(size=3), r.uniform(-0.3, 0.3, 3)
    if split_universal:  # the paper's form: two joints with a massless body between
        b.add_body("E", "base", joint_point=jp, rotations=(1,), d_rot=d_rot, d_ref=d_ref)
        b.add_body("arm", "E", rotations=(2,), **arm)
    else:
        b.add_body("arm", "base", joint_point=jp, rotations=(1, 2), d_rot=d_rot, d_ref=d_ref, **arm)
    axis = r.normal(size=3)
    b.add_body("slider", "arm", joint_point=r.uniform(-0.3, 0.3, 3), translations=(axis,), rotations=(1,),
               d_rot=axis, d_ref=r.normal(size=3), mass=0.8, com=r.uniform(-0.1, 0.1, 3), inertia=inertia(0.8))
    b.add_body("ball", "slider", joint_point=r.uniform(-0.3, 0.3, 3), rotations=(2, 3, 1), d_rot=r.normal(size=3),
               d_ref=r.normal(size=3), mass=0.6, com=r.uniform(-0.1, 0.1, 3), inertia=inertia(0.6))
    b.add_body("tip", "ball", joint_point=r.uniform(-0.3, 0.3, 3), translations=(r.normal(size=3),), mass=0.3,
               com=r.uniform(-0.1, 0.1, 3), inertia=inertia(0.3))
    return b.build()


def _model_tau(system, forces):
    """The Model's joint forces for Kane forces applied to speeds u = q' only (in to_model's
    joint order: the bodies' order, welded bodies merged)."""
    parts = []
    for b, j in enumerate(system.joints):
        sl = system.q_slice(b)
        if j.nq == 0:
            continue
        if j.n_translations == 3:  # free joint: (force, torque) on the base
            parts.append(jnp.zeros(6))
        elif j.n_rotations == 3:  # spherical
            parts.append(jnp.zeros(3))
        else:
            parts.append(forces[sl])
    return jnp.concatenate(parts)


def _joint_forces(system, n):
    """Random forces on the speeds u = q' (joint torques and forces), zero on the others."""
    forces = rng.normal(size=(n, system.nq))
    for b, j in enumerate(system.joints):
        if j.n_translations == 3 or j.n_rotations == 3:
            forces[:, system.q_slice(b)] = 0.0
    return forces


def _compare(system, split=None, n=16):
    """One compiled program: Kane's u' lumped and body by body (and for ``split``, the same
    tree with a two-rotation joint split in two), Kane mapped to the Model's qdd against aba,
    and the rates of momentum and kinetic energy. Even states have zero gravity."""
    model = to_model(system)
    qs, us = _states(n, system.nq)
    forces = _joint_forces(system, n)
    gravity = np.where(np.arange(n)[:, None] % 2, np.asarray(system.gravity), 0.0)

    def one(q, u, forces, g):
        s = eqx.tree_at(lambda s: s.gravity, system, g)
        dyn = kane_dynamics(s, q, u, forces)
        out = dict(kane=dyn.u_dot, plain=kane_dynamics(s, q, u, forces, lump=False).u_dot)
        if split is not None:
            out["split"] = kane_dynamics(eqx.tree_at(lambda s: s.gravity, split, g), q, u, forces).u_dot
        (qm, qdm), (_, out["kane_qdd"]) = jax.jvp(lambda q, u: state_to_model(s, q, u), (q, u),
                                                  (dyn.q_dot, dyn.u_dot))
        out["aba_qdd"] = mbjax.aba(eqx.tree_at(lambda m: m.gravity, model, g), qm, qdm, _model_tau(s, forces))
        (out["momentum"], _), (out["momentum_rate"], out["energy_rate"]) = jax.jvp(
            lambda q, u: (kane_momentum(s, q, u), kane_kinetic_energy(s, q, u)), (q, u), (dyn.q_dot, dyn.u_dot))
        out["power"] = u @ forces
        out["power_scale"] = jnp.abs(u * (dyn.mass_matrix @ dyn.u_dot)).sum()  # size of the terms of dT/dt
        return out

    out = jax.jit(jax.vmap(one))(qs, us, forces, gravity)
    for k in range(n):
        assert_close(out["plain"][k], out["kane"][k], 1e-12, what="lumped vs body by body")
        if split is not None:
            assert_close(out["split"][k], out["kane"][k], 1e-12, what="two rotations vs two joints")
        assert_close(out["kane_qdd"][k], out["aba_qdd"][k], RTOL, what="kane vs aba")
        if k % 2 == 0:  # no gravity: momentum conserved, dT/dt = power of the joint forces
            assert np.abs(out["momentum_rate"][k]).max() <= 1e-12 * np.abs(out["momentum"][k]).max()
            assert_close(out["energy_rate"][k], out["power"][k], 1e-12, what="power balance",
                         scale=out["power_scale"][k])


@pytest.mark.usefixtures("runtime_checks_off")
def test_satellite_against_aba_lumping_conservation():
    """The satellite: Kane (composite bodies, the paper's speeds) against aba on the same tree;
    lumping changes nothing; momentum is conserved and dT/dt is the joint power."""
    system = eqx.tree_at(lambda s: s.gravity, satellite(), jnp.array([0.3, -0.5, -9.81]))
    assert system.tree.fixed == (False, True, False, True, False)
    _compare(system)


@pytest.mark.usefixtures("runtime_checks_off")
def test_mixed_system_against_aba_lumping_two_rotations():
    """Every building-block form (3-1-3 and 2-3-1 rotations, welded and rotor children, two
    rotations, translation + rotation, a translation below a 3-rotation joint), as above, and
    a two-rotation joint against the paper's two joints with a massless body between."""
    system = _mixed_system()
    assert [c[0] for c in system.categories] == ["nonrecursive", "fixed", "fixed", "fixed", "recursive",
                                                 "recursive", "recursive", "recursive"]
    _compare(system, split=_mixed_system(split_universal=True))


# -------------------------------------------------------------------- random trees
def _random_tree_check(spec, batch=6):
    models = build_batch(spec, batch, gravity=np.where(np.arange(batch)[:, None] % 2, [0.3, -2.0, -9.81], 0.0))
    r = np.random.default_rng(spec.seed % 2**31)
    keys = jax.random.split(jax.random.PRNGKey(spec.seed % 2**31), batch)
    nv, nb = models.armature.shape[1], models.mass.shape[1]
    qd, tau, f_ext = r.normal(size=(batch, nv)), r.normal(size=(batch, nv)), r.normal(size=(batch, nb, 6))

    def one(model, key, qd, tau, f_ext):
        q = mbjax.random_configuration(model, key)
        return (mbjax.forward_dynamics(model, q, qd, tau, f_ext, method="kane"),
                mbjax.forward_dynamics(model, q, qd, tau, f_ext, method="aba"))

    kane, aba = jax.jit(jax.vmap(one))(models, keys, qd, tau, f_ext)
    for k in range(batch):
        assert_close(kane[k], aba[k], RTOL, what=f"kane vs aba, model {k}")


ALL_JOINTS = TreeSpec(parents=(-1, 0, 1, 1, 3, 2, 0, 6, 7), joints=(
    "free", "revolute", "continuous", "prismatic", "planar", "spherical", "universal", "cylindrical", "free"),
    armature=(False,) + (True,) * 8, limited=(False,) * 9, frames=(), seed=11)


@pytest.mark.usefixtures("runtime_checks_off")
def test_random_trees_all_joint_types():
    """Every joint type, free and planar joints below moving parents, armature, f_ext, gravity."""
    _random_tree_check(ALL_JOINTS)


@pytest.mark.usefixtures("runtime_checks_off")
@hypothesis_settings(1)
@given(spec=tree_specs(max_bodies=5, max_joint_types=2))
def test_random_trees(spec):
    _random_tree_check(spec, batch=4)


# ------------------------------------------------------------------------- SymPy
def _sympy_kane(bodies, gravity):
    """M and f of KanesMethod for a tree of ``bodies`` (dicts: parent, joint "revolute" (with
    axis index i1) or "free" (root only: translations along N, 1-2-3 rotations, the paper's
    speeds with the composite mass centre ``ref``), joint_point, R0, mass, com, inertia),
    lambdified as functions of (q, u, forces)."""
    import sympy as sp
    from sympy.physics.mechanics import KanesMethod, Point, ReferenceFrame, RigidBody, dynamicsymbols, inertia

    n = sum(6 if b["joint"] == "free" else 1 for b in bodies)
    q, u = dynamicsymbols(f"q1:{n + 1}"), dynamicsymbols(f"u1:{n + 1}")
    tau = sp.symbols(f"tau1:{n + 1}")
    N, O = ReferenceFrame("N"), Point("O")
    O.set_vel(N, 0)

    def vec(frame, x):
        return sum((sp.Float(float(c)) * e for c, e in zip(x, (frame.x, frame.y, frame.z))), 0 * frame.x)

    frames, origins, kd, rigid, loads, k = [], [], [], [], [], 0
    for i, b in enumerate(bodies):
        A = N if b["parent"] < 0 else frames[b["parent"]]
        A0 = O if b["parent"] < 0 else origins[b["parent"]]
        B = ReferenceFrame(f"B{i}")
        if b["joint"] == "free":
            B.orient_body_fixed(N, (q[3], q[4], q[5]), "123")
            B.set_ang_vel(N, u[3] * B.x + u[4] * B.y + u[5] * B.z)
            B0 = O.locatenew(f"P{i}", q[0] * N.x + q[1] * N.y + q[2] * N.z)
            X = B0.locatenew(f"X{i}", vec(B, b["ref"]))
            X.set_vel(N, u[0] * B.x + u[1] * B.y + u[2] * B.z)
            B0.set_vel(N, X.vel(N) - B.ang_vel_in(N).cross(vec(B, b["ref"])))
            c5, c6, s5, s6 = sp.cos(q[4]), sp.cos(q[5]), sp.sin(q[4]), sp.sin(q[5])
            q4d = (u[3] * c6 - u[4] * s6) / c5  # Eq. (29)
            kd += [q[j].diff() - B0.vel(N).dot(e) for j, e in enumerate((N.x, N.y, N.z))]
            kd += [q[3].diff() - q4d, q[4].diff() - (u[4] * c6 + u[3] * s6), q[5].diff() - (u[5] - q4d * s5)]
            k = 6
        else:
            nominal = ReferenceFrame(f"R{i}")
            nominal.orient_explicit(A, sp.Matrix(np.asarray(b["R0"], dtype=float)))  # A.dcm(nominal) = R0
            axis = (nominal.x, nominal.y, nominal.z)[b["i1"] - 1]
            B.orient_axis(nominal, axis, q[k])
            B.set_ang_vel(A, u[k] * axis)
            B0 = A0.locatenew(f"P{i}", vec(A, b["joint_point"]))
            B0.v2pt_theory(A0, N, A)
            kd.append(q[k].diff() - u[k])
            loads += [(B, tau[k] * axis)] + ([(A, -tau[k] * axis)] if b["parent"] >= 0 else [])
            k += 1
        cm = B0.locatenew(f"C{i}", vec(B, b["com"]))
        cm.v2pt_theory(B0, N, B)
        I = np.asarray(b["inertia"], dtype=float)
        dyadic = inertia(B, *(sp.Float(x) for x in (I[0, 0], I[1, 1], I[2, 2], I[0, 1], I[1, 2], I[2, 0])))
        rigid.append(RigidBody(f"body{i}", cm, B, sp.Float(b["mass"]), (dyadic, cm)))
        loads.append((cm, vec(N, b["mass"] * np.asarray(gravity))))
        frames.append(B)
        origins.append(B0)
    km = KanesMethod(N, q_ind=q, u_ind=u, kd_eqs=kd)
    km.kanes_equations(rigid, loads)
    args = (list(q), list(u), list(tau))
    return sp.lambdify(args, km.mass_matrix, "numpy", cse=True), sp.lambdify(args, km.forcing, "numpy", cse=True)


def _chain(spec, gravity):
    """A KaneSystem of 1-rotation joints, and the matching body dicts for _sympy_kane."""
    b = KaneBuilder(gravity=gravity)
    bodies = []
    for i, (parent, i1, d_rot, d_ref, jp, mass, com, I) in enumerate(spec):
        b.add_body(f"b{i}", None if parent < 0 else f"b{parent}", joint_point=jp, rotations=(i1,), d_rot=d_rot,
                   d_ref=d_ref, mass=mass, com=com, inertia=I)
        bodies.append(dict(parent=parent, joint="revolute", i1=i1, R0=nominal_orientation(i1, d_rot, d_ref),
                           joint_point=jp, mass=mass, com=com, inertia=I))
    return b.build(), bodies


def _inertia(r, m):
    d = m * r.uniform(0.02, 0.1, 3)
    Q = np.linalg.qr(r.normal(size=(3, 3)))[0]
    return Q @ np.diag([d[1] + d[2], d[0] + d[2], d[0] + d[1]]) @ Q.T


def _sympy_cases():
    r = np.random.default_rng(3)
    g = (0.0, -9.81, 0.0)
    pendulum = _chain([(-1, 3, (0, 0, 1), (1, 0, 0), (0, 0, 0), 1.2, (0.4, 0.05, 0.0), _inertia(r, 1.2)),
                       (0, 3, (0, 0, 1), (1, 0, 0), (0.8, 0, 0), 0.9, (0.35, -0.02, 0.0), _inertia(r, 0.9))], g)
    eye = np.eye(3)  # nominal frames parallel to the parent's (keeps sympy's expressions small)
    chain = _chain([(i - 1, i1, eye[i1 - 1], eye[i1 % 3], r.uniform(-0.4, 0.4, 3), m,
                     r.uniform(-0.2, 0.2, 3), np.diag(np.diag(_inertia(r, m)))) for i, (i1, m) in
                    enumerate([(1, 1.5), (2, 1.1), (3, 0.7)])],
                   tuple(r.normal(size=3)))
    # a rotor on a free body: the rotor's mass centre is on its axis, so it is fixed and lumped
    mB, cB, IB, mC, jpC, IC = 20.0, np.array([0.05, -0.03, 0.02]), _inertia(r, 20.0), 2.0, np.array([0.1, 0.2, -0.3]), \
        np.diag([0.04, 0.04, 0.07])
    b = KaneBuilder(gravity=(0.0, 0.0, -9.81))
    b.add_body("bus", translations=np.eye(3), rotations=(1, 2, 3), mass=mB, com=cB, inertia=IB)
    b.add_body("rotor", "bus", joint_point=jpC, rotations=(3,), mass=mC, com=(0, 0, 0.1), inertia=IC)
    ref = (mB * cB + mC * (jpC + np.array([0, 0, 0.1]))) / (mB + mC)  # composite mass centre, by hand
    rotor = (b.build(), [dict(parent=-1, joint="free", ref=ref, mass=mB, com=cB, inertia=IB),
                         dict(parent=0, joint="revolute", i1=3, R0=np.eye(3), joint_point=jpC, mass=mC,
                              com=(0, 0, 0.1), inertia=IC)])
    return {"double_pendulum": (pendulum, g), "spatial_chain": (chain, None), "rotor_on_free_body": (rotor, None)}


@pytest.mark.parametrize("case", ["double_pendulum", "spatial_chain", "rotor_on_free_body"])
def test_against_sympy_kanes_method(case, runtime_checks_off):
    (system, bodies), _ = _sympy_cases()[case]
    if case == "rotor_on_free_body":
        assert system.categories[1] == ("fixed", "rotor")
    M_sym, f_sym = _sympy_kane(bodies, np.asarray(system.gravity))
    qs, us = _states(6, system.nq)
    forces = rng.normal(size=(6, system.nq))
    if case == "rotor_on_free_body":
        forces[:, :6] = 0.0  # sympy's loads: the rotor's motor torque (on the rotor, reacting on the bus)
    dyn = jax.jit(jax.vmap(lambda q, u, f: kane_dynamics(system, q, u, f)))(qs, us, forces)
    for k in range(len(qs)):
        args = (list(qs[k]), list(us[k]), list(forces[k]))
        assert_close(dyn.mass_matrix[k], np.asarray(M_sym(*args), dtype=float), 1e-12, what=f"{case}: M")
        assert_close(dyn.forces[k], np.asarray(f_sym(*args), dtype=float).ravel(), 1e-12, what=f"{case}: f")


# ---------------------------------------------------------------------- gradients
def test_gradients_wrt_satellite_inertia():
    """d u' / d(masses, mass centres, inertias): forward and reverse mode against central
    differences (Richardson, steps h and 2h) along a random direction of those parameters."""
    sat = satellite()
    q, u = rng.uniform(-1, 1, 10), rng.uniform(-1, 1, 10)
    forces = rng.normal(size=10)
    w = rng.normal(size=10)
    dm = rng.normal(size=5) * np.array([100.0, 5.0, 2.0, 0.0, 1.0])  # E stays massless
    dc = rng.normal(size=(5, 3)) * 0.05
    dc[3] = 0.0
    dI = rng.normal(size=(5, 3, 3))
    dI = 0.5 * (dI + dI.transpose(0, 2, 1)) * np.array([50.0, 0.1, 0.05, 0.0, 0.5])[:, None, None]
    dc[1, :2] = 0.0  # keep the clock's mass centre on its axis (it stays a fixed rotor)

    def loss(params):
        m, c, I = params
        s = eqx.tree_at(lambda s: (s.mass, s.com, s.inertia), sat, (m, c, I))
        return w @ kane_dynamics(s, q, u, forces).u_dot

    params = (sat.mass, sat.com, sat.inertia)
    direction = (jnp.asarray(dm), jnp.asarray(dc), jnp.asarray(dI))

    def shifted(t):
        return loss(jax.tree_util.tree_map(lambda p, d: p + t * d, params, direction))

    @jax.jit
    def everything(steps):  # one compilation: values at the FD steps, forward and reverse mode
        grad = jax.grad(loss)(params)
        return (jax.vmap(shifted)(steps), jax.jvp(shifted, (0.0,), (1.0,))[1],
                sum(jnp.vdot(g, d) for g, d in zip(grad, direction)))

    h = 1e-4
    values, jvp, rev = everything(jnp.array([h, -h, 2 * h, -2 * h]))
    fd = richardson((values[0] - values[1]) / (2 * h), (values[2] - values[3]) / (4 * h))
    assert np.isfinite(jvp) and abs(jvp) > 1e-6
    assert abs(jvp - fd) <= 1e-7 * abs(jvp), (jvp, fd)
    assert abs(rev - jvp) <= 1e-12 * abs(jvp), (rev, jvp)


def test_errors():
    one = KaneBuilder().add_body("a", rotations=(1,), mass=1.0, com=(0, 0.1, 0), inertia=np.eye(3) * 0.1).build()
    with pytest.raises(ValueError, match="expects \\(1,\\)"):
        kane_dynamics(one, np.zeros(2), np.zeros(1))
    with pytest.raises(ValueError, match="f_ext has shape"):
        kane_dynamics(one, np.zeros(1), np.zeros(1), f_ext=np.zeros((2, 6)))
    with pytest.raises(Exception, match="NaN"):
        kane_dynamics(one, np.full(1, np.nan), np.zeros(1))
    with pytest.raises(ValueError, match="parallel to d_rot"):
        KaneBuilder().add_body("a", rotations=(1,), d_rot=(1, 0, 0), d_ref=(2, 0, 0))
    with pytest.raises(ValueError, match="0 to 3 axis indices"):
        KaneBuilder().add_body("a", rotations=(4,))
    with pytest.raises(NotImplementedError, match="no mbjax equivalent"):
        to_model(KaneBuilder().add_body("a", translations=np.eye(3)[:2], mass=1.0, inertia=np.eye(3) * 0.1).build())
