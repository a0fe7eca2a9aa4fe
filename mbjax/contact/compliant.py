"""A compliant contact model: normal force from penetration, regularised Coulomb friction, as
body wrenches (the ``f_ext`` of the dynamics protocol).

For each candidate sphere (:mod:`mbjax.contact.shapes`) touching the ground
(:mod:`mbjax.contact.ground`, :mod:`mbjax.contact.heightfield`), or each pair of bodies'
spheres and capsules touching (:mod:`mbjax.contact.pairs`), with depth d > 0 and depth rate
d' = -n . u (u the velocity of the material point at the contact relative to the other side),
the normal force is one of

- :class:`SpringDamper`: f_n = max(0, k d + c d'), linear (its coefficient of restitution
  has a closed form, :meth:`SpringDamper.restitution`);
- :class:`HuntCrossley`: f_n = max(0, k d^p (1 + 3/2 alpha d')) (Hunt & Crossley 1975), whose
  dissipation vanishes at first touch, so that the force has no jump; e ~ 1 - alpha v_in at low
  impact speed v_in.

Friction (:class:`Friction`) is Coulomb's law regularised at a slip speed v_s:
f_t = -mu f_n u / sqrt(|u|^2 + v_s^2), with u the tangential velocity of the body's material
point at the contact. Its error: a contact that Coulomb's law would hold still creeps at the
speed where the regularised force equals the load, |u| = v_s r / sqrt(1 - r^2) with
r = |f_t| / (mu f_n) < 1 (e.g. v_s = 1e-4 m/s, r = 0.5: 58 µm/s); sliding contacts get
mu f_n (1 - O(v_s^2 / |u|^2)).
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from ..kinematics import body_velocities_from, tree_kinematics
from ..model.model import Model
from .ground import Contacts, Plane
from .heightfield import Heightfield
from .pairs import BodyPairs
from .shapes import ContactPoints


class _Law(eqx.Module):
    """A law's parameters, checked at construction when concrete (plain errors; traced values,
    e.g. under ``jax.grad``, are not): ``_positive`` and ``_nonnegative`` name the fields."""

    _positive = ()
    _nonnegative = ()

    def __check_init__(self):
        for names, positive in ((self._positive, True), (self._nonnegative, False)):
            for name in names:
                value = getattr(self, name)
                if isinstance(value, jax.core.Tracer):
                    continue
                v = np.asarray(value)
                if not np.all(np.isfinite(v)) or np.any(v <= 0 if positive else v < 0):
                    raise ValueError(f"{type(self).__name__}: {name} must be "
                                     f"{'positive' if positive else 'non-negative'} and finite; got {v}")


class SpringDamper(_Law):
    """Linear normal force f_n = max(0, k d + c d') (``stiffness`` k in N/m, ``damping`` c in N s/m)."""

    stiffness: jnp.ndarray = eqx.field(converter=jnp.asarray)
    damping: jnp.ndarray = eqx.field(converter=jnp.asarray)
    _positive, _nonnegative = ("stiffness",), ("damping",)

    def __call__(self, depth, rate):
        return jnp.maximum(self.stiffness * depth + self.damping * rate, 0.0)

    def linearised(self, load):
        """(stiffness, damping) of the law about a static ``load``: k and c."""
        return self.stiffness, self.damping

    def energy(self, depth):
        """The spring's stored energy k d^2 / 2 (zero apart)."""
        return 0.5 * self.stiffness * jnp.maximum(depth, 0.0) ** 2

    def restitution(self, mass):
        """Coefficient of restitution of a point ``mass`` bouncing on the ground with this law
        (no gravity): contact ends when k d + c d' = 0. With s = c / 2m and w^2 = k/m - s^2,
        underdamped (w^2 > 0, w_d = w): at w_d t = pi - atan(c w_d / (k - c s)),
        e = -exp(-s t) (cos w_d t - s / w_d sin w_d t); overdamped (b = sqrt(-w^2)): at
        tanh(b t) = c b / (c s - k), e = -exp(-s t) (cosh b t - s / b sinh b t); critically damped:
        e = exp(-2) (at s t = 2)."""
        k, c = self.stiffness, self.damping
        s = c / (2.0 * mass)
        w2 = k / mass - s**2
        under, over = w2 > 0, w2 < 0
        wd, b = jnp.sqrt(jnp.where(under, w2, 1.0)), jnp.sqrt(jnp.where(over, -w2, 1.0))
        t = (jnp.pi - jnp.arctan2(c * wd, k - c * s)) / wd
        e_under = -jnp.exp(-s * t) * (jnp.cos(wd * t) - s / wd * jnp.sin(wd * t))
        t = jnp.arctanh(jnp.where(over, c * b / (c * s - k), 0.5)) / b
        e_over = -jnp.exp(-s * t) * (jnp.cosh(b * t) - s / b * jnp.sinh(b * t))
        return jnp.where(under, e_under, jnp.where(over, e_over, jnp.exp(-2.0)))


class HuntCrossley(_Law):
    """Hunt–Crossley normal force f_n = max(0, k d^p (1 + 3/2 alpha d')): ``stiffness`` k,
    ``exponent`` p (3/2 for Hertzian sphere contact), ``dissipation`` alpha (s/m)."""

    stiffness: jnp.ndarray = eqx.field(converter=jnp.asarray)
    dissipation: jnp.ndarray = eqx.field(converter=jnp.asarray)
    exponent: float = eqx.field(default=1.5, static=True)
    _positive, _nonnegative = ("stiffness",), ("dissipation",)

    def __check_init__(self):
        if not self.exponent >= 1:
            raise ValueError(f"HuntCrossley: exponent must be >= 1; got {self.exponent}")

    def __call__(self, depth, rate):
        d = jnp.maximum(depth, 0.0)
        return jnp.maximum(self.stiffness * d**self.exponent * (1.0 + 1.5 * self.dissipation * rate), 0.0)

    def linearised(self, load):
        """(stiffness, damping) of the law about a static ``load`` f, at the depth
        d = (f / k)^(1/p): p f / d and 3/2 alpha f."""
        depth = (load / self.stiffness) ** (1.0 / self.exponent)
        return jnp.where(depth > 0, self.exponent * load / jnp.where(depth > 0, depth, 1.0), 0.0), 1.5 * self.dissipation * load

    def energy(self, depth):
        """The elastic part's stored energy k d^(p+1) / (p+1) (zero apart)."""
        return self.stiffness * jnp.maximum(depth, 0.0) ** (self.exponent + 1) / (self.exponent + 1)


class Friction(_Law):
    """Regularised Coulomb friction: ``coefficient`` mu >= 0, slip ``speed`` v_s > 0 (m/s)."""

    coefficient: jnp.ndarray = eqx.field(converter=jnp.asarray)
    speed: jnp.ndarray = eqx.field(converter=jnp.asarray)
    _positive, _nonnegative = ("speed",), ("coefficient",)

    def __call__(self, normal_force, slip):
        norm = jnp.sqrt(jnp.sum(slip**2, axis=-1) + self.speed**2)
        return -(self.coefficient * normal_force / norm)[:, None] * slip


def contact_forces(normal, friction, c: Contacts, u):
    """Forces (k, 3) of the laws ``normal`` and ``friction`` (or None) at contacts ``c`` whose
    second side moves at velocity ``u`` (k, 3) relative to the first at the contact point: the
    depth rate is d' = -n . u (n . u is the same for every point on the normal line), the slip
    u - (n . u) n; the force acts on the second side (the first gets its opposite)."""
    rate = -jnp.sum(c.normal * u, axis=-1)
    fn = jnp.where(c.depth > 0, normal(c.depth, rate), 0.0)
    f = fn[:, None] * c.normal
    if friction is not None:
        f = f + friction(fn, u - jnp.sum(u * c.normal, axis=-1, keepdims=True) * c.normal)
    return f


def law_rates(model: Model, normal, friction, J, n, inverse_mass,
              keys=("contact springs and dampers", "regularised friction")) -> dict:
    """Eigenvalue estimates (1/s) of the fastest motions of k contacts with normals ``n`` (k, 3)
    whose relative velocities are ``J qd`` (J (k, 3, nv)), every one as if touching under an
    equal share of the model's weight: the ``normal`` law linearised (:meth:`SpringDamper.linearised`)
    on the apparent mass along the normal, 1 / (n^T J M^-1 J^T n), and the ``friction``'s rate
    mu f / (v_s m_t) on the smallest apparent mass across it (``inverse_mass``: M^-1), under
    the names ``keys``."""
    inverse = J @ inverse_mass @ np.swapaxes(J, 1, 2)  # (k, 3, 3): inverse apparent masses
    along = np.einsum("ki,kij,kj->k", n, inverse, n)
    moving = along > 0
    load = float(np.sum(np.asarray(model.mass)) * np.linalg.norm(np.asarray(model.gravity))) / len(n)
    k, c = (np.broadcast_to(np.asarray(x, float), moving.shape) for x in normal.linearised(load))
    m = 1.0 / np.where(moving, along, 1.0)
    root = np.sqrt(c**2 - 4 * m * k + 0j)
    rates = {keys[0]: np.concatenate([((-c - root) / (2 * m))[moving], ((-c + root) / (2 * m))[moving]])}
    if friction is not None:
        across = np.eye(3) - n[:, :, None] * n[:, None, :]
        fastest = np.linalg.eigvalsh(across @ inverse @ across)[:, -1]
        rates[keys[1]] = -(np.asarray(friction.coefficient) * load / np.asarray(friction.speed) * fastest)[moving] + 0j
    return rates


class CompliantContact(eqx.Module):
    """Contacts of a model's candidate spheres with the ground, as forces.

    **Fields:** ``points`` (:class:`mbjax.contact.ContactPoints`), ``ground``
    (:class:`mbjax.contact.Plane` or :class:`mbjax.contact.Heightfield`), ``normal``
    (:class:`SpringDamper` or :class:`HuntCrossley`), ``friction`` (:class:`Friction`, or None
    for frictionless contacts). Every number is a leaf: gradients flow to the contact
    parameters, the ground and the shapes.
    """

    points: ContactPoints
    ground: Plane | Heightfield
    normal: SpringDamper | HuntCrossley
    friction: Friction | None = None

    def forces(self, model: Model, q, qd):
        """The contacts (:class:`mbjax.contact.Contacts`) and the force (k, 3) the ground
        exerts on each candidate, world frame (zero where not touching)."""
        return self._forces(model, tree_kinematics(model, q), qd)

    def _forces(self, model, tk, qd):
        body = np.asarray(self.points.body)
        c = self.ground.contacts(self._centres(tk), self.points.radius)
        v = body_velocities_from(model, tk, qd)[body]  # world frame: (velocity of the point at the origin, w)
        return c, contact_forces(self.normal, self.friction, c, v[:, :3] + jnp.cross(v[:, 3:], c.point))

    def contacts(self, model: Model, q):
        """The candidates' contacts with the ground at ``q`` (:class:`mbjax.contact.Contacts`:
        geometry only, no forces)."""
        return self.ground.contacts(self._centres(tree_kinematics(model, q)), self.points.radius)

    def potential_energy(self, model: Model, q):
        """Energy stored in the contacts' springs: with the bodies' kinetic and potential
        energy it never increases in a passive run (the dampers and friction only dissipate,
        and a clipped spring-damper lets go while its spring still holds energy, which the body
        does not get back)."""
        return jnp.sum(self.normal.energy(self.contacts(model, q).depth))

    def _centres(self, tk):
        """World centres (k, 3) of the candidate spheres, from the bodies' poses."""
        return self.points.centres(tk.R, tk.p)

    def rates(self, model: Model, q, inverse_mass) -> dict:
        """Eigenvalue estimates (1/s) of the contacts' fastest motions at ``q``, every candidate
        as if touching under an equal share of the model's weight: the normal law linearised
        (:meth:`SpringDamper.linearised`) on the candidate's apparent mass along the normal,
        1 / (n^T J M^-1 J^T n), and the friction's rate mu f / (v_s m_t) on its smallest
        apparent mass across it (``inverse_mass``: M^-1 at ``q``)."""
        tk = tree_kinematics(model, q)
        body = np.asarray(self.points.body)
        centres = self._centres(tk)

        def velocities(qd):
            v = body_velocities_from(model, tk, qd)[body]
            return v[:, :3] + jnp.cross(v[:, 3:], centres)

        J = np.asarray(jax.jacfwd(velocities)(jnp.zeros(model.nv, q.dtype)))  # (k, 3, nv)
        normals = np.asarray(self.ground.contacts(centres, self.points.radius).normal)
        return law_rates(model, self.normal, self.friction, J, normals, inverse_mass)

    def wrenches(self, model: Model, q, qd):
        """Body wrenches (nbodies, 6): force and moment about the body origin, in body axes
        (the ``f_ext`` of :func:`mbjax.aba` and of every formulation)."""
        tk = tree_kinematics(model, q)
        c, f = self._forces(model, tk, qd)
        return body_wrenches(model, tk, np.asarray(self.points.body), c.point, f)


def body_wrenches(model: Model, tk, body, point, force):
    """Body wrenches (nbodies, 6) in body axes of the world ``force`` (k, 3) acting at ``point``
    (k, 3) on ``body`` (k,) (repeated bodies sum): force and moment about the body origin."""
    moment = jnp.cross(point - tk.p[body], force)
    world = jnp.zeros((model.nbodies, 6), force.dtype).at[body].add(jnp.concatenate([force, moment], -1))
    # both halves into body axes: R^T f, R^T m
    return jnp.einsum("bji,bkj->bki", tk.R, world.reshape(-1, 2, 3)).reshape(-1, 6)


class PairContact(eqx.Module):
    """Contacts between bodies, as forces: the pairs of spheres and capsules of ``pairs``
    (:func:`mbjax.contact.body_pairs`) pushed apart by the ``normal`` law
    (:class:`SpringDamper` or :class:`HuntCrossley`) on their depth, with ``friction``
    (:class:`Friction`, its coefficient a scalar or one per pair; or None) on the relative slip
    of the two bodies' material points at the contact. Each pair's force acts on both bodies at
    the contact point, equal and opposite, so the system's momentum is conserved; the
    spring's work is its energy (:meth:`potential_energy`) and the rest is dissipated. Every
    number is a leaf (differentiable).
    """

    pairs: BodyPairs
    normal: SpringDamper | HuntCrossley
    friction: Friction | None = None

    def forces(self, model: Model, q, qd):
        """The pairs' contacts (:class:`mbjax.contact.Contacts`, normals from the first shape to
        the second) and the force (p, 3) on each pair's second body, world frame (zero where
        apart; the first body gets its opposite)."""
        return self._forces(model, tree_kinematics(model, q), qd)

    def _forces(self, model, tk, qd):
        c = self.pairs.contacts(tk.R, tk.p)
        return c, contact_forces(self.normal, self.friction, c, self._relative_velocities(model, tk, qd, c.point))

    def _relative_velocities(self, model, tk, qd, point):
        """Velocity (p, 3) of each pair's second body's material point at ``point`` relative to the first's."""
        v = body_velocities_from(model, tk, qd)  # world frame: (velocity of the point at the origin, w)
        body = np.asarray(self.pairs.body)
        first, second = v[body[np.asarray(self.pairs.first)]], v[body[np.asarray(self.pairs.second)]]
        return second[:, :3] - first[:, :3] + jnp.cross(second[:, 3:] - first[:, 3:], point)

    def contacts(self, model: Model, q):
        """The pairs' contacts at ``q`` (:class:`mbjax.contact.Contacts`: geometry only)."""
        tk = tree_kinematics(model, q)
        return self.pairs.contacts(tk.R, tk.p)

    def potential_energy(self, model: Model, q):
        """Energy stored in the pairs' springs (see :meth:`CompliantContact.potential_energy`)."""
        return jnp.sum(self.normal.energy(self.contacts(model, q).depth))

    def rates(self, model: Model, q, inverse_mass) -> dict:
        """The fastest motions' eigenvalue estimates (:func:`law_rates`), every pair as if touching
        at its current closest points."""
        tk = tree_kinematics(model, q)
        c = self.pairs.contacts(tk.R, tk.p)
        J = np.asarray(jax.jacfwd(lambda qd: self._relative_velocities(model, tk, qd, c.point))(
            jnp.zeros(model.nv, q.dtype)))
        return law_rates(model, self.normal, self.friction, J, np.asarray(c.normal), inverse_mass,
                         ("body-pair springs and dampers", "regularised friction between bodies"))

    def wrenches(self, model: Model, q, qd):
        """Body wrenches (nbodies, 6), force and moment about the body origin in body axes (the
        ``f_ext`` of every formulation): each pair's force on its second body, its opposite on
        its first."""
        tk = tree_kinematics(model, q)
        c, f = self._forces(model, tk, qd)
        body = np.asarray(self.pairs.body)
        on = np.concatenate([body[np.asarray(self.pairs.second)], body[np.asarray(self.pairs.first)]])
        return body_wrenches(model, tk, on, jnp.concatenate([c.point, c.point]), jnp.concatenate([f, -f]))
