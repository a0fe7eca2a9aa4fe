"""Contacts with the ground (mbjax.contact): detection against MuJoCo's collision pipeline,
and the compliant model against closed forms (static equilibrium, the restitution of a linear
spring-damper, a block sliding or creeping on a slope)."""

import itertools
import math
import pathlib
import re

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mbjax
from mbjax import contact


G = 9.81


# ---------------------------------------------------------------------------------- detection
SCENE = """<mujoco><worldbody>
  <geom name="floor" type="plane" size="0 0 1" pos="0.1 -0.2 0.05" euler="8 -5 0"/>
  <body name="s"><freejoint/><geom type="sphere" size="0.1" pos="0.02 0.03 -0.01"/></body>
  <body name="c"><freejoint/><geom type="capsule" size="0.07 0.25" pos="0.05 0 0.02" euler="30 20 10"/></body>
  <body name="b"><freejoint/><geom type="box" size="0.1 0.15 0.2" pos="-0.03 0.02 0.01" euler="10 -40 25"/></body>
</worldbody></mujoco>"""


def _mujoco():
    return pytest.importorskip("mujoco", reason="MuJoCo (in the test extra) is the reference for the contacts")


def _geom_frame(mujoco, m, g):
    R = np.zeros(9)
    mujoco.mju_quat2Mat(R, m.geom_quat[g])
    return R.reshape(3, 3), m.geom_pos[g].copy()


def _assert_equal_to_mujoco(c, theirs):
    """Each of MuJoCo's contacts ``theirs`` equals the touching candidate of ``c`` nearest to it,
    and there are as many of each; returns how many were compared."""
    ours = np.flatnonzero(np.asarray(c.depth) > 0)
    assert len(ours) == len(theirs)
    for con in theirs:
        i = ours[np.argmin(np.linalg.norm(np.asarray(c.point)[ours] - con.pos, axis=1))]
        np.testing.assert_allclose(-c.depth[i], con.dist, rtol=0, atol=1e-12)
        np.testing.assert_allclose(c.point[i], con.pos, rtol=0, atol=1e-12)
        np.testing.assert_allclose(c.normal[i], con.frame[:3], rtol=0, atol=1e-12)
    return len(theirs)


def test_plane_contacts_equal_mujoco():
    mujoco = _mujoco()
    m = mujoco.MjModel.from_xml_string(SCENE)
    d = mujoco.MjData(m)
    shapes = []
    for g in (1, 2, 3):  # sphere, capsule, box, each in its body's frame
        R, t = _geom_frame(mujoco, m, g)
        size = m.geom_size[g]
        kind = mujoco.mjtGeom(int(m.geom_type[g]))
        shapes.append({mujoco.mjtGeom.mjGEOM_SPHERE: lambda: contact.sphere(size[0], t),
                       mujoco.mjtGeom.mjGEOM_CAPSULE: lambda: contact.capsule(size[0], size[1], R, t),
                       mujoco.mjtGeom.mjGEOM_BOX: lambda: contact.box(size, R, t)}[kind]())
    rng = np.random.default_rng(0)
    checked = 0
    for _ in range(40):
        for j in range(3):  # random poses straddling the plane
            quat = rng.normal(size=4)
            d.qpos[7 * j: 7 * j + 7] = np.concatenate([[0.1, -0.2, 0.05] + rng.uniform(-0.3, 0.3, 3) * [1, 1, 0.5],
                                                       quat / np.linalg.norm(quat)])
        mujoco.mj_forward(m, d)
        n = d.geom_xmat[0].reshape(3, 3)[:, 2]
        plane = contact.Plane(n, n @ d.geom_xpos[0])
        for j, (centres, radius) in enumerate(shapes):
            body = m.geom_bodyid[j + 1]
            world = centres @ d.xmat[body].reshape(3, 3).T + d.xpos[body]
            c = contact.plane_contacts(plane, jnp.asarray(world), jnp.asarray(radius))
            if np.sum(np.asarray(c.depth) > 0) > 4:  # MuJoCo keeps at most four corners of a box
                continue
            floor = [con for con in d.contact[:d.ncon] if (con.geom1, con.geom2) == (0, j + 1)]
            checked += _assert_equal_to_mujoco(c, floor)
    assert checked > 50


def test_bad_shapes_and_parameters_raise():
    with pytest.raises(ValueError, match="radius must be positive"):
        contact.sphere(-0.1)
    with pytest.raises(ValueError, match="every half size of a box must be positive"):
        contact.box((0.1, 0.0, 0.1))
    with pytest.raises(ValueError, match="coefficient must be non-negative"):
        contact.Friction(-0.5, 1e-4)
    with pytest.raises(ValueError, match="stiffness must be positive"):
        contact.SpringDamper(0.0, 1.0)
    with pytest.raises(ValueError, match="unit vector"):
        contact.Plane(jnp.asarray([0.0, 0.0, 2.0]), 0.0)
    with pytest.raises(ValueError, match="proper rotation"):
        contact.capsule(0.1, 0.2, rotation=-np.eye(3))


# ------------------------------------------------------------------------------- compliant model
def _ball(mass=2.0, gravity=(0.0, 0.0, -G), offset=(0.1, 0.0, 0.0)):
    """A free body whose sphere (and centre of mass) sits ``offset`` from the body origin."""
    b = mbjax.ModelBuilder("ball", gravity=gravity)
    b.add_body("ball", joint="free", mass=mass, com=offset, inertia=np.diag([0.02, 0.03, 0.025]))
    return b.build()


def _base_q(R, centre, offset):
    quat = mbjax.spatial.rotation_to_quat(jnp.asarray(R))  # (w, x, y, z)
    return jnp.concatenate([jnp.asarray(centre - R @ np.asarray(offset)), quat])


def test_ball_at_rest_carries_its_weight():
    offset, r, mass = np.array([0.1, 0.0, 0.0]), 0.1, 2.0
    model = _ball(mass, offset=tuple(offset))
    law = contact.HuntCrossley(1e5, 0.4, exponent=1.5)
    cm = contact.CompliantContact(contact.contact_points(model, [("ball", contact.sphere(r, offset))]),
                                  contact.Plane.horizontal(0.0), law, contact.Friction(0.8, 1e-4))
    depth = (mass * G / 1e5) ** (1 / 1.5)  # k d^p = m g
    R = np.asarray(mbjax.spatial.axis_angle_rotation(jnp.asarray([0.3, -0.5, 0.8]) / np.sqrt(0.98), jnp.asarray(1.1)))
    q = _base_q(R, np.array([0.4, -0.2, r - depth]), offset)
    qd = jnp.zeros(model.nv)
    _, f = cm.forces(model, q, qd)
    np.testing.assert_allclose(jnp.sum(f, axis=0), [0.0, 0.0, mass * G], rtol=1e-14, atol=1e-13)
    qdd = mbjax.forward_dynamics(model, q, qd, jnp.zeros(model.nv), method=contact.WithContacts(cm))
    np.testing.assert_allclose(qdd, 0.0, atol=1e-12)


def test_spring_damper_bounce_restitution():
    """No gravity, a ball meets the ground at 1 m/s: it leaves at e m/s, e in closed form."""
    model = _ball(1.0, gravity=(0.0, 0.0, 0.0), offset=(0.0, 0.0, 0.0))
    law = contact.SpringDamper(1e4, 20.0)
    cm = contact.CompliantContact(contact.contact_points(model, [("ball", contact.sphere(0.1))]),
                                  contact.Plane.horizontal(0.0), law)
    q0 = jnp.asarray([0.0, 0.0, 0.11, 1.0, 0.0, 0.0, 0.0])
    qd0 = jnp.asarray([0.0, 0.0, -1.0, 0.0, 0.0, 0.0])
    traj = mbjax.simulate(model, q0, qd0, 0.0, 0.08, method=contact.WithContacts(cm), rtol=1e-11, atol=1e-11,
                          saveat=[0.08])
    e = float(law.restitution(1.0))
    assert 0.7 < e < 0.8
    np.testing.assert_allclose(traj.qd[-1, 2], e, rtol=1e-7)
    np.testing.assert_allclose(traj.qd[-1, jnp.asarray([0, 1, 3, 4, 5])], 0.0, atol=1e-12)


