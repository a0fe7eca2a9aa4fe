"""Contacts of an MJCF model: its geoms as collision shapes, its plane or hfield as the
ground, and the pairs of its geoms that may touch, read from MuJoCo's compiled model (as
:func:`mbjax.load_mjcf` reads the bodies)."""

from __future__ import annotations

import warnings

import jax
import numpy as np

from ..model.mjcf import compile_mjcf, import_mujoco
from ..model.model import Model
from .compliant import CompliantContact, Friction, PairContact
from .ground import Plane
from .heightfield import Heightfield
from .pairs import body_pairs
from .shapes import box, capsule, contact_points, mesh, sphere


def _rotation(mujoco, quat):
    R = np.zeros(9)
    mujoco.mju_quat2Mat(R, quat)
    return R.reshape(3, 3)


def _collide(m, a, b):
    """MuJoCo's filter: geoms a and b collide when contype of one meets conaffinity of the other."""
    return bool((m.geom_contype[a] & m.geom_conaffinity[b]) or (m.geom_contype[b] & m.geom_conaffinity[a]))


def _pair_friction(m, a, b) -> float:
    """MuJoCo's sliding friction of geoms a and b: the one of higher ``priority``'s, else the larger."""
    pa, pb = m.geom_priority[a], m.geom_priority[b]
    fa, fb = m.geom_friction[a][0], m.geom_friction[b][0]
    return float(fa if pa > pb else fb if pb > pa else max(fa, fb))


def _geom_shape(mujoco, m, model: Model, g):
    """``(mbjax body, shape)`` of MuJoCo's geom ``g`` (:mod:`.shapes`), its pose the geom's in its
    MuJoCo body composed with that body's frame in the mbjax body; the body is None for a
    geom fixed to the world (it never moves), the shape None for a type mbjax does not model
    (cylinders, ellipsoids, ...)."""
    geom = mujoco.mjtGeom
    b = int(m.geom_bodyid[g])
    f = model.frame_index(mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_BODY, b) or f"body{b}") if b else None
    body = -1 if f is None else model.topology.frame_bodies[f]
    if body < 0:
        return None, None
    Rf, pf = np.asarray(model.frame_rotation[f]), np.asarray(model.frame_translation[f])
    R = Rf @ _rotation(mujoco, m.geom_quat[g])
    t = Rf @ m.geom_pos[g] + pf
    size, kind = m.geom_size[g], m.geom_type[g]
    if kind == geom.mjGEOM_SPHERE:
        return body, sphere(size[0], t)
    if kind == geom.mjGEOM_CAPSULE:
        return body, capsule(size[0], size[1], R, t)
    if kind == geom.mjGEOM_BOX:
        return body, box(size, R, t)
    if kind == geom.mjGEOM_MESH:
        i = m.geom_dataid[g]
        return body, mesh(m.mesh_vert[m.mesh_vertadr[i]: m.mesh_vertadr[i] + m.mesh_vertnum[i]], R, t)
    return body, None


def _geom_name(mujoco, m, g):
    return mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_GEOM, g) or f"geom{g}"


