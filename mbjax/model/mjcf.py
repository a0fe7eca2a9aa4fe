"""MJCF loading through MuJoCo's own compiler.

MuJoCo's compiler (the optional ``mujoco`` package) reads the file -- defaults, includes,
``<compiler>`` settings, inertias computed from geoms -- and this module converts the compiled
``mjModel`` into a :class:`Model` with :class:`ModelBuilder`.

Conventions (see also :mod:`mbjax.interop`):

- ``q`` is MuJoCo's ``qpos`` unchanged: quaternions are (w, x, y, z) in both, free joints are
  (position, quaternion) in the world frame, and a hinge's or slide's ``ref`` is built into
  its placement, so the angle is MuJoCo's.
- Velocities, accelerations and forces agree for hinge, slide and ball joints (ball: angular
  velocity in the child frame). Free joints differ: MuJoCo's velocity is (world-frame linear
  velocity of the body origin, body-frame angular velocity), mbjax's is the body-frame spatial
  velocity (linear, angular), as in Pinocchio. Convert with
  :func:`mbjax.from_mujoco_velocity` / :func:`mbjax.to_mujoco_velocity` and the acceleration
  and force versions.
- One mbjax body per MuJoCo joint. A body with several joints becomes a chain of massless
  bodies, one per joint, the last carrying the inertia; each joint body's frame sits at its
  joint's anchor, oriented like the MuJoCo body. A MuJoCo body keeps its name as an mbjax
  body when it has one joint anchored at its origin (the common case); otherwise the joint
  bodies are named ``"body:joint"``. Every MuJoCo body and every named site is a frame at
  MuJoCo's ``xpos``/``xmat`` (``site_xpos``/``site_xmat``); bodies without joints are
  merged into their parent. Unnamed bodies are called ``body<id>``, unnamed joints
  ``<body>_joint<k>``; unnamed sites are skipped.
- Joint ranges become ``lower``/``upper`` (hinge and slide; a ball joint's cone limit is not
  kept); mocap bodies are fixed where they stand in the file; armature, damping, stiffness and
  ``springref`` become the model's leaves (:func:`mbjax.passive_forces`). MuJoCo's own option
  flags that disable gravity, springs or dampers are honoured.
- Not modelled: contacts, and the enforcement of joint limits (both are MuJoCo constraints).
  mbjax's input is the generalized force; :func:`mbjax.load_mjcf_actuators` turns the
  model's joint actuators into a map from MuJoCo's ``ctrl`` to it.
- ``connect`` and ``weld`` equalities, between bodies or sites, become loop closures
  (:func:`mbjax.load_mjcf_with_closures`): a ``connect`` is a spherical cut joint at its anchors,
  a ``weld`` a rigid one holding MuJoCo's ``relpose``. mbjax enforces them exactly, where
  MuJoCo's are soft (``solref``, ``solimp``); ``torquescale`` has no counterpart.
"""

from __future__ import annotations

import io
import os
import xml.etree.ElementTree as ET
from typing import NamedTuple

import numpy as np

from .builder import ModelBuilder
from .joints import JOINT_TYPES
from .model import Model

#: features that ``load_mjcf`` refuses unless named in ``ignore``
IGNORABLE = {
    "equality": "equality constraints (<equality>)",
    "tendon": "tendons (<tendon>): their springs, dampers, limits and actuation",
    "actuator_dynamics": "actuators with activation dynamics or muscles",
    "frictionloss": "joint dry friction (frictionloss)",
    "gravcomp": "gravity compensation (gravcomp)",
    "fluid": "fluid forces (<option density/viscosity>)",
    "free_joint_spring": "springs on free joints",
    "nonlinear_passive": "polynomial joint springs or dampers (stiffnesspoly, dampingpoly)",
}

_INSTALL = 'install it with `pip install mujoco` (or mbjax\'s extra: `pip install "mbjax[mjcf]"`)'


class MJCFError(ValueError):
    """The MJCF uses something mbjax does not model (``features``: the names to ignore it)."""

    def __init__(self, message: str, features: tuple = ()):
        super().__init__(message)
        self.features = tuple(features)


def import_mujoco():
    try:
        import mujoco
    except ImportError:
        raise ModuleNotFoundError(f"load_mjcf needs MuJoCo's compiler, the `mujoco` package; {_INSTALL}") from None
    return mujoco


