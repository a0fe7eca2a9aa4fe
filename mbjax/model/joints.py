"""Joint types: configuration manifold, transform, motion subspace and velocity-product term.

Every joint type is a stateless object whose methods act on *all joints of that type at
once* (leading dimension ``n``), so that a model with many revolute joints computes their
transforms in a handful of array operations.

The frame of the child body is ``placement * X_J(q)``: the joint's placement in the parent
body, then the joint's own motion. Motion subspaces ``S`` are given as one 6-vector row per
velocity coordinate, ``(linear, angular)``, expressed in the child body frame, so that the
child's velocity relative to the parent, in the child frame, is ``v_J = S^T qd`` (Featherstone,
*Rigid Body Dynamics Algorithms*, Sec. 4.4). ``c_J = (d/dt S) qd`` with the derivative of the
components in the child frame; it is zero for every type here except ``universal``.

| type        | nq | nv | q                                | v                              |
|-------------|----|----|----------------------------------|--------------------------------|
| revolute    | 1  | 1  | angle                            | angle rate                     |
| continuous  | 2  | 1  | (cos, sin) of the angle          | angle rate                     |
| prismatic   | 1  | 1  | displacement                     | rate                           |
| spherical   | 4  | 3  | unit quaternion (w, x, y, z)     | angular velocity, child frame  |
| universal   | 2  | 2  | angles about axis 1 then axis 2  | angle rates                    |
| cylindrical | 2  | 2  | (displacement, angle) on one axis| rates                          |
| planar      | 4  | 3  | (x, y, cos, sin) in the x-y plane| (vx, vy, wz), child frame      |
| free        | 7  | 6  | (position, quaternion w, x, y, z)| (linear, angular), child frame |

The free joint follows Pinocchio's free-flyer: ``v`` is the spatial velocity of the body
frame expressed in the body frame, and ``integrate`` is ``q * exp(v)`` on SE(3).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from .. import spatial


def _zeros6(n, dtype):
    return jnp.zeros((n, 6), dtype=dtype)


def _wrap(x):
    return jnp.arctan2(jnp.sin(x), jnp.cos(x))


def _bounded_uniform(key, lower, upper, default):
    """Uniform sample in [lower, upper], where infinite bounds fall back to +-default."""
    lo = jnp.where(jnp.isfinite(lower), lower, -default)
    hi = jnp.where(jnp.isfinite(upper), upper, default)
    return jax.random.uniform(key, lower.shape, dtype=lower.dtype, minval=lo, maxval=hi)


def _random_quaternion(key, n, dtype):
    """Uniformly distributed unit quaternions (normalised Gaussian samples), w >= 0."""
    g = jax.random.normal(key, (n, 4), dtype=dtype)
    g = g / jnp.linalg.norm(g, axis=-1, keepdims=True)
    return jnp.where(g[:, :1] < 0, -g, g)


def _rotate_unit_complex(c, s, angle):
    """(cos, sin) of (theta + angle) from (cos theta, sin theta)."""
    ca, sa = jnp.cos(angle), jnp.sin(angle)
    return c * ca - s * sa, s * ca + c * sa


def _angle_tangent(q, dq):
    """d/dx of the angle from (cos, sin) q to x at x = q, applied to dq: the difference's atan2(y, x)
    at y = 0, x = |q|^2."""
    c, s = q[:, 0], q[:, 1]
    return (c * dq[:, 1] - s * dq[:, 0]) / (c * c + s * s)


def _rotation_tangent(q, dq):
    """d/dx of log(q^-1 x) (a quaternion difference) at x = q, applied to dq: 2 vec(q* dq) / |q|^2,
    with vec(q* dq) = w dv - dw v - v x dv (the logarithm's derivative at the identity is 2, the
    normalisation removes the part along q); written by components, not by
    :func:`mbjax.spatial.quat_multiply`, whose sum and cross product are reductions over 3-4
    components for each of ``jax.jacfwd``'s tangents (YNNPACK's calls in a plain ``jax.jit``)."""
    w, x, y, z = q[:, 0], q[:, 1], q[:, 2], q[:, 3]
    dw, dx, dy, dz = dq[:, 0], dq[:, 1], dq[:, 2], dq[:, 3]
    k = 2.0 / (w * w + x * x + y * y + z * z)
    return jnp.stack([k * (w * dx - dw * x - (y * dz - z * dy)),
                      k * (w * dy - dw * y - (z * dx - x * dz)),
                      k * (w * dz - dw * z - (x * dy - y * dx))], -1)


class AbstractJoint:
    """Interface of a joint type. Subclasses are singletons; their methods are vectorised."""

    name: str
    nq: int
    nv: int
    #: slices of q that must have unit norm (quaternions, unit complex numbers)
    unit_slices: tuple = ()
    #: True where S depends on q in the child frame (then c_J may be nonzero)
    has_bias: bool = False

    def transform(self, axis, q):
        """Rotation (n, 3, 3) and translation (n, 3) of X_J(q)."""
        raise NotImplementedError

    def motion_subspace(self, axis, q):
        """S as (n, nv, 6) rows, child frame."""
        raise NotImplementedError

    def placed(self, R0, p0, axis, q):
        """The body poses in their parents, (R0, p0) X_J(q), for C states in a last axis:
        (n, 3, 3, C) and (n, 3, C) from the placements R0 (n, 3, 3), p0 (n, 3) and q (n, nq, C)
        (mbjax.dynamics.levels). By default :meth:`transform` mapped over the states."""
        def one(x):
            return spatial.compose(R0, p0, *self.transform(axis, x))

        return jax.vmap(one, in_axes=-1, out_axes=-1)(q)

    def bias(self, axis, q, qd):
        """c_J = (dS/dt) qd, (n, 6), child frame."""
        return _zeros6(q.shape[0], q.dtype)

    def neutral(self):
        """Neutral configuration (nq,) as a NumPy array."""
        return np.zeros(self.nq)

    def random(self, key, lower, upper):
        """Random configurations (n, nq) within finite bounds, elsewhere a default range."""
        return _bounded_uniform(key, lower, upper, np.pi)

    def integrate(self, q, v):
        """q (+) v on the configuration manifold."""
        return q + v

    def difference(self, q0, q1):
        """v such that integrate(q0, v) == q1."""
        return q1 - q0

    def difference_tangent(self, q, dq):
        """The velocity of a configuration displacement dq at q: d/dx difference(q, x) at x = q
        applied to dq (what a q tangent is in the tangent space). By default the forward mode
        of :meth:`difference`; joints on a manifold give it in closed form."""
        return jax.jvp(lambda x: self.difference(q, x), (q,), (dq,))[1]

    def rate(self, q, v):
        """dq/dt at a normalised q moving at velocity v: d/ds integrate(q, s v) at s = 0."""
        return jax.jvp(lambda dv: self.integrate(q, dv), (jnp.zeros_like(v),), (v,))[1]

    def normalize(self, q):
        """Project q back onto the manifold (unit quaternions, unit complex numbers)."""
        for sl in self.unit_slices:
            part = q[:, sl]
            q = q.at[:, sl].set(part / jnp.linalg.norm(part, axis=-1, keepdims=True))
        return q

    def __repr__(self):
        return self.name


class Revolute(AbstractJoint):
    name, nq, nv = "revolute", 1, 1

    def transform(self, axis, q):
        a = axis[:, 0]
        return spatial.axis_angle_rotation(a, q[:, 0]), jnp.zeros_like(a)

    def motion_subspace(self, axis, q):
        a = axis[:, 0]
        return jnp.concatenate([jnp.zeros_like(a), a], -1)[:, None, :]

    def placed(self, R0, p0, axis, q):
        """R0 X_J = R0 + sin q (R0 K) + (1 - cos q) (R0 K^2), K = [a]x: the products are of the
        model alone, and the states' part is one elementwise kernel."""
        return _turned(R0, p0, axis[:, 0], *spatial.stored_sincos(q[:, 0]))


