"""MJCF models against MuJoCo itself.

The models are those of MuJoCo's MJX test data (the ``mujoco-mjx`` wheel, installed by the
``test`` extra) -- the humanoid, the Shadow hand, the joint-type zoo ``pendula`` and the
mesh-inertia bodies of ``convex`` -- plus a small model written here for what they lack
(hinge and slide ``ref``, ``springref``, joint anchors off the body origin, several anchored
joints in one body, a welded body, sites).

With MuJoCo's constraints (contacts, equalities, limits) and actuation disabled, mbjax's
mass matrix, bias forces, passive forces, accelerations and frame poses must equal
``mj_forward``'s to 1e-9 relative in float64, at random configurations, velocities and
applied forces, after the free-joint velocity convention is mapped (mbjax.interop). Each
model is checked by one jitted, vmapped program.
"""

from __future__ import annotations

from importlib import metadata
from pathlib import Path

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mbjax

mujoco = pytest.importorskip("mujoco", reason="MuJoCo (in the test extra) compiles MJCF and is the reference")

TOL = 1e-9
N = 12  # random states per model


def _mjx_test_data() -> Path | None:
    try:
        dist = metadata.distribution("mujoco-mjx")
    except metadata.PackageNotFoundError:
        return None
    path = Path(dist.locate_file("mujoco/mjx/test_data"))
    return path if path.is_dir() else None


TEST_DATA = _mjx_test_data()

SMALL = """
<mujoco model="small">
  <compiler angle="degree"/>
  <option gravity="0.3 -0.2 -9.7"/>
  <default>
    <joint armature="0.01" damping="0.2"/>
    <geom type="capsule" size="0.05 0.2"/>
  </default>
  <worldbody>
    <site name="world_site" pos="0.1 0.2 0.3"/>
    <body name="base" pos="0 0 1" euler="10 20 30">
      <joint name="h_ref" type="hinge" axis="0 1 1" pos="0.1 -0.2 0.05" ref="30" stiffness="2" springref="10"/>
      <geom pos="0.1 0 0" euler="0 90 0"/>
      <body name="stack" pos="0.3 0.1 -0.2" quat="0.9 0.1 -0.3 0.2">
        <joint name="s1" type="hinge" axis="1 0 0" pos="0.05 0.02 0"/>
        <joint name="s2" type="slide" axis="0.3 0.4 0.5" ref="0.1" stiffness="3" springref="0.2"/>
        <joint name="s3" type="hinge" axis="0 0 1" pos="-0.1 0 0.07" range="-40 50"/>
        <geom pos="0 0.1 0" size="0.04 0.1"/>
        <site name="tip" pos="0 0.2 0.05" euler="0 0 45"/>
        <body name="welded" pos="0 0 0.3" euler="30 0 0">
          <geom type="box" size="0.05 0.1 0.02" pos="0.02 0 0"/>
          <site name="tool"/>
        </body>
      </body>
      <body name="ball" pos="-0.3 0 0">
        <joint name="b" type="ball" pos="0 0 0.1" stiffness="1.5" damping="0.3"/>
        <joint name="after_ball" type="slide" axis="0 0 1"/>
        <geom type="ellipsoid" size="0.1 0.05 0.03" pos="0 0 -0.1"/>
      </body>
    </body>
    <body name="float" pos="1 0 2">
      <freejoint name="root"/>
      <geom type="box" size="0.1 0.2 0.3" pos="0.01 0.02 0.03"/>
      <body name="arm" pos="0 0 -0.4">
        <joint name="arm_j" type="hinge" axis="1 1 0" pos="0 0 0.1"/>
        <geom/>
      </body>
    </body>
  </worldbody>
</mujoco>
"""

MODELS = {
    "small": (SMALL, ()),
    "humanoid": ("humanoid/humanoid.xml", ()),
    "shadow_hand": ("shadow_hand/right_hand.xml", ()),
    "pendula": ("pendula.xml", ("tendon", "gravcomp")),
    "convex": ("convex.xml", ()),
}


def _source(name):
    src, _ = MODELS[name]
    if src.lstrip().startswith("<"):
        return src
    if TEST_DATA is None:
        pytest.skip("needs MuJoCo's MJX test data: pip install mujoco-mjx (in mbjax's test extra)")
    return str(TEST_DATA / src)