def mjcf_contacts(model: Model, source, normal, slip_speed=1e-4, filters: bool = True) -> CompliantContact:
    """The compliant contacts of the MJCF model ``source`` (a path, MJCF text or an
    ``MjModel``) loaded as ``model`` (by :func:`mbjax.load_mjcf`).

    Its first plane or hfield geom in the world body is the ground (a :class:`Plane`, or a
    :class:`Heightfield` of the hfield's data times its elevation); its spheres, capsules and boxes on
    moving bodies become shapes (:mod:`mbjax.contact.shapes`), meshes by their hulls' vertices;
    cylinders and ellipsoids are left out with a warning. With ``filters``, a geom is kept only
    when MuJoCo would let it collide with the ground (``contype`` / ``conaffinity``, or an
    explicit ``<pair>`` with the ground); friction is MuJoCo's rule for a pair (the pair's own,
    else the sliding coefficient of the geom of higher ``priority``, else the larger).
    ``normal`` is the normal law (:class:`SpringDamper` or :class:`HuntCrossley`: MuJoCo's soft
    constraints have no exact counterpart) and ``slip_speed`` the friction's regularisation.
    """
    mujoco = import_mujoco()
    m = compile_mjcf(source)
    geom = mujoco.mjtGeom
    grounds = [g for g in range(m.ngeom) if m.geom_bodyid[g] == 0
               and int(m.geom_type[g]) in (int(geom.mjGEOM_PLANE), int(geom.mjGEOM_HFIELD))]
    if not grounds:
        raise ValueError("mjcf_contacts: the model has no plane or hfield geom in its world body to serve as the "
                         "ground")
    ground = grounds[0]
    plane = int(m.geom_type[ground]) == int(geom.mjGEOM_PLANE)
    surface = _plane(mujoco, m, ground) if plane else _heightfield(mujoco, m, ground)
    # explicit <pair>s with the ground: kept whatever contype / conaffinity say, with their friction
    paired = {int(b if a == ground else a): float(f[0]) for a, b, f in zip(m.pair_geom1, m.pair_geom2, m.pair_friction)
              if ground in (a, b)}
    shapes, mu, skipped = [], [], []
    for g in range(m.ngeom):
        if m.geom_bodyid[g] == 0 or (filters and g not in paired and not _collide(m, g, ground)):
            continue
        body, shape = _geom_shape(mujoco, m, model, g)
        if body is None:  # welded to the world: never moves onto the ground
            continue
        if shape is None:
            skipped.append(_geom_name(mujoco, m, g))
            continue
        shapes.append((body, shape))
        mu.append(np.full(len(shape[1]), paired.get(g, _pair_friction(m, g, ground))))
    if skipped:
        warnings.warn(f"mjcf_contacts: geoms {skipped} are cylinders or ellipsoids, which mbjax.contact does not "
                      "model; they get no contact", stacklevel=2)
    if not shapes:
        raise ValueError("mjcf_contacts: no geom of a moving body collides with the ground (contype / conaffinity); "
                         "pass filters=False to give every sphere, capsule, box and mesh a contact")
    points = contact_points(model, shapes)
    surface = jax.tree.map(lambda x: x.astype(model.dtype), surface)
    return CompliantContact(points, surface, normal, Friction(np.concatenate(mu).astype(model.dtype), slip_speed))


def _plane(mujoco, m, g) -> Plane:
    R = _rotation(mujoco, m.geom_quat[g])
    return Plane(R[:, 2], R[:, 2] @ m.geom_pos[g])


def _heightfield(mujoco, m, g) -> Heightfield:
    """MuJoCo's hfield geom ``g``: its data (nrow, ncol) scaled by the elevation ``size[2]``,
    over the half sizes ``size[:2]``, at the geom's position (turned hfields are refused)."""
    if not np.allclose(m.geom_quat[g], [1.0, 0.0, 0.0, 0.0]):
        raise ValueError(f"mjcf_contacts: hfield {_geom_name(mujoco, m, g)!r} is turned (quat {m.geom_quat[g]}); "
                         "mbjax takes hfields aligned with the world's axes")
    k = m.geom_dataid[g]
    nrow, ncol, start = m.hfield_nrow[k], m.hfield_ncol[k], m.hfield_adr[k]
    data = np.asarray(m.hfield_data[start: start + nrow * ncol], float).reshape(nrow, ncol)
    size = m.hfield_size[k]
    return Heightfield(data * size[2], (float(size[0]), float(size[1])), tuple(float(x) for x in m.geom_pos[g]))


