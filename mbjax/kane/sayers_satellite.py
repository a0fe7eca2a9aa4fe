"""The satellite of Sayers (1991, Table 2, Figs. 1-2) as a ready model.

Bus B (parent N; translations along n1, n2, n3, then rotations 1-2-3 about n1, the
intermediate axis and b3), clock C (parent B, rotation about b3, mass centre on the axis: a
*fixed* rotor lumped into B), camera D (parent C, rotation about c1), massless body E
(parent B, rotation about b3) and boom F (parent E, rotation about e1): E and F make the
boom's two-axis flexing. No gravity. q = (q1..q10), u = (u1..u10) as in Table 2:
u1-u3 are the velocity components of the composite mass centre of B (bus + clock) along b1-b3,
u4-u6 the angular-velocity components of B along b1-b3, u7-u10 the joint angle rates.

The paper prints no numbers for lengths, masses and inertias. :data:`PARAMETERS` holds the
values chosen here (SI units), all in one place:

- bus: 1500 kg, 2 m class; its own mass centre at B0 (so that the composite mass centre is
  (0, 0, -P1) with P1 = L2 M_C / (M_B + M_C), as in Table 2), inertia with products
  (I_B12, I_B13, I_B23), kg m^2.
- clock: 40 kg turntable, transverse moment I_C and axial moment I_C3. Table 2 prints the
  clock's dyadic as ``I_C (b1 b1) + I_C (b2 b2)`` with no b3 b3 term; a turntable has an axial
  moment, so I_C3 is kept (set it to 0 for the printed dyadic).
- camera: 25 kg with a full inertia matrix (I_D11 ... I_D23).
- boom: 12 kg, 5 m long along -f2 (mass centre at L8 = 2.5 m), I_F1 = m l^2 / 12 about e1
  and f3, I_F2 small about its own axis (Table 2's dyadic ``I_F1 e1e1 + I_F2 f2f2 + I_F1 f3f3``).
- lengths L1..L8 (m): joint point of D in C (0, L3, -L1), clock mass centre (0, 0, -L2),
  camera mass centre (0, -L5, -L6), joint point of E in B (0, -L7, 0), boom mass centre
  (0, -L8, 0). (L4 does not appear in Table 2.)
"""

from __future__ import annotations

import numpy as np

from .system import KaneBuilder, KaneSystem

PARAMETERS = dict(
    M_B=1500.0, M_C=40.0, M_D=25.0, M_F=12.0,
    I_B=((1800.0, -30.0, 25.0), (-30.0, 1500.0, 15.0), (25.0, 15.0, 1200.0)),
    I_C=1.5, I_C3=2.5,
    I_D=((0.8, 0.05, -0.03), (0.05, 0.6, 0.02), (-0.03, 0.02, 0.5)),
    I_F1=25.0, I_F2=0.05,
    L1=0.6, L2=0.4, L3=0.3, L5=0.15, L6=0.2, L7=1.2, L8=2.5,
)


def p1(params=PARAMETERS) -> float:
    """P1 = L2 M_C / (M_B + M_C): the composite mass centre of B is at (0, 0, -P1)."""
    return params["L2"] * params["M_C"] / (params["M_B"] + params["M_C"])


def satellite(**overrides) -> KaneSystem:
    """The satellite of Table 2 as a :class:`~mbjax.kane.KaneSystem`.

    **Arguments:** any entry of :data:`PARAMETERS` to change, e.g. ``satellite(M_F=20.0)``.
    """
    unknown = set(overrides) - set(PARAMETERS)
    if unknown:
        raise ValueError(f"unknown satellite parameters {sorted(unknown)}; known: {sorted(PARAMETERS)}")
    P = {**PARAMETERS, **overrides}
    n1, n2, n3 = np.eye(3)
    b = KaneBuilder(gravity=(0.0, 0.0, 0.0))
    b.add_body("bus", translations=(n1, n2, n3), rotations=(1, 2, 3), d_rot=n1, d_ref=n2,
               mass=P["M_B"], inertia=np.asarray(P["I_B"]))
    b.add_body("clock", "bus", rotations=(3,), d_rot=n3, d_ref=n1, mass=P["M_C"], com=(0.0, 0.0, -P["L2"]),
               inertia=np.diag([P["I_C"], P["I_C"], P["I_C3"]]))
    b.add_body("camera", "clock", joint_point=(0.0, P["L3"], -P["L1"]), rotations=(1,), d_rot=n1, d_ref=n2,
               mass=P["M_D"], com=(0.0, -P["L5"], -P["L6"]), inertia=np.asarray(P["I_D"]))
    b.add_body("E", "bus", joint_point=(0.0, -P["L7"], 0.0), rotations=(3,), d_rot=n3, d_ref=n1)
    b.add_body("boom", "E", rotations=(1,), d_rot=n1, d_ref=n2, mass=P["M_F"], com=(0.0, -P["L8"], 0.0),
               inertia=np.diag([P["I_F1"], P["I_F2"], P["I_F1"]]))
    return b.build()
