"""Rigid contacts and joint stops by time stepping: impulses at velocity level with exact
Coulomb friction, a step size independent of any contact stiffness.

**The step** (length h, semi-implicit Euler, as the loop-closure stepper and MuJoCo):

    v* = qd + h M(q)^-1 (tau + passive - C(q, qd) + J_ext^T f_ext)      (the free motion)
    qd+ = v* + M^-1 G^T lambda,        q+ = q (+) h qd+

with one change for free joints, whose linear velocity v is in the body's axes (R its
orientation): the step is taken on the velocity in the parent's axes, R v, which is constant in
free flight. Its rate is R (dv/dt + w x v), so w x v joins the free acceleration; the origin
moves by h R v+ (not along the group exponential's arc, which would sink a ball rolling on the
ground into it at every step), and v+ is re-expressed in the new axes, exp(-h w+) v+. Without
this, the explicit Coriolis term -w x v of the body-axes equations would lengthen v by
sqrt(1 + h^2 |w|^2) at every step of a spinning body: energy from nowhere.

Damping is taken implicitly (linearly implicit Euler, as MuJoCo's ``implicitfast``): the
joints' dampers and, in :func:`rollout`, a controller's -d tau / d qd (symmetrised) D enter as
M + h D in place of M, so that a PD controller's derivative gain on a light link does not
limit the step (explicitly, h < 2 m / k_d).

G stacks, for every constraint i, three rows in its frame (n_i, t1_i, t2_i): the velocity of
the body's material point at contact i relative to the other side (the ground, or the pair's
first body), along the normal and two tangents; a joint stop is one row (+-1 on its
coordinate) with no tangents. lambda_i = (lambda_n, lambda_t) is the impulse of constraint i
over the step (the contact force times h). With u+ = G qd+ = G v* + W lambda, W = G M^-1 G^T
the Delassus matrix, the impulses solve the Coulomb problem at velocity level (Moreau 1988,
Stewart & Trinkle 1996; Jean's non-smooth contact dynamics, 1999):

    0 <= lambda_n  _|_  u_n+ - b >= 0,      b = -max(g, beta g) / h
    lambda_t = -mu lambda_n u_t+ / |u_t+| where u_t+ != 0,   |lambda_t| <= mu lambda_n otherwise

with g the gap (minus the penetration). Apart (g > 0) a contact may close at most its gap in
the step, so nothing passes through anything; in contact it may not approach; a penetration
(from the curvature of the surfaces, or a start in the ground) is pushed out at the rate
beta g / h (``stabilisation`` beta, default 0.2). A joint stop's gap is linear in q, so a
coordinate that starts within its limits stays there exactly (to the solver's tolerance).
Impacts are perfectly plastic (restitution 0): the contact's normal velocity after it is 0.

**The solver** is projected Gauss–Seidel on the impulses (Moreau's and Jean's NSGS): for each
constraint in turn, the others held, the normal impulse is the exact one-dimensional
solution, lambda_n <- max(0, lambda_n - (u_n - b) / W_nn), and the tangential impulse the
projection of a gradient step on the friction disk, lambda_t <- P_{|.| <= mu lambda_n}(lambda_t
- u_t / w_t) with w_t the larger eigenvalue of the constraint's tangential block of W. Its
fixed points are exactly Coulomb's law: inside the disk u_t = 0 (sticking, no creep), on its
edge lambda_t opposes u_t. ``iterations`` sweeps (static: a fixed count, differentiable in both
modes), started from the previous step's impulses; each step reports the residual of the
fixed point (impulse units, N s), which tells whether the sweeps sufficed. Contacts at rest
converge in a few sweeps from the warm start; many strongly coupled contacts (a box's four
corners) need more. The model's joint springs and dampers enter explicitly, as in
:func:`mbjax.simulate`.
"""

from __future__ import annotations