def _turned(R0, p0, a, s, c):
    """Placements (R0, p0) turned by angles with sines s and cosines c (n, C) about axes a (n, 3);
    s and c are read nine times each: stored values, or cheap expressions of them."""
    K = spatial.skew(a)
    A, B = spatial.matmul(R0, K), spatial.matmul(R0, spatial.matmul(K, K))
    s, c = s[:, None, None], c[:, None, None]
    R = R0[..., None] + A[..., None] * s + B[..., None] * (1.0 - c)
    return R, jnp.broadcast_to(p0[..., None], p0.shape + s.shape[-1:])


class Continuous(Revolute):
    """Unbounded revolute joint stored as (cos q, sin q), Pinocchio's RevoluteUnbounded."""

    name, nq, nv = "continuous", 2, 1
    unit_slices = (slice(0, 2),)

    def transform(self, axis, q):
        a = axis[:, 0]
        q = spatial.computed_once(q / jnp.linalg.norm(q, axis=-1, keepdims=True))
        c, s = q[:, 0:1, None], q[:, 1:2, None]
        K = spatial.skew(a)
        R = jnp.eye(3, dtype=q.dtype) + s * K + (1.0 - c) * spatial.matmul(K, K)
        return R, jnp.zeros_like(a)

    def placed(self, R0, p0, axis, q):
        # (cos, sin) normalised, each evaluated once
        c, s = spatial.computed_once(jnp.moveaxis(q / jnp.linalg.norm(q, axis=1, keepdims=True), 1, 0))
        return _turned(R0, p0, axis[:, 0], s, c)

    def neutral(self):
        return np.array([1.0, 0.0])

    def random(self, key, lower, upper):
        t = jax.random.uniform(key, lower.shape[:1], dtype=lower.dtype, minval=-np.pi, maxval=np.pi)
        return jnp.stack([jnp.cos(t), jnp.sin(t)], -1)

    def integrate(self, q, v):
        c, s = _rotate_unit_complex(q[:, 0], q[:, 1], v[:, 0])
        return jnp.stack([c, s], -1)

    def difference(self, q0, q1):
        c0, s0, c1, s1 = q0[:, 0], q0[:, 1], q1[:, 0], q1[:, 1]
        return jnp.arctan2(c0 * s1 - s0 * c1, c0 * c1 + s0 * s1)[:, None]

    def difference_tangent(self, q, dq):
        return _angle_tangent(q, dq)[:, None]