def _full_mass_matrix(m, d):
    M = np.zeros((m.nv, m.nv))
    try:
        mujoco.mj_fullM(m, d, M)  # MuJoCo >= 4
    except TypeError:
        mujoco.mj_fullM(m, M, d.qM)
    return M


def _random_qpos(m, rng):
    """A random qpos: hinges and slides within their range (else +-pi, +-1), random unit
    quaternions, free positions in [-1, 1]^3."""
    q = np.zeros(m.nq)
    for j in range(m.njnt):
        a, t = m.jnt_qposadr[j], m.jnt_type[j]
        quat = rng.standard_normal(4)
        if t == mujoco.mjtJoint.mjJNT_FREE:
            q[a : a + 7] = np.concatenate([rng.uniform(-1, 1, 3), quat / np.linalg.norm(quat)])
        elif t == mujoco.mjtJoint.mjJNT_BALL:
            q[a : a + 4] = quat / np.linalg.norm(quat)
        else:
            lo, hi = m.jnt_range[j] if m.jnt_limited[j] else (-np.pi, np.pi)
            q[a] = rng.uniform(lo, hi)
    return q


def _mujoco_reference(m, Q, QVEL, F):
    """mj_forward with constraints and actuation off: M, qfrc_bias, qfrc_passive, qacc, and
    world poses (xpos, xmat) of bodies 1.. and sites."""
    m.opt.disableflags |= mujoco.mjtDisableBit.mjDSBL_CONSTRAINT | mujoco.mjtDisableBit.mjDSBL_ACTUATION
    m.body_gravcomp[:] = 0.0  # ignored by mbjax (pendula)
    if m.ntendon:
        m.tendon_stiffness[:] = 0.0
        m.tendon_damping[:] = 0.0
    d = mujoco.MjData(m)
    out = {k: [] for k in ("M", "bias", "passive", "qacc", "xpos", "xmat", "site_xpos", "site_xmat")}
    for q, v, f in zip(Q, QVEL, F):
        d.qpos[:], d.qvel[:], d.qfrc_applied[:] = q, v, f
        mujoco.mj_forward(m, d)
        out["M"].append(_full_mass_matrix(m, d))
        out["bias"].append(d.qfrc_bias.copy())
        out["passive"].append(d.qfrc_passive.copy())
        out["qacc"].append(d.qacc.copy())
        out["xpos"].append(d.xpos[1:].copy())
        out["xmat"].append(d.xmat[1:].reshape(-1, 3, 3).copy())
        out["site_xpos"].append(d.site_xpos.copy())
        out["site_xmat"].append(d.site_xmat.reshape(-1, 3, 3).copy())
    return {k: np.array(v) for k, v in out.items()}


@jax.jit
def _compare(model, frames, q, qvel, f, ref):
    """mbjax's quantities mapped onto MuJoCo's (one state; vmapped over states)."""
    qd = mbjax.from_mujoco_velocity(model, q, qvel)
    tau = mbjax.from_mujoco_force(model, q, f)
    # MuJoCo's M and bias in mbjax's coordinates: qvel = J qd, qacc = J qdd + Jdot qd
    J = jax.vmap(lambda e: mbjax.to_mujoco_velocity(model, q, e), out_axes=1)(jnp.eye(model.nv, dtype=q.dtype))
    jdot_qd = mbjax.to_mujoco_acceleration(model, q, qd, jnp.zeros_like(qd))
    passive = mbjax.passive_forces(model, q, qd)
    qdd = mbjax.forward_dynamics(model, q, qd, tau + passive)
    R, p = mbjax.frame_placements(model, q)
    R, p = jnp.take(R, frames, axis=0), jnp.take(p, frames, axis=0)
    got = {
        "M": mbjax.crba(model, q),
        "bias": mbjax.nonlinear_effects(model, q, qd),
        "passive": mbjax.to_mujoco_force(model, q, passive),
        "qacc": mbjax.to_mujoco_acceleration(model, q, qd, qdd),
        "pose": jnp.concatenate([R.reshape(-1), p.reshape(-1)]),
        "roundtrip": mbjax.from_mujoco_acceleration(model, q, mbjax.to_mujoco_velocity(model, q, qd),
                                                   mbjax.to_mujoco_acceleration(model, q, qd, qdd)),
    }
    want = {
        "M": J.T @ ref["M"] @ J,
        "bias": J.T @ (ref["bias"] + ref["M"] @ jdot_qd),
        "passive": ref["passive"],
        "qacc": ref["qacc"],
        "pose": jnp.concatenate([ref["xmat"].reshape(-1), ref["site_xmat"].reshape(-1),
                                 ref["xpos"].reshape(-1), ref["site_xpos"].reshape(-1)]),
        "roundtrip": qdd,
    }
    # relative error: max |difference| / max |reference| (absolute where the reference is 0)
    return {k: jnp.max(jnp.abs(got[k] - want[k])) / jnp.maximum(jnp.max(jnp.abs(want[k])), 1.0 if k == "passive" else 1e-300)
            for k in got}


