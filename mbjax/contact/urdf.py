"""Contacts of a URDF model: the ``<collision>`` geometries of its links as collision shapes
(as :func:`mbjax.load_urdf` reads the links)."""

from __future__ import annotations

import os
import re
import struct
import warnings
from pathlib import Path

import numpy as np

from ..model.model import Model
from ..model.urdf import URDFError, origin_placement, parse_floats, read_urdf
from .compliant import CompliantContact
from .ground import Plane
from .shapes import box, contact_points, mesh, sphere


def urdf_contacts(model: Model, source, normal, friction=None, ground: Plane | None = None,
                  package_dirs=()) -> CompliantContact:
    """The compliant contacts of the URDF ``source`` (a path, or URDF text) loaded as ``model``
    (by :func:`mbjax.load_urdf` or :func:`mbjax.load_example_robot`).

    Every ``<collision>`` of a link on a moving body becomes a shape on that body
    (:mod:`mbjax.contact.shapes`): spheres, boxes, and meshes (STL, binary or ASCII, scaled) by
    the vertices of their convex hull, the only points of a mesh that can touch a plane first
    (as MuJoCo collides meshes); cylinders are left out with a warning. URDF has no ground and
    no friction: ``ground`` (default: the horizontal plane z = 0), the normal law ``normal``
    (:class:`SpringDamper` or :class:`HuntCrossley`) and ``friction`` (:class:`Friction`, or
    None) are given. A mesh ``package://NAME/path`` is looked up in ``package_dirs`` and in the
    folders above the URDF file (e.g. ``.../share`` for example-robot-data).
    """
    robot = read_urdf(source)
    here = Path(str(source)).resolve().parent if os.path.exists(str(source)) else None
    search = [Path(d) for d in package_dirs] + ([] if here is None else [here, *here.parents])
    shapes, skipped = [], []
    for link in robot.findall("link"):
        name = link.get("name")
        f = model.frame_index(name)
        body = model.topology.frame_bodies[f]
        if body < 0:  # welded to the world: never moves onto the ground
            continue
        Rf, pf = np.asarray(model.frame_rotation[f]), np.asarray(model.frame_translation[f])
        for k, collision in enumerate(link.findall("collision")):
            what = f"collision {k} of link {name!r}"
            Rc, tc = origin_placement(collision, what)
            R, t = Rf @ Rc, Rf @ tc + pf
            geometry = collision.find("geometry")
            kind = None if geometry is None or len(geometry) == 0 else geometry[0]
            if kind is None:
                raise URDFError(f"{what} has no <geometry>")
            if kind.tag == "sphere":
                shape = sphere(parse_floats(kind.get("radius") or "", 1, f"sphere radius of {what}")[0], t)
            elif kind.tag == "box":
                shape = box(0.5 * parse_floats(kind.get("size") or "", 3, f"box size of {what}"), R, t)
            elif kind.tag == "mesh":
                scale = parse_floats(kind.get("scale", "1 1 1"), 3, f"mesh scale of {what}")
                shape = mesh(stl_vertices(_mesh_path(kind.get("filename"), search, here, what)), R, t, scale)
            else:
                skipped.append(f"{name}/{kind.tag}")
                continue
            shapes.append((body, shape))
    if skipped:
        warnings.warn(f"urdf_contacts: {skipped} are cylinders (or other shapes) mbjax.contact does not model; they "
                      "get no contact", stacklevel=2)
    if not shapes:
        raise ValueError("urdf_contacts: no link on a moving body has a <collision> sphere, box or mesh")
    ground = Plane.horizontal(0.0, model.dtype) if ground is None else ground
    return CompliantContact(contact_points(model, shapes), ground, normal, friction)


def _mesh_path(filename, search, here, what) -> str:
    """The file of a mesh ``filename``: ``package://NAME/...`` under one of ``search``,
    ``file://...``, or a path relative to the URDF's folder ``here``."""
    if not filename:
        raise URDFError(f"{what}: <mesh> has no filename")
    if filename.startswith("package://"):
        rest = filename[len("package://"):]
        for folder in search:
            if (folder / rest).is_file():
                return str(folder / rest)
        raise FileNotFoundError(f"{what}: mesh {filename!r} not found under {[str(s) for s in search]}; pass the folder "
                                "that holds its package as package_dirs=[...]")
    path = Path(filename[len("file://"):] if filename.startswith("file://") else filename)
    if not path.is_absolute() and here is not None:
        path = here / path
    if not path.is_file():
        raise FileNotFoundError(f"{what}: no mesh file {str(path)!r}")
    return str(path)


def stl_vertices(path) -> np.ndarray:
    """The distinct vertices (n, 3) of an STL file, binary or ASCII."""
    data = Path(path).read_bytes()
    if len(data) >= 84:
        (count,) = struct.unpack("<I", data[80:84])
        if len(data) == 84 + 50 * count:  # binary: 80-byte header, count, then 50 bytes per facet
            facets = np.frombuffer(data[84:], dtype=np.dtype([("n", "<f4", 3), ("v", "<f4", (3, 3)), ("a", "<u2")]))
            return np.unique(facets["v"].reshape(-1, 3).astype(float), axis=0)
    text = data.decode("ascii", errors="replace")
    found = re.findall(r"vertex\s+(\S+)\s+(\S+)\s+(\S+)", text)
    if not found:
        raise ValueError(f"{path}: not an STL file (no binary facets, no ASCII vertices)")
    return np.unique(np.asarray(found, dtype=float), axis=0)
