"""Classic planar closed-chain mechanisms, built as a tree Model plus LoopClosures.

Links lie along their local x axis, from their joint to their tip; all joint axes are z and
gravity acts along -y, so the mechanisms move in the x-y plane. Each link is a uniform bar of
mass m and length l: centre of mass at l/2, moments of inertia m l^2 / 12 about y and z.
"""

from __future__ import annotations

import numpy as np

from ..model.builder import ModelBuilder
from .closures import LoopClosureBuilder

PLANAR = ("x", "y")  # the rows of a planar pin joint that are not identically satisfied


def _bar(mass, length):
    inertia = np.diag([1e-6, 1.0, 1.0]) * mass * length**2 / 12.0
    return dict(mass=mass, com=(length / 2.0, 0.0, 0.0), inertia=inertia)


def four_bar(ground=1.0, crank=0.4, coupler=1.0, rocker=0.8, masses=(1.0, 2.0, 1.5), planar_closure=True):
    """A four-bar linkage: crank (pivot at the origin) - coupler - rocker (pivot at
    (``ground``, 0, 0)); the coupler tip is pinned to the rocker tip by a revolute cut joint.

    **Arguments:** link lengths, the masses of crank, coupler and rocker; ``planar_closure``:
    keep only the pin's two in-plane rows (independent constraints); ``False`` keeps all five
    revolute rows, three of which hold identically in the plane: a redundant, rank-deficient
    closure (Phi_q has rank 2).

    **Returns:** ``(model, closures)``; q = (crank angle, coupler angle relative to the crank,
    rocker angle), all joints revolute about z.
    """
    b = ModelBuilder("four_bar", gravity=(0.0, -9.81, 0.0))
    b.add_body("crank", joint="revolute", **_bar(masses[0], crank))
    b.add_body("coupler", parent="crank", joint="revolute", translation=(crank, 0.0, 0.0), **_bar(masses[1], coupler))
    b.add_body("rocker", joint="revolute", translation=(ground, 0.0, 0.0), **_bar(masses[2], rocker))
    model = b.build()
    lb = LoopClosureBuilder(model)
    lb.add_loop("pin", "revolute", "coupler", "rocker", translation_a=(coupler, 0.0, 0.0),
                translation_b=(rocker, 0.0, 0.0), directions=PLANAR if planar_closure else None)
    return model, lb.build()


def slider_crank(crank=0.3, rod=1.0, masses=(1.0, 1.5, 2.0)):
    """A slider-crank: crank (pivot at the origin) - connecting rod - slider on the x axis; the
    rod's tip is pinned to the slider by a planar revolute cut joint.

    **Returns:** ``(model, closures)``; q = (crank angle, rod angle relative to the crank,
    slider position).
    """
    b = ModelBuilder("slider_crank", gravity=(0.0, -9.81, 0.0))
    b.add_body("crank", joint="revolute", **_bar(masses[0], crank))
    b.add_body("rod", parent="crank", joint="revolute", translation=(crank, 0.0, 0.0), **_bar(masses[1], rod))
    b.add_body("slider", joint="prismatic", axis=(1.0, 0.0, 0.0), mass=masses[2],
               inertia=np.eye(3) * 1e-3)
    model = b.build()
    lb = LoopClosureBuilder(model)
    lb.add_loop("pin", "revolute", "rod", "slider", translation_a=(rod, 0.0, 0.0), directions=PLANAR)
    return model, lb.build()
