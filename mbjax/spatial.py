"""Spatial algebra: rotations, quaternions, rigid transforms, motions, forces, inertias.

Conventions, settled here once for the whole library:

* A **spatial motion** (velocity, acceleration, motion-subspace column) is a 6-vector
  ``(v, w)``: linear part first, angular part second (Pinocchio's order). ``v`` is the
  velocity of the point of the body that coincides with the origin of the frame the motion
  is expressed in.
* A **spatial force** (wrench) is ``(f, tau)``: force first, moment about the frame origin
  second.
* A **transform** ``(R, p)`` is the pose of a frame B in a frame A: a point with
  coordinates ``x_B`` in B has coordinates ``x_A = R @ x_B + p`` in A.
* Quaternions are ``(w, x, y, z)`` with the scalar first.
* A **world inertia** is the triple ``(m, h, I_O)``: mass, first moment ``h = m c`` and the
  rotational inertia about the frame origin ``I_O = I_c + m (|c|^2 E - c c^T)``. It is linear
  in the body's ten inertial parameters, so the inertias of several bodies expressed in one
  frame simply add (used by the composite-inertia algorithms).

All functions act on the trailing dimensions and broadcast over leading ones.
"""

from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp


def skew(v):
    """The matrix ``[v]x`` with ``[v]x @ u == cross(v, u)``. ``(..., 3) -> (..., 3, 3)``."""
    x, y, z = v[..., 0], v[..., 1], v[..., 2]
    o = jnp.zeros_like(x)
    return jnp.stack(
        [jnp.stack([o, -z, y], -1), jnp.stack([z, o, -x], -1), jnp.stack([-y, x, o], -1)], -2
    )


def matvec(A, x):
    """``A @ x`` over the trailing dims, broadcasting the leading ones."""
    return jnp.einsum("...ij,...j->...i", A, x)


def matmul(A, B):
    """``A @ B`` over the trailing dims, broadcasting the leading ones."""
    return jnp.einsum("...ij,...jk->...ik", A, B)


def transpose(A):
    return jnp.swapaxes(A, -1, -2)


def computed_once(x):
    """``x``, made a stored value rather than an expression.

    XLA:CPU fuses elementwise operations into the kernels that consume them and evaluates
    them once per element of the *consumer*: sin(q) feeding the nine entries of a rotation
    matrix is evaluated nine times per joint (most of the cost of a batch's joint transforms).
    XLA does not fuse a reduction into elementwise consumers, so a two-term product with one
    (exact, signed zeros and non-finite values included) makes XLA evaluate ``x`` once and
    store it. (It may fuse one into a gather: a batch's mass matrices, spread from their
    entries, gained nothing from it and dropped it in session 37.)
    A product, not a sum with zero: jaxlib 0.10 hands sums to YNNPACK library calls unless
    ``mbjax.jit``'s options say otherwise, and under a plain ``jax.jit`` the sums made
    batched ``crba`` 1.8x slower (session 36).
    """
    return jnp.prod(jnp.stack([x, jnp.ones_like(x)]), axis=0)


# --------------------------------------------------------------------------- rotations
#: pi / 2 = sum of these, to 9e-32: the first two with 22 significant bits, so that k times
#: them is exact for any quadrant count k below 2^31 (|x| up to 3e9), whether or not XLA fuses
#: the products into multiply-adds (Cody & Waite's argument reduction). With 27 bits (exact
#: only below 2^26) the result at |x| = 1e9 depended on that: 6e-8 off in some programs.
_HALF_PI = (float.fromhex("0x1.921fbp+0"), float.fromhex("0x1.5110bp-22"), float.fromhex("0x1.18469898cc517p-44"))
#: Taylor coefficients of sin r / r and cos r in r^2, to r^16: on |r| <= pi / 4 the first term
#: left out is below 1e-19
_SIN = tuple((-1) ** j / math.factorial(2 * j + 1) for j in range(9))
_COS = tuple((-1) ** j / math.factorial(2 * j) for j in range(9))