def _block(angle, mu):
    b = mbjax.ModelBuilder("block")
    b.add_body("block", joint="free", mass=1.0, inertia=np.eye(3) * (1.0 / 6) * 0.04)
    model = b.build()
    R = np.asarray(mbjax.spatial.axis_angle_rotation(jnp.asarray([0.0, -1.0, 0.0]), jnp.asarray(angle)))
    k, c = 1e6, 1e3  # four corners: damping ratio 0.25 in bounce
    cm = contact.CompliantContact(contact.contact_points(model, [("block", contact.box((0.1, 0.1, 0.1)))]),
                                  contact.Plane.slope(angle), contact.SpringDamper(k, c), contact.Friction(mu, 1e-4))
    depth = G * np.cos(angle) / (4 * k)
    q0 = _base_q(R, R @ np.array([0.0, 0.0, 0.1 - depth]), np.zeros(3))
    return model, cm, q0, R[:, 0]


def test_block_slides_down_a_slope_at_coulombs_rate():
    angle, mu = 0.3, 0.2
    model, cm, q0, down = _block(angle, mu)
    ts = jnp.asarray([0.2, 0.3, 0.4])
    traj = mbjax.simulate(model, q0, jnp.zeros(6), 0.0, 0.4, method=contact.WithContacts(cm), saveat=ts,
                          rtol=1e-9, atol=1e-9)
    s = np.asarray(traj.q[:, :3]) @ down  # position along the slope, rising along +x
    a = -(s[2] - 2 * s[1] + s[0]) / 0.1**2
    # measured 1.0e-7: the solver's 1e-9 tolerance over a second difference of step 0.1 s
    np.testing.assert_allclose(a, G * (np.sin(angle) - mu * np.cos(angle)), rtol=1e-6)


def test_block_on_a_steeper_friction_creeps_at_the_regularised_rate():
    angle, mu, vs = 0.3, 0.5, 1e-4
    model, cm, q0, down = _block(angle, mu)
    traj = mbjax.simulate(model, q0, jnp.zeros(6), 0.0, 0.05, method=contact.WithContacts(cm),
                          saveat=jnp.asarray([0.04, 0.05]), rtol=1e-9, atol=1e-12)
    speed = -(np.asarray(traj.q[1, :3]) - np.asarray(traj.q[0, :3])) @ down / 0.01
    r = np.tan(angle) / mu
    np.testing.assert_allclose(speed, vs * r / np.sqrt(1 - r**2), rtol=1e-8)  # measured 8e-11


def test_gradient_through_a_bounce_matches_finite_differences():
    model = _ball(1.0, gravity=(0.0, 0.0, -G), offset=(0.0, 0.0, 0.0))
    pts = contact.contact_points(model, [("ball", contact.sphere(0.1))])
    q0 = jnp.asarray([0.0, 0.0, 0.15, 1.0, 0.0, 0.0, 0.0])
    qd0 = jnp.asarray([0.3, 0.0, -1.0, 0.0, 0.0, 0.0])

    def height(k):
        cm = contact.CompliantContact(pts, contact.Plane.horizontal(0.0), contact.HuntCrossley(k, 0.3),
                                      contact.Friction(0.5, 1e-3))
        traj = mbjax.simulate(model, q0, qd0, 0.0, 0.15, method=contact.WithContacts(cm), saveat=[0.15],
                              rtol=1e-11, atol=1e-11)
        return traj.q[-1, 2]

    k, h = 2e4, 1.0
    fd = (height(k + h) - height(k - h)) / (2 * h)
    # measured 7.4e-6 at h = 1 and 6.6e-6 at h = 10: the derivative of the adaptive solve, whose
    # steps straddle the touch-down kink, not the differences' error (the issue's bound, 1e-5)
    np.testing.assert_allclose(jax.grad(height)(k), fd, rtol=1e-5)


def test_gradient_through_a_standing_quadruped_matches_finite_differences():
    """Forward mode through 30 ms of the quadruped standing on its four feet under its posture
    controller (every foot in contact throughout, no change of mode): the base height's and a
    hip's derivatives with respect to the floor's stiffness and friction coefficient."""
    import diffrax

    model = mbjax.load_bundled("quadruped")
    points = contact.frame_points(model, ["FL_FOOT", "FR_FOOT", "HL_FOOT", "HR_FOOT"])
    weight = float(jnp.sum(model.mass)) * G
    stand = mbjax.neutral(model).at[2].set(0.44 - weight / 4 / 5e4)
    gains = lambda g: jnp.concatenate([jnp.zeros(6), jnp.full(8, g)])  # noqa: E731
    posture = mbjax.PD(model, gains(200.0), gains(5.0), mbjax.Setpoint(stand, jnp.zeros(model.nv)))
    q0 = stand.at[7:].add(jnp.asarray([0.02, -0.02, -0.02, 0.02, 0.01, -0.01, -0.01, 0.01]))

    def outputs(p):  # (sideways drift, base height, first hip) at 30 ms
        floor = contact.CompliantContact(points, contact.Plane.horizontal(0.0), contact.SpringDamper(p[0], 800.0),
                                         contact.Friction(p[1], 1e-3))
        traj = mbjax.simulate(model, q0, jnp.zeros(model.nv), 0.0, 0.03, tau=posture,
                              method=contact.WithContacts(floor), saveat=[0.03], rtol=1e-10, atol=1e-10,
                              adjoint=diffrax.ForwardMode())
        return traj.q[-1, jnp.asarray([0, 2, 7])]

    p = jnp.asarray([5e4, 0.8])
    J = jax.jit(jax.jacfwd(outputs))(p)
    steps = jnp.asarray([[5.0, 0.0], [0.0, 1e-4]])
    y = jax.jit(jax.vmap(outputs))(jnp.concatenate([p + steps, p - steps]))
    fd = ((y[:2] - y[2:]) / jnp.asarray([[5.0], [1e-4]])).T / 2
    # measured 1e-8 to 5e-7 (the height's tiny derivative in the friction, 1e-7 m, is left out:
    # the difference of two solves at tolerance 1e-10 cannot resolve it)
    for i, j in ((1, 0), (2, 0), (0, 1), (2, 1)):
        np.testing.assert_allclose(J[i, j], fd[i, j], rtol=1e-5, err_msg=f"output {i}, parameter {j}")


def test_stability_functions_of_explicit_solvers():
    """R(z) from the solvers' Butcher tableaus: Heun's and Bosh3's are the Taylor polynomials of
    exp(z) of their order; the real stability intervals are Euler's 2 and Dopri5's, where its
    polynomial (Hairer, Norsett & Wanner, Sec. II.5) 1 + z + ... + z^5/120 + z^6/600 returns to 1."""
    import diffrax
    from mbjax.simulation import stability

    z = np.random.default_rng(0).normal(size=8) + 1j * np.random.default_rng(1).normal(size=8)
    taylor = lambda z, p: sum(z**k / math.factorial(k) for k in range(p + 1))  # noqa: E731
    for solver, order in ((diffrax.Heun(), 2), (diffrax.Bosh3(), 3)):
        np.testing.assert_allclose(stability.stability_function(solver)(z), taylor(z, order), rtol=1e-13)
    euler = stability.stability_function(diffrax.Euler())
    # |R| <= 1 + 1e-12 counts as stable: 2 + 1e-12
    assert stability.largest_stable_step(euler, [-1.0], 10.0) == pytest.approx(2.0, abs=2e-12)
    dopri5 = stability.stability_function(diffrax.Dopri5())
    polynomial = np.polynomial.Polynomial([1, -1, 1 / 2, -1 / 6, 1 / 24, -1 / 120, 1 / 600])  # R(-x)
    edge = min(r.real for r in (polynomial - 1).roots() if abs(r.imag) < 1e-12 and r.real > 1e-9)
    assert edge == pytest.approx(3.3066, abs=1e-4)  # the figure in the literature
    assert stability.largest_stable_step(dopri5, [-1.0], 10.0) == pytest.approx(edge, abs=1e-9)
    assert stability.stability_function(diffrax.Kvaerno5()) is None  # implicit: not checked


