"""Contacts of an MJCF model: its geoms as collision shapes and its plane as the ground, read
from MuJoCo's compiled model (as :func:`mbjax.load_mjcf` reads the bodies)."""

from __future__ import annotations

import warnings

import numpy as np

from ..model.mjcf import compile_mjcf, import_mujoco
from ..model.model import Model
from .compliant import CompliantContact, Friction
from .ground import Plane
from .shapes import box, capsule, contact_points, mesh, sphere


def _rotation(mujoco, quat):
    R = np.zeros(9)
    mujoco.mju_quat2Mat(R, quat)
    return R.reshape(3, 3)


def _collide(m, a, b):
    """MuJoCo's filter: geoms a and b collide when contype of one meets conaffinity of the other."""
    return bool((m.geom_contype[a] & m.geom_conaffinity[b]) or (m.geom_contype[b] & m.geom_conaffinity[a]))


def mjcf_contacts(model: Model, source, normal, slip_speed=1e-4, filters: bool = True) -> CompliantContact:
    """The compliant contacts of the MJCF model ``source`` (a path, MJCF text or an
    ``MjModel``) loaded as ``model`` (by :func:`mbjax.load_mjcf`).

    Its first plane geom in the world body is the ground; its spheres, capsules and boxes on
    moving bodies become shapes (:mod:`mbjax.contact.shapes`), meshes by their hulls' vertices;
    cylinders and ellipsoids are left out with a warning. With ``filters``, a geom is kept only
    when MuJoCo would let it collide with the ground (``contype`` / ``conaffinity``); friction
    is MuJoCo's rule for a pair, the larger sliding coefficient of the geom and the ground.
    ``normal`` is the normal law (:class:`SpringDamper` or :class:`HuntCrossley`: MuJoCo's soft
    constraints have no exact counterpart) and ``slip_speed`` the friction's regularisation.
    """
    mujoco = import_mujoco()
    m = compile_mjcf(source)
    geom = mujoco.mjtGeom
    planes = [g for g in range(m.ngeom) if m.geom_bodyid[g] == 0 and m.geom_type[g] == geom.mjGEOM_PLANE]
    if not planes:
        raise ValueError("mjcf_contacts: the model has no plane geom in its world body to serve as the ground")
    ground = planes[0]
    R0 = _rotation(mujoco, m.geom_quat[ground])
    plane = Plane(R0[:, 2], R0[:, 2] @ m.geom_pos[ground])
    shapes, mu, skipped = [], [], []
    for g in range(m.ngeom):
        b = int(m.geom_bodyid[g])
        if b == 0 or (filters and not _collide(m, g, ground)):
            continue
        name = mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_BODY, b) or f"body{b}"
        f = model.frame_index(name)
        body = model.topology.frame_bodies[f]
        if body < 0:  # welded to the world: never moves onto the ground
            continue
        # the geom's pose in the mbjax body: its MuJoCo body's frame, then the geom in it
        Rf, pf = np.asarray(model.frame_rotation[f]), np.asarray(model.frame_translation[f])
        R = Rf @ _rotation(mujoco, m.geom_quat[g])
        t = Rf @ m.geom_pos[g] + pf
        size, kind = m.geom_size[g], m.geom_type[g]
        if kind == geom.mjGEOM_SPHERE:
            shape = sphere(size[0], t)
        elif kind == geom.mjGEOM_CAPSULE:
            shape = capsule(size[0], size[1], R, t)
        elif kind == geom.mjGEOM_BOX:
            shape = box(size, R, t)
        elif kind == geom.mjGEOM_MESH:
            i = m.geom_dataid[g]
            shape = mesh(m.mesh_vert[m.mesh_vertadr[i]: m.mesh_vertadr[i] + m.mesh_vertnum[i]], R, t)
        else:
            skipped.append(mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_GEOM, g) or f"geom{g}")
            continue
        shapes.append((body, shape))
        mu.append(np.full(len(shape[1]), max(m.geom_friction[g][0], m.geom_friction[ground][0])))
    if skipped:
        warnings.warn(f"mjcf_contacts: geoms {skipped} are cylinders or ellipsoids, which mbjax.contact does not "
                      "model; they get no contact", stacklevel=2)
    if not shapes:
        raise ValueError("mjcf_contacts: no geom of a moving body collides with the ground (contype / conaffinity); "
                         "pass filters=False to give every sphere, capsule, box and mesh a contact")
    points = contact_points(model, shapes)
    return CompliantContact(points, Plane(plane.normal.astype(model.dtype), plane.offset.astype(model.dtype)), normal,
                            Friction(np.concatenate(mu).astype(model.dtype), slip_speed))
