"""The two examples of Huang et al. (2000): the planar double pendulum (Fig. 8) and
the 3-leg Stewart platform (Fig. 10), with the printed data and the repairs they need.

**Stewart platform data and their repair.** Fig. 10 prints, at the initial pose, the centres
of mass of the seven links and the positions of the nine joints (world frame, metres, two
decimals), the revolute joints' directions, and the principal inertias. Read as printed:

- Leg Li runs from knee J(i+3) to ball J(i): its printed centre of mass is their midpoint.
- The crank centres of mass are the midpoints of J4–J8, J5–J7 and J6–J9, while the paper's
  own bookkeeping (Sec. 12: ``Q_(i+3)`` holds the reactions of joint ``i+6`` on link
  ``i+3``) puts motor J(i+6) on crank L(i+3): the printed **positions of J7 and J8 are
  swapped**. We keep the positions and re-label them: motor J7 at (0, 0.39, -0.03) on L4,
  J8 at (0.33, -0.19, -0.03) on L5, J9 at (-0.33, -0.19, -0.03) on L6.
- With that pairing, the printed motor "directions" (0, -0.97, 0.26), (-0.84, 0.48, 0.26),
  (0.84, 0.48, 0.26) are the unit vectors along the cranks, from the motor to the knee
  (within the rounding: e.g. (0, -0.10, 0.03)/0.104 = (0, -0.958, 0.287)). They cannot be
  rotation axes: a crank turning about its own length does not move its knee. **We take
  each motor axis parallel to its leg's knee axis** (J4: (1, 0, 0), J5: (-0.5, -0.87, 0),
  J6: (-0.5, 0.867, 0), normalised), perpendicular to the crank: every crank and leg then
  move in one vertical plane, the classic 3-RRS parallel mechanism.
- Principal axes: the links are long in their local x (I_x is the small inertia), so the
  legs' and cranks' x axes lie along them (I_y = I_z, so x fixes the tensor); the platform's
  largest inertia I_y = I_x + I_z is about its normal, the world z axis.
- Gravity is not stated: we use 9.81 m/s² along -z. Each motor applies +10 N m about its
  axis (counter-clockwise looking down the axis): with these axes, all three in the same
  sense, which drives the knees down at the start.

Every body's geometry is taken from these printed points, so the printed pose closes every
loop exactly; :func:`stewart_platform` still passes it through :func:`~mbjax.assemble`.
Its tree: motor joints (world → crank), knees (crank → leg), and a free joint for the
platform; the three balls are cut spherical joints. Rows: 6 revolute × 5 + 3 spherical × 3
= 39 constraints, hence 39 unknown reactions in Eq. (36). The paper counts 45: three
moments at each revolute joint; the six moments about the revolute axes are not reactions
(zero at the knees, the motor torques at the motors), which leaves the paper's own rule
"unknowns = joint constraints" (Sec. 13) at 39.
"""

from __future__ import annotations

import numpy as np

from ..model.builder import ModelBuilder
from .closures import LoopClosureBuilder

#: Fig. 8: mass (kg), inertia about the normal (kg m²), half length (m) of each link
DOUBLE_PENDULUM = dict(mass=14.59, inertia=1.36, half_length=0.61, gravity=9.81, dt=0.001)

#: Fig. 10 (c), (d) as printed (OCR's dropped decimal points restored)
STEWART_PRINTED = dict(
    mass=(5, 5, 5, 1, 1, 1, 10),
    inertia=((0.07, 0.7, 0.7),) * 3 + ((0.01, 0.1, 0.1),) * 3 + ((2.5, 5.0, 2.5),),
    com=((0, 0.450, 0.355), (0.39, -0.225, 0.355), (-0.39, -0.225, 0.355), (0, 0.337, -0.013),
         (0.292, -0.168, -0.013), (-0.292, -0.168, -0.013), (0, 0, 0.71)),
    joint=((0, 0.61, 0.71), (0.53, -0.31, 0.71), (-0.53, -0.31, 0.71), (0, 0.29, 0), (0.25, -0.14, 0),
           (-0.25, -0.14, 0), (0.33, -0.19, -0.03), (0, 0.39, -0.03), (-0.33, -0.19, -0.03)),
    direction={4: (1, 0, 0), 5: (-0.5, -0.87, 0), 6: (-0.5, 0.867, 0), 7: (0, -0.97, 0.26),
               8: (-0.84, 0.48, 0.26), 9: (0.84, 0.48, 0.26)},
    motor_torque=10.0,
    dt=0.002,
)