def test_a_fixed_step_too_long_for_the_contact_is_refused():
    """A fixed-step explicit solver that the contact's regularised friction (mu m g / (v_s m):
    4905 1/s on a 1 kg ball) would make unstable is refused before the run, with the fix; at the
    step the message suggests the run is stable."""
    import diffrax

    ball = _ball(1.0, offset=(0.0, 0.0, 0.0))
    floor = contact.CompliantContact(contact.contact_points(ball, [("ball", contact.sphere(0.1))]),
                                     contact.Plane.horizontal(0.0), contact.SpringDamper(1e4, 20.0),
                                     contact.Friction(0.5, 1e-3))
    rates = contact.WithContacts(floor).fast_rates(ball, jnp.asarray([0, 0, 0.5, 1, 0, 0, 0.0]))
    np.testing.assert_allclose(rates["regularised friction"], [-0.5 * G / 1e-3], rtol=1e-12)
    np.testing.assert_allclose(np.abs(rates["contact springs and dampers"]), [100.0, 100.0], rtol=1e-12)  # sqrt(k/m)
    q0, fixed = jnp.asarray([0.0, 0.0, 0.099, 1.0, 0.0, 0.0, 0.0]), diffrax.ConstantStepSize()
    qd0 = jnp.asarray([0.2, 0.0, 0.0, 0.0, 0.0, 0.0])  # sliding
    with pytest.raises(ValueError, match=r"Tsit5 at the fixed step dt0 = 0.001 s is unstable on the regularised "
                                         r"friction .* Take dt0 <= (\S+) s, or an adaptive step") as info:
        mbjax.simulate(ball, q0, qd0, 0.0, 0.05, method=contact.WithContacts(floor), stepsize_controller=fixed,
                       dt0=1e-3)
    safe = float(re.search(r"Take dt0 <= (\S+) s", str(info.value)).group(1))
    traj = mbjax.simulate(ball, q0, qd0, 0.0, 0.05, method=contact.WithContacts(floor), stepsize_controller=fixed,
                          dt0=safe)
    # and the ball ends rolling: a rigid ball would roll at m r^2 v0 / (m r^2 + I) = 0.05 m/s
    # (angular momentum about the contact); this one sinks 1 mm and its friction is regularised,
    # which leaves it at 0.0496 m/s with its surface slipping at 2.5e-4 m/s (measured)
    vx, wy = float(traj.qd[-1, 0]), float(traj.qd[-1, 4])
    # the 1 % is the physics of the compliant model (sinking and regularised slip, 0.8 % here),
    # not numerical slack; the slip speed is bounded at twice its measured value
    np.testing.assert_allclose(vx, 0.01 * 0.2 / (0.01 + 0.03), rtol=1e-2)
    assert abs(vx - 0.1 * wy) < 5e-4


# ------------------------------------------------------------------------------- heightfields
def test_heightfield_of_a_plane_gives_the_planes_contacts():
    """A grid sampled from a tilted plane: spheres over it (and over the plateau beyond its
    edges, at the edge's height) have the plane's contacts, to 1e-12."""
    n = np.array([0.2, -0.3, 1.0]) / np.linalg.norm([0.2, -0.3, 1.0])
    plane = contact.Plane(jnp.asarray(n), jnp.asarray(0.05))
    nrow, ncol, (hx, hy), centre = 7, 9, (0.8, 0.6), (0.3, -0.2, 0.01)
    x = centre[0] - hx + 2 * hx * np.arange(ncol) / (ncol - 1)
    y = centre[1] - hy + 2 * hy * np.arange(nrow) / (nrow - 1)
    heights = (0.05 - n[0] * x[None, :] - n[1] * y[:, None]) / n[2] - centre[2]
    field = contact.Heightfield(heights, (hx, hy), centre)
    rng = np.random.default_rng(5)
    centres = np.stack([rng.uniform(centre[0] - hx, centre[0] + hx, 200),
                        rng.uniform(centre[1] - hy, centre[1] + hy, 200), rng.uniform(-0.2, 0.3, 200)], -1)
    radius = rng.uniform(0.0, 0.1, 200)
    ours, theirs = field.contacts(jnp.asarray(centres), jnp.asarray(radius)), plane.contacts(centres, radius)
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(a, b, rtol=0, atol=1e-12)
    beyond = jnp.asarray([[centre[0] + hx + 0.5, centre[1] + 0.1], [centre[0] - 0.2, centre[1] - hy - 1.0]])
    z, slope = field.height(beyond)
    edge = field.height(jnp.asarray([[centre[0] + hx, centre[1] + 0.1], [centre[0] - 0.2, centre[1] - hy]]))[0]
    np.testing.assert_allclose(z, edge, rtol=0, atol=1e-15)
    assert slope[0, 0] == 0.0 and slope[1, 1] == 0.0  # flat across the edge it is beyond


def test_mjcf_hfield_is_mujocos_surface():
    """MJX's barkour stands on a rough hfield (240 x 280, 5 cm of relief): read as the ground by
    ``mjcf_contacts``, its surface, two triangles per cell, is where MuJoCo's ray casts meet it."""
    mujoco = _mujoco()
    path = pathlib.Path(mujoco.__file__).parent / "mjx" / "test_data" / "barkour_v0" / "assets" / "barkour_v0_mjx.xml"
    if not path.exists():
        pytest.skip("needs MuJoCo's MJX test data (barkour_v0): pip install mujoco-mjx (in mbjax's test extra)")
    model = mbjax.load_mjcf(path)
    field = contact.mjcf_contacts(model, path, contact.SpringDamper(1e4, 10.0)).ground
    assert isinstance(field, contact.Heightfield) and field.heights.shape == (240, 280)
    m = mujoco.MjModel.from_xml_path(str(path))
    d = mujoco.MjData(m)
    mujoco.mj_forward(m, d)
    hfield = [g for g in range(m.ngeom) if m.geom_type[g] == mujoco.mjtGeom.mjGEOM_HFIELD][0]
    rng = np.random.default_rng(6)
    compared = 0
    for x, y in rng.uniform(-19.0, 19.0, (300, 2)):
        geom = np.zeros(1, np.int32)
        dist = mujoco.mj_ray(m, d, np.array([x, y, 1.0]), np.array([0.0, 0.0, -1.0]), None, 1, -1, geom)
        if geom[0] != hfield:  # the robot's own geoms, near the origin
            continue
        z, _ = field.height(jnp.asarray([[x, y]]))
        np.testing.assert_allclose(z[0], 1.0 - dist, rtol=0, atol=1e-12)
        compared += 1
    assert compared > 250


def test_block_slides_down_a_heightfield_slope_at_coulombs_rate():
    """The block of the plane's test on a heightfield sampled from the same slope."""
    angle, mu = 0.3, 0.2
    model, cm, q0, down = _block(angle, mu)
    x = np.linspace(-2.0, 2.0, 11)
    heights = np.broadcast_to(np.tan(angle) * x, (5, 11))  # z = x tan(angle): Plane.slope's surface
    floor = eqx.tree_at(lambda c: c.ground, cm, contact.Heightfield(heights, (2.0, 1.0)))
    ts = jnp.asarray([0.2, 0.3, 0.4])
    traj = mbjax.simulate(model, q0, jnp.zeros(6), 0.0, 0.4, method=contact.WithContacts(floor), saveat=ts,
                          rtol=1e-9, atol=1e-9)
    s = np.asarray(traj.q[:, :3]) @ down
    a = -(s[2] - 2 * s[1] + s[0]) / 0.1**2
    np.testing.assert_allclose(a, G * (np.sin(angle) - mu * np.cos(angle)), rtol=1e-6)


def test_gradient_with_respect_to_the_heights():
    """A ball pressed into a bumpy grid: the derivative of its contact force with respect to
    every height equals central differences (the force is piecewise linear in the heights)."""
    ball = _ball(1.0, offset=(0.0, 0.0, 0.0))
    points = contact.contact_points(ball, [("ball", contact.sphere(0.1))])
    heights = np.random.default_rng(7).uniform(0.0, 0.02, (4, 5))
    q = jnp.asarray([0.13, -0.07, 0.105, 1.0, 0.0, 0.0, 0.0])
    qd = jnp.asarray([0.2, 0.1, -0.3, 0.0, 0.0, 0.0])

    def force(h):
        cm = contact.CompliantContact(points, contact.Heightfield(h, (0.5, 0.4)), contact.SpringDamper(1e4, 30.0),
                                      contact.Friction(0.5, 1e-2))
        return jnp.sum(cm.forces(ball, q, qd)[1], axis=0)

    J = jax.jacfwd(force)(jnp.asarray(heights))
    assert np.count_nonzero(np.abs(np.asarray(J)).sum(0)) == 3  # the three corners of the triangle below
    fd = np.zeros_like(np.asarray(J))
    for i, j in itertools.product(range(4), range(5)):
        e = np.zeros_like(heights)
        e[i, j] = 1e-7
        fd[:, i, j] = (force(jnp.asarray(heights + e)) - force(jnp.asarray(heights - e))) / 2e-7
    np.testing.assert_allclose(J, fd, rtol=1e-6, atol=1e-6)