class Prismatic(AbstractJoint):
    name, nq, nv = "prismatic", 1, 1

    def transform(self, axis, q):
        a = axis[:, 0]
        R = jnp.broadcast_to(jnp.eye(3, dtype=q.dtype), (q.shape[0], 3, 3))
        return R, a * q

    def motion_subspace(self, axis, q):
        a = axis[:, 0]
        return jnp.concatenate([a, jnp.zeros_like(a)], -1)[:, None, :]

    def placed(self, R0, p0, axis, q):
        R = jnp.broadcast_to(R0[..., None], R0.shape + q.shape[-1:])
        return R, p0[..., None] + spatial.matvec(R0, axis[:, 0])[..., None] * q[:, 0, None, :]

    def random(self, key, lower, upper):
        return _bounded_uniform(key, lower, upper, 1.0)


class Spherical(AbstractJoint):
    name, nq, nv = "spherical", 4, 3
    unit_slices = (slice(0, 4),)

    def transform(self, axis, q):
        return spatial.quat_to_rotation(q), jnp.zeros((q.shape[0], 3), q.dtype)

    def motion_subspace(self, axis, q):
        S = jnp.concatenate([jnp.zeros((3, 3)), jnp.eye(3)], -1).astype(q.dtype)
        return jnp.broadcast_to(S, (q.shape[0], 3, 6))

    def neutral(self):
        return np.array([1.0, 0.0, 0.0, 0.0])

    def random(self, key, lower, upper):
        return _random_quaternion(key, lower.shape[0], lower.dtype)

    def integrate(self, q, v):
        # body-frame angular velocity: q' = q * exp(v)
        return spatial.quat_multiply(q, spatial.quat_exp(v))

    def rate(self, q, v):
        # d/ds q * exp(s v) = q * (0, v / 2), in closed form: the forward mode of quat_exp's
        # small-angle branches at zero made every simulation's program larger
        return spatial.quat_multiply(q, spatial.quat_pure(0.5 * v))

    def difference(self, q0, q1):
        return spatial.quat_log(spatial.quat_multiply(spatial.quat_conjugate(q0), q1))

    def difference_tangent(self, q, dq):
        return _rotation_tangent(q, dq)


class Universal(AbstractJoint):
    """Rotation about axis 1 (parent side) followed by axis 2 (child side)."""

    name, nq, nv = "universal", 2, 2
    has_bias = True

    def transform(self, axis, q):
        R1 = spatial.axis_angle_rotation(axis[:, 0], q[:, 0])
        R2 = spatial.axis_angle_rotation(axis[:, 1], q[:, 1])
        return spatial.matmul(R1, R2), jnp.zeros((q.shape[0], 3), q.dtype)

    def _first_axis_in_child(self, axis, q):
        R2 = spatial.axis_angle_rotation(axis[:, 1], q[:, 1])
        return spatial.matvec(spatial.transpose(R2), axis[:, 0])

    def motion_subspace(self, axis, q):
        # w_child = R2^T a1 qd1 + a2 qd2
        z = jnp.zeros((q.shape[0], 3), q.dtype)
        s1 = jnp.concatenate([z, self._first_axis_in_child(axis, q)], -1)
        s2 = jnp.concatenate([z, axis[:, 1]], -1)
        return jnp.stack([s1, s2], 1)

    def bias(self, axis, q, qd):
        # d/dt (R2^T a1) = -[a2 qd2] R2^T a1
        b = self._first_axis_in_child(axis, q)
        w = -(qd[:, 0] * qd[:, 1])[:, None] * jnp.cross(axis[:, 1], b)
        return jnp.concatenate([jnp.zeros_like(w), w], -1)