def _refuse_urdf(text):
    """A URDF (root element ``<robot>``) given as MJCF: MuJoCo would half-read it."""
    try:
        source = io.StringIO(text) if text.lstrip().startswith("<") else text
        root = next(ET.iterparse(source, events=("start",)))[1].tag
    except (ET.ParseError, OSError, StopIteration):
        return  # MuJoCo's compiler reports it
    if root == "robot":
        raise MJCFError(f"{'this text' if isinstance(source, io.StringIO) else repr(text)} is a URDF (its root "
                        "element is <robot>), not MJCF; load it with mbjax.load_urdf")


def compile_mjcf(source):
    """The compiled ``mujoco.MjModel`` of a path (``.xml`` or ``.mjb``), MJCF text, or an
    ``MjModel`` (returned as is)."""
    if isinstance(source, (str, os.PathLike)):
        _refuse_urdf(str(source))
    mujoco = import_mujoco()
    if isinstance(source, mujoco.MjModel):
        return source
    text = str(source)
    is_xml = text.lstrip().startswith("<")
    if not is_xml and not os.path.isfile(text):
        raise FileNotFoundError(f"no MJCF file at {text!r} (and the argument is not MJCF text)")
    try:
        if is_xml:
            return mujoco.MjModel.from_xml_string(text)
        if text.endswith(".mjb"):
            return mujoco.MjModel.from_binary_path(text)
        return mujoco.MjModel.from_xml_path(text)
    except ValueError as e:  # MuJoCo's compiler errors
        raise MJCFError(f"MuJoCo could not compile the model: {e}") from None


def load_mjcf(source, ignore=(), inertia_check: str = "raise", dtype=None) -> Model:
    """Build a :class:`Model` from an MJCF model, compiled by MuJoCo.

    **Arguments:**

    - ``source``: path to an ``.xml`` (or ``.mjb``) file, MJCF text, or a ``mujoco.MjModel``.
    - ``ignore``: names of features to drop instead of refusing the model: any of
      ``"equality"``, ``"tendon"``, ``"actuator_dynamics"``, ``"frictionloss"``,
      ``"gravcomp"``, ``"fluid"``, ``"free_joint_spring"``, ``"nonlinear_passive"``.
      Contacts are never modelled and need no entry.
    - ``inertia_check``: ``"raise"`` (default) or ``"warn"`` on inertias no rigid body has.
    - ``dtype``: floating-point type of the model's arrays.

    **Returns:** the :class:`Model`; its q is MuJoCo's qpos (see this module's conventions
    for the free-joint velocity).
    """
    ignore = _ignored(ignore)
    m = compile_mjcf(source)
    mujoco = import_mujoco()
    _refuse_unsupported(mujoco, m, ignore)
    return _convert(mujoco, m, ignore, inertia_check, dtype)[0]


class LoopEquality(NamedTuple):
    """A ``connect`` or ``weld`` equality of an MJCF model, as the arguments of
    :meth:`mbjax.LoopClosureBuilder.add_loop` (``joint`` is ``"spherical"`` or ``"weld"``,
    ``frame_a``/``frame_b`` are frame names or None for the world, ``pose_a``/``pose_b`` its
    keyword arguments)."""

    name: str
    joint: str
    frame_a: str | None
    frame_b: str | None
    pose_a: dict
    pose_b: dict


def load_mjcf_equalities(source, ignore=(), inertia_check: str = "raise", dtype=None):
    """Like :func:`load_mjcf`, with the model's active ``connect`` and ``weld`` equalities.

    **Returns:** ``(model, equalities)``, a list of :class:`LoopEquality`.
    :func:`mbjax.load_mjcf_with_closures` turns them into loop closures.
    """
    ignore = _ignored(ignore)
    m = compile_mjcf(source)
    mujoco = import_mujoco()
    loops = _loop_equalities(mujoco, m)
    _refuse_unsupported(mujoco, m, ignore, handled=loops)
    model, site_frames = _convert(mujoco, m, ignore, inertia_check, dtype)
    return model, [_equality(mujoco, m, e, site_frames) for e in loops]


def _ignored(ignore):
    unknown = set(ignore) - set(IGNORABLE)
    if isinstance(ignore, str) or unknown:
        raise ValueError(f"ignore must be a collection of {sorted(IGNORABLE)}; got {ignore!r}")
    return set(ignore)


# ------------------------------------------------------------------------------ equalities
def _loop_equalities(mujoco, m):
    """Ids of the active connect and weld equalities."""
    eq = mujoco.mjtEq
    return [e for e in range(m.neq) if m.eq_active0[e] and int(m.eq_type[e]) in (int(eq.mjEQ_CONNECT), int(eq.mjEQ_WELD))]


