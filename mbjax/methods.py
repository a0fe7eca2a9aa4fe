"""The forward-dynamics formulations of mbjax by name: one registry above all of them.

Each is a :class:`mbjax.Dynamics` (``dynamics(model, q, qd, tau, f_ext=None) -> qdd``, see
:mod:`mbjax.dynamics.protocol`); :func:`forward_dynamics`, :func:`mbjax.simulate` and
:class:`mbjax.trajopt.TrajectoryProblem` take a name from :data:`METHODS` or any
:class:`mbjax.Dynamics` (e.g. :class:`mbjax.ClosedChainDynamics`, which carries its loop
closures), or a plain function ``fn(model, q, qd, tau) -> qdd`` (wrapped by :class:`Function`).
"""

from __future__ import annotations

from typing import Callable

import equinox as eqx
import jax
import jax.numpy as jnp

from .compilation import filter_jit
from .dynamics.aba import aba_from
from .dynamics.bodies import external_forces_or_zero
from .dynamics.crba import crba_fast
from .dynamics.protocol import Dynamics
from .dynamics.rnea import rnea_fast
from .formulations.forward import METHODS as MAXIMAL_METHODS
from .formulations.forward import forward_dynamics_maximal
from .formulations.free_floating import check_free_floating, momentum_forward_dynamics_from
from .kane.models import kane_forward_dynamics_from
from .kinematics import tree_kinematics
from .model.model import Model


class ABA(Dynamics):
    """Articulated-body algorithm (Featherstone), O(n); analytic derivatives."""

    def forward(self, model, q, qd, tau, f_ext):
        return aba_from(model, q, qd, tau, f_ext)


class CRBA(Dynamics):
    """Mass matrix by CRBA, bias by RNEA, then a Cholesky solve: O(n^3), fewer sequential steps."""

    def forward(self, model, q, qd, tau, f_ext):
        h = rnea_fast(model, q, qd, jnp.zeros_like(qd), f_ext)
        return jax.scipy.linalg.cho_solve(jax.scipy.linalg.cho_factor(crba_fast(model, q)), tau - h)


class Momentum(Dynamics):
    """Free-floating models: the momentum form (Wilde et al. 2018, Eq. 39), the base
    eliminated by its Schur complement (:mod:`mbjax.formulations.free_floating`)."""

    def forward(self, model, q, qd, tau, f_ext):
        check_free_floating(model)
        return momentum_forward_dynamics_from(model, tree_kinematics(model, q), q, qd, tau, f_ext)


class Maximal(Dynamics):
    """Mufti's maximal-coordinate formulations (:mod:`mbjax.formulations`; no armature):
    ``"kkt"``, ``"sparse_kkt"``, ``"schur"`` or ``"barycentric"``."""

    formulation: str = eqx.field(static=True)

    def __check_init__(self):
        if self.formulation not in MAXIMAL_METHODS:
            raise ValueError(f"unknown maximal-coordinate formulation {self.formulation!r}; use one of {MAXIMAL_METHODS}")

    def forward(self, model, q, qd, tau, f_ext):
        return forward_dynamics_maximal(model, q, qd, tau, f_ext, self.formulation)


class Kane(Dynamics):
    """Kane's method with Sayers' building-block joints and speeds (:mod:`mbjax.kane`), mapped
    back to the model's velocity coordinates."""

    def forward(self, model, q, qd, tau, f_ext):
        return kane_forward_dynamics_from(model, q, qd, tau, external_forces_or_zero(model, f_ext, tau.dtype))


class Function(Dynamics):
    """A plain function ``fn(model, q, qd, tau) -> qdd`` as a :class:`Dynamics`; ``f_ext``, when
    given, is passed on as the keyword ``f_ext=``. Make ``fn`` an ``eqx.Module`` (or a plain
    function) so that its array parameters are differentiated and batched like the model's."""

    fn: Callable

    def forward(self, model, q, qd, tau, f_ext):
        return self.fn(model, q, qd, tau, **({} if f_ext is None else {"f_ext": f_ext}))


#: the named formulations
REGISTRY = {"aba": ABA(), "crba": CRBA(), "momentum": Momentum(), "kane": Kane(),
            **{name: Maximal(name) for name in MAXIMAL_METHODS}}
#: their names
METHODS = tuple(REGISTRY)


def as_dynamics(method) -> Dynamics:
    """The :class:`Dynamics` for ``method``: a name from :data:`METHODS`, a :class:`Dynamics`
    (returned as is) or a plain function (wrapped by :class:`Function`)."""
    if isinstance(method, Dynamics):
        return method
    if isinstance(method, str):
        if method not in REGISTRY:
            raise ValueError(f"unknown method {method!r}; use one of {METHODS}")
        return REGISTRY[method]
    if callable(method):
        return Function(method)
    raise TypeError(
        f"method must be a forward-dynamics method name such as 'aba' or 'crba', an mbjax.Dynamics, or a "
        f"callable dynamics(model, q, qd, tau) -> qdd; got {type(method).__name__}"
    )


@filter_jit(one_state=True)
def forward_dynamics(model: Model, q, qd, tau, f_ext=None, method="aba"):
    """Joint accelerations (nv,) by ``method``: one of :data:`METHODS` or a :class:`mbjax.Dynamics`.

    ``"aba"``: articulated-body algorithm, O(n). ``"crba"``: mass matrix by CRBA, bias by RNEA,
    then a Cholesky solve, O(n^3) but with fewer sequential steps. ``"momentum"``
    (free-floating models): the momentum form (Wilde et al. 2018, Eq. 39), with the base
    eliminated by its Schur complement. ``"kkt" | "sparse_kkt" | "schur" | "barycentric"``:
    Mufti's (1983) maximal-coordinate formulations (no armature). ``"kane"``: Kane's method
    with Sayers' (1991) building-block joints and speeds, mapped back to the model's velocity
    coordinates.
    """
    return as_dynamics(method)(model, q, qd, tau, f_ext)


def forward_dynamics_from(model: Model, q, qd, tau, f_ext=None, method="aba"):
    """:func:`forward_dynamics` without input checks, for use inside other algorithms (e.g.
    trajectory optimisation, whose trial steps may diverge to non-finite states)."""
    return as_dynamics(method).unchecked()(model, q, qd, tau, f_ext)