class Cylindrical(AbstractJoint):
    """Translation along and rotation about one axis; q = (displacement, angle)."""

    name, nq, nv = "cylindrical", 2, 2

    def transform(self, axis, q):
        a = axis[:, 0]
        return spatial.axis_angle_rotation(a, q[:, 1]), a * q[:, :1]

    def motion_subspace(self, axis, q):
        a = axis[:, 0]
        z = jnp.zeros_like(a)
        return jnp.stack([jnp.concatenate([a, z], -1), jnp.concatenate([z, a], -1)], 1)

    def random(self, key, lower, upper):
        k1, k2 = jax.random.split(key)
        d = _bounded_uniform(k1, lower[:, :1], upper[:, :1], 1.0)
        t = _bounded_uniform(k2, lower[:, 1:], upper[:, 1:], np.pi)
        return jnp.concatenate([d, t], -1)


def _se2_exp(v):
    """Displacement (in the starting frame) and rotation of the planar twist (vx, vy, w)."""
    w = v[:, 2]
    small = jnp.abs(w) < 1e-6
    ws = jnp.where(small, 1.0, w)
    a = jnp.where(small, 1.0 - w * w / 6.0, jnp.sin(ws) / ws)  # sin w / w
    b = jnp.where(small, w / 2.0 - w**3 / 24.0, (1.0 - jnp.cos(ws)) / ws)  # (1 - cos w) / w
    dx = a * v[:, 0] - b * v[:, 1]
    dy = b * v[:, 0] + a * v[:, 1]
    return dx, dy, w


class Planar(AbstractJoint):
    """Motion in the x-y plane of the joint frame; q = (x, y, cos t, sin t), v in the child frame."""

    name, nq, nv = "planar", 4, 3
    unit_slices = (slice(2, 4),)

    def transform(self, axis, q):
        c, s = spatial.computed_once(q[:, 2:4] / jnp.linalg.norm(q[:, 2:4], axis=-1, keepdims=True)).T
        o, one = jnp.zeros_like(c), jnp.ones_like(c)
        R = jnp.stack([jnp.stack([c, -s, o], -1), jnp.stack([s, c, o], -1), jnp.stack([o, o, one], -1)], -2)
        return R, jnp.stack([q[:, 0], q[:, 1], o], -1)

    def motion_subspace(self, axis, q):
        S = np.zeros((3, 6))
        S[0, 0] = S[1, 1] = S[2, 5] = 1.0
        return jnp.broadcast_to(jnp.asarray(S, q.dtype), (q.shape[0], 3, 6))

    def neutral(self):
        return np.array([0.0, 0.0, 1.0, 0.0])

    def random(self, key, lower, upper):
        k1, k2 = jax.random.split(key)
        xy = _bounded_uniform(k1, lower[:, :2], upper[:, :2], 1.0)
        t = jax.random.uniform(k2, lower.shape[:1], dtype=lower.dtype, minval=-np.pi, maxval=np.pi)
        return jnp.concatenate([xy, jnp.cos(t)[:, None], jnp.sin(t)[:, None]], -1)

    def integrate(self, q, v):
        # pose * exp(v) on SE(2)
        dx, dy, w = _se2_exp(v)
        c, s = q[:, 2], q[:, 3]
        x = q[:, 0] + c * dx - s * dy
        y = q[:, 1] + s * dx + c * dy
        c2, s2 = _rotate_unit_complex(c, s, w)
        return jnp.stack([x, y, c2, s2], -1)

    def rate(self, q, v):
        # d/ds of pose * exp(s v): the linear velocity turned into the joint frame, (-sin, cos) w
        c, s = q[:, 2], q[:, 3]
        return jnp.stack([c * v[:, 0] - s * v[:, 1], s * v[:, 0] + c * v[:, 1], -s * v[:, 2], c * v[:, 2]], -1)

    def difference(self, q0, q1):
        c0, s0 = q0[:, 2], q0[:, 3]
        w = jnp.arctan2(c0 * q1[:, 3] - s0 * q1[:, 2], c0 * q1[:, 2] + s0 * q1[:, 3])
        ex, ey = q1[:, 0] - q0[:, 0], q1[:, 1] - q0[:, 1]
        px, py = c0 * ex + s0 * ey, -s0 * ex + c0 * ey  # displacement in frame 0
        small = jnp.abs(w) < 1e-6
        ws = jnp.where(small, 1.0, w)
        a = jnp.where(small, 1.0 - w * w / 6.0, jnp.sin(ws) / ws)
        b = jnp.where(small, w / 2.0 - w**3 / 24.0, (1.0 - jnp.cos(ws)) / ws)
        det = a * a + b * b  # inverse of [[a, -b], [b, a]]
        vx = (a * px + b * py) / det
        vy = (-b * px + a * py) / det
        return jnp.stack([vx, vy, w], -1)

    def difference_tangent(self, q, dq):
        # at x = q: w = 0, (px, py) = 0, so the displacement in frame 0 and the angle's rate
        c, s = q[:, 2], q[:, 3]
        x, y = c * dq[:, 0] + s * dq[:, 1], -s * dq[:, 0] + c * dq[:, 1]
        return jnp.stack([x, y, _angle_tangent(q[:, 2:], dq[:, 2:])], -1)