# ----------------------------------------------------------------------------- between bodies
PAIRS = """<mujoco><worldbody>
  <body name="s1"><freejoint/><geom type="sphere" size="0.1" pos="0.02 0.03 -0.01"/></body>
  <body name="s2"><freejoint/><geom type="sphere" size="0.13"/></body>
  <body name="c1"><freejoint/><geom type="capsule" size="0.07 0.25" pos="0.05 0 0.02" euler="30 20 10"/></body>
  <body name="c2"><freejoint/><geom type="capsule" size="0.05 0.15" pos="0 0.01 0" euler="-10 50 0"/></body>
</worldbody></mujoco>"""


def _pair_contacts_equal_mujoco(mujoco, m, d, model, cm, geoms):
    """Each of MuJoCo's contacts between ``geoms`` (the MuJoCo geom of each shape of ``cm``)
    equals the same pair's contact in ``cm`` to 1e-12 (depth, normal, point), and the pairs
    touching are the same; returns how many were compared."""
    mujoco.mj_forward(m, d)
    c, _ = cm.forces(model, jnp.asarray(d.qpos), jnp.zeros(model.nv))
    pair = {(geoms[i], geoms[j]): k for k, (i, j) in enumerate(zip(cm.pairs.first, cm.pairs.second))}
    theirs = [con for con in d.contact[:d.ncon] if con.geom1 in geoms and con.geom2 in geoms]
    assert sorted(pair[con.geom1, con.geom2] for con in theirs) == list(np.flatnonzero(np.asarray(c.depth) > 0))
    for con in theirs:
        k = pair[con.geom1, con.geom2]
        np.testing.assert_allclose(-c.depth[k], con.dist, rtol=0, atol=1e-12)
        np.testing.assert_allclose(c.point[k], con.pos, rtol=0, atol=1e-12)
        np.testing.assert_allclose(c.normal[k], con.frame[:3], rtol=0, atol=1e-12)
    return len(theirs)


def test_sphere_and_capsule_pairs_equal_mujoco():
    """Spheres and capsules on four free bodies at random overlapping poses: every pair's
    depth, normal (from the first shape to the second) and point equal ``mj_collision``'s."""
    mujoco = _mujoco()
    model = mbjax.load_mjcf(PAIRS)
    m = mujoco.MjModel.from_xml_string(PAIRS)
    d = mujoco.MjData(m)
    shapes = []
    for g in range(4):
        R, t = _geom_frame(mujoco, m, g)
        size = m.geom_size[g]
        round_ = int(m.geom_type[g]) == int(mujoco.mjtGeom.mjGEOM_SPHERE)
        shape = contact.sphere(size[0], t) if round_ else contact.capsule(*size[:2], R, t)
        shapes.append((m.geom_bodyid[g] - 1, shape))
    pairs = contact.body_pairs(model, shapes)
    assert list(zip(pairs.first, pairs.second)) == list(itertools.combinations(range(4), 2))
    cm = contact.PairContact(pairs, contact.SpringDamper(1e4, 10.0))
    rng = np.random.default_rng(2)
    compared = 0
    for _ in range(60):
        for j in range(4):
            quat = rng.normal(size=4)
            d.qpos[7 * j: 7 * j + 7] = np.concatenate([rng.uniform(-0.2, 0.2, 3), quat / np.linalg.norm(quat)])
        compared += _pair_contacts_equal_mujoco(mujoco, m, d, model, cm, list(range(4)))
    assert compared > 100


CHAIN = """<mujoco><worldbody>
  <geom name="floor" type="plane" size="0 0 1"/>
  <body name="a" pos="0 0 0.5"><joint type="hinge" axis="0 1 0"/>
    <geom name="ga" type="capsule" fromto="0 0 0 0.4 0 0" size="0.05"/>
    <body name="b" pos="0.4 0 0"><joint type="hinge" axis="0 1 0"/>
      <geom name="gb" type="capsule" fromto="0 0 0 0.4 0 0" size="0.05"/>
      <body name="c" pos="0.4 0 0"><joint type="hinge" axis="0 1 0"/>
        <geom name="gc" type="capsule" fromto="0 0 0 0.4 0 0" size="0.05"/>
        <geom name="tip" type="sphere" pos="0.4 0 0" size="0.08"/>
        <body name="welded" pos="0.2 0 0"><geom name="bolt" type="sphere" pos="0 0.1 0" size="0.04"/></body>
      </body>
    </body>
  </body>
  <body name="ball" pos="0.3 0 0.3"><freejoint/>
    <geom name="ball" type="sphere" size="0.1" priority="1" friction="0.3"/></body>
  <body name="rod" pos="-0.3 0 0.3"><freejoint/><geom name="rod" type="capsule" size="0.04 0.2" friction="1.3"/>
    <geom name="cube" type="box" size="0.05 0.05 0.05" pos="0 0 0.3"/></body>
</worldbody>
<contact><exclude body1="a" body2="c"/>
  <pair geom1="ga" geom2="ball" friction="0.7 0.7 0.005 0.0001 0.0001"/></contact></mujoco>"""


def test_mjcf_pairs_are_the_pairs_mujoco_collides():
    """A hinged chain of capsules (a sphere at its tip, another on a body welded to the last
    link), a free ball and a free rod: ``mjcf_pairs`` pairs the geoms as MuJoCo does (not a
    body with its parent, the welded body as its link, the ``<exclude>``d bodies apart, the
    explicit ``<pair>`` with its friction, the box left out with a warning), and at random
    configurations its touching pairs and their contacts are MuJoCo's."""
    mujoco = _mujoco()
    model = mbjax.load_mjcf(CHAIN)
    with pytest.warns(UserWarning, match=r"6 geom pairs .* left out: mbjax pairs spheres and capsules on moving "
                                         r"bodies only \(e.g. 'ga' and 'cube'\)"):
        cm = contact.mjcf_pairs(model, CHAIN, contact.SpringDamper(1e4, 10.0))
    m = mujoco.MjModel.from_xml_string(CHAIN)
    geoms = [g for g in range(m.ngeom) if int(m.geom_type[g]) in (int(mujoco.mjtGeom.mjGEOM_SPHERE),
                                                                  int(mujoco.mjtGeom.mjGEOM_CAPSULE))]
    name = lambda i: mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_GEOM, geoms[i])  # noqa: E731
    friction = {frozenset((name(i), name(j))): float(f) for i, j, f in
                zip(cm.pairs.first, cm.pairs.second, np.asarray(cm.friction.coefficient))}
    assert friction == {
        frozenset(p): f for p, f in [
            (("ga", "ball"), 0.7),  # the explicit pair
            (("ga", "bolt"), 1.0),  # <exclude> names bodies: the welded one is not excluded with its link
            (("ga", "rod"), 1.3), (("gb", "ball"), 0.3), (("gb", "rod"), 1.3),  # the ball's priority; the larger
            (("gc", "ball"), 0.3), (("gc", "rod"), 1.3), (("tip", "ball"), 0.3), (("tip", "rod"), 1.3),
            (("bolt", "ball"), 0.3), (("bolt", "rod"), 1.3), (("ball", "rod"), 0.3)]}
    d = mujoco.MjData(m)
    rng = np.random.default_rng(3)
    compared = 0
    for _ in range(150):
        d.qpos[:3] = rng.uniform(-2.0, 2.0, 3)
        for j in (3, 10):
            quat = rng.normal(size=4)
            d.qpos[j: j + 7] = np.concatenate([rng.uniform(-0.3, 0.6, 3) * [2.0, 0.3, 1.0],
                                               quat / np.linalg.norm(quat)])
        compared += _pair_contacts_equal_mujoco(mujoco, m, d, model, cm, geoms)
    assert compared > 30