from typing import NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from ..checks import check_external_forces, check_state
from ..compilation import filter_jit
from ..configuration import integrate_from
from ..dynamics.crba import mass_matrix_from
from ..dynamics.passive import passive_forces_from
from ..dynamics.rnea import rnea_from
from ..kinematics import tree_kinematics
from ..model.model import Model
from ..simulation.fixed_steps import scan_steps
from ..spatial import matvec, quat_to_rotation, rotation_exp
from .ground import Plane
from .heightfield import Heightfield
from .limits import JointLimits
from .pairs import BodyPairs
from .shapes import ContactPoints

#: default number of projected Gauss–Seidel sweeps per step
ITERATIONS = 50
#: default share of a penetration removed per step
STABILISATION = 0.2


def _friction(value, name):
    value = jnp.asarray(value)
    if not isinstance(value, jax.core.Tracer) and not np.all(np.isfinite(value) & (np.asarray(value) >= 0)):
        raise ValueError(f"{name}: the friction coefficient must be non-negative and finite; got {np.asarray(value)}")
    return value


class Rows(NamedTuple):
    """Constraint rows of k contacts: ``jacobian`` (k, 3, nv) along (normal, tangent, tangent),
    ``gap`` (k,) (minus the penetration), ``frame`` (k, 3, 3) the rows n, t1, t2 (world axes),
    ``point`` (k, 3) world contact points, ``mu`` (k,) friction coefficients."""

    jacobian: jax.Array
    gap: jax.Array
    frame: jax.Array
    point: jax.Array
    mu: jax.Array


def tangent_frame(n):
    """Rows (n, t1, t2) (k, 3, 3) of right-handed orthonormal frames around unit normals ``n``
    (k, 3), continuous in n away from n_z = 0 (Duff et al. 2017, "Building an orthonormal basis,
    revisited")."""
    s = jnp.where(n[:, 2] >= 0, 1.0, -1.0)
    a = -1.0 / (s + n[:, 2])
    b = n[:, 0] * n[:, 1] * a
    t1 = jnp.stack([1.0 + s * n[:, 0] ** 2 * a, s * b, -s * n[:, 0]], -1)
    t2 = jnp.stack([b, s + n[:, 1] ** 2 * a, -n[:, 1]], -1)
    return jnp.stack([n, t1, t2], 1)


def point_jacobians(model: Model, tk, body, point):
    """World velocity Jacobians (k, 3, nv) of the material points of ``body`` (k,) at the world
    points ``point`` (k, 3): column j is A[b, j] (S_j,lin + S_j,ang x point), S_j the world motion
    subspace of coordinate j (linear part: the velocity of the point at the world origin)."""
    A = jnp.asarray(model.topology.dof_ancestors, point.dtype)[np.asarray(body)]  # (k, nv)
    lin = tk.S[None, :, :3] + jnp.cross(tk.S[None, :, 3:], point[:, None, :])  # (k, nv, 3)
    return jnp.swapaxes(A[:, :, None] * lin, 1, 2)


class RigidContact(eqx.Module):
    """Rigid contacts of a model's candidate spheres (``points``, :class:`ContactPoints`) with
    the ``ground`` (:class:`Plane` or :class:`Heightfield`), with Coulomb ``friction`` mu (a
    scalar or one per candidate; 0: frictionless). Leaves are differentiable."""

    points: ContactPoints
    ground: Plane | Heightfield
    friction: jax.Array = eqx.field(converter=lambda x: _friction(x, "RigidContact"))

    def rows(self, model: Model, tk) -> Rows:
        c = self.ground.contacts(self.points.centres(tk.R, tk.p), self.points.radius)
        frame = tangent_frame(c.normal)
        J = frame @ point_jacobians(model, tk, self.points.body, c.point)
        return Rows(J, -c.depth, frame, c.point, jnp.broadcast_to(self.friction, c.depth.shape))