def _frame_ids(model, m):
    """mbjax frame index of each MuJoCo body 1.. and each site, in MuJoCo's order."""
    bodies = [mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_BODY, b) or f"body{b}" for b in range(1, m.nbody)]
    sites = [mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_SITE, s) for s in range(m.nsite)]
    assert all(sites), "the compared models name every site"
    names = bodies + [s if s not in bodies else f"site:{s}" for s in sites]
    return np.array([model.frame_index(n) for n in names])


@pytest.mark.parametrize("name", list(MODELS))
def test_equals_mujoco(name):
    m = mbjax.model.mjcf.compile_mjcf(_source(name))
    model = mbjax.load_mjcf(m, ignore=MODELS[name][1])
    assert (model.nq, model.nv) == (m.nq, m.nv)
    rng = np.random.default_rng(0)
    Q = np.array([_random_qpos(m, rng) for _ in range(N)])
    QVEL, F = rng.standard_normal((2, N, m.nv))
    ref = _mujoco_reference(m, Q, QVEL, F)
    err = jax.vmap(_compare, (None, None, 0, 0, 0, 0))(model, _frame_ids(model, m), Q, QVEL, F, ref)
    worst = {k: float(v.max()) for k, v in err.items()}
    assert all(v <= TOL for v in worst.values()), f"{name}: relative errors {worst}"
    if name == "small":  # the springs and anchors are exercised
        assert np.abs(ref["passive"]).max() > 0.1


def test_names_and_layout():
    model = mbjax.load_mjcf(SMALL)
    assert model.name == "small"
    # a joint at the body origin keeps the body's name; anchored or stacked joints get body:joint
    assert model.body_names == ("base:h_ref", "stack:s1", "stack:s2", "stack:s3", "ball:b", "ball:after_ball",
                                "float", "arm:arm_j")
    assert model.joint_types == ("revolute", "revolute", "prismatic", "revolute", "spherical", "prismatic", "free", "revolute")
    for frame in ("base", "stack", "welded", "tool", "tip", "world_site", "ball", "arm"):
        model.frame_index(frame)
    s3 = model.q_slice("s3")
    np.testing.assert_allclose([model.lower[s3.start], model.upper[s3.start]], np.deg2rad([-40, 50]), rtol=1e-15)
    np.testing.assert_allclose(model.damping[model.v_slice("b")], 0.3)
    np.testing.assert_allclose(model.spring_reference[model.q_slice("h_ref")], np.deg2rad(10), rtol=1e-15)
    np.testing.assert_allclose(model.gravity, [0.3, -0.2, -9.7])
    # MuJoCo's own switches are honoured
    off = mbjax.load_mjcf(SMALL.replace('<option gravity="0.3 -0.2 -9.7"/>',
                                        '<option><flag gravity="disable" spring="disable" damper="disable"/></option>'))
    assert not np.any(off.gravity) and not np.any(off.damping) and not np.any(off.stiffness)