@jax.custom_jvp
def sincos(x):
    """``(sin x, cos x)``, in float64 by polynomials XLA vectorises (within 2.3e-16 of the
    exact values for |x| up to 3e9; tests/test_spatial.py).

    XLA:CPU evaluates float64 ``sin`` and ``cos`` one element at a time (about 15 ns each on
    this project's machine); a batch's joint transforms spent 12-25 % of their time there.
    The angle is reduced to r = x - k pi / 2, |r| <= pi / 4, and sin r, cos r are Taylor
    polynomials (Horner's rule) placed in the quadrant k mod 4. Other precisions use
    ``jnp.sin`` and ``jnp.cos``.
    """
    if x.dtype != jnp.float64:
        return jnp.sin(x), jnp.cos(x)
    return _sincos64(x)


@jax.jit  # traced once per shape: a dynamics function's traces call it many times
def _sincos64(x):
    return _in_quadrant(*_polynomials(x))


def _polynomials(x):
    """sin r, cos r and the quadrant k mod 4 of x = r + k pi / 2."""
    # the nearest quadrant by floor, not jnp.round: with round, test_simulate.py's checkpointed
    # gradient through a pendulum came out 3e-4 wrong under the suite's XLA flags (backend
    # optimisation level 0 with the classic emitters; right at level 3 and with the fusion
    # emitters): an XLA:CPU miscompilation not seen in smaller programs
    k = jnp.floor(x * (2.0 / math.pi) + 0.5)
    r = ((x - k * _HALF_PI[0]) - k * _HALF_PI[1]) - k * _HALF_PI[2]
    r2 = r * r
    horner = lambda coefficients: functools.reduce(lambda acc, a: acc * r2 + a, coefficients[::-1])  # noqa: E731
    # k mod 4, exact for the integer k: XLA:CPU runs jnp.remainder's fmod as a library call per
    # element, which took half of this function's time
    return r * horner(_SIN), horner(_COS), k - 4.0 * jnp.floor(k * 0.25)


def _in_quadrant(s, c, quadrant):
    sin = jnp.where(quadrant == 0, s, jnp.where(quadrant == 1, c, jnp.where(quadrant == 2, -s, -c)))
    cos = jnp.where(quadrant == 0, c, jnp.where(quadrant == 1, -s, jnp.where(quadrant == 2, -c, s)))
    return sin, cos


@jax.custom_jvp
def stored_sincos(x):
    """:func:`sincos` for arrays whose sines and cosines are each read many times (a batch's
    joint transforms): the values behind them are evaluated once and stored
    (:func:`computed_once`). In float64 these are the two polynomials and the quadrant, and
    the quadrant's signs are applied where the values are read; stored sines and cosines would
    each evaluate both polynomials (talos_reduced's batched joint transforms 0.59 -> 0.47 us per
    state, session 36).
    """
    if x.dtype != jnp.float64:
        return tuple(computed_once(jnp.stack([jnp.sin(x), jnp.cos(x)])))
    return _in_quadrant(*computed_once(jnp.stack(_polynomials(x))))


def _sincos_jvp(fun):
    def jvp(primals, tangents):
        s, c = fun(*primals)
        return (s, c), (c * tangents[0], -s * tangents[0])

    return jvp


sincos.defjvp(_sincos_jvp(sincos))
stored_sincos.defjvp(_sincos_jvp(stored_sincos))


def _safe_norm(w):
    """|w| and a version that is never zero (so that gradients at w = 0 stay finite)."""
    n2 = jnp.sum(w * w, axis=-1)
    small = n2 < 1e-12
    n2_safe = jnp.where(small, 1.0, n2)
    return jnp.sqrt(n2_safe), n2, small


