"""The control parametrisation of direct shooting: torques on the actuated joints, given at
``K`` knots evenly spaced over the horizon and interpolated between them.

The knot values ``u`` (K, nu) are the decision variables. The torque on the actuated velocity
coordinates is the interpolation of ``u``; the other coordinates (a free-floating base, the
passive joint of an acrobot) get zero. With ``kind="linear"`` the torque between two knots is
a convex combination of the knot values, so bounds on the knots bound the torque everywhere.
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from ..model.model import Model
from ..simulation.controllers import FeedForward

#: Gauss–Legendre rule on [0, 1] with 4 nodes: exact for polynomials of degree <= 7, so for the
#: square of a cubic (degree 6) and of a linear interpolation
_GL_X, _GL_W = np.polynomial.legendre.leggauss(4)
GAUSS_NODES, GAUSS_WEIGHTS = (_GL_X + 1) / 2, _GL_W / 2


def actuated_dofs(model: Model, actuated) -> np.ndarray:
    """Velocity indices (nu,) of the actuated joints, in the order given.

    ``actuated``: ``None`` (every joint but a free-floating base), or a sequence of joint names
    (all velocity coordinates of each) or velocity indices.
    """
    if actuated is None:
        actuated = [name for name, kind in zip(model.joint_names, model.joint_types) if kind != "free"]
    dofs = []
    for joint in actuated:
        if isinstance(joint, str):
            dofs.extend(range(model.nv)[model.v_slice(joint)])
        elif isinstance(joint, (int, np.integer)) and 0 <= joint < model.nv:
            dofs.append(int(joint))
        else:
            raise ValueError(f"actuated joint {joint!r} is neither a joint name of {model.name!r} nor a velocity "
                             f"index in [0, {model.nv})")
    if not dofs or len(set(dofs)) != len(dofs):
        raise ValueError(f"actuated must name at least one joint, each once; got {actuated!r}")
    return np.asarray(dofs, dtype=np.int32)


class KnotControls(eqx.Module):
    """Torques interpolated between ``knots`` evenly spaced times over ``[0, duration]``.

    **Fields:** ``ts`` (K,): knot times; ``dofs`` (nu,): actuated velocity indices (static);
    ``nv``; ``kind``: ``"linear"`` or ``"cubic"`` (see :meth:`FeedForward.from_knots`).
    """

    ts: jax.Array
    dofs: tuple = eqx.field(static=True)
    nv: int = eqx.field(static=True)
    kind: str = eqx.field(static=True)

    def __init__(self, model: Model, duration, knots: int, actuated=None, kind: str = "linear"):
        if int(knots) < 2:
            raise ValueError(f"knots must be at least 2 (the start and the end of the horizon); got {knots}")
        if kind not in ("linear", "cubic"):
            raise ValueError(f"unknown interpolation {kind!r}; use 'linear' or 'cubic'")
        if not float(duration) > 0:
            raise ValueError(f"duration must be positive; got {duration}")
        self.ts = jnp.linspace(0.0, duration, int(knots), dtype=model.dtype)
        self.dofs = tuple(int(i) for i in actuated_dofs(model, actuated))
        self.nv = model.nv
        self.kind = kind

    @property
    def shape(self) -> tuple:
        """Shape (K, nu) of the knot values."""
        return (self.ts.shape[0], len(self.dofs))

    @property
    def window(self) -> tuple:
        """``(width, back)``: the torques on knot interval k depend on the ``width`` knots from
        ``k - back`` (linear: k and k + 1; cubic, whose backward Hermite slopes reach one knot
        back: k - 1 to k + 1); fewer when there are fewer knots."""
        width, back = (2, 0) if self.kind == "linear" else (3, 1)
        return min(width, self.ts.shape[0]), back

    def torques(self, u):
        """Joint torques (K, nv) at the knots: ``u`` on the actuated coordinates, zero elsewhere."""
        return jnp.zeros((u.shape[0], self.nv), u.dtype).at[:, np.asarray(self.dofs)].set(u)

    def controller(self, u) -> FeedForward:
        """The open-loop controller ``tau(t)`` of knot values ``u`` (K, nu)."""
        return FeedForward.from_knots(self.ts, self.torques(u), self.kind)

    def quadrature(self, u):
        """Gauss–Legendre nodes over the horizon: weights (M,) and actuated torques (M, nu), with
        ``sum_m w_m |u_m|^2`` the exact integral of ``|u(t)|^2`` over the horizon."""
        h = jnp.diff(self.ts)
        ts = (self.ts[:-1, None] + h[:, None] * GAUSS_NODES).reshape(-1)
        weights = (h[:, None] * GAUSS_WEIGHTS).reshape(-1)
        path = self.controller(u).path
        return weights, jax.vmap(path.evaluate)(ts)[:, np.asarray(self.dofs)]