def _equality(mujoco, m, e, site_frames):
    """The LoopEquality of equality ``e``.

    MuJoCo's residuals (engine_core_constraint.c), with body poses (R_i, p_i):
    connect: p_1 + R_1 data[0:3] = p_2 + R_2 data[3:6];
    weld: p_1 + R_1 data[3:6] = p_2 + R_2 data[0:3] and R_1 relpose = R_2, relpose = data[6:10].
    For site equalities the site frames coincide (weld) or their origins (connect).
    """
    obj = mujoco.mjtObj
    name = mujoco.mj_id2name(m, obj.mjOBJ_EQUALITY, e) or f"equality{e}"
    weld = int(m.eq_type[e]) == int(mujoco.mjtEq.mjEQ_WELD)
    ids, data = (int(m.eq_obj1id[e]), int(m.eq_obj2id[e])), np.asarray(m.eq_data[e], float)
    if int(m.eq_objtype[e]) == int(obj.mjOBJ_SITE):
        frames = [site_frames.get(i) for i in ids]
        if None in frames:
            raise MJCFError(f"equality {name!r} joins unnamed sites; name them to load it as a loop closure")
        pose_a, pose_b = {}, {}
    else:
        frames = [None if i == 0 else mujoco.mj_id2name(m, obj.mjOBJ_BODY, i) or f"body{i}" for i in ids]
        if weld:
            pose_a = dict(rotation_a=_quat_to_rotation(data[6:10]), translation_a=data[3:6])
            pose_b = dict(translation_b=data[0:3])
        else:
            pose_a, pose_b = dict(translation_a=data[0:3]), dict(translation_b=data[3:6])
    return LoopEquality(name, "weld" if weld else "spherical", frames[0], frames[1], pose_a, pose_b)


# ------------------------------------------------------------------------------ checks
def _names(mujoco, m, obj, ids):
    return [mujoco.mj_id2name(m, obj, int(i)) or f"(unnamed, id {int(i)})" for i in ids]


def _refuse_unsupported(mujoco, m, ignore, handled=()):
    """Raise MJCFError naming what the model uses and mbjax does not model (except
    ``ignore``, and the equalities ``handled`` as loop closures)."""
    obj = mujoco.mjtObj
    found = {}
    eqs = [e for e in range(m.neq) if m.eq_active0[e] and e not in handled]  # inactive: not enforced
    if eqs:
        hint = "" if handled else "; connect and weld load as loop closures with load_mjcf_with_closures"
        found["equality"] = f"{len(eqs)} equality constraint(s) {_names(mujoco, m, obj.mjOBJ_EQUALITY, eqs)[:5]}{hint}"
    if m.ntendon:
        found["tendon"] = f"{m.ntendon} tendon(s) {_names(mujoco, m, obj.mjOBJ_TENDON, range(m.ntendon))[:5]}"
    dyn = [i for i in range(m.nu) if m.actuator_dyntype[i] != mujoco.mjtDyn.mjDYN_NONE
           or m.actuator_gaintype[i] == mujoco.mjtGain.mjGAIN_MUSCLE]
    if dyn:
        found["actuator_dynamics"] = f"actuator(s) {_names(mujoco, m, obj.mjOBJ_ACTUATOR, dyn)[:5]}"
    fl = np.flatnonzero(m.dof_frictionloss)
    if fl.size:
        found["frictionloss"] = f"joint(s) {sorted(set(_names(mujoco, m, obj.mjOBJ_JOINT, m.dof_jntid[fl])))[:5]}"
    gc = np.flatnonzero(m.body_gravcomp)
    if gc.size:
        found["gravcomp"] = f"body(ies) {_names(mujoco, m, obj.mjOBJ_BODY, gc)[:5]}"
    if m.opt.density > 0 or m.opt.viscosity > 0:
        found["fluid"] = f"density {m.opt.density:g}, viscosity {m.opt.viscosity:g}"
    free = mujoco.mjtJoint.mjJNT_FREE
    fs = [j for j in range(m.njnt) if m.jnt_type[j] == free and m.jnt_stiffness[j] != 0]
    if fs:
        found["free_joint_spring"] = f"free joint(s) {_names(mujoco, m, obj.mjOBJ_JOINT, fs)}"
    poly = [a for a in ("jnt_stiffnesspoly", "dof_dampingpoly") if np.any(getattr(m, a, 0.0))]
    if poly:
        found["nonlinear_passive"] = ", ".join(poly)
    refused = {k: v for k, v in found.items() if k not in ignore}
    if refused:
        lines = [f"  - {IGNORABLE[k]}: {v}  [ignore={k!r}]" for k, v in refused.items()]
        raise MJCFError(
            "the MJCF model uses features that mbjax does not model:\n" + "\n".join(lines)
            + f"\nPass ignore={tuple(refused)} to load it without them.",
            features=tuple(refused),
        )
    if getattr(m, "nflex", 0):
        raise MJCFError(f"the MJCF model has {m.nflex} flex (deformable) object(s); mbjax models rigid bodies only")