def rotation_exp(w):
    """Rodrigues' formula ``exp([w]x)`` for a rotation vector ``w`` (..., 3).

    R = E + (sin t / t) [w] + ((1 - cos t) / t^2) [w]^2,  t = |w|; Taylor series near t = 0
    keep the value and its derivatives exact at the identity.
    """
    t, t2, small = _safe_norm(w)
    a = jnp.where(small, 1.0 - t2 / 6.0 + t2 * t2 / 120.0, jnp.sin(t) / t)
    b = jnp.where(small, 0.5 - t2 / 24.0 + t2 * t2 / 720.0, (1.0 - jnp.cos(t)) / (t * t))
    a, b = computed_once(jnp.stack([a, b]))[..., None, None]
    K = skew(w)
    eye = jnp.eye(3, dtype=w.dtype)
    return eye + a * K + b * matmul(K, K)


def axis_angle_rotation(axis, angle):
    """Rotation by ``angle`` about the unit vector ``axis``: E + sin q [a] + (1 - cos q) [a]^2."""
    K = skew(axis)
    s, c = computed_once(jnp.stack(sincos(angle)))[..., None, None]
    eye = jnp.eye(3, dtype=K.dtype)
    return eye + s * K + (1.0 - c) * matmul(K, K)


def quat_to_rotation(q):
    """Rotation matrix of the quaternion ``q = (w, x, y, z)`` (normalised first)."""
    q = computed_once(q / jnp.linalg.norm(q, axis=-1, keepdims=True))
    w, x, y, z = q[..., 0], q[..., 1], q[..., 2], q[..., 3]
    return jnp.stack(
        [
            jnp.stack([1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)], -1),
            jnp.stack([2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)], -1),
            jnp.stack([2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)], -1),
        ],
        -2,
    )


def quat_multiply(a, b):
    """Hamilton product ``a * b`` of (w, x, y, z) quaternions."""
    aw, av = a[..., :1], a[..., 1:]
    bw, bv = b[..., :1], b[..., 1:]
    w = aw * bw - jnp.sum(av * bv, axis=-1, keepdims=True)
    v = aw * bv + bw * av + jnp.cross(av, bv)
    return jnp.concatenate([w, v], axis=-1)


def quat_pure(w):
    """The quaternion (0, w) of a 3-vector ``w`` (angular velocities in quaternion rates)."""
    return jnp.concatenate([jnp.zeros_like(w[..., :1]), w], axis=-1)


def quat_conjugate(q):
    return q * jnp.array([1.0, -1.0, -1.0, -1.0], dtype=q.dtype)


def quat_exp(w):
    """Unit quaternion of the rotation vector ``w``: (cos(t/2), sin(t/2) w / t)."""
    t, t2, small = _safe_norm(w)
    c = jnp.where(small, 1.0 - t2 / 8.0, jnp.cos(0.5 * t))
    s = jnp.where(small, 0.5 - t2 / 48.0, jnp.sin(0.5 * t) / t)
    return jnp.concatenate([c[..., None], s[..., None] * w], axis=-1)


def quat_log(q):
    """Rotation vector of a unit quaternion (the shorter of q and -q is used)."""
    q = q / jnp.linalg.norm(q, axis=-1, keepdims=True)
    q = jnp.where(q[..., :1] < 0, -q, q)
    w, v = q[..., 0], q[..., 1:]
    s, s2, small = _safe_norm(v)
    # t = 2 atan2(|v|, w); t / |v| -> 2 / w (1 - |v|^2 / (3 w^2)) as |v| -> 0
    scale = jnp.where(small, 2.0 / w * (1.0 - s2 / (3.0 * w * w)), 2.0 * jnp.arctan2(s, w) / s)
    return scale[..., None] * v