def _two_bodies(mass1=2.0, mass2=3.0):
    b = mbjax.ModelBuilder("two", gravity=(0.0, 0.0, 0.0))
    b.add_body("one", joint="free", mass=mass1, inertia=np.diag([0.02, 0.03, 0.025]))
    b.add_body("two", joint="free", mass=mass2, inertia=np.diag([0.04, 0.05, 0.03]))
    return b.build()


def test_pair_bounce_restitution():
    """No gravity: a sphere meets the middle of a capsule head on at 1.5 m/s relative speed;
    they part at e times it, e the spring-damper's closed form on the reduced mass."""
    model = _two_bodies()
    law = contact.SpringDamper(1e4, 20.0)
    pairs = contact.body_pairs(model, [("one", contact.sphere(0.1)), ("two", contact.capsule(0.05, 0.1))])
    cm = contact.PairContact(pairs, law)
    q0 = jnp.asarray([0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.3, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0])
    qd0 = jnp.zeros(12).at[0].set(1.0).at[6].set(-0.5)
    traj = mbjax.simulate(model, q0, qd0, 0.0, 0.3, method=contact.WithContacts(cm), rtol=1e-11, atol=1e-11,
                          saveat=[0.3])
    e = float(law.restitution(2.0 * 3.0 / 5.0))
    assert 0.7 < e < 0.8
    np.testing.assert_allclose((traj.qd[-1, 6] - traj.qd[-1, 0]) / 1.5, e, rtol=1e-7)  # measured 1.7e-9
    np.testing.assert_allclose(2.0 * traj.qd[-1, 0] + 3.0 * traj.qd[-1, 6], 0.5, rtol=1e-12)


def test_glancing_pair_impact_conserves_momentum_and_never_gains_energy():
    """Two free bodies (a sphere off its centre of mass, a tilted capsule) collide obliquely
    while spinning, with friction: the system's linear and angular momentum stay what they were
    (the forces are equal, opposite and act at one point), and the energy, the spring's
    included, never increases; to the integration's accuracy."""
    model = _two_bodies()
    R = np.asarray(mbjax.spatial.axis_angle_rotation(jnp.asarray([0.6, 0.0, 0.8]), jnp.asarray(0.9)))
    cm = contact.PairContact(contact.body_pairs(model, [("one", contact.sphere(0.1, (0.02, -0.01, 0.03))),
                                                        ("two", contact.capsule(0.05, 0.15, R, (0.01, 0.0, 0.0)))]),
                             contact.HuntCrossley(1e5, 0.3), contact.Friction(0.6, 1e-3))
    q0 = jnp.asarray([0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.35, 0.08, -0.05, 0.9, 0.1, 0.3, -0.2])
    q0 = q0.at[10:].set(q0[10:] / jnp.linalg.norm(q0[10:]))
    qd0 = jnp.asarray([1.2, 0.1, 0.0, 2.0, -1.0, 3.0, -0.4, 0.0, 0.1, 0.5, 2.0, -1.0])
    traj = mbjax.simulate(model, q0, qd0, 0.0, 0.4, method=contact.WithContacts(cm), rtol=1e-11, atol=1e-11,
                          saveat=jnp.linspace(0.0, 0.4, 201))
    depth = np.asarray(jax.vmap(lambda q: cm.forces(model, q, jnp.zeros(12))[0].depth[0])(traj.q))
    assert depth.max() > 1e-4 and depth[-1] < 0  # they did collide, and parted
    h = np.asarray(jax.vmap(lambda q, qd: mbjax.momentum(model, q, qd))(traj.q, traj.qd))
    np.testing.assert_allclose(h, np.broadcast_to(h[0], h.shape), rtol=0, atol=1e-9)
    energy = np.asarray(jax.vmap(lambda q, qd: mbjax.kinetic_energy(model, q, qd) + cm.potential_energy(model, q))(
        traj.q, traj.qd))
    assert np.all(np.diff(energy) <= 1e-9 * energy[0]), np.diff(energy).max()
    assert energy[-1] < 0.99 * energy[0]  # friction and damping took some


def test_gradient_through_a_pair_collision_matches_finite_differences():
    """Reverse mode through a glancing blow with friction, at fixed steps (so that the
    differences and the derivative see the same discrete map, steps that straddle the
    touch-down included; an adaptive solve's step choices add a term of their own). The step
    is short enough for the tangent dynamics: while the contact point sticks, the regularised
    friction acts on perturbations at mu f_n / (v_s m) ~ 1e4-1e5 1/s, and at dt0 = 1e-4 the
    bounded forward run had derivatives of 1e15 (measured)."""
    import diffrax

    model = _two_bodies()
    pairs = contact.body_pairs(model, [("one", contact.sphere(0.1)), ("two", contact.capsule(0.05, 0.1))])
    # they touch at t = 0.016 s and part at about 0.08 s
    q0 = jnp.asarray([0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.165, 0.05, 0.0, 1.0, 0.0, 0.0, 0.0])
    qd0 = jnp.zeros(12).at[0].set(1.0).at[6].set(-0.5)

    def final(p):  # the second body's sideways speed and spin after the blow
        cm = contact.PairContact(pairs, contact.HuntCrossley(p[0], 0.3), contact.Friction(p[1], 1e-3))
        traj = mbjax.simulate(model, q0, qd0, 0.0, 0.1, method=contact.WithContacts(cm), saveat=[0.1],
                              stepsize_controller=diffrax.ConstantStepSize(), dt0=2e-5)
        return traj.qd[-1, jnp.asarray([7, 11])]

    p = jnp.asarray([2e4, 0.5])
    J = jax.jit(jax.jacrev(final))(p)
    # small differences: the steps that straddle the parting move with the stiffness, a kink
    # of the discrete map in k (at 20 N/m the differences were off by 5e-5; at 0.2, 3e-8)
    steps = jnp.asarray([[0.2, 0.0], [0.0, 1e-5]])
    y = jax.jit(jax.vmap(final))(jnp.concatenate([p + steps, p - steps]))
    fd = ((y[:2] - y[2:]) / jnp.asarray([[0.2], [1e-5]])).T / 2
    np.testing.assert_allclose(J, fd, rtol=1e-6)


def test_bad_pairs_raise():
    model = _two_bodies()
    with pytest.raises(ValueError, match="body pairs take spheres and capsules"):
        contact.body_pairs(model, [("one", contact.sphere(0.1)), ("two", contact.box((0.1, 0.1, 0.1)))])
    with pytest.raises(ValueError, match="no pair of shapes may touch"):
        contact.body_pairs(model, [("one", contact.sphere(0.1)), ("one", contact.sphere(0.1, (0.1, 0.0, 0.0)))])
    with pytest.raises(ValueError, match="on two different bodies"):
        contact.body_pairs(model, [("one", contact.sphere(0.1)), ("two", contact.sphere(0.1))], pairs=[(0, 0)])
    with pytest.raises(TypeError, match="contact must be a contact.CompliantContact, a contact.PairContact"):
        contact.WithContacts(contact.SpringDamper(1e4, 1.0))


# ---------------------------------------------------------------------------------- joint limits
def test_joint_stop_restitution():
    """No gravity: a wheel turning at 2 rad/s meets its upper stop and leaves at -2 e rad/s."""
    b = mbjax.ModelBuilder("wheel", gravity=(0.0, 0.0, 0.0))
    b.add_body("wheel", joint="revolute", axis=(0, 0, 1), mass=1.0, inertia=np.diag([0.3, 0.3, 0.5]),
               lower=-1.0, upper=0.5)
    model = b.build()
    law = contact.SpringDamper(200.0, 2.0)
    stops = contact.joint_limits(model, law)
    assert (stops.q_lower, stops.q_upper) == ((0,), (0,))
    traj = mbjax.simulate(model, jnp.asarray([0.4]), jnp.asarray([2.0]), 0.0, 0.4,
                          method=contact.WithContacts(limits=stops), rtol=1e-11, atol=1e-11, saveat=[0.4])
    e = float(law.restitution(0.5))
    np.testing.assert_allclose(traj.qd[-1, 0], -2.0 * e, rtol=1e-7)
    # and the same at the lower stop
    traj = mbjax.simulate(model, jnp.asarray([-0.9]), jnp.asarray([-2.0]), 0.0, 0.4,
                          method=contact.WithContacts(limits=stops), rtol=1e-11, atol=1e-11, saveat=[0.4])
    np.testing.assert_allclose(traj.qd[-1, 0], 2.0 * e, rtol=1e-7)