def test_refuses_unsupported_features():
    src = _source("pendula")
    with pytest.raises(mbjax.MJCFError, match=r"tendon.*\n.*gravcomp.*\n.*ignore=\('tendon', 'gravcomp'\)"):
        mbjax.load_mjcf(src)
    with pytest.raises(ValueError, match="ignore must be"):
        mbjax.load_mjcf(src, ignore=("tendons",))
    with pytest.raises(mbjax.MJCFError, match="frictionloss"):
        mbjax.load_mjcf(SMALL.replace('damping="0.2"', 'damping="0.2" frictionloss="0.1"'))
    with pytest.raises(mbjax.MJCFError, match="equality"):
        mbjax.load_mjcf(SMALL.replace("</mujoco>", '<equality><weld body1="float"/></equality></mujoco>'))
    with pytest.raises(mbjax.MJCFError, match="free_joint_spring"):
        mbjax.load_mjcf(SMALL.replace('<freejoint name="root"/>', '<joint name="root" type="free" stiffness="1"/>'))
    with pytest.raises(mbjax.MJCFError, match="could not compile"):
        mbjax.load_mjcf("<mujoco><worldbody><body><joint/></body></worldbody></mujoco>")  # no mass
    with pytest.raises(FileNotFoundError):
        mbjax.load_mjcf("no/such/model.xml")


def test_passive_forces_gradient_at_rest():
    """The spring is smooth at its rest configuration (no NaN from the quaternion log)."""
    model = mbjax.load_mjcf(SMALL)
    q = model.spring_reference
    g = jax.jacfwd(lambda q: mbjax.passive_forces(model, q, jnp.zeros(model.nv)))(q)
    assert np.all(np.isfinite(np.asarray(g)))
    # d tau / d q of a revolute spring is -stiffness
    i = model.q_slice("h_ref").start
    np.testing.assert_allclose(g[model.v_slice("h_ref").start, i], -2.0, rtol=1e-12)


def test_urdf_damping():
    urdf = mbjax.bundled_model_path("double_pendulum").read_text().replace('damping="0.0"', 'damping="0.7"', 1)
    model = mbjax.load_urdf(urdf)
    np.testing.assert_allclose(model.damping, [0.7, 0.0])
    qd = jnp.array([2.0, 3.0])
    np.testing.assert_allclose(mbjax.passive_forces(model, mbjax.neutral(model), qd), [-1.4, 0.0])


def test_cli_info(tmp_path, capsys):
    from mbjax import cli

    path = tmp_path / "small.xml"
    path.write_text(SMALL)
    assert cli.main(["info", str(path)]) == 0
    out = capsys.readouterr().out
    assert "nq = 17, nv = 15" in out and "MJCF" in out
    assert "├── base:h_ref  (revolute h_ref," in out and "│   ├── stack:s1  (revolute s1, 0 kg)" in out
    assert "└── float  (free root," in out
    pendula = tmp_path / "pendula.xml"
    pendula.write_text(SMALL.replace("<worldbody>", '<worldbody><body gravcomp="1"><joint/><geom size="0.1"/></body>'))
    assert cli.main(["info", str(pendula)]) == 1
    assert "On the command line: --ignore gravcomp." in capsys.readouterr().err
    assert cli.main(["info", str(pendula), "--ignore", "gravcomp"]) == 0


# ------------------------------------------------------------------ equalities as loop closures
LOOPS = """
<mujoco model="loops">
  <option gravity="0.4 -0.3 -9.8"><flag contact="disable"/></option>
  <worldbody>
    <body name="l1" pos="0 0 1">
      <joint name="l_ball" type="ball"/>
      <geom type="capsule" fromto="0 0 0 0.5 0 0" size="0.04"/>
      <body name="l2" pos="0.5 0 0">
        <joint name="l_hinge" axis="0 1 0"/>
        <geom type="capsule" fromto="0 0 0 0.4 0.1 -0.3" size="0.03"/>
        <site name="l_tip" pos="0.4 0.1 -0.3"/>
      </body>
    </body>
    <body name="r1" pos="1.3 0.1 1.1">
      <joint name="r_hinge1" axis="0 1 0"/>
      <geom type="capsule" fromto="0 0 0 -0.2 0 -0.5" size="0.04"/>
      <body name="r2" pos="-0.2 0 -0.5" euler="10 20 5">
        <joint name="r_hinge2" axis="1 0 0.3"/>
        <geom type="capsule" fromto="0 0 0 -0.2 0 -0.1" size="0.03"/>
        <site name="r_tip" pos="-0.2 0 -0.1"/>
      </body>
    </body>
    <body name="box" pos="0.2 0.5 0.3" quat="0.9 0.1 0.3 -0.2">
      <freejoint/>
      <geom type="box" size="0.1 0.05 0.08"/>
      <site name="box_corner" pos="0.1 0.05 0.08" quat="0.8 0.2 -0.1 0.3"/>
    </body>
  </worldbody>
  <equality>
    <connect name="tips" body1="l2" body2="r2" anchor="0.4 0.1 -0.3"/>
    <weld name="box_on_l1" body1="box" body2="l1"/>
    <connect name="sites" site1="l_tip" site2="r_tip" active="false"/>
    <weld name="site_weld" site1="box_corner" site2="r_tip" active="false"/>
  </equality>
</mujoco>
"""


