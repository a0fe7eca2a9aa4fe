"""Physically consistent identification: least squares over parameters that can only describe
real bodies (log-Cholesky of the pseudo-inertia, Rucker & Wensing 2022), fitted with optax.

Minimises, over log-Cholesky parameters ``phi`` of every body and non-negative joint
parameters (armature, viscous and Coulomb friction, each the square of a free number),

    |W theta(phi) - tau|^2 / |tau|^2  +  w sum_i d(J_i, J_i,prior)

where ``d`` is the entropic divergence of pseudo-inertias (Lee, Wensing & Park 2020): a weak
pull towards prior values (e.g. CAD data) that fixes the parameter combinations the data do
not determine, and that is zero when the fit agrees with the prior.
"""

from __future__ import annotations

from typing import NamedTuple

import equinox as eqx
import jax.numpy as jnp
import numpy as np
import optax

from ..checks import default_tolerance
from .log_cholesky import log_cholesky_from_parameters, parameters_from_log_cholesky
from .log_cholesky import parameters_from_pseudo_inertia, pseudo_inertia
from .optimize import minimize, quadratic_form
from .parameters import DynamicParameters, ParameterLayout

#: eigenvalues of a pseudo-inertia are raised to at least this fraction of its trace (float64;
#: float32: 100 units of roundoff, since rebuilding J from its eigenvectors rounds at eps |J|, and
#: a floor of 1e-10 left about half of the repaired bodies without a Cholesky factor)
MIN_EIGENVALUE = 1e-10


class ConsistentFit(NamedTuple):
    """Result of :func:`physically_consistent`: the fitted :class:`DynamicParameters` and the
    loss at every iteration."""

    params: DynamicParameters
    losses: np.ndarray


def nearest_consistent(pi, min_eigenvalue: float | None = None):
    """Inertial parameters (..., 10) made physically consistent: the eigenvalues of each
    pseudo-inertia are raised to at least ``min_eigenvalue`` times its trace (bodies already
    consistent with that margin are unchanged). ``min_eigenvalue`` defaults to
    ``mbjax.checks.default_tolerance(pi.dtype, MIN_EIGENVALUE, 100)``: 1e-10 in float64,
    1.2e-5 in float32, so that the result has a log-Cholesky factorisation."""
    J = pseudo_inertia(jnp.asarray(pi))
    if min_eigenvalue is None:
        min_eigenvalue = default_tolerance(J.dtype, MIN_EIGENVALUE, 100)
    lam, V = jnp.linalg.eigh(J)
    floor = min_eigenvalue * jnp.trace(J, axis1=-2, axis2=-1)[..., None]
    fixed = (V * jnp.maximum(lam, floor)[..., None, :]) @ jnp.swapaxes(V, -1, -2)
    ok = jnp.all(lam >= floor, axis=-1)[..., None]
    return jnp.where(ok, pi, parameters_from_pseudo_inertia(fixed))


def _initial_joint_parameters(R, z, layout: ParameterLayout, pi):
    """Least-squares joint parameters (armature, friction) given the inertial parameters
    ``pi``, raised to at least 1e-3 of their group's largest value: a start from which the
    square-root parametrisation can move (it cannot leave exactly 0)."""
    n = 10 * layout.nbodies
    if not layout.groups:
        return {}
    x = jnp.linalg.lstsq(R[:, n:], z - R[:, :n] @ pi.reshape(-1))[0].reshape(len(layout.groups), layout.nv)
    x = jnp.maximum(x, 1e-3 * jnp.max(jnp.abs(x), axis=1, keepdims=True))
    return {g: jnp.sqrt(x[k]) for k, g in enumerate(layout.groups)}