def test_panda_fingers_stay_within_their_stops():
    model = mbjax.load_example_robot("panda")
    k = 1e4
    stops = contact.joint_limits(model, contact.SpringDamper(k, 20.0))
    q0 = mbjax.neutral(model).at[jnp.asarray([7, 8])].set(0.02)
    qd0 = jnp.zeros(model.nv).at[jnp.asarray([7, 8])].set(jnp.asarray([0.5, -0.5]))  # thrown at the stops
    traj = mbjax.simulate(model, q0, qd0, 0.0, 1.0, method=contact.WithContacts(limits=stops))
    fingers = np.asarray(traj.q[:, 7:])
    # a finger (m = 0.015 kg) hitting its stop at 0.5 m/s enters it by at most v sqrt(m / k) = 0.6 mm
    bound = 0.5 * np.sqrt(0.015 / k)
    assert fingers.min() >= -bound and fingers.max() <= 0.04 + bound
    free = mbjax.simulate(model, q0, qd0, 0.0, 1.0, limits=False)  # without the stops they leave their range
    assert np.asarray(free.q[:, 7:]).max() > 0.04 + 10 * bound or np.asarray(free.q[:, 7:]).min() < -10 * bound


def test_simulate_puts_stops_at_the_declared_limits_by_default():
    """``mbjax.simulate`` enforces the limits the model declares, with the default stops
    (critically damped, time constant T): a slider thrown at v into its stop enters it by
    x(t) = v t exp(-t / T), at most v T / e, and leaves it at exp(-2) v; ``limits=False`` lets it
    pass. The same run with the model traced (passed to ``jax.jit``: the stops on every
    coordinate, acting where the limit is finite) and in a batch of models is the same. The
    panda from rest under gravity (its arm falling onto its own stops) keeps its fingers within
    millimetres of [0, 0.04] m; without the stops they slide away."""
    T, v = contact.limits.TIME_CONSTANT, 0.5
    b = mbjax.ModelBuilder("slider", gravity=(0.0, 0.0, 0.0))
    b.add_body("slider", joint="prismatic", axis=(1, 0, 0), mass=0.2, inertia=np.eye(3) * 1e-3, lower=0.0, upper=0.04)
    slider = b.build()
    q0, qd0 = jnp.asarray([0.03]), jnp.asarray([v])
    ts = jnp.linspace(0.0, 0.05, 501)  # it meets the stop at t = 0.02 s
    tight = dict(rtol=1e-11, atol=1e-11, saveat=ts, solver=diffrax.Dopri8())  # Tsit5: 7e-8 m off past the kink
    run = mbjax.simulate(slider, q0, qd0, 0.0, 0.05, **tight)
    inside = np.asarray(ts) - 0.02
    expected = np.where(inside > 0, 0.04 + v * inside * np.exp(-inside / T), 0.03 + v * np.asarray(ts))
    entered = (inside > 0) & (inside < 2 * T)  # until it leaves the stop, 2 T later
    np.testing.assert_allclose(np.asarray(run.q[:, 0])[entered], expected[entered], atol=1e-12)  # 5e-15
    assert abs(float(run.q[:, 0].max()) - (0.04 + v * T / np.e)) < 1e-12  # the peak, at t = T in, is a sample
    np.testing.assert_allclose(float(run.qd[-1, 0]), -np.exp(-2.0) * v, rtol=1e-8)  # restitution exp(-2)
    passes = mbjax.simulate(slider, q0, qd0, 0.0, 0.05, limits=False, saveat=ts)
    np.testing.assert_allclose(passes.q[-1, 0], 0.03 + 0.05 * v, rtol=1e-12)
    traced = jax.jit(lambda m: mbjax.simulate(m, q0, qd0, 0.0, 0.05, **tight).q)(slider)
    np.testing.assert_allclose(traced, run.q, atol=1e-14)
    models = jax.tree.map(lambda x: jnp.stack([x, x]), slider)
    batch = mbjax.simulate_batch(models, jnp.stack([q0, q0]), jnp.stack([qd0, qd0]), 0.0, 0.05, batch_model=True,
                                 **tight)
    np.testing.assert_allclose(batch.q[1], run.q, atol=1e-14)
    panda = mbjax.load_example_robot("panda")
    fingers = np.asarray(mbjax.simulate(panda, mbjax.neutral(panda).at[7:].set(0.02), jnp.zeros(panda.nv), 0.0,
                                        1.0).q[:, 7:])
    # a bound, not a closed form: the arm's joints slam into their own 2 ms stops, and the hand's
    # deceleration (~v / T, hundreds of m/s^2) presses the fingers in by a T^2 ~ millimetres (measured 3.4 mm)
    assert fingers.min() > -5e-3 and fingers.max() < 0.045


def test_default_stops_are_critically_damped_on_each_coordinates_inertia():
    """Without a law every stop is k = I / T^2, c = 2 I / T with I the coordinate's apparent
    inertia 1 / (M^-1)_jj at the neutral configuration: on a wheel I is its inertia about the
    axis, and it leaves its stop at the linear law's closed-form restitution; on the panda I
    is Pinocchio's."""
    T = contact.limits.TIME_CONSTANT
    b = mbjax.ModelBuilder("wheel", gravity=(0.0, 0.0, 0.0))
    b.add_body("wheel", joint="revolute", axis=(0, 0, 1), mass=1.0, inertia=np.diag([0.3, 0.3, 0.5]),
               lower=-1.0, upper=0.5)
    wheel = contact.joint_limits(b.build())
    np.testing.assert_allclose([wheel.law.stiffness[0], wheel.law.damping[0]], [0.5 / T**2, 1.0 / T], rtol=1e-13)
    traj = mbjax.simulate(b.build(), jnp.asarray([0.49]), jnp.asarray([2.0]), 0.0, 0.05,
                          method=contact.WithContacts(limits=wheel), rtol=1e-11, atol=1e-11, saveat=[0.05])
    law = contact.SpringDamper(0.5 / T**2, 1.0 / T)
    np.testing.assert_allclose(traj.qd[-1, 0], -2.0 * float(law.restitution(0.5)), rtol=1e-7)
    assert float(law.restitution(0.5)) == pytest.approx(np.exp(-2.0), rel=1e-15)  # critical damping
    # overdamped (twice critical): the closed form against the simulated bounce
    heavy = contact.JointLimits((0,), (0,), (0,), (0,), jnp.asarray([-1.0]), jnp.asarray([0.5]),
                                contact.SpringDamper(0.5 / T**2, 2.0 / T))
    traj = mbjax.simulate(b.build(), jnp.asarray([0.49]), jnp.asarray([2.0]), 0.0, 0.05,
                          method=contact.WithContacts(limits=heavy), rtol=1e-11, atol=1e-11, saveat=[0.05])
    np.testing.assert_allclose(traj.qd[-1, 0], -2.0 * float(heavy.law.restitution(0.5)), rtol=1e-7)

    pin = pytest.importorskip("pinocchio", reason="Pinocchio (in the test extra) is the reference mass matrix")
    model = mbjax.load_example_robot("panda")
    reference = pin.buildModelFromUrdf(str(mbjax.example_robot_path("panda")))
    reference.armature[:] = np.asarray(model.armature)
    M = pin.crba(reference, reference.createData(), np.asarray(mbjax.neutral(model)))
    inertia = 1.0 / np.diag(np.linalg.inv(np.triu(M) + np.triu(M, 1).T))
    law = contact.stops(model)
    np.testing.assert_allclose(np.asarray(law.stiffness), inertia / T**2, rtol=1e-10)
    np.testing.assert_allclose(np.asarray(law.damping), 2 * inertia / T, rtol=1e-10)
    with pytest.raises(ValueError, match="time_constant must be a positive number"):
        contact.stops(model, 0.0)