def _equality_residuals(m, qpos):
    """Per active equality: MuJoCo's translation error norm and rotation angle (weld)."""
    d = mujoco.MjData(m)
    d.qpos[:] = qpos
    mujoco.mj_forward(m, d)
    rows = d.efc_pos[d.efc_type == mujoco.mjtConstraint.mjCNSTR_EQUALITY]
    out, k = [], 0
    for e in range(m.neq):
        if not d.eq_active[e]:
            continue
        n = 6 if m.eq_type[e] == mujoco.mjtEq.mjEQ_WELD else 3
        r = rows[k : k + n]
        k += n
        out.append(np.linalg.norm(r[:3]))
        if n == 6:  # rows 3:6 are the error quaternion's vector part (torquescale 1)
            out.append(2 * np.arcsin(min(np.linalg.norm(r[3:]), 1.0)))
    return np.array(out)


def _mbjax_residuals(model, closures, q):
    phi = np.asarray(mbjax.loop_residual(model, closures, q))
    out, k = [], 0
    for kind in closures.joint_types:
        out.append(np.linalg.norm(phi[k : k + 3]))
        if kind == "weld":
            out.append(np.linalg.norm(phi[k + 3 : k + 6]))
        k += 3 if kind == "spherical" else 6
    return np.array(out)


@pytest.mark.parametrize("active", [(0, 1), (2, 3)], ids=["bodies", "sites"])
def test_equalities_are_loop_closures(active):
    """connect and weld equalities, between bodies and between sites: at random
    configurations mbjax's loop residual has MuJoCo's magnitudes (translation error, weld
    rotation angle), loop by loop."""
    m = mbjax.model.mjcf.compile_mjcf(LOOPS)
    m.eq_active0[:] = [e in active for e in range(m.neq)]
    model, closures = mbjax.load_mjcf_with_closures(m)
    names = [mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_EQUALITY, e) for e in active]
    assert closures.names == tuple(names)
    rng = np.random.default_rng(1)
    for _ in range(4):
        qpos = _random_qpos(m, rng)
        np.testing.assert_allclose(_mbjax_residuals(model, closures, qpos), _equality_residuals(m, qpos), rtol=1e-10, atol=1e-12)


def test_closed_chain_dynamics_equal_rigid_mujoco():
    """At rest on the constraint manifold, mbjax's constrained accelerations equal the rigid
    solution built from MuJoCo's own mass matrix, bias forces and equality Jacobian,
    [M -J^T; J 0] (qacc, f) = (tau - bias, 0) (MuJoCo's equalities are soft; at zero velocity
    J_dot qvel vanishes, so this is the exact rigid limit of its model). Away from rest, the
    velocities MuJoCo's equality Jacobian allows are those mbjax's loop Jacobian allows (at
    another assembled configuration: off the constraint manifold the two residual functions,
    and so their Jacobians, differ)."""
    m = mbjax.model.mjcf.compile_mjcf(LOOPS)
    model, closures = mbjax.load_mjcf_with_closures(m)
    assert np.abs(mbjax.loop_residual(model, closures, m.qpos0)).max() < 1e-12  # MuJoCo assembles at qpos0
    rng = np.random.default_rng(2)
    tau = rng.standard_normal(m.nv)
    d = mujoco.MjData(m)
    d.qpos[:] = m.qpos0
    d.qfrc_applied[:] = tau
    mujoco.mj_forward(m, d)
    M = _full_mass_matrix(m, d)
    J = d.efc_J.reshape(-1, m.nv)[d.efc_type == mujoco.mjtConstraint.mjCNSTR_EQUALITY]
    kkt = np.block([[M, -J.T], [J, np.zeros((len(J), len(J)))]])
    qacc = np.linalg.solve(kkt, np.concatenate([tau - d.qfrc_bias, np.zeros(len(J))]))[: m.nv]
    q = jnp.asarray(m.qpos0)
    zero = jnp.zeros(m.nv)
    qdd = mbjax.constrained_forward_dynamics(model, closures, q, zero, mbjax.from_mujoco_force(model, q, tau)).qdd
    expected = mbjax.from_mujoco_acceleration(model, q, zero, qacc)
    np.testing.assert_allclose(qdd, expected, rtol=0, atol=1e-10 * np.abs(expected).max())

    # at another assembled configuration: ker(J_mujoco) = ker(Phi_q), through the velocity convention
    guess = mbjax.integrate(model, q, 0.3 * rng.standard_normal(m.nv))
    qpos = np.asarray(mbjax.assemble(model, closures, guess))
    d.qpos[:] = qpos
    mujoco.mj_forward(m, d)
    J = d.efc_J.reshape(-1, m.nv)[d.efc_type == mujoco.mjtConstraint.mjCNSTR_EQUALITY]
    Phi_q = np.asarray(mbjax.loop_jacobian(model, closures, qpos))
    null = np.linalg.svd(Phi_q)[2][np.linalg.matrix_rank(Phi_q):].T  # mbjax velocities
    qvel = np.asarray(jax.vmap(lambda v: mbjax.to_mujoco_velocity(model, qpos, v), 1, 1)(null))
    assert np.abs(J @ qvel).max() < 1e-10 * np.abs(J).max()