@eqx.filter_jit
def _setup(W, tau, layout, initial_pi, prior_pi, prior_weight):
    """The start (variables) and the data of the loss, in one compiled program."""
    R, z, c = quadratic_form(W, tau)
    start = nearest_consistent(initial_pi)
    prior_pi = start if prior_pi is None else nearest_consistent(prior_pi)
    x0 = {"phi": log_cholesky_from_parameters(start), **_initial_joint_parameters(R, z, layout, start)}
    J0 = pseudo_inertia(prior_pi)
    data = dict(R=R, z=z, c=c, scale=1.0 / (z @ z + c), J0_inv=jnp.linalg.inv(J0),
                logdet_J0=jnp.linalg.slogdet(J0)[1], prior_weight=prior_weight)
    return x0, data


def _unpack(x, layout):
    """Inertial parameters (nb, 10) and joint parameters {group: (nv,)} of the variables."""
    return parameters_from_log_cholesky(x["phi"]), {g: x[g] ** 2 for g in layout.groups}


def _loss(x, layout, R, z, c, scale, J0_inv, logdet_J0, prior_weight):
    """|W theta - tau|^2 / |tau|^2 + w sum_i d(J_i, J0_i) (module docstring)."""
    pi, joint = _unpack(x, layout)
    theta = layout.pack(DynamicParameters(pi, **{g: joint.get(g) for g in ("armature", "viscous", "coulomb")}))
    r = R @ theta - z
    # entropic divergence with J = U U^T: log det J = 2 log det U = 2 (4 alpha + d1 + d2 + d3), so
    # d(J, J0) = -2 (4 alpha + d1 + d2 + d3) + log det J0 + <J0^-1, J> - 4: no factorisation per step
    phi = x["phi"]
    logdet_J = 2.0 * (4.0 * phi[:, 0] + phi[:, 1] + phi[:, 2] + phi[:, 3])
    divergence = -logdet_J + logdet_J0 + jnp.sum(J0_inv * pseudo_inertia(pi), axis=(-2, -1)) - 4.0
    return scale * (r @ r + c) + prior_weight * jnp.sum(divergence)


def physically_consistent(W, tau, layout: ParameterLayout, initial: DynamicParameters, *,
                          prior: DynamicParameters | None = None, prior_weight: float = 1e-6, steps: int = 1000,
                          optimizer: optax.GradientTransformation | None = None, gtol: float = 1e-12,
                          progress: bool = True) -> ConsistentFit:
    """Fit every parameter of ``layout`` to torques ``tau`` so that each body stays a real body.

    **Arguments:**

    - ``W`` (rows, layout.size): the stacked full regressor (:func:`stacked_regressor`), and
      ``tau`` (N, nv) or (rows,): the measured torques.
    - ``initial``: :class:`DynamicParameters` to start from (e.g. CAD values); inconsistent
      bodies are first moved to :func:`nearest_consistent`. The joint parameters of the layout
      start from their least-squares values given those inertias.
    - ``prior``, ``prior_weight``: the entropic-divergence regulariser (default prior: the
      initial values; ``prior_weight=0`` switches it off).
    - ``steps``, ``optimizer`` (default ``optax.lbfgs()``), ``gtol``, ``progress``: see
      :func:`mbjax.identify.minimize`.

    **Returns:** a :class:`ConsistentFit`; groups absent from ``layout`` keep their initial values.
    """
    if jnp.shape(W) != (jnp.shape(W)[0], layout.size):
        raise ValueError(f"W has shape {jnp.shape(W)}; the layout has {layout.size} parameters. Use the full "
                         "stacked regressor, not the base regressor")
    prior_pi = None if prior is None else prior.inertial
    x0, data = _setup(W, tau, layout, initial.inertial, prior_pi, jnp.asarray(prior_weight, jnp.result_type(W)))
    loss = eqx.Partial(_loss, layout=layout, **data)
    result = minimize(loss, x0, optimizer, steps, gtol=gtol, progress=progress, desc="consistent fit")
    pi, joint = _unpack(result.params, layout)
    params = initial._replace(inertial=pi, **joint)
    return ConsistentFit(params, result.losses)