# ------------------------------------------------------------------------------ conversion
# NumPy rotations, in float64 whatever JAX's precision (the model is cast at the end)
def _quat_to_rotation(q):
    w, x, y, z = np.asarray(q, dtype=float) / np.linalg.norm(q)
    return np.array([
        [1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
        [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
        [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)],
    ])


def _axis_rotation(axis, angle):
    K = np.array([[0, -axis[2], axis[1]], [axis[2], 0, -axis[0]], [-axis[1], axis[0], 0]])
    return np.eye(3) + np.sin(angle) * K + (1 - np.cos(angle)) * K @ K


def _convert(mujoco, m, ignore, inertia_check, dtype) -> Model:
    obj = mujoco.mjtObj
    dsbl = m.opt.disableflags
    gravity = np.zeros(3) if dsbl & mujoco.mjtDisableBit.mjDSBL_GRAVITY else np.array(m.opt.gravity)
    passive = (not dsbl & mujoco.mjtDisableBit.mjDSBL_SPRING, not dsbl & mujoco.mjtDisableBit.mjDSBL_DAMPER)
    body_names = [mujoco.mj_id2name(m, obj.mjOBJ_BODY, b) or f"body{b}" for b in range(m.nbody)]
    model_name = bytes(m.names[: m.names.index(b"\0")]).decode() or "mjcf"
    builder = ModelBuilder(model_name, gravity=gravity, inertia_check=inertia_check)

    # tip[b]: the mbjax body carrying MuJoCo body b (None = world) and the position of b's
    # origin in that body's frame (the frames are parallel: it is minus the last joint's anchor)
    tip = {0: (None, np.zeros(3))}
    inertial_frame = {0: (np.zeros(3), np.array([1.0, 0, 0, 0]))}
    taken = set(body_names)  # frame names in use
    for b in range(1, m.nbody):
        name = body_names[b]
        parent, offset = tip[int(m.body_parentid[b])]
        placement = (_quat_to_rotation(m.body_quat[b]), offset + m.body_pos[b])
        inertial_frame[b] = _same_frame(mujoco, m.body_sameframe[b], m.body_ipos[b], m.body_iquat[b], None)
        ipos, iquat = inertial_frame[b]
        inertial = dict(mass=float(m.body_mass[b]), com=ipos, inertia=_rotate(m.body_inertia[b], iquat))
        if m.body_jntnum[b] == 0:
            builder.add_body(name, parent=parent, rotation=placement[0], translation=placement[1], **inertial)
            tip[b] = (name, np.zeros(3))
        else:
            tip[b] = _add_joints(mujoco, m, builder, b, name, parent, placement, inertial, passive)
            taken.update(_chain_names(mujoco, m, b, name)[0])
            if tip[b][0] != name:
                builder.add_frame(name, tip[b][0], translation=tip[b][1])

    site_frames = {}  # site id -> frame name
    for s in range(m.nsite):
        sname = mujoco.mj_id2name(m, obj.mjOBJ_SITE, s)
        if sname:
            body, offset = tip[int(m.site_bodyid[s])]
            pos, quat = _same_frame(mujoco, m.site_sameframe[s], m.site_pos[s], m.site_quat[s],
                                    inertial_frame[int(m.site_bodyid[s])])
            site_frames[s] = f"site:{sname}" if sname in taken else sname
            builder.add_frame(site_frames[s], body, rotation=_quat_to_rotation(quat), translation=offset + pos)
    return builder.build(dtype=dtype), site_frames


def _chain_names(mujoco, m, b, name):
    """Names of the mbjax bodies and of the joints of MuJoCo body b (which has joints).

    The body keeps its name when it has one joint and that joint's frame is the body's (no
    anchor away from the body origin); otherwise the joint bodies are ``"body:joint"``.
    """
    joints = range(m.body_jntadr[b], m.body_jntadr[b] + m.body_jntnum[b])
    names = [mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_JOINT, j) or f"{name}_joint{k}" for k, j in enumerate(joints)]
    jt = mujoco.mjtJoint
    single = len(names) == 1 and not (int(m.jnt_type[joints[0]]) in (jt.mjJNT_HINGE, jt.mjJNT_BALL)
                                      and np.any(m.jnt_pos[joints[0]]))
    return [name] if single else [f"{name}:{jn}" for jn in names], names