class Free(AbstractJoint):
    """Six-DoF joint: q = (p, quaternion w, x, y, z), v = body-frame (linear, angular)."""

    name, nq, nv = "free", 7, 6
    unit_slices = (slice(3, 7),)

    def transform(self, axis, q):
        return spatial.quat_to_rotation(q[:, 3:]), q[:, :3]

    def motion_subspace(self, axis, q):
        return jnp.broadcast_to(jnp.eye(6, dtype=q.dtype), (q.shape[0], 6, 6))

    def neutral(self):
        return np.array([0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0])

    def random(self, key, lower, upper):
        k1, k2 = jax.random.split(key)
        p = _bounded_uniform(k1, lower[:, :3], upper[:, :3], 1.0)
        return jnp.concatenate([p, _random_quaternion(k2, lower.shape[0], lower.dtype)], -1)

    def integrate(self, q, v):
        # (R, p) * exp6(v):  p' = p + R V(w) v,  quat' = quat * exp(w)
        R = spatial.quat_to_rotation(q[:, 3:])
        _, dp = spatial.se3_exp(v)
        p = q[:, :3] + spatial.matvec(R, dp)
        return jnp.concatenate([p, spatial.quat_multiply(q[:, 3:], spatial.quat_exp(v[:, 3:]))], -1)

    def rate(self, q, v):
        # d/ds of (R, p) * exp6(s v): (R v_linear, q * (0, w / 2)), as V(0) = 1
        R = spatial.quat_to_rotation(q[:, 3:])
        return jnp.concatenate([spatial.matvec(R, v[:, :3]), SPHERICAL.rate(q[:, 3:], v[:, 3:])], -1)

    def difference(self, q0, q1):
        # log6((R0, p0)^-1 (R1, p1))
        R0 = spatial.quat_to_rotation(q0[:, 3:])
        rel = spatial.quat_multiply(spatial.quat_conjugate(q0[:, 3:]), q1[:, 3:])
        w = spatial.quat_log(rel)
        p = spatial.matvec(spatial.transpose(R0), q1[:, :3] - q0[:, :3])
        return spatial.se3_log(p, w)

    def difference_tangent(self, q, dq):
        # at x = q the relative motion is the identity, where log6 has derivative 1: (R^T dp, the
        # rotation's); R^T dp by components, as _rotation_tangent, not a matvec per tangent
        R = spatial.quat_to_rotation(q[:, 3:])
        lin = [R[:, 0, i] * dq[:, 0] + R[:, 1, i] * dq[:, 1] + R[:, 2, i] * dq[:, 2] for i in range(3)]
        return jnp.concatenate([jnp.stack(lin, -1), _rotation_tangent(q[:, 3:], dq[:, 3:])], -1)


REVOLUTE, CONTINUOUS, PRISMATIC = Revolute(), Continuous(), Prismatic()
SPHERICAL, UNIVERSAL, CYLINDRICAL = Spherical(), Universal(), Cylindrical()
PLANAR, FREE = Planar(), Free()

#: every movable joint type by name (``fixed`` joints are merged away by the builder)
JOINT_TYPES = {j.name: j for j in (REVOLUTE, CONTINUOUS, PRISMATIC, SPHERICAL, UNIVERSAL, CYLINDRICAL, PLANAR, FREE)}