ACTUATED = """
<mujoco model="actuated">
  <worldbody>
    <body name="a">
      <joint name="hinge" axis="0 1 0" range="-1 1" actuatorfrcrange="-3 3"/>
      <geom type="capsule" fromto="0 0 0 0.5 0 0" size="0.05"/>
      <body name="b" pos="0.5 0 0">
        <joint name="slide" type="slide" axis="1 0 0"/>
        <geom type="box" size="0.1 0.1 0.1"/>
        <body name="c" pos="0.2 0 0">
          <joint name="free_hinge" axis="0 0 1"/>
          <geom type="sphere" size="0.05"/>
        </body>
      </body>
    </body>
  </worldbody>
  <actuator>
    <motor joint="hinge" gear="2.5" ctrlrange="-1 1"/>
    <position joint="slide" kp="40" kv="3" ctrlrange="-0.3 0.3" forcerange="-5 5"/>
    <velocity joint="free_hinge" kv="2" gear="-1.5"/>
    <general joint="free_hinge" gaintype="affine" gainprm="1 0.5 -0.2" biastype="affine" biasprm="0.1 -2 -0.3"/>
  </actuator>
</mujoco>
"""


def test_actuators_equal_mujoco():
    """Motor, position (with kv), velocity and general affine actuators, with control, force
    and joint actuator-force limits: mbjax's torques equal MuJoCo's qfrc_actuator."""
    m = mbjax.model.mjcf.compile_mjcf(ACTUATED)
    model, actuators = mbjax.load_mjcf(m), mbjax.load_mjcf_actuators(m)
    assert actuators.names == ("actuator0", "actuator1", "actuator2", "actuator3") and actuators.nv == model.nv
    rng = np.random.default_rng(3)
    d = mujoco.MjData(m)
    torque = eqx.filter_jit(lambda q, qd, c: actuators(q, qd, c))
    for _ in range(20):  # controls up to twice the ranges: the limits are exercised
        d.qpos[:], d.qvel[:], d.ctrl[:] = rng.uniform(-1, 1, m.nq), 2 * rng.standard_normal(m.nv), rng.uniform(-2, 2, m.nu)
        mujoco.mj_forward(m, d)
        np.testing.assert_allclose(torque(d.qpos, d.qvel, d.ctrl), d.qfrc_actuator, rtol=1e-12, atol=1e-12)
    tau = actuators.control(jnp.array([0.5, 0.1, 0.0, 0.2]))(0.0, jnp.zeros(3), jnp.zeros(3))
    assert np.isfinite(tau).all()
    with pytest.raises(mbjax.MJCFError, match="ball or free joint"):
        mbjax.load_mjcf_actuators('<mujoco><worldbody><body><freejoint name="f"/><geom size=".1"/></body></worldbody>'
                                  '<actuator><motor joint="f" gear="1 0 0 0 0 0"/></actuator></mujoco>')
    with pytest.raises(ValueError, match="4 actuators"):
        actuators(jnp.zeros(3), jnp.zeros(3), jnp.zeros(2))