def rotation_to_quat(R):
    """Unit quaternion (w, x, y, z), w >= 0, of a rotation matrix (Shepperd's method: the
    largest of 4w^2, 4x^2, 4y^2, 4z^2 is taken as the pivot, so no division by a small number)."""
    r00, r11, r22 = R[..., 0, 0], R[..., 1, 1], R[..., 2, 2]
    a, b, c = R[..., 2, 1] - R[..., 1, 2], R[..., 0, 2] - R[..., 2, 0], R[..., 1, 0] - R[..., 0, 1]
    d, e, f = R[..., 0, 1] + R[..., 1, 0], R[..., 0, 2] + R[..., 2, 0], R[..., 1, 2] + R[..., 2, 1]
    pivots = jnp.stack([r00 + r11 + r22, r00 - r11 - r22, r11 - r00 - r22, r22 - r00 - r11], -1)
    k = jnp.argmax(pivots, axis=-1)
    s = 2.0 * jnp.sqrt(jnp.maximum(1.0 + jnp.max(pivots, axis=-1), 1e-30))  # 4 |pivot component|
    cands = [
        jnp.stack([0.25 * s, a / s, b / s, c / s], -1),
        jnp.stack([a / s, 0.25 * s, d / s, e / s], -1),
        jnp.stack([b / s, d / s, 0.25 * s, f / s], -1),
        jnp.stack([c / s, e / s, f / s, 0.25 * s], -1),
    ]
    q = jnp.select([(k == i)[..., None] for i in range(4)], cands)
    return jnp.where(q[..., :1] < 0, -q, q)


def rotation_log(R):
    """Rotation vector ``w`` (..., 3) with ``rotation_exp(w) == R``, |w| <= pi; zero-safe."""
    return quat_log(rotation_to_quat(R))


# ------------------------------------------------------------------------------- SE(3)
def _se3_left_jacobian_coeffs(w):
    """Coefficients of V(w) = E + b [w] + c [w]^2 with b = (1 - cos t)/t^2, c = (t - sin t)/t^3."""
    t, t2, small = _safe_norm(w)
    b = jnp.where(small, 0.5 - t2 / 24.0 + t2 * t2 / 720.0, (1.0 - jnp.cos(t)) / (t * t))
    c = jnp.where(small, 1.0 / 6.0 - t2 / 120.0 + t2 * t2 / 5040.0, (t - jnp.sin(t)) / (t * t * t))
    return b, c


def se3_exp(nu):
    """Exponential of the twist ``nu = (v, w)``: returns ``(R, p)`` with p = V(w) v."""
    v, w = nu[..., :3], nu[..., 3:]
    b, c = _se3_left_jacobian_coeffs(w)
    K = skew(w)
    p = v + b[..., None] * matvec(K, v) + c[..., None] * matvec(K, matvec(K, v))
    return rotation_exp(w), p


def se3_log(p, w):
    """Twist ``(v, w)`` with ``se3_exp((v, w)) == (R, p)``, given ``w``, the rotation vector of R.

    v = V(w)^-1 p with V^-1 = E - [w]/2 + d [w]^2, d = (1 - (t/2) cot(t/2)) / t^2: the same as
    (1/t^2)(1 - (t sin t)/(2 (1 - cos t))), whose 1 - cos t would cancel and leave d with an
    error of eps / t^4 (v off by 2e-8 |p| at t = 1e-4). Below t = 1e-2 the Taylor series of d,
    whose next term is 1e-17 of it there; above, d's error eps / t^2 is bounded by the t^2 of
    [w]^2, so v is exact to rounding.
    """
    t2 = jnp.sum(w * w, axis=-1)
    series = t2 < 1e-4
    half = 0.5 * jnp.sqrt(jnp.where(series, 1.0, t2))
    d = jnp.where(series, 1.0 / 12.0 + t2 / 720.0 + t2 * t2 / 30240.0,
                  (1.0 - half / jnp.tan(half)) / (4.0 * half * half))
    K = skew(w)
    v = p - 0.5 * matvec(K, p) + d[..., None] * matvec(K, matvec(K, p))
    return jnp.concatenate([v, w], axis=-1)


# ---------------------------------------------------------------- transforms of frames
def compose(R1, p1, R2, p2):
    """(R1, p1) * (R2, p2): pose of frame C in A from the pose of B in A and of C in B."""
    return matmul(R1, R2), p1 + matvec(R1, p2)