def huang_double_pendulum(gravity=DOUBLE_PENDULUM["gravity"]):
    """Fig. 8: two identical links hinged in series to the ground, moving in the x-y plane,
    gravity along -y.

    Each link lies along its local x axis from its hinge: mass 14.59 kg, centre of mass at
    0.61 m, inertia 1.36 kg m² about z (the paper's J' = [0 0 1.36]). The out-of-plane
    inertias, printed as zero, are set to (0.01, 1.36) kg m²: they do not enter the planar
    motion but keep each body's inertia invertible (Eq. 10 needs J'^-1).

    **Returns:** the Model; q = (θ1, θ2 - θ1), the angles of link 1 and of link 2 relative to
    link 1 from the x axis. No closures: both hinges are tree joints, whose reactions are
    Huang's unknowns (in-plane: the 4 of Eq. 39).
    """
    p = DOUBLE_PENDULUM
    link = dict(mass=p["mass"], com=(p["half_length"], 0.0, 0.0), inertia=np.diag([0.01, p["inertia"], p["inertia"]]))
    b = ModelBuilder("huang_double_pendulum", gravity=(0.0, -gravity, 0.0))
    b.add_body("link1", joint="revolute", joint_name="joint1", **link)
    b.add_body("link2", parent="link1", joint="revolute", joint_name="joint2",
               translation=(2 * p["half_length"], 0.0, 0.0), **link)
    return b.build()


def _principal(inertia, x_axis):
    """Inertia tensor (world axes) with principal values ``inertia`` and local x along ``x_axis``."""
    x = np.asarray(x_axis, float) / np.linalg.norm(x_axis)
    helper = np.eye(3)[np.argmin(np.abs(x))]
    y = np.cross(x, helper)
    y /= np.linalg.norm(y)
    R = np.stack([x, y, np.cross(x, y)], 1)
    return R @ np.diag(inertia) @ R.T


def stewart_platform(gravity=9.81):
    """Fig. 10: the 3-leg (3-RRS) Stewart platform, repaired as the module docstring says.

    Bodies: ``crank1..3`` (L4–L6, revolute motor joints ``motor1..3`` = J7–J9 to the
    ground), ``leg1..3`` (L1–L3, revolute knees ``knee1..3`` = J4–J6), ``platform`` (L7, free
    joint); cut spherical joints ``ball1..3`` (J1–J3) between the legs and the platform. All
    body frames are parallel to the world at the printed pose, with origins at the motors,
    the knees and the platform's centre of mass.

    **Returns:** ``(model, closures, q0, tau)``: q0 the printed pose (assembled), tau the
    three 10 N m motor torques (nv,).
    """
    from .assembly import assemble  # noqa: PLC0415 (assembly imports the solvers, not this module)

    p = STEWART_PRINTED
    P = {k + 1: np.asarray(x, float) for k, x in enumerate(p["joint"])}
    motor = {4: P[8], 5: P[7], 6: P[9]}  # J7 and J8 positions swapped (see the docstring)
    b = ModelBuilder("stewart_platform", gravity=(0.0, 0.0, -gravity))
    for i in (1, 2, 3):
        knee, ball = P[i + 3], P[i]
        axis = np.asarray(p["direction"][i + 3], float)
        axis /= np.linalg.norm(axis)
        crank_com, leg_com = np.asarray(p["com"][i + 2]), np.asarray(p["com"][i - 1])
        b.add_body(f"crank{i}", joint="revolute", joint_name=f"motor{i}", axis=axis, translation=motor[i + 3],
                   mass=p["mass"][i + 2], com=crank_com - motor[i + 3],
                   inertia=_principal(p["inertia"][i + 2], knee - motor[i + 3]))
        b.add_body(f"leg{i}", parent=f"crank{i}", joint="revolute", joint_name=f"knee{i}", axis=axis,
                   translation=knee - motor[i + 3], mass=p["mass"][i - 1], com=leg_com - knee,
                   inertia=_principal(p["inertia"][i - 1], ball - knee))
    centre = np.asarray(p["com"][6], float)
    b.add_body("platform", joint="free", mass=p["mass"][6], inertia=np.diag(np.asarray(p["inertia"][6])[[0, 2, 1]]))
    model = b.build()
    lb = LoopClosureBuilder(model)
    for i in (1, 2, 3):
        lb.add_loop(f"ball{i}", "spherical", f"leg{i}", "platform", translation_a=P[i] - P[i + 3],
                    translation_b=P[i] - centre)
    closures = lb.build()
    q0 = np.zeros(model.nq)
    q0[6:9], q0[9] = centre, 1.0  # the platform's free joint: position, quaternion (1, 0, 0, 0)
    tau = np.zeros(model.nv)
    tau[:6:2] = p["motor_torque"]  # motors are the first coordinate of each chain
    return model, closures, assemble(model, closures, q0, tol=1e-12), tau