def mjcf_pairs(model: Model, source, normal, slip_speed=1e-4) -> PairContact:
    """The contacts between the bodies of the MJCF model ``source`` (a path, MJCF text or an
    ``MjModel``) loaded as ``model`` (by :func:`mbjax.load_mjcf`): its spheres and capsules on
    moving bodies (:func:`mbjax.contact.body_pairs`), paired as MuJoCo pairs them. Its explicit
    ``<pair>`` elements, with their own friction; and every two geoms whose ``contype`` and
    ``conaffinity`` match, except on one body (bodies welded together count as one), on a body
    and its parent, or on bodies that an ``<exclude>`` names, with MuJoCo's friction of a pair
    (the geom of higher ``priority``'s, else the larger sliding coefficient). Pairs with
    other geom types (boxes, meshes, cylinders) or with geoms fixed to the world are left out,
    with a warning. ``normal`` and ``slip_speed`` as for :func:`mjcf_contacts`.
    """
    mujoco = import_mujoco()
    m = compile_mjcf(source)
    shape_of = {}  # MuJoCo geom -> (mbjax body, shape), for the geoms that can be paired
    round_ = (int(mujoco.mjtGeom.mjGEOM_SPHERE), int(mujoco.mjtGeom.mjGEOM_CAPSULE))
    for g in range(m.ngeom):
        if int(m.geom_type[g]) in round_:  # (no convex hulls of meshes built to be dropped)
            body, shape = _geom_shape(mujoco, m, model, g)
            if body is not None:
                shape_of[g] = (body, shape)
    weld = m.body_weldid
    excluded = {int(x) for x in m.exclude_signature}
    explicit = {(int(a), int(b)): float(f[0]) for a, b, f in zip(m.pair_geom1, m.pair_geom2, m.pair_friction)}
    candidates = dict(explicit)
    for g1 in range(m.ngeom):
        for g2 in range(g1 + 1, m.ngeom):
            b1, b2 = m.geom_bodyid[g1], m.geom_bodyid[g2]
            w1, w2 = weld[b1], weld[b2]
            signature = (int(min(b1, b2)) << 16) + int(max(b1, b2))  # MuJoCo's, of the two bodies (not welds)
            parent = w1 and w2 and (weld[m.body_parentid[w1]] == w2 or weld[m.body_parentid[w2]] == w1)
            if ((g1, g2) in explicit or (g2, g1) in explicit or w1 == w2 or (w1 == 0 and w2 == 0) or parent
                    or signature in excluded or not _collide(m, g1, g2)):
                continue
            candidates[(g1, g2)] = _pair_friction(m, g1, g2)
    kept = {pair: mu for pair, mu in candidates.items() if all(g in shape_of for g in pair)}
    ground = {int(mujoco.mjtGeom.mjGEOM_PLANE), int(mujoco.mjtGeom.mjGEOM_HFIELD)}  # mjcf_contacts' contacts
    left_out = sorted(pair for pair in set(candidates) - set(kept) if not ground & {int(m.geom_type[g]) for g in pair})
    if left_out:
        warnings.warn(f"mjcf_pairs: {len(left_out)} geom pairs that MuJoCo would collide are left out: mbjax pairs "
                      f"spheres and capsules on moving bodies only (e.g. {_geom_name(mujoco, m, left_out[0][0])!r} "
                      f"and {_geom_name(mujoco, m, left_out[0][1])!r})", stacklevel=2)
    if not kept:
        raise ValueError("mjcf_pairs: no pair of spheres or capsules on moving bodies may touch")
    # MuJoCo's order in a pair: the geom of the lower type first (a sphere before a capsule), so
    # that the normals point the same way
    kept = {(a, b) if (m.geom_type[a], a) <= (m.geom_type[b], b) else (b, a): mu for (a, b), mu in kept.items()}
    geoms = sorted({g for pair in kept for g in pair})
    index = {g: i for i, g in enumerate(geoms)}
    pairs = body_pairs(model, [shape_of[g] for g in geoms], pairs=[(index[a], index[b]) for a, b in kept])
    mu = np.asarray(list(kept.values()), model.dtype)
    return PairContact(pairs, normal, Friction(mu, slip_speed))