class RigidPairs(eqx.Module):
    """Rigid contacts between the spheres and capsules of ``pairs`` (:func:`body_pairs`), with
    Coulomb ``friction`` mu (a scalar or one per pair). The normal points from each pair's first
    shape to its second; the impulse acts on the second body, its opposite on the first."""

    pairs: BodyPairs
    friction: jax.Array = eqx.field(converter=lambda x: _friction(x, "RigidPairs"))

    def rows(self, model: Model, tk) -> Rows:
        c = self.pairs.contacts(tk.R, tk.p)
        body = np.asarray(self.pairs.body)
        first, second = body[np.asarray(self.pairs.first)], body[np.asarray(self.pairs.second)]
        frame = tangent_frame(c.normal)
        J = frame @ (point_jacobians(model, tk, second, c.point) - point_jacobians(model, tk, first, c.point))
        return Rows(J, -c.depth, frame, c.point, jnp.broadcast_to(self.friction, c.depth.shape))


def limit_rows(model: Model, limits: JointLimits, q):
    """Rows (l, nv) and gaps (l,) of the stops, one per limited coordinate j, at the nearer of its
    two limits: +e_j with gap q_j - lower at the lower one, -e_j with gap upper - q_j at the upper
    (a coordinate cannot press on both at once)."""
    sides = {}  # velocity index -> (q index, index among the lower limits or None, among the upper or None)
    for which, qis, vis in (("lower", limits.q_lower, limits.v_lower), ("upper", limits.q_upper, limits.v_upper)):
        for n, (qi, vi) in enumerate(zip(qis, vis)):
            _, lo, up = sides.get(vi, (qi, None, None))
            sides[vi] = (qi, n, up) if which == "lower" else (qi, lo, n)
    vi = np.asarray(sorted(sides), int)
    qi = np.asarray([sides[v][0] for v in vi], int)
    lo = np.asarray([-1 if sides[v][1] is None else sides[v][1] for v in vi], int)
    up = np.asarray([-1 if sides[v][2] is None else sides[v][2] for v in vi], int)
    lower = q[qi] - limits.lower[np.maximum(lo, 0)] if len(limits.q_lower) else jnp.zeros(len(vi), q.dtype)
    upper = limits.upper[np.maximum(up, 0)] - q[qi] if len(limits.q_upper) else jnp.zeros(len(vi), q.dtype)
    lower, upper = jnp.where(lo >= 0, lower, jnp.inf), jnp.where(up >= 0, upper, jnp.inf)  # no limit on that side
    at_lower = lower <= upper
    rows = jnp.zeros((len(vi), model.nv), q.dtype).at[np.arange(len(vi)), vi].set(jnp.where(at_lower, 1.0, -1.0))
    return rows, jnp.minimum(lower, upper)


def _free_coordinates(model: Model):
    """Indices (f, 3) of the free joints' linear and angular velocities, positions, and (f, 4)
    quaternions."""
    joints = [i for i, t in enumerate(model.joint_types) if t == "free"]
    v = np.asarray([model.v_slice(i).start for i in joints], int).reshape(-1, 1)
    q = np.asarray([model.q_slice(i).start for i in joints], int).reshape(-1, 1)
    return v + np.arange(3), v + 3 + np.arange(3), q + np.arange(3), q + 3 + np.arange(4)


class SolverState(NamedTuple):
    impulses: jax.Array  # (3k + l,) the contacts' (normal, t1, t2), then the stops', N s
    residual: jax.Array  # () the largest change of an impulse in one more (Jacobi) sweep, N s


def _safe_inverse(x):
    return jnp.where(x > 0, 1.0 / jnp.where(x > 0, x, 1.0), 0.0)


