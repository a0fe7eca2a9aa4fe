"""MJCF models with their ``connect`` and ``weld`` equalities as loop closures."""

from __future__ import annotations

from ..model.mjcf import load_mjcf_equalities
from .closures import LoopClosureBuilder


def load_mjcf_with_closures(source, ignore=(), inertia_check: str = "raise", dtype=None):
    """Like :func:`mbjax.load_mjcf`, with the model's ``connect`` and ``weld`` equalities as loop
    closures.

    **Returns:** ``(model, closures)``: the :class:`mbjax.Model` of the kinematic tree and the
    :class:`mbjax.LoopClosures` (``None`` when the file has no active connect or weld), for
    :func:`mbjax.constrained_forward_dynamics`, :func:`mbjax.constrained_vector_field` and :func:`mbjax.assemble`.
    A ``connect`` becomes a spherical cut joint at its two anchors; a ``weld`` a rigid cut
    joint whose frames are body 1 at the weld's anchor turned by ``relpose``, and body 2 at
    the anchor (sites: the site frames). Other equalities (joint, tendon, distance, flex) are
    refused unless ``ignore`` names ``"equality"``. Equalities that are inactive in the file
    (``active="false"``) are left out, as MuJoCo leaves them out until they are switched on.
    """
    model, equalities = load_mjcf_equalities(source, ignore, inertia_check, dtype)
    if not equalities:
        return model, None
    builder = LoopClosureBuilder(model)
    for e in equalities:
        builder.add_loop(e.name, e.joint, e.frame_a, e.frame_b, **e.pose_a, **e.pose_b)
    return model, builder.build(dtype=dtype)
