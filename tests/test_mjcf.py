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

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mbjax

mujoco = pytest.importorskip("mujoco")

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