def solve_impulses(W, u_free, target, mu, start, iterations: int) -> SolverState:
    """Projected Gauss–Seidel on the Coulomb problem (module docstring) of k contacts and l stops:
    ``W`` (m, m) with m = 3k + l, the contacts' rows (normal, t1, t2) first; ``u_free`` (m,) the
    constraint velocities of the free motion; ``target`` (k + l,) the bounds b on the normal
    velocities; ``mu`` (k,); ``start`` (m,) the initial impulses."""
    k = mu.shape[0]
    m = W.shape[0]
    c = jnp.arange(k)
    block = W[3 * c[:, None, None] + jnp.arange(3)[:, None], 3 * c[:, None, None] + jnp.arange(3)]  # (k, 3, 3)
    inv_n = _safe_inverse(block[:, 0, 0])
    a, b, d = block[:, 1, 1], block[:, 1, 2], block[:, 2, 2]
    disc = 0.25 * (a - d) ** 2 + b**2  # zero for an isotropic block (a sphere on a plane): no NaN in derivatives
    inv_t = _safe_inverse(0.5 * (a + d) + jnp.where(disc > 0, jnp.sqrt(jnp.where(disc > 0, disc, 1.0)), 0.0))
    inv_l = _safe_inverse(jnp.diagonal(W)[3 * k:])

    def contact(i, lam, u):
        """The new impulse (3,) of contact i, given its velocity u (3,) at impulses lam (m,)."""
        old = jax.lax.dynamic_slice(lam, (3 * i,), (3,))
        ln = jnp.maximum(old[0] - (u[0] - target[i]) * inv_n[i], 0.0)
        ut = u[1:] + block[i, 1:, 0] * (ln - old[0])
        lt = old[1:] - inv_t[i] * ut
        s, radius = jnp.sum(lt**2), mu[i] * ln
        outside = s > radius**2
        lt = lt * jnp.where(outside, radius / jnp.sqrt(jnp.where(outside, s, 1.0)), 1.0)
        return jnp.concatenate([ln[None], lt])

    def stop(j, lam, u):
        """The new impulse of stop j, given its velocity u at impulses lam (m,)."""
        return jnp.maximum(lam[3 * k + j] - (u - target[k + j]) * inv_l[j], 0.0)

    def sweep(_, lam):
        def one_contact(i, lam):
            u = jax.lax.dynamic_slice(u_free, (3 * i,), (3,)) + jax.lax.dynamic_slice(W, (3 * i, 0), (3, m)) @ lam
            return jax.lax.dynamic_update_slice(lam, contact(i, lam, u), (3 * i,))

        def one_stop(j, lam):
            return lam.at[3 * k + j].set(stop(j, lam, u_free[3 * k + j] + W[3 * k + j] @ lam))

        for i in range(k):  # unrolled: one short chain of kernels per sweep
            lam = one_contact(i, lam)
        for j in range(m - 3 * k):
            lam = one_stop(j, lam)
        return lam

    lam = jax.lax.fori_loop(0, iterations, sweep, start)
    u = u_free + W @ lam
    jacobi = [jax.vmap(contact, (0, None, 0))(c, lam, u[:3 * k].reshape(k, 3)).reshape(-1)] if k else []
    jacobi += [jax.vmap(stop, (0, None, 0))(jnp.arange(m - 3 * k), lam, u[3 * k:])] if m > 3 * k else []
    jacobi = jnp.concatenate(jacobi)
    return SolverState(lam, jnp.max(jnp.abs(jacobi - lam), initial=0.0))


class StepResult(eqx.Module):
    """One step of :func:`step`: ``q``, ``qd`` at t + h; ``forces`` (k, 3) the mean force over the
    step on each contact's (second) body, world axes (impulse / h); ``limit_forces`` (nv,) the
    generalized forces of the joint stops; ``impulses`` (3k + l,) the contacts' impulses in their
    frames (normal, t1, t2), then the l stops' (one per limited coordinate), the next step's warm
    start (:attr:`contact_impulses`: the first part as (k, 3)); ``residual`` the solver's (N s)."""

    q: jax.Array
    qd: jax.Array
    forces: jax.Array
    limit_forces: jax.Array
    impulses: jax.Array
    residual: jax.Array

    @property
    def contact_impulses(self):
        """(..., k, 3) the contacts' impulses (normal, t1, t2) in their frames, N s."""
        k = self.forces.shape[-2]
        return self.impulses[..., :3 * k].reshape(self.impulses.shape[:-1] + (k, 3))


