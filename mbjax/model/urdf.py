"""URDF loading.

Parsed with the standard library's ``xml.etree.ElementTree``: URDF's kinematic and inertial
content is a small, flat schema, and the maintained URDF packages on PyPI either pull in mesh
and ROS dependencies or are thin wrappers over the same parser. Keeping it in-house means one
dependency less and error messages that name the link or joint at fault.

Conventions match Pinocchio's ``buildModelFromUrdf``:

- the body frame of a link is its URDF link frame (the frame of its parent joint);
- fixed joints are merged: the child's inertia is added to the nearest movable ancestor and
  the child survives as a frame; a fixed base's root link is welded to the world;
- q is ordered depth first over the tree, children in file order (``joint_order="file"``,
  the order a user reads). Pinocchio reads URDF through urdfdom, which keeps joints in a map
  sorted by name, so *its* order visits children by joint name: ``joint_order="pinocchio"``
  reproduces it exactly, for a one-to-one comparison of q, v and every matrix;
- ``continuous`` joints use
  (cos, sin) (nq = 2), ``floating`` joints and the optional floating base use
  (position, quaternion) with the quaternion as **(w, x, y, z)** (Pinocchio stores x, y, z, w);
- the floating base's joint is named ``root_joint``;
- ``<dynamics damping=...>`` of revolute, continuous and prismatic joints becomes the
  model's joint ``damping`` (see :func:`mbjax.passive_forces`); ``friction`` is not modelled.
"""

from __future__ import annotations

import os
import xml.etree.ElementTree as ET

import numpy as np

from .builder import ModelBuilder
from .model import Model

_TYPES = {
    "revolute": "revolute",
    "continuous": "continuous",
    "prismatic": "prismatic",
    "fixed": "fixed",
    "floating": "free",
    "planar": "planar",
}


class URDFError(ValueError):
    """The URDF is malformed or uses something mbjax does not model."""


def rpy_to_rotation(rpy):
    """URDF's fixed-axis roll-pitch-yaw: R = Rz(yaw) Ry(pitch) Rx(roll)."""
    r, p, y = rpy
    cr, sr, cp, sp, cy, sy = np.cos(r), np.sin(r), np.cos(p), np.sin(p), np.cos(y), np.sin(y)
    return np.array(
        [
            [cy * cp, cy * sp * sr - sy * cr, cy * sp * cr + sy * sr],
            [sy * cp, sy * sp * sr + cy * cr, sy * sp * cr - cy * sr],
            [-sp, cp * sr, cp * cr],
        ]
    )


def parse_floats(text, n, what, finite=True):
    """``n`` numbers from ``text``, finite unless ``finite`` is False (a caller that checks them)."""
    try:
        vals = [float(x) for x in text.split()]
    except ValueError:
        raise URDFError(f"{what}: expected {n} numbers, got {text!r}") from None
    if len(vals) != n:
        raise URDFError(f"{what}: expected {n} numbers, got {text!r}")
    if finite and not np.all(np.isfinite(vals)):
        raise URDFError(f"{what}: {text!r} is not finite")
    return np.array(vals)


def _number(elem, key, what, default=None):
    """The number in attribute ``key`` of ``elem`` (``default`` when absent)."""
    text = elem.get(key)
    if text is None:
        return default
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if np.isnan(value):
        raise URDFError(f"{what}: <{elem.tag} {key}={text!r}> must be a number")
    return value


def origin_placement(elem, what):
    """The rotation (3, 3) and translation (3,) of ``elem``'s ``<origin>`` (identity without one)."""
    o = elem.find("origin") if elem is not None else None
    if o is None:
        return np.eye(3), np.zeros(3)
    xyz = parse_floats(o.get("xyz", "0 0 0"), 3, f"origin xyz of {what}")
    rpy = parse_floats(o.get("rpy", "0 0 0"), 3, f"origin rpy of {what}")
    return rpy_to_rotation(rpy), xyz


