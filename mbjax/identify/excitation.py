"""Exciting trajectories: finite Fourier series (Swevers, Ganseman, Tukel, De Schutter &
Van Brussel 1997), and the condition number of the stacked base regressor they produce.

Joint k follows, with the fundamental pulsation ``omega_f`` and ``L`` harmonics,

    q_k(t)   = q0_k + sum_l a_kl / (omega_f l) sin(omega_f l t) - b_kl / (omega_f l) cos(omega_f l t)
    qd_k(t)  = sum_l a_kl cos(omega_f l t) + b_kl sin(omega_f l t)
    qdd_k(t) = sum_l -a_kl omega_f l sin(omega_f l t) + b_kl omega_f l cos(omega_f l t)

periodic with period ``2 pi / omega_f`` (so measurements can be averaged over periods). The
smaller the condition number of the base regressor stacked over the samples, the less the
torque noise is amplified in the estimate; :func:`optimize_excitation` lowers it.
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from ..model.model import Model
from .base import BaseParameters
from .optimize import Minimization, minimize
from .parameters import ParameterLayout
from .inverse_dynamics import check_layout, regressor_from


class FourierTrajectory(eqx.Module):
    """A finite Fourier series per joint (see the module docstring).

    **Fields:** ``q0`` (nv,) offsets; ``a``, ``b`` (nv, L) coefficients (rad/s or m/s);
    ``omega`` the fundamental pulsation (rad/s).
    """

    q0: jax.Array
    a: jax.Array
    b: jax.Array
    omega: jax.Array

    @classmethod
    def random(cls, key, q0, harmonics: int = 5, period: float = 10.0, velocity: float = 1.0):
        """Random coefficients, ``velocity`` being the scale of each joint's peak speed."""
        q0 = jnp.asarray(q0)
        ka, kb = jax.random.split(key)
        shape = (q0.shape[0], harmonics)
        c = velocity / harmonics
        return cls(q0, c * jax.random.normal(ka, shape, q0.dtype), c * jax.random.normal(kb, shape, q0.dtype),
                   jnp.asarray(2 * np.pi / period, q0.dtype))

    @property
    def period(self):
        return 2 * jnp.pi / self.omega

    def __call__(self, t):
        """``(q, qd, qdd)`` (nv,) each at time ``t`` (a scalar; ``jax.vmap`` over times)."""
        w = self.omega * jnp.arange(1, self.a.shape[1] + 1, dtype=self.a.dtype)
        s, c = jnp.sin(w * t), jnp.cos(w * t)
        q = self.q0 + (self.a * s - self.b * c) @ (1.0 / w)
        qd = self.a @ c + self.b @ s
        qdd = (self.b * c - self.a * s) @ w
        return q, qd, qdd

    def sample(self, ts):
        """``(q, qd, qdd)`` (T, nv) each at the times ``ts`` (T,)."""
        return jax.vmap(self)(jnp.asarray(ts))


def _check_vector_joints(model: Model):
    bad = [(n, t) for n, t, j in zip(model.joint_names, model.joint_types, model.topology.joints)
           if j.nq != j.nv or j.unit_slices]
    if bad:
        raise ValueError(f"a Fourier trajectory drives q directly, which needs joints with q in a vector space "
                         f"(revolute, prismatic, universal, cylindrical); {bad} are not. Fix those joints or "
                         "write their motion with mbjax.integrate")


def base_regressor_over(model: Model, trajectory: FourierTrajectory, ts, layout: ParameterLayout,
                        base: BaseParameters):
    """The stacked base regressor (T nv, r) along ``trajectory`` at the times ``ts``."""
    q, qd, qdd = trajectory.sample(ts)
    Y = jax.vmap(lambda a, b, c: regressor_from(model, layout, a, b, c))(q, qd, qdd)
    return base.regressor(Y.reshape(-1, layout.size))


@eqx.filter_jit
def condition_number(model: Model, trajectory: FourierTrajectory, ts, base: BaseParameters,
                     layout: ParameterLayout | None = None):
    """The condition number ``sigma_max / sigma_min`` of the base regressor stacked over the
    samples of ``trajectory`` at the times ``ts`` (T,)."""
    layout = check_layout(model, layout)
    _check_vector_joints(model)
    return _condition(base_regressor_over(model, trajectory, ts, layout, base))


def _condition(W):
    """``sigma_max / sigma_min`` of ``W`` (rows, p).

    In float64 from the eigenvalues of ``W^T W`` (p x p), accurate while ``eps cond(W)^2 << 1``
    (cond << 1e8). In float32 that bound is cond << 3e3, below the condition of a random
    trajectory's regressor (~2e3 for panda: its smallest eigenvalue came out 40 % off), so
    there the singular values come from the triangular factor of ``W = Q R``: accurate while
    ``eps cond(W) << 1``."""
    if jnp.finfo(W.dtype).eps < 1e-10:
        lam = jnp.linalg.eigvalsh(W.T @ W)
        return jnp.sqrt(lam[-1] / lam[0])
    s = jnp.linalg.svd(jnp.linalg.qr(W, mode="r"), compute_uv=False)
    return s[0] / s[-1]


def _excitation_loss(ab, trajectory, model, ts, base, layout, limit_weight):
    """log cond(W_b) + limit_weight sum_k e_k^2 of the trajectory with coefficients ``ab``."""
    traj = eqx.tree_at(lambda f: (f.a, f.b), trajectory, ab)
    q, qd, _ = traj.sample(ts)
    excess = (jnp.maximum(q - model.upper, 0.0) + jnp.maximum(model.lower - q, 0.0)
              + jnp.maximum(jnp.abs(qd) - model.velocity_limit, 0.0))
    cond = _condition(base_regressor_over(model, traj, ts, layout, base))
    return jnp.log(cond) + limit_weight * jnp.sum(jnp.max(excess, axis=0) ** 2)


def optimize_excitation(model: Model, trajectory: FourierTrajectory, ts, base: BaseParameters,
                        layout: ParameterLayout | None = None, *, steps: int = 200, limit_weight: float = 1e3,
                        optimizer=None, progress: bool = True) -> Minimization:
    """Lower the condition number of the base regressor by changing the Fourier coefficients.

    Minimises ``log cond(W_b) + limit_weight * sum_k e_k^2`` over ``a``, ``b`` (``q0`` and
    ``omega`` stay fixed) with optax, where ``e_k`` is the largest excursion of joint k beyond
    its position or velocity limits.

    **Arguments:** ``trajectory``: the start; ``ts`` (T,): sample times; ``base``: the base
    parameters (:func:`base_parameters`); ``steps``, ``optimizer`` (default
    ``optax.lbfgs()``), ``progress``: see :func:`mbjax.identify.minimize`.

    **Returns:** a :class:`Minimization` whose ``params`` is the improved
    :class:`FourierTrajectory` and ``losses`` the objective along the way.
    """
    layout = check_layout(model, layout)
    _check_vector_joints(model)
    ts = jnp.asarray(ts)
    loss = eqx.Partial(_excitation_loss, trajectory=trajectory, model=model, ts=jnp.asarray(ts), base=base,
                       layout=layout, limit_weight=jnp.asarray(limit_weight, model.dtype))
    coefficients = (trajectory.a, trajectory.b)
    result = minimize(loss, coefficients, optimizer, steps, progress=progress, desc="excitation")
    return Minimization(eqx.tree_at(lambda f: (f.a, f.b), trajectory, result.params), result.losses)