class TimeStepping(eqx.Module):
    """Rigid ``contacts`` (:class:`RigidContact`, :class:`RigidPairs`, or a list of them) and
    joint stops ``limits`` (:func:`joint_limits`: their positions; their laws are not used),
    enforced by impulses at every step (module docstring) with ``iterations`` (static)
    projected Gauss–Seidel sweeps and ``stabilisation`` beta in (0, 1]."""

    contacts: tuple
    limits: JointLimits | None
    iterations: int = eqx.field(static=True)
    stabilisation: float = eqx.field(static=True)

    def __init__(self, contacts=(), limits: JointLimits | None = None, *, iterations: int = ITERATIONS,
                 stabilisation: float = STABILISATION):
        contacts = tuple(contacts) if isinstance(contacts, (list, tuple)) else (contacts,)
        for c in contacts:
            if not isinstance(c, (RigidContact, RigidPairs)):
                raise TypeError(f"contacts must be contact.RigidContact or contact.RigidPairs (or a list of them); got "
                                f"{type(c).__name__}; compliant contacts go to contact.WithContacts")
        if limits is not None and not isinstance(limits, JointLimits):
            raise TypeError(f"limits must be contact.joint_limits(model); got {type(limits).__name__}")
        if not contacts and limits is None:
            raise ValueError("TimeStepping needs contacts, joint limits, or both")
        if not (isinstance(iterations, (int, np.integer)) and iterations >= 1):
            raise ValueError(f"iterations must be a positive integer; got {iterations!r}")
        if not 0 < stabilisation <= 1:
            raise ValueError(f"stabilisation must be in (0, 1]; got {stabilisation}")
        self.contacts, self.limits = contacts, limits
        self.iterations, self.stabilisation = int(iterations), float(stabilisation)

    def size(self, model: Model) -> int:
        """The number of impulse components, 3k + l: three per contact, one per limited coordinate."""
        tk = jax.eval_shape(tree_kinematics, model, jnp.zeros(model.nq, model.dtype))
        k = sum(jax.eval_shape(c.rows, model, tk).gap.shape[0] for c in self.contacts)
        return 3 * k + (0 if self.limits is None else len(set(self.limits.v_lower) | set(self.limits.v_upper)))

    def step_from(self, model: Model, q, qd, tau, dt, f_ext, start, damping=None) -> StepResult:
        """:func:`step` without input checks; ``start`` (3k + l,) the impulses to start from;
        ``damping`` (nv, nv): -d tau / d qd of the controller (symmetrised), taken implicitly
        with the joints' own dampers (module docstring)."""
        tk = tree_kinematics(model, q)
        h = rnea_from(model, tk, q, qd, jnp.zeros_like(qd), f_ext)
        D = jnp.diag(jnp.broadcast_to(model.damping, qd.shape).astype(qd.dtype))
        if damping is not None:
            D = D + 0.5 * (damping + damping.T)
        chol = jax.scipy.linalg.cho_factor(mass_matrix_from(model, tk) + dt * D, lower=True)
        lin, ang, pos, quat = _free_coordinates(model)
        rows = [c.rows(model, tk) for c in self.contacts]
        k = sum(r.gap.shape[0] for r in rows)
        G = [r.jacobian.reshape(-1, model.nv) for r in rows]  # (3k, nv): each contact's normal, t1, t2
        gap, mu = [r.gap for r in rows], [r.mu for r in rows]
        if self.limits is not None:
            Gl, gl = limit_rows(model, self.limits, q)
            G, gap = G + [Gl], gap + [gl]
        G, gap = jnp.concatenate(G), jnp.concatenate(gap)
        mu = jnp.concatenate(mu) if rows else jnp.zeros(0, qd.dtype)
        # One solve for all right-hand sides: two independent batched LAPACK solves (under vmap)
        # can run at once and deadlock jaxlib 0.10's CPU runtime, each waiting on the thread pool
        # the other holds (docs/contacts.md, "Limits").
        rhs = jnp.concatenate([(tau + passive_forces_from(model, q, qd) - h)[:, None], G.T], axis=1)
        a_and_MinvGt = jax.scipy.linalg.cho_solve(chol, rhs)
        a, MinvGt = a_and_MinvGt[:, 0], a_and_MinvGt[:, 1:]
        v_free = qd + dt * a.at[lin].add(jnp.cross(qd[ang], qd[lin]))  # the rate of R v (module docstring)
        target = -jnp.maximum(gap, self.stabilisation * gap) / dt
        sol = solve_impulses(G @ MinvGt, G @ v_free, target, mu, start, self.iterations)
        qd1 = v_free + MinvGt @ sol.impulses
        frames = jnp.concatenate([r.frame for r in rows]) if rows else jnp.zeros((0, 3, 3), qd.dtype)
        forces = jnp.einsum("ki,kij->kj", sol.impulses[:3 * k].reshape(k, 3), frames) / dt
        limit_forces = G[3 * k:].T @ sol.impulses[3 * k:] / dt
        q1 = integrate_from(model, q, dt * qd1)
        q1 = q1.at[pos].set(q[pos] + dt * matvec(quat_to_rotation(q[quat]), qd1[lin]))
        qd1 = qd1.at[lin].set(matvec(rotation_exp(-dt * qd1[ang]), qd1[lin]))
        return StepResult(q1, qd1, forces, limit_forces, sol.impulses, sol.residual)