def test_cli_puts_stops_at_the_limits_of_the_models_file(capsys):
    """``mbjax simulate panda`` (issue: the fingers slid 8 m): stops on by default, with the
    motion's excursion past them and the energy balance with their stored energy reported;
    ``--no-limits`` turns them off."""
    from mbjax import cli

    assert cli.main(["simulate", "panda", "--duration", "0.5", "--quiet"]) == 0
    out = capsys.readouterr().out
    past = float(re.search(r"went past them by at most (\S+)", out).group(1))
    # the soft stops let a joint in by about v T / e (and more where its inertia has grown past
    # the neutral one): 0.11 rad at 54 rad/s in the 2 s run of the docs; a sanity bound here
    assert "stops     18 joint limits" in out and 0 < past < 0.2, out
    assert float(re.search(r"rose by at most (\S+)", out).group(1)) < 1e-8  # the stops only take energy
    assert cli.main(["simulate", "panda", "--duration", "0.5", "--quiet", "--no-limits"]) == 0
    out = capsys.readouterr().out
    assert "stops" not in out and float(re.search(r"largest relative drift (\S+)", out).group(1)) < 1e-6
    # a fixed step the stops would make unstable is refused, with the step that is not
    assert cli.main(["demo", "--model", "panda", "--dt", "0.01", "--duration", "0.1", "--quiet"]) == 1
    err = capsys.readouterr().err
    assert re.search(r"the joint stops make the fixed step --dt 0.01 unstable; take --dt \S+ or less", err), err


# ------------------------------------------------------------------------------------ from MJCF
WALKER = """<mujoco><worldbody>
  <geom name="floor" type="plane" size="0 0 1" pos="0 0 -0.1" euler="6 4 0" friction="0.9"/>
  <body name="torso" pos="0 0 0.3"><freejoint/>
    <geom type="capsule" size="0.05 0.2" euler="0 90 0" friction="1.2"/>
    <geom type="box" size="0.06 0.08 0.04" pos="0.1 0 0.05" euler="0 0 20"/>
    <geom type="sphere" size="0.03" pos="-0.2 0 0" contype="0" conaffinity="0"/>
    <body name="leg" pos="0.2 0 0" euler="0 0 30"><joint name="hip" type="hinge" axis="0 1 0"/>
      <geom type="capsule" fromto="0 0 0 0 0 -0.25" size="0.03"/>
      <body name="foot" pos="0 0 -0.25"><geom type="sphere" size="0.04" pos="0.01 0 -0.01"/></body>
    </body>
  </body>
</worldbody></mujoco>"""


def test_mjcf_contacts_equal_mujoco():
    mujoco = _mujoco()
    model = mbjax.load_mjcf(WALKER)
    cm = contact.mjcf_contacts(model, WALKER, contact.SpringDamper(1e4, 10.0))
    assert len(cm.points) == 2 + 8 + 2 + 1  # the filtered sphere left out; the foot welded to the leg
    # MuJoCo's rule for a pair: the larger coefficient (the floor's 0.9, the capsule's 1.2, the default 1)
    np.testing.assert_allclose(np.unique(np.asarray(cm.friction.coefficient)), [1.0, 1.2])
    m = mujoco.MjModel.from_xml_string(WALKER)
    d = mujoco.MjData(m)
    rng = np.random.default_rng(1)
    compared = 0
    for _ in range(30):
        quat = rng.normal(size=4)
        d.qpos[:] = np.concatenate([rng.uniform(-0.2, 0.2, 3) * [1, 1, 0.5], quat / np.linalg.norm(quat),
                                    rng.uniform(-1.5, 1.5, 1)])
        mujoco.mj_forward(m, d)
        c, _ = cm.forces(model, jnp.asarray(d.qpos), jnp.zeros(model.nv))
        if np.sum(np.asarray(c.depth)[2:10] > 0) > 4:  # MuJoCo keeps at most four corners of a box
            continue
        compared += _assert_equal_to_mujoco(c, [con for con in d.contact[:d.ncon] if con.geom1 == 0])
    assert compared > 20


def test_mjcf_contacts_take_explicit_pairs_with_the_ground():
    """MJX's humanoid turns its geoms' contacts off (contype 0) and pairs its four foot capsules
    with the floor explicitly: those are its contacts, with the pairs' friction, equal to
    MuJoCo's at random configurations."""
    mujoco = _mujoco()
    path = pathlib.Path(mujoco.__file__).parent / "mjx" / "test_data" / "humanoid" / "humanoid.xml"
    if not path.exists():
        pytest.skip("needs MuJoCo's MJX test data (humanoid): pip install mujoco-mjx (in mbjax's test extra)")
    model = mbjax.load_mjcf(path)
    cm = contact.mjcf_contacts(model, path, contact.SpringDamper(1e4, 10.0))
    assert len(cm.points) == 8  # four capsules, two end spheres each
    m = mujoco.MjModel.from_xml_path(str(path))
    d = mujoco.MjData(m)
    rng = np.random.default_rng(4)
    compared = 0
    for _ in range(30):
        d.qpos[:] = m.qpos0
        quat = np.array([1.0, 0.0, 0.0, 0.0]) + rng.normal(scale=0.1, size=4)
        d.qpos[2:7] = np.concatenate([[rng.uniform(1.1, 1.4)], quat / np.linalg.norm(quat)])
        d.qpos[7:] += rng.uniform(-0.3, 0.3, m.nq - 7)
        mujoco.mj_forward(m, d)
        c, _ = cm.forces(model, jnp.asarray(d.qpos), jnp.zeros(model.nv))
        compared += _assert_equal_to_mujoco(c, d.contact[:d.ncon])
    assert compared > 10


def test_urdf_contacts_are_the_collision_geometries_pinocchio_reads():
    """``contact.urdf_contacts`` on the panda: its boxes' corners and its meshes' convex hull
    vertices, placed on the moving bodies, are where Pinocchio's collision model puts them at a
    random configuration (1e-12), one candidate per hull vertex; bad input is refused."""
    pin = pytest.importorskip("pinocchio", reason="Pinocchio (in the test extra) reads the collision geometries")
    from scipy.spatial import ConvexHull

    path = str(mbjax.example_robot_path("panda"))
    model = mbjax.load_example_robot("panda")
    cm = contact.urdf_contacts(model, path, contact.SpringDamper(1e4, 10.0), contact.Friction(0.8, 1e-3))
    q = mbjax.random_configuration(model, jax.random.PRNGKey(3))
    ours = np.asarray(cm._centres(mbjax.kinematics.tree_kinematics(model, q)))
    shape = np.asarray(cm.points.shape)
    reference = pin.buildModelFromUrdf(path)
    share = next(str(d) for d in pathlib.Path(path).parents if (d / "example-robot-data").is_dir())
    geometry = pin.buildGeomFromUrdf(reference, path, pin.COLLISION, [share])
    data, gdata = reference.createData(), geometry.createData()
    pin.forwardKinematics(reference, data, np.asarray(q))
    pin.updateGeometryPlacements(reference, data, geometry, gdata)
    moving = [i for i, g in enumerate(geometry.geometryObjects) if g.parentJoint != 0]
    assert len(moving) == shape.max() + 1 == 16  # link0's is on the fixed base
    for k, i in enumerate(moving):
        g, placement = geometry.geometryObjects[i], gdata.oMg[i]
        if hasattr(g.geometry, "halfSide"):
            local = np.array(list(itertools.product((-1, 1), repeat=3))) * np.asarray(g.geometry.halfSide)
        else:
            vertices = np.asarray(g.geometry.vertices()) * np.asarray(g.meshScale)
            local = vertices[ConvexHull(vertices).vertices]
        world = local @ placement.rotation.T + placement.translation
        mine = ours[shape == k]
        assert len(mine) == len(world), (g.name, len(mine), len(world))
        gap = np.linalg.norm(mine[:, None] - world[None], axis=-1).min(axis=1).max()
        assert gap < 1e-12, (g.name, gap)
    with pytest.raises(FileNotFoundError, match="pass the folder that holds its package"):
        contact.urdf_contacts(model, open(path).read(), contact.SpringDamper(1e4, 10.0))