def _inertial(link):
    name = link.get("name")
    inertial = link.find("inertial")
    if inertial is None:
        return 0.0, np.zeros(3), np.zeros((3, 3))
    mass_el, inertia_el = inertial.find("mass"), inertial.find("inertia")
    if mass_el is None or mass_el.get("value") is None:
        raise URDFError(f"link {name!r}: <inertial> has no <mass value=...>")
    if inertia_el is None:
        raise URDFError(f"link {name!r}: <inertial> has no <inertia>")
    keys = ("ixx", "ixy", "ixz", "iyy", "iyz", "izz")
    missing = [k for k in keys if inertia_el.get(k) is None]
    if missing:
        raise URDFError(f"link {name!r}: <inertia> lacks {', '.join(missing)}")
    try:
        mass = float(mass_el.get("value"))
        ixx, ixy, ixz, iyy, iyz, izz = (float(inertia_el.get(k)) for k in keys)
    except ValueError:
        raise URDFError(f"link {name!r}: inertial values must be numbers") from None
    if not np.all(np.isfinite([mass, ixx, ixy, ixz, iyy, iyz, izz])):
        raise URDFError(f"link {name!r}: inertial values must be finite")
    R, c = origin_placement(inertial, f"inertial of link {name!r}")
    I = np.array([[ixx, ixy, ixz], [ixy, iyy, iyz], [ixz, iyz, izz]])
    return mass, c, R @ I @ R.T


def read_urdf(source):
    """The ``<robot>`` element of a URDF path or text (clear errors for a missing file, bad XML
    or another root)."""
    text = str(source)
    if text.lstrip().startswith("<"):
        data = text
    elif os.path.exists(text):
        with open(text, encoding="utf-8") as fh:
            data = fh.read()
    else:
        raise FileNotFoundError(f"no URDF file at {text!r} (and the argument is not URDF text)")
    try:
        root = ET.fromstring(data)
    except ET.ParseError as e:
        raise URDFError(f"malformed URDF (XML error: {e})") from None
    if root.tag != "robot":
        raise URDFError(f"the root element is <{root.tag}>; a URDF starts with <robot>")
    return root


def load_urdf(source, floating_base: bool = False, mimic: str = "error", joint_order: str = "file",
              inertia_check: str = "raise", dtype=None) -> Model:
    """Build a :class:`Model` from a URDF file path or URDF text.

    **Arguments:**

    - ``source``: path to a ``.urdf`` file, or the XML text itself.
    - ``floating_base``: attach the root link to the world with a free joint ``root_joint``.
    - ``mimic``: ``"error"`` (default) refuses joints with a ``<mimic>`` tag, since mbjax does
      not couple them; ``"independent"`` loads them as ordinary independent joints (what
      Pinocchio does by default).
    - ``joint_order``: ``"file"`` (children in file order) or ``"pinocchio"`` (children sorted
      by joint name, Pinocchio's order).
    - ``inertia_check``: ``"raise"`` (default) on inertias no rigid body can have (negative
      principal moment, triangle inequality), or ``"warn"`` and keep them as given.
    - ``dtype``: floating-point type of the model's arrays.
    """
    if mimic not in ("error", "independent"):
        raise ValueError(f"mimic must be 'error' or 'independent', not {mimic!r}")
    if joint_order not in ("file", "pinocchio"):
        raise ValueError(f"joint_order must be 'file' or 'pinocchio', not {joint_order!r}")
    robot = read_urdf(source)
    links = {}
    for link in robot.findall("link"):
        name = link.get("name")
        if not name:
            raise URDFError("a <link> has no name")
        if name in links:
            raise URDFError(f"link {name!r} is defined twice")
        links[name] = link
    if not links:
        raise URDFError("the URDF has no <link>")

    children: dict[str, list] = {n: [] for n in links}
    parent_of: dict[str, str] = {}
    seen_joints = set()
    for joint in robot.findall("joint"):
        jname = joint.get("name")
        if not jname:
            raise URDFError("a <joint> has no name")
        if jname in seen_joints:
            raise URDFError(f"joint {jname!r} is defined twice")
        seen_joints.add(jname)
        p, c = joint.find("parent"), joint.find("child")
        if p is None or c is None or not p.get("link") or not c.get("link"):
            raise URDFError(f"joint {jname!r} needs <parent link=...> and <child link=...>")
        pl, cl = p.get("link"), c.get("link")
        for ln in (pl, cl):
            if ln not in links:
                raise URDFError(f"joint {jname!r} refers to link {ln!r}, which is not defined")
        if cl in parent_of:
            raise URDFError(f"link {cl!r} has two parent joints; URDF describes trees only")
        parent_of[cl] = jname
        children[pl].append(joint)

    if joint_order == "pinocchio":
        for js in children.values():
            js.sort(key=lambda j: j.get("name").encode())
    roots = [n for n in links if n not in parent_of]
    if len(roots) != 1:
        if not roots:
            raise URDFError("the joints form a cycle: no link is free of a parent joint")
        raise URDFError(f"the URDF has {len(roots)} root links {roots}; it must form one tree")
    root = roots[0]

    builder = ModelBuilder(robot.get("name", "robot"), inertia_check=inertia_check)
    m, c, I = _inertial(links[root])
    builder.add_body(root, joint="free" if floating_base else "fixed", joint_name="root_joint",
                     mass=m, com=c, inertia=I)
    reached = {root}
    stack = [root]
    while stack:
        parent = stack.pop()
        for joint in children[parent]:
            _add_joint(builder, joint, links, mimic)
        # visit children in file order: push in reverse
        for joint in reversed(children[parent]):
            stack.append(joint.find("child").get("link"))
            reached.add(joint.find("child").get("link"))
    if len(reached) != len(links):
        raise URDFError(f"links {sorted(set(links) - reached)} are not connected to the root {root!r} (cycle?)")
    return builder.build(dtype=dtype)