def _checked(model, stepping, dt):
    if not isinstance(stepping, TimeStepping):
        raise TypeError(f"stepping must be a contact.TimeStepping; got {type(stepping).__name__}")
    if not isinstance(dt, jax.core.Tracer) and not float(dt) > 0:
        raise ValueError(f"the step dt must be positive; got {dt}")
    return jnp.asarray(dt, model.dtype)


@filter_jit
def step(model: Model, stepping: TimeStepping, q, qd, tau, dt, f_ext=None, impulses=None) -> StepResult:
    """One step of length ``dt`` of ``model`` with the rigid contacts and stops of ``stepping``
    (:class:`TimeStepping`) from ``(q, qd)`` under the torques ``tau`` (nv,) and optional
    external wrenches ``f_ext`` (nbodies, 6); ``impulses`` (3k + l,): a warm start (a previous
    :attr:`StepResult.impulses`; default zero). Returns a :class:`StepResult`."""
    dt = _checked(model, stepping, dt)
    q, qd, tau = check_state(model, q, qd=qd, tau=tau)
    f_ext = check_external_forces(model, f_ext)
    start = jnp.zeros(stepping.size(model), qd.dtype) if impulses is None else jnp.asarray(impulses, qd.dtype)
    return stepping.step_from(model, q, qd, tau, dt, f_ext, start)


@filter_jit
def rollout(model: Model, stepping: TimeStepping, q0, qd0, tau, dt, steps: int, f_ext=None, impulses=None):
    """``steps`` steps of :func:`step` from ``(q0, qd0)`` in one ``lax.scan``, each warm started
    from the impulses of the one before (the first from ``impulses``, default zero: a previous
    rollout's last :attr:`StepResult.impulses` continues it seamlessly).

    ``tau``: (nv,) constant, (steps, nv) one row per step, or a controller ``tau(t, q, qd)``
    (e.g. :class:`mbjax.PD`; its damping -d tau / d qd is taken implicitly); ``steps`` (static).
    **Returns:** ``(trajectory, results)``: a :class:`mbjax.Trajectory` of the steps + 1 states at
    ``dt * arange(steps + 1)``, and the :class:`StepResult` of every step stacked (forces, limit
    forces, impulses, residuals).
    """
    dt = _checked(model, stepping, dt)
    q0, qd0 = check_state(model, q0, qd=qd0)
    f_ext = check_external_forces(model, f_ext)

    def one(q, qd, u, impulses):
        u, damping = u if callable(tau) else (u, None)
        out = stepping.step_from(model, q, qd, u, dt, f_ext, impulses, damping)
        return out.q, out.qd, out.impulses, out

    def controller(t, q, qd):  # the torques, and their damping -d tau / d qd, taken implicitly
        u, du = jax.linearize(lambda v: tau(t, q, v), qd)
        return u, -jax.vmap(du, out_axes=1)(jnp.eye(model.nv, dtype=qd.dtype))

    start = jnp.zeros(stepping.size(model), qd0.dtype) if impulses is None else jnp.asarray(impulses, qd0.dtype)
    return scan_steps(model, one, q0, qd0, controller if callable(tau) else tau, dt, steps, start)