def test_mjcf_mesh_contacts_are_its_hull_vertices():
    """A mesh geom (a cube's corners and its centre) gets the cube's eight corners as
    candidates: the vertices of its hull, in MuJoCo's placement of the geom."""
    mujoco = _mujoco()
    corners = np.array(list(itertools.product((-0.1, 0.1), repeat=3)))
    vertex = " ".join(f"{x:g}" for x in np.concatenate([corners, np.zeros((1, 3))]).ravel())
    xml = f"""<mujoco><asset><mesh name="cube" vertex="{vertex}"/></asset><worldbody>
      <geom type="plane" size="1 1 0.1"/>
      <body name="b" pos="0 0 1"><freejoint/><geom type="mesh" mesh="cube" pos="0.05 0 0" euler="10 20 30"/></body>
    </worldbody></mujoco>"""
    model = mbjax.load_mjcf(xml)
    cm = contact.mjcf_contacts(model, xml, contact.SpringDamper(1e4, 10.0))
    q = mbjax.random_configuration(model, jax.random.PRNGKey(4))
    ours = np.asarray(cm._centres(mbjax.kinematics.tree_kinematics(model, q)))
    m = mujoco.MjModel.from_xml_string(xml)
    d = mujoco.MjData(m)
    d.qpos[:] = np.asarray(q)
    mujoco.mj_forward(m, d)
    # MuJoCo stores mesh vertices in float32: its corners are 0.1 to 1.5e-9
    local = np.asarray(m.mesh_vert, float)
    local = local[np.all(np.abs(np.abs(local) - 0.1) < 1e-6, axis=1)]  # the corners, not the centre
    world = local @ d.geom_xmat[1].reshape(3, 3).T + d.geom_xpos[1]
    assert len(ours) == len(local) == 8
    assert np.linalg.norm(ours[:, None] - world[None], axis=-1).min(axis=1).max() < 1e-12


def test_mjcf_contacts_refuse_what_they_cannot_model():
    _mujoco()
    with pytest.warns(UserWarning, match="cylinders or ellipsoids"):
        text = WALKER.replace('<geom type="sphere" size="0.04"', '<geom type="cylinder" size="0.04 0.02"')
        contact.mjcf_contacts(mbjax.load_mjcf(text), text, contact.SpringDamper(1e4, 10.0))
    no_floor = WALKER.replace('<geom name="floor" type="plane" size="0 0 1" pos="0 0 -0.1" euler="6 4 0" friction="0.9"/>',
                              "")
    with pytest.raises(ValueError, match="no plane or hfield geom"):
        contact.mjcf_contacts(mbjax.load_mjcf(no_floor), no_floor, contact.SpringDamper(1e4, 10.0))


def test_energy_never_increases_in_a_passive_run():
    """A box thrown spinning onto the floor: kinetic + potential + the contact springs' energy
    falls or stays, at every saved time (the spring-damper's damping, its letting go while
    compressed, and friction only take energy out); to the integration's accuracy."""
    b = mbjax.ModelBuilder("box")
    b.add_body("box", joint="free", mass=1.0, inertia=np.diag([0.01, 0.02, 0.025]))
    model = b.build()
    cm = contact.CompliantContact(contact.contact_points(model, [("box", contact.box((0.1, 0.15, 0.2)))]),
                                  contact.Plane.horizontal(0.0), contact.SpringDamper(1e5, 30.0),
                                  contact.Friction(0.6, 1e-3))
    q0 = jnp.asarray([0.0, 0.0, 0.4, 0.9, 0.3, -0.2, 0.2])
    q0 = q0.at[3:].set(q0[3:] / jnp.linalg.norm(q0[3:]))
    qd0 = jnp.asarray([1.0, 0.5, -1.0, 3.0, -2.0, 1.0])
    traj = mbjax.simulate(model, q0, qd0, 0.0, 1.5, method=contact.WithContacts(cm), rtol=1e-10, atol=1e-10,
                          saveat=jnp.linspace(0.0, 1.5, 301))
    energy = np.asarray(jax.vmap(lambda q, qd: mbjax.kinetic_energy(model, q, qd) + mbjax.potential_energy(model, q)
                                 + cm.potential_energy(model, q))(traj.q, traj.qd))
    assert np.all(np.diff(energy) <= 1e-8 * np.abs(energy[0])), np.diff(energy).max()
    assert energy[-1] < 0.5 * energy[0]  # it did touch the floor and lose energy


def test_long_trial_steps_into_the_ground_are_rejected_not_raised():
    """With one saved time the solver's first trial steps go deep into the floor, where the
    forces overflow: the step must be rejected (it raised 'NaN or infinite' before)."""
    model = _ball(1.0, offset=(0.0, 0.0, 0.0))
    cm = contact.CompliantContact(contact.contact_points(model, [("ball", contact.sphere(0.1))]),
                                  contact.Plane.horizontal(0.0), contact.SpringDamper(1e4, 20.0),
                                  contact.Friction(0.3, 1e-2))
    q0 = jnp.asarray([0.0, 0.0, 0.5, 1.0, 0.0, 0.0, 0.0])
    traj = mbjax.simulate(model, q0, jnp.asarray([1.0, 0.0, 0.0, 0.0, 0.0, 0.0]), 0.0, 1.2,
                          method=contact.WithContacts(cm), saveat=[1.2])
    assert np.all(np.isfinite(np.asarray(traj.q))) and 0.1 < float(traj.q[-1, 2]) < 0.5
    with pytest.raises(ValueError, match="qd has shape"):  # shapes are still checked
        mbjax.forward_dynamics(model, q0, jnp.zeros(5), jnp.zeros(6), method=contact.WithContacts(cm))


def test_touch_down_and_lift_off_events_stop_at_the_closed_form_times():
    """A ball thrown at the floor at v from a gap h, no gravity, linear spring-damper: it touches
    at h / v; the clipped law lets go at the restitution time t_r (``SpringDamper.restitution``'s
    closed form), the ball still in the floor by d(t_r), which it leaves in free flight
    d(t_r) / e v later. Both events stop the run there (Newton's method on the depth); in a
    batch of gaps each run stops at its own time."""
    m, r, v, h = 1.0, 0.1, 1.0, 0.05
    model = mbjax.ModelBuilder("ball", gravity=(0.0, 0.0, 0.0)).add_body("ball", joint="free", mass=m,
                                                                        inertia=np.eye(3) * 0.4 * m * r**2).build()
    law = contact.SpringDamper(1e4, 20.0)
    floor = contact.CompliantContact(contact.contact_points(model, [("ball", contact.sphere(r))]),
                                     contact.Plane.horizontal(0.0), law)
    q0, qd0 = jnp.asarray([0.0, 0.0, r + h, 1.0, 0.0, 0.0, 0.0]), jnp.zeros(6).at[2].set(-v)
    tight = dict(method=contact.WithContacts(floor), rtol=1e-12, atol=1e-12, solver=diffrax.Dopri8())
    down = mbjax.simulate(model, q0, qd0, 0.0, 1.0, event=contact.touch_down(model, floor), **tight)
    valid = np.asarray(down.valid)
    assert bool(down.event) and abs(float(down.ts[valid][-1]) - h / v) < 1e-10
    # in the floor: d(t) = v / w exp(-s t) sin(w t), s = c / 2m, w^2 = k / m - s^2; force k d + c d' = 0 at t_r
    k, c = 1e4, 20.0
    s, w = c / (2 * m), np.sqrt(k / m - (c / (2 * m)) ** 2)
    t_r = (np.pi - np.arctan2(c * w, k - c * s)) / w
    d_r = v / w * np.exp(-s * t_r) * np.sin(w * t_r)
    e = float(law.restitution(m))
    expected = h / v + t_r + d_r / (e * v)
    t1 = 1e-3  # start 1 ms into the contact, on the closed-form motion
    d1, rate1 = v / w * np.exp(-s * t1) * np.sin(w * t1), v * np.exp(-s * t1) * (np.cos(w * t1) - s / w * np.sin(w * t1))
    up = mbjax.simulate(model, q0.at[2].set(r - d1), qd0.at[2].set(-rate1), h / v + t1, 1.0,
                        event=contact.lift_off(model, floor), **tight)
    valid = np.asarray(up.valid)
    assert bool(up.event) and abs(float(up.ts[valid][-1]) - expected) < 1e-9, (float(up.ts[valid][-1]), expected)
    gaps = jnp.asarray([0.02, 0.05, 0.1])
    batch = mbjax.simulate_batch(model, jnp.stack([q0.at[2].set(r + g) for g in gaps]), jnp.stack([qd0] * 3), 0.0,
                                 1.0, event=contact.touch_down(model, floor), **tight)
    assert bool(jnp.all(batch.event))
    stopped = [float(ts[valid][-1]) for ts, valid in zip(np.asarray(batch.ts), np.asarray(batch.valid))]
    np.testing.assert_allclose(stopped, gaps / v, atol=1e-10)
    with pytest.raises(TypeError, match="CompliantContact"):
        contact.touch_down(model, contact.RigidContact(floor.points, floor.ground, 0.5))