def _add_joints(mujoco, m, builder, b, name, parent, placement, inertial, passive):
    """Add MuJoCo body b, which has joints, as a chain of one mbjax body per joint.

    MuJoCo moves the body frame F joint by joint: F <- F T(a) X_J(q) T(-a) for a hinge or ball
    with anchor a (jnt_pos), F <- F X_J(q) for a slide. Joint body k sits at its anchor a_k:
    its placement is (body_quat, body_pos + R a_1) in the parent for the first joint and
    (E, a_k - a_{k-1}) after that; the last one carries the inertia, with the CoM at ipos - a_n.

    **Returns:** (name of the last joint body, position of b's origin in it).
    """
    jt = mujoco.mjtJoint
    kinds = {jt.mjJNT_HINGE: "revolute", jt.mjJNT_SLIDE: "prismatic", jt.mjJNT_BALL: "spherical", jt.mjJNT_FREE: "free"}
    springs, dampers = passive
    joints = list(range(m.body_jntadr[b], m.body_jntadr[b] + m.body_jntnum[b]))
    types = [int(m.jnt_type[j]) for j in joints]
    R, p = placement
    if jt.mjJNT_FREE in types:
        if len(joints) > 1 or m.body_parentid[b] != 0 or np.any(m.jnt_pos[joints[0]]):
            raise MJCFError(f"body {name!r}: a free joint must be the only joint of a child of the world, at the body origin")
        R, p = np.eye(3), np.zeros(3)  # qpos is the body's world pose
    for k in range(len(joints) - 1):
        if types[k] == jt.mjJNT_BALL and any(t in (jt.mjJNT_HINGE, jt.mjJNT_BALL) for t in types[k + 1 :]):
            raise MJCFError(
                f"body {name!r}: a ball joint followed by another rotation in the same body is not "
                "supported (MuJoCo's ball velocity would then not be the joint's own); split the body"
            )
    body_names, joint_names = _chain_names(mujoco, m, b, name)
    previous = None
    for k, j in enumerate(joints):
        kind = kinds[types[k]]
        a = np.array(m.jnt_pos[j]) if kind in ("revolute", "spherical") else np.zeros(3)
        Rj, pj = (R, p + R @ a) if previous is None else (np.eye(3), a - previous)
        qa, da = m.jnt_qposadr[j], m.jnt_dofadr[j]
        axis = np.array(m.jnt_axis[j])
        options = {}
        if kind == "revolute":  # MuJoCo turns by qpos - ref, and Rot(u, q - ref) = Rot(u, -ref) Rot(u, q)
            Rj = Rj @ _axis_rotation(axis, -m.qpos0[qa])
        elif kind == "prismatic":
            pj = pj - Rj @ axis * m.qpos0[qa]
        if m.jnt_limited[j] and kind in ("revolute", "prismatic"):
            options.update(lower=m.jnt_range[j][0], upper=m.jnt_range[j][1])
        if k == len(joints) - 1:
            options.update(inertial, com=inertial["com"] - a)
        nq, nv = JOINT_TYPES[kind].nq, JOINT_TYPES[kind].nv
        builder.add_body(
            body_names[k], parent=parent, joint=kind, joint_name=joint_names[k], axis=axis, rotation=Rj,
            translation=pj, armature=m.dof_armature[da : da + nv],
            damping=m.dof_damping[da : da + nv] if dampers else 0.0,
            stiffness=m.jnt_stiffness[j] if springs and kind != "free" else 0.0,
            spring_reference=m.qpos_spring[qa : qa + nq], **options,
        )
        parent, previous = body_names[k], a
    return parent, -previous


def _same_frame(mujoco, flag, pos, quat, inertial_frame):
    """Position and orientation of a frame in its body, as MuJoCo's kinematics uses them.

    MuJoCo's compiler marks a frame that lies within rounding of its body's frame (or, for
    sites, of the body's inertial frame ``inertial_frame``) as the same frame, and then uses
    that frame's pose: do the same, for results equal to MuJoCo's to the last digits.
    """
    same, identity, flag = mujoco.mjtSameFrame, np.array([1.0, 0, 0, 0]), int(flag)
    if flag == same.mjSAMEFRAME_BODY:
        return np.zeros(3), identity
    if flag == same.mjSAMEFRAME_BODYROT:
        return np.array(pos), identity
    if flag == same.mjSAMEFRAME_INERTIA:
        return inertial_frame
    if flag == same.mjSAMEFRAME_INERTIAROT:
        return np.array(pos), inertial_frame[1]
    return np.array(pos), np.array(quat)


def _rotate(principal, quat):
    """Inertia tensor R diag(principal) R^T of MuJoCo's principal moments and iquat."""
    R = _quat_to_rotation(quat)
    return R @ np.diag(principal) @ R.T