def _add_joint(builder, joint, links, mimic):
    jname = joint.get("name")
    jtype = joint.get("type")
    if jtype not in _TYPES:
        raise URDFError(f"joint {jname!r} has type {jtype!r}; supported: {', '.join(_TYPES)}")
    if joint.find("mimic") is not None and mimic == "error":
        mj = joint.find("mimic")
        raise URDFError(
            f"joint {jname!r} mimics joint {mj.get('joint')!r} (multiplier {mj.get('multiplier', '1')}, "
            f"offset {mj.get('offset', '0')}). mbjax does not couple mimic joints; pass "
            "mimic='independent' to load it as an ordinary joint (Pinocchio's default)."
        )
    child = joint.find("child").get("link")
    R, p = origin_placement(joint, f"joint {jname!r}")
    axis_el = joint.find("axis")
    axis = (parse_floats(axis_el.get("xyz", "1 0 0"), 3, f"axis of joint {jname!r}", finite=False) if axis_el is not None
            else np.array([1.0, 0, 0]))  # checked below, where it is used
    kind = _TYPES[jtype]
    if kind not in ("fixed", "free") and not (np.all(np.isfinite(axis)) and np.any(axis != 0)):
        raise URDFError(f"joint {jname!r}: <axis xyz={axis_el.get('xyz')!r}> is not a direction; give a finite, "
                        "non-zero vector")
    if kind == "planar":
        scaled = axis / np.abs(axis).max()  # scaled first: no overflow in the norm
        if not np.allclose(scaled / np.linalg.norm(scaled), [0, 0, 1]):
            raise URDFError(f"planar joint {jname!r}: only the x-y plane (axis 0 0 1) is supported; rotate its origin "
                            "instead")
    options = {}
    what = f"joint {jname!r}"
    lim = joint.find("limit")
    if lim is not None and kind in ("revolute", "prismatic"):
        if kind == "revolute" or lim.get("lower") is not None:
            options["lower"] = _number(lim, "lower", what, 0.0)
            options["upper"] = _number(lim, "upper", what, 0.0)
    if lim is not None and kind in ("revolute", "prismatic", "continuous"):
        for key in ("velocity", "effort"):
            if lim.get(key) is not None:
                options[f"{key}_limit"] = _number(lim, key, what)
    dyn = joint.find("dynamics")
    if dyn is not None and dyn.get("damping") is not None and kind in ("revolute", "prismatic", "continuous"):
        options["damping"] = _number(dyn, "damping", what)
    m, c, I = _inertial(links[child])
    parent = joint.find("parent").get("link")
    builder.add_body(child, parent=parent, joint=kind, joint_name=jname, axis=axis, rotation=R,
                     translation=p, mass=m, com=c, inertia=I, **options)
