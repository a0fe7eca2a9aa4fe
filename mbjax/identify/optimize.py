"""A gradient-based minimisation loop with optax, jitted in chunks, with a progress bar."""

from __future__ import annotations

from typing import NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax

from ..progress import Progress


class Minimization(NamedTuple):
    """The result of :func:`minimize`: the parameters and the loss at every iteration."""

    params: object
    losses: np.ndarray


#: the default optimizer: one instance, so that jitted loops are reused from call to call
LBFGS = optax.lbfgs()


def minimize(loss, params, optimizer: optax.GradientTransformation | None = None, steps: int = 500,
             gtol: float = 0.0, ftol: float | None = None, progress: bool = True, desc: str = "minimizing",
             chunk: int = 25) -> Minimization:
    """Minimise ``loss(params)`` with an optax optimizer.

    Iterations run in jitted chunks of up to ``chunk`` steps (one ``lax.while_loop`` each);
    between chunks Python updates the progress bar. The run stops after ``steps`` iterations,
    once the gradient norm is at most ``gtol``, or once an iteration lowered the loss by at
    most ``ftol |loss|`` (a converged line search no longer moves). ``ftol`` defaults to 1e-13
    with the default L-BFGS and to no such test otherwise (Adam's loss may rise).

    **Arguments:**

    - ``loss``: a function of ``params`` (any pytree of arrays) returning a scalar. Pass its
      data as an ``equinox.Partial`` (``eqx.Partial(f, data=...)`` with ``f`` defined once):
      the compiled loop is then reused by later calls with new data of the same shapes.
    - ``optimizer``: default ``optax.lbfgs()`` (its line search calls ``loss`` again; any optax
      transformation works, e.g. ``optax.adam(1e-2)``).
    - ``steps``: the most iterations; ``gtol``, ``ftol``: the stopping tests above.
    - ``progress``: show a progress bar (tqdm when installed).

    **Returns:** :class:`Minimization` (params, losses (iterations,)).
    """
    if optimizer is None:
        optimizer, ftol = LBFGS, 1e-13 if ftol is None else ftol
    # strong types throughout: weakly typed leaves would change type after the first chunk
    # and compile the loop a second time
    params, state = _strongly_typed((params, optimizer.init(params)))
    losses, bar = [], Progress(steps, desc, "iterations", progress)
    try:
        while len(losses) < steps:
            limit = min(chunk, steps - len(losses))
            tols = (jnp.asarray(gtol), None if ftol is None else jnp.asarray(ftol))
            new_params, new_state, k, values, done = _run(loss, optimizer, params, state, jnp.asarray(limit), chunk,
                                                          *tols)
            values = np.asarray(values)[: int(k)]
            if not np.all(np.isfinite(values)):
                break  # keep the last finite iterate
            params, state = new_params, new_state
            losses.extend(values)
            bar.update(int(k), f"loss {float(values[-1]):.6g}")
            if bool(done):
                break
    finally:
        bar.close()
    return Minimization(params, np.asarray(losses))


def _strongly_typed(tree):
    return jax.tree.map(lambda x: jnp.asarray(x, jnp.result_type(x)) if eqx.is_array(x) else x, tree)


@eqx.filter_jit
def _run(loss, optimizer, params, state, limit, chunk: int, gtol, ftol):
    """Up to ``limit`` iterations of ``optimizer`` on ``loss`` in one while loop."""
    # line-search optimizers keep the value and gradient of the accepted step in their state
    from_state = optax.tree_utils.tree_get(state, "value") is not None
    value_and_grad = optax.value_and_grad_from_state(loss) if from_state else jax.value_and_grad(loss)

    def step(carry):
        params, state, k, values, _ = carry
        value, grad = value_and_grad(params, state=state) if from_state else value_and_grad(params)
        updates, state = optimizer.update(grad, state, params, value=value, grad=grad, value_fn=loss)
        previous = jnp.where(k > 0, values[jnp.maximum(k - 1, 0)], jnp.inf)
        stalled = False if ftol is None else previous - value <= ftol * jnp.abs(value)
        done = (optax.tree.norm(grad) <= gtol) | stalled
        return optax.apply_updates(params, updates), state, k + 1, values.at[k].set(value), done

    values = jnp.full(chunk, jnp.nan, jax.eval_shape(loss, params).dtype)
    carry = (params, state, 0, values, False)
    return jax.lax.while_loop(lambda c: (c[2] < limit) & ~c[4], step, carry)


def quadratic_form(W, tau):
    """``(R, z, c)`` with ``|W theta - tau|^2 = |R theta - z|^2 + c`` for every theta, from the
    thin QR of ``W`` (rows, p): R (p, p); a least-squares loss then costs O(p^2) per
    evaluation whatever the number of samples, and keeps QR's accuracy."""
    W, tau = jnp.asarray(W), jnp.asarray(tau).reshape(-1)
    if W.shape[0] != tau.shape[0]:
        raise ValueError(f"W has {W.shape[0]} rows and tau {tau.shape[0]} entries; stack tau (N, nv) as "
                         "tau.reshape(-1) to match stacked_regressor")
    Q, R = jnp.linalg.qr(W)
    z = Q.T @ tau
    return R, z, jnp.maximum(tau @ tau - z @ z, 0.0)