def inverse(R, p):
    Rt = transpose(R)
    return Rt, -matvec(Rt, p)


# ------------------------------------------------------------- motions and forces
def transform_motion(R, p, m):
    """Express in A a motion given in B, where (R, p) is the pose of B in A (Ad_X m)."""
    w = matvec(R, m[..., 3:])
    v = matvec(R, m[..., :3]) + jnp.cross(p, w)
    return jnp.concatenate([v, w], axis=-1)


def inverse_transform_motion(R, p, m):
    """Express in B a motion given in A, where (R, p) is the pose of B in A."""
    v, w = m[..., :3], m[..., 3:]
    Rt = transpose(R)
    return jnp.concatenate([matvec(Rt, v - jnp.cross(p, w)), matvec(Rt, w)], axis=-1)


def transform_force(R, p, f):
    """Express in A a force given in B, where (R, p) is the pose of B in A."""
    lin = matvec(R, f[..., :3])
    return jnp.concatenate([lin, matvec(R, f[..., 3:]) + jnp.cross(p, lin)], axis=-1)


def inverse_transform_force(R, p, f):
    """Express in B a force given in A, where (R, p) is the pose of B in A."""
    lin, ang = f[..., :3], f[..., 3:]
    Rt = transpose(R)
    return jnp.concatenate([matvec(Rt, lin), matvec(Rt, ang - jnp.cross(p, lin))], axis=-1)


def cross_motion(a, m):
    """Spatial cross product a x m of two motions (the derivative of m moving with a)."""
    av, aw = a[..., :3], a[..., 3:]
    mv, mw = m[..., :3], m[..., 3:]
    return jnp.concatenate([jnp.cross(aw, mv) + jnp.cross(av, mw), jnp.cross(aw, mw)], axis=-1)


def cross_force(a, f):
    """Spatial cross product a x* f of a motion and a force."""
    av, aw = a[..., :3], a[..., 3:]
    fl, fa = f[..., :3], f[..., 3:]
    return jnp.concatenate([jnp.cross(aw, fl), jnp.cross(aw, fa) + jnp.cross(av, fl)], axis=-1)


# --------------------------------------------------------------------------- inertias
def world_inertia(mass, com, inertia, R, p):
    """World inertia ``(m, h, I_O)`` of a body whose frame has pose (R, p) in the world.

    ``com`` and ``inertia`` (about the CoM) are given in the body frame.
    """
    c = matvec(R, com) + p
    # only the symmetric part of the inertia is physical; using it here keeps every
    # algorithm (and every derivative) blind to an antisymmetric perturbation
    inertia = 0.5 * (inertia + transpose(inertia))
    Ic = matmul(matmul(R, inertia), transpose(R))
    h = mass[..., None] * c
    # I_O = I_c + m (|c|^2 E - c c^T)     (parallel-axis theorem)
    eye = jnp.eye(3, dtype=c.dtype)
    IO = Ic + mass[..., None, None] * (
        jnp.sum(c * c, axis=-1)[..., None, None] * eye - c[..., :, None] * c[..., None, :]
    )
    return mass, h, IO


def inertia_apply(mass, h, IO, m):
    """Momentum ``I m`` of a world inertia (m, h, I_O) moving with the motion ``m``.

    (m v + w x h,  h x v + I_O w)
    """
    v, w = m[..., :3], m[..., 3:]
    lin = mass[..., None] * v + jnp.cross(w, h)
    ang = jnp.cross(h, v) + matvec(IO, w)
    return jnp.concatenate([lin, ang], axis=-1)


def inertia_matrix(mass, h, IO):
    """The 6x6 matrix [[m E, -[h]x], [[h]x, I_O]] of a world inertia."""
    eye = jnp.eye(3, dtype=h.dtype)
    H = skew(h)
    top = jnp.concatenate([mass[..., None, None] * eye, -H], axis=-1)
    bottom = jnp.concatenate([H, IO], axis=-1)
    return jnp.concatenate([top, bottom], axis=-2)
