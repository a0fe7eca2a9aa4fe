"""Feasibility-driven differential dynamic programming (FDDP) for the shooting transcriptions.

A shooting problem with torques linear between knots is a discrete-time optimal control
problem over the knot intervals k = 0 .. K-2. Its state at knot k is ``x_k = (q_k, qd_k, u_k)``
(the knot's torque is carried along, because interval k's motion depends on both of its knot
values), its control is the next knot value ``w_k = u_{k+1}``, and its dynamics
``x_{k+1} = F_k(x_k, w_k)`` integrate interval k with the problem's fixed steps. The first knot
value ``u_0`` is chosen before the first interval, with ``(q_0, qd_0)`` fixed. The objective is
``1/2 |r|^2``, with ``r`` the shooting solver's residuals (costs and augmented-Lagrangian terms)
on the integration grid; each residual is charged to the first stage whose state or grid it
touches (every :mod:`mbjax.trajopt.costs` term is local to an interval, a knot or a grid point).

The solver keeps a state at every knot and lets the dynamics be violated by gaps
``f_{k+1} = F_k(x_k, w_k) (-) x_{k+1}`` (tangent coordinates at ``x_{k+1}``, so quaternions stay
on their manifold), so it can start from a guessed path (multiple shooting with a node at every
knot). Each iteration (Mastalli et al., "Crocoddyl: an efficient and versatile framework for
multi-contact optimal control", ICRA 2020, Sec. IV; Tassa, Erez & Todorov, IROS 2012, for the
regularisation):

1. Linearise every interval at once (``vmap``, forward mode with ``2 nv + 2 nu`` tangents):
   ``dx_{k+1} = A_k dx_k + B_k dw_k + f_{k+1}``, and the residuals' Jacobian on each stage's
   variables, ``J_k``, giving Gauss–Newton stage models ``g_k = J_k^T r``, ``H_k = J_k^T J_k``:
   once per accepted iterate, carried to the next iteration's convergence test and gains. The
   first pass evaluates the starting point by a forward pass without a step (3.), so the
   compiled loop holds the plain simulation once and its linearisation once. (Each trial
   simulated together with its Jacobian, the loop would hold only the latter: on the
   free-floating reorientation it compiled in 5.4 s instead of 7.6 s but a rejected trial then
   costs a Jacobian, and panda's point to point ran 2.5x slower per iteration.)
2. Backward pass from the terminal stage (``V_{K-1} = (g, H)`` of its residuals), with the gap
   in the value's expansion point, ``V'_x = V_x + V_xx f``:

       Q_x = g_x + A^T V'_x,        Q_u = g_w + B^T V'_x,
       Q_xx = H_xx + A^T V_xx A,    Q_uu = H_ww + B^T V_xx B,    Q_ux = H_wx + B^T V_xx A,
       k = -(Q_uu + mu B^T B)^-1 Q_u,   K = -(Q_uu + mu B^T B)^-1 (Q_ux + mu B^T A)

   (the model regularised on the next state, Tassa et al. Eq. 10), and the value from the
   unregularised model: ``V_x = Q_x + K^T Q_uu k + K^T Q_u + Q_ux^T k``,
   ``V_xx = Q_xx + K^T Q_uu K + K^T Q_ux + Q_ux^T K`` (their Eq. 11).
3. Forward pass with step ``alpha``: ``w_k = w_k + alpha k_k + K_k (x_k' (-) x_k)``, and the
   new state at each knot the simulation of the interval less ``(1 - alpha)`` of its old gap,
   so that a full step (``alpha = 1``) closes every gap. In the linear model the trial moves
   by ``alpha`` times the full step ``d``, so the model predicts the change
   ``alpha D_1 + alpha^2 D_2 / 2`` with ``D_1 = sum g_k . d_k``, ``D_2 = sum d_k^T H_k d_k``;
   ``alpha`` halves from 1 until the actual change is at most a tenth of a predicted decrease
   (or, while gaps remain open and closing them costs, at most twice the predicted increase).
   ``mu`` falls 10x after a full step, stays after a half step and grows 10x after a shorter
   one, none, or gains that are not finite.

It ends where the gaps are closed (``|f| <= atol``) and ``|Q_u| <= atol + rtol max(1/2 |r|^2, 1)``
at every stage (the gradient of the objective along the controls, once the gaps are closed
and the steps vanish).
"""

from __future__ import annotations

from typing import NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp

from ..checks import default_tolerance
from ..configuration import difference_from, integrate_from, normalize
from ..simulation.trajectory import Trajectory
from .costs import Rollout
from .shooting import MultipleShooting, ShootingNodes, SingleShooting


def _solve_spd(A, b):
    return jax.scipy.linalg.cho_solve(jax.scipy.linalg.cho_factor(A), b)


class Linearisation(NamedTuple):
    """The stage models at an iterate: ``cost`` ``1/2 |r|^2``; ``AB`` (K-1, n, n + nu) the
    dynamics ``[A_k B_k]``; ``gap`` (K-1, n) ``f_{k+1}``; ``g`` (K-1, n + nu), ``H`` (K-1, n + nu,
    n + nu) the Gauss–Newton models of the stages' residuals; ``g_end`` (n,), ``H_end`` (n, n)
    the terminal stage's; n = 2 nv + nu."""

    cost: jax.Array
    AB: jax.Array
    gap: jax.Array
    g: jax.Array
    H: jax.Array
    g_end: jax.Array
    H_end: jax.Array


class Iterate(NamedTuple):
    """An iterate: knot values ``u`` (K, nu), knot states ``q``, ``qd`` (K-1 rows, the last
    knot's being the last interval's end), its objective ``cost`` and the transcription's
    ``rollout`` of it (with its defects)."""

    u: jax.Array
    q: jax.Array
    qd: jax.Array
    cost: jax.Array
    rollout: Rollout


class Stages:
    """A shooting problem as the stages of the module docstring, and the functions FDDP
    evaluates on them. Built inside a traced function from a problem (in forward mode), its
    transcription, the residual function (a :class:`Rollout` to a vector) and the
    transcription's variables ``z`` of the starting iterate, whose knot states are ``(q0, qd0)``
    and the shooting nodes (single shooting: ``(q0, qd0)`` repeated, until :meth:`linearise`
    simulates the knots)."""

    def __init__(self, problem, transcription, residuals, z):
        self.problem, self.residuals = problem, residuals
        self.multiple = isinstance(transcription, MultipleShooting)
        model, K = problem.model, problem.knots
        self.nv, self.nu = model.nv, problem.controls.shape[1]
        self.n = 2 * self.nv + self.nu
        self.no_defects = jnp.zeros((K - 2) * 2 * self.nv if self.multiple else 0, problem.q0.dtype)
        grids = jax.vmap(lambda k: problem._grid(k, 1)[2])(jnp.arange(K - 1))  # each interval's
        self.ts = jnp.concatenate([grids[:, :-1].reshape(-1), grids[-1, -1:]])  # the integration grid
        if self.multiple:
            self.u = z.u
            self.q = jnp.concatenate([problem.q0[None], jax.vmap(normalize, (None, 0))(model, z.q)])
            self.qd = jnp.concatenate([problem.qd0[None], z.qd])
        else:
            self.u = z
            self.q, self.qd = (jnp.broadcast_to(x, (K - 1, x.shape[0])) for x in (problem.q0, problem.qd0))

    def variables(self, u, q, qd):
        """The transcription's variables of an iterate."""
        return ShootingNodes(u, q[1:], qd[1:]) if self.multiple else u

    def residual(self, u, Xq, Xqd):
        """The residual vector of knot values ``u`` and the grid ``(Xq, Xqd)`` (N + 1 rows)."""
        return self.residuals(Rollout(u, Trajectory(ts=self.ts, q=Xq, qd=Xqd), self.no_defects))

    def interval(self, u, qk, qdk, k, dx):
        """Interval k's grid (S + 1 rows) from its start ``(qk, qdk, u_k)`` and ``u_{k+1}``, moved
        along ``dx = (dq, dqd, du_k, du_{k+1})``; twice, for ``jax.jacfwd(..., has_aux=True)``."""
        nv, n = self.nv, self.n
        u = u.at[k].add(dx[2 * nv:n]).at[k + 1].add(dx[n:])
        traj = self.problem.simulate(u, integrate_from(self.problem.model, qk, dx[:nv]), qdk + dx[nv:2 * nv], k, 1)
        return (traj.q, traj.qd), (traj.q, traj.qd)

    def linearise(self, u, q, qd) -> Linearisation:
        """The stage models at ``(u, q, qd)``: every interval linearised at once (``vmap``,
        forward mode with ``2 nv + 2 nu`` tangents along ``(dq, dqd, du_k, du_{k+1})`` at its
        start), then :meth:`models`."""
        zero = jnp.zeros(self.n + self.nu, u.dtype)
        (Jq, Jqd), (gq, gqd) = jax.vmap(lambda qk, qdk, k: jax.jacfwd(
            lambda dx: self.interval(u, qk, qdk, k, dx), has_aux=True)(zero))(q, qd, jnp.arange(q.shape[0]))
        return self.models(u, q, qd, Jq, Jqd, gq, gqd)

    def placeholder(self) -> tuple:
        """The starting iterate, with zeros for its cost and rollout, and zero stage models (the
        shapes of :meth:`trial`'s and :meth:`linearise`'s), until a pass evaluates them."""
        K, N, nq, nv, n, dtype = self.problem.knots, self.ts.shape[0], self.q.shape[1], self.nv, self.n, self.u.dtype
        zeros = lambda *shape: jnp.zeros(shape, dtype)  # noqa: E731
        m = n + self.nu
        lin = Linearisation(zeros(), zeros(K - 1, n, m), zeros(K - 1, n), zeros(K - 1, m), zeros(K - 1, m, m),
                            zeros(n), zeros(n, n))
        rollout = Rollout(self.u, Trajectory(ts=self.ts, q=zeros(N, nq), qd=zeros(N, nv)), self.no_defects)
        return Iterate(self.u, self.q, self.qd, zeros(), rollout), lin

    def trial(self, u, q, qd, gap, k0, k, K, alpha, keep=False) -> Iterate:
        """The forward pass with step ``alpha`` from the iterate ``(u, q, qd)`` with gaps ``gap``
        (K-1, n): ``w_k = u_{k+1} + alpha k_k + K_k (x_k' (-) x_k)``, and the new state at each
        knot the simulation of the interval before it less ``(1 - alpha)`` of its old gap
        (``keep``, multiple shooting: the old knot states, gaps open; single shooting has none)."""
        model, nv = self.problem.model, self.nv
        last = jnp.arange(q.shape[0]) == q.shape[0] - 1

        def stage(carry, s):
            qh, qdh, uh = carry
            kk, KK, uk, uk1, qk, qdk, qn, qdn, f, end, i = s
            w = uk1 + alpha * kk + KK @ jnp.concatenate([difference_from(model, qk, qh), qdh - qdk, uh - uk])
            traj = self.problem.simulate(u.at[i].set(uh).at[i + 1].set(w), qh, qdh, i, 1)
            if self.multiple:  # the next knot state: the interval's end less (1 - alpha) of the old gap
                q_new = integrate_from(model, qn, difference_from(model, qn, traj.q[-1]) - (1 - alpha) * f[:nv])
                qd_new = traj.qd[-1] - (1 - alpha) * f[nv:2 * nv]
                q_new, qd_new = jnp.where(keep, qn, q_new), jnp.where(keep, qdn, qd_new)
                q_new, qd_new = jnp.where(end, traj.q[-1], q_new), jnp.where(end, traj.qd[-1], qd_new)
            else:
                q_new, qd_new = traj.q[-1], traj.qd[-1]
            return (q_new, qd_new, w), (traj.q, traj.qd, w)

        u0 = u[0] + alpha * k0
        _, (gq, gqd, w) = jax.lax.scan(stage, (q[0], qd[0], u0), (
            k, K, u[:-1], u[1:], q, qd, jnp.roll(q, -1, 0), jnp.roll(qd, -1, 0), gap, last, jnp.arange(q.shape[0])))
        u = jnp.concatenate([u0[None], w])
        Xq = jnp.concatenate([gq[:, :-1].reshape(-1, gq.shape[-1]), gq[-1:, -1]])
        Xqd = jnp.concatenate([gqd[:, :-1].reshape(-1, nv), gqd[-1:, -1]])
        r = self.residual(u, Xq, Xqd)
        q, qd = gq[:, 0], gqd[:, 0]
        defects = (MultipleShooting.defects(model, q[1:], qd[1:], gq[:-1, -1], gqd[:-1, -1]) if self.multiple
                   else self.no_defects)
        return Iterate(u, q, qd, 0.5 * r @ r, Rollout(u, Trajectory(ts=self.ts, q=Xq, qd=Xqd), defects))

    def models(self, u, q, qd, Jq, Jqd, gq, gqd) -> Linearisation:
        """The stage models of the iterate ``(u, q, qd)`` from its intervals' grids ``gq``
        (K-1, S+1, nq), ``gqd`` and their Jacobians ``Jq`` (K-1, S+1, nq, n + nu), ``Jqd``; and
        the residuals' Jacobian on the knot values and the grid, split by stage."""
        model, K, S = self.problem.model, self.problem.knots, self.problem.substeps
        nv, nu, n, dtype = self.nv, self.nu, self.n, u.dtype
        # the last knot's state is the last interval's end (no gap there)
        q_next, qd_next = jnp.concatenate([q[1:], gq[-1:, -1]]), jnp.concatenate([qd[1:], gqd[-1:, -1]])
        gap = jnp.concatenate([jax.vmap(lambda a, b: difference_from(model, a, b))(q_next, gq[:, -1]),
                               gqd[:, -1] - qd_next, jnp.zeros((K - 1, nu), dtype)], 1)
        tangent = jax.vmap(lambda a, b: jax.jacfwd(lambda y: difference_from(model, a, y))(b))(q_next, gq[:, -1])
        next_u = jnp.zeros((nu, n + nu), dtype).at[:, n:].set(jnp.eye(nu, dtype=dtype))
        AB = jnp.concatenate([tangent @ Jq[:, -1], Jqd[:, -1], jnp.broadcast_to(next_u, (K - 1, nu, n + nu))], 1)
        Xq = jnp.concatenate([gq[:, :-1].reshape(-1, gq.shape[-1]), gq[-1:, -1]])
        Xqd = jnp.concatenate([gqd[:, :-1].reshape(-1, nv), gqd[-1:, -1]])

        # the residuals' derivatives along each stage's variables (K stages, m columns each):
        # stage k < K-1 along (dq, dqd, du_k, du_{k+1}) moves its interval's grid rows (all but
        # the end) and its two knot values; the last stage along (dq, dqd, du_{K-1}) moves the
        # last grid row and knot value
        m, N, nq = n + nu, (K - 1) * S, gq.shape[-1]
        place = jnp.eye(K, K - 1, dtype=dtype)  # stage k -> interval k
        Tq = jnp.einsum("kl,lsqc->kclsq", place, Jq[:, :-1]).reshape(K, m, N, nq)
        Tqd = jnp.einsum("kl,lsvc->kclsv", place, Jqd[:, :-1]).reshape(K, m, N, nv)
        retract = jax.jacfwd(lambda e: integrate_from(model, gq[-1, -1], e))(jnp.zeros(nv, dtype))
        last = jnp.arange(K) == K - 1
        end_q = jnp.zeros((m, nq), dtype).at[:nv].set(retract.T)
        end_qd = jnp.zeros((m, nv), dtype).at[nv:2 * nv].set(jnp.eye(nv, dtype=dtype))
        Tq = jnp.concatenate([Tq, jnp.where(last[:, None, None, None], end_q[None, :, None], 0.0)], 2)
        Tqd = jnp.concatenate([Tqd, jnp.where(last[:, None, None, None], end_qd[None, :, None], 0.0)], 2)
        eye_u = jnp.eye(nu, dtype=dtype)
        Tu = (jnp.einsum("kj,ab->kajb", jnp.eye(K, dtype=dtype), jnp.zeros((m, nu), dtype).at[2 * nv:n].set(eye_u))
              + jnp.einsum("kj,ab->kajb", jnp.eye(K, k=1, dtype=dtype), jnp.zeros((m, nu), dtype).at[n:].set(eye_u)))
        r, derivative = jax.linearize(self.residual, u, Xq, Xqd)
        J = jax.vmap(jax.vmap(derivative))(Tu, Tq, Tqd)  # (K, m, rows)
        J = jnp.swapaxes(J, 1, 2)
        # each residual is charged to the first stage whose state (knot state, grid rows, knot
        # value) it depends on; a later knot value it depends on is then that stage's control.
        # A residual that also depends on a later stage's knot state or grid, or on a knot
        # value two knots on, couples stages: the stage models cannot hold it
        state = jnp.any(J[:, :, :n] != 0, axis=2)  # (K, rows)
        owner = jnp.argmax(state, axis=0)
        stage = jnp.arange(K)[:, None]
        coupled = (state & (stage > owner + 1)) | (jnp.any(J[:, :, :2 * nv] != 0, axis=2) & (stage == owner + 1))
        # (derivatives that are not finite, of a start whose simulation diverged, say nothing of
        # the structure)
        J = eqx.error_if(J, jnp.any(coupled) & jnp.all(jnp.isfinite(J)), "a cost or constraint couples knots more "
                         "than one interval apart (e.g. a periodicity term): FDDP needs terms local to an interval, a "
                         "knot or a grid point; solve this problem with trajopt.LevenbergMarquardt")
        J = J * (owner[None, :] == stage).astype(dtype)[:, :, None]
        J, J_end = J[:-1], J[-1, :, :n]
        return Linearisation(0.5 * r @ r, AB, gap, jnp.einsum("krj,r->kj", J, r), jnp.einsum("kri,krj->kij", J, J),
                             J_end.T @ r, J_end.T @ J_end)

    def backward(self, lin: Linearisation, mu):
        """The gains: ``k0`` (nu,) for ``u_0``, and ``k`` (K-1, nu), ``K`` (K-1, nu, n) for the
        later knot values; and the largest control gradient ``|Q_u|``."""
        n, nv, nu = self.n, self.nv, self.nu

        def stage(V, s):
            Vx, Vxx = V
            AB, f, g, H = s
            A, B = AB[:, :n], AB[:, n:]
            Vx_f = Vx + Vxx @ f  # the value's expansion point moved by the gap
            Qx, Qu = g[:n] + A.T @ Vx_f, g[n:] + B.T @ Vx_f
            Qxx, Quu, Qux = H[:n, :n] + A.T @ Vxx @ A, H[n:, n:] + B.T @ Vxx @ B, H[n:, :n] + B.T @ Vxx @ A
            # the gains from the model regularised on the next state (Tassa, Erez & Todorov 2012,
            # Eq. 10), the value from the unregularised one (their Eq. 11)
            kK = -_solve_spd(Quu + mu * B.T @ B, jnp.concatenate([Qu[:, None], Qux + mu * B.T @ A], 1))
            k, K = kK[:, 0], kK[:, 1:]
            Vx = Qx + K.T @ Quu @ k + K.T @ Qu + Qux.T @ k
            Vxx = Qxx + K.T @ Quu @ K + K.T @ Qux + Qux.T @ K
            return (Vx, 0.5 * (Vxx + Vxx.T)), (k, K, Qu)

        (Vx, Vxx), (k, K, Qu) = jax.lax.scan(stage, (lin.g_end, lin.H_end), (lin.AB, lin.gap, lin.g, lin.H),
                                             reverse=True)
        Vu = Vx[2 * nv:]  # u_0, chosen with (q_0, qd_0) fixed
        k0 = -_solve_spd(Vxx[2 * nv:, 2 * nv:] + mu * jnp.eye(nu, dtype=Vu.dtype), Vu)
        return k0, k, K, jnp.maximum(jnp.max(jnp.abs(Qu)), jnp.max(jnp.abs(Vu)))

    def predicted(self, lin: Linearisation, k0, k, K):
        """``(D_1, D_2)``: the change of the stage models along the full step is
        ``alpha D_1 + alpha^2 D_2 / 2`` at step ``alpha``."""
        def stage(dx, s):
            AB, f, g, H, kk, KK = s
            d = jnp.concatenate([dx, kk + KK @ dx])
            return AB @ d + f, (g @ d, d @ H @ d)

        dx0 = jnp.zeros(self.n, k0.dtype).at[2 * self.nv:].set(k0)
        dx, (d1, d2) = jax.lax.scan(stage, dx0, (lin.AB, lin.gap, lin.g, lin.H, k, K))
        return d1.sum() + lin.g_end @ dx, d2.sum() + dx @ lin.H_end @ dx


class FDDP(eqx.Module):
    """Feasibility-driven DDP (module docstring) as the inner solver of
    :func:`mbjax.trajopt.solve`'s shooting transcriptions: ``SingleShooting`` or
    ``MultipleShooting(knots - 1)`` (a node at every knot), with linear torque interpolation.

    **Fields:** ``rtol``, ``atol``: the solve ends when the gaps are at most ``atol`` and the
    control gradient ``Q_u`` at most ``atol + rtol max(F, 1)`` (default: 1e-8 for a float64
    problem, 1000 units of roundoff, 1.2e-4, for a float32 one); ``damping``: the initial
    regularisation ``mu``; ``line_search``: step sizes tried (``alpha`` from 1 down to
    ``2^-(line_search - 1)``) before the regularisation grows.
    """

    rtol: float | None = None
    atol: float | None = None
    damping: float = 1e-3
    line_search: int = eqx.field(default=10, static=True)

    def check(self, problem, transcription):
        """Raise if ``problem`` and ``transcription`` are not a stagewise problem FDDP solves."""
        if problem.controls.kind != "linear":
            raise ValueError("FDDP needs torques linear between knots (interpolation='linear'): a cubic spline "
                             "couples every knot to every interval")
        if isinstance(transcription, MultipleShooting):
            if transcription.segments != problem.knots - 1:
                raise ValueError(f"FDDP keeps a state at every knot: use MultipleShooting({problem.knots - 1}) (a "
                                 f"segment per knot interval) or SingleShooting(); got {transcription.segments} "
                                 "segments")
        elif not isinstance(transcription, SingleShooting):
            raise TypeError(f"FDDP solves SingleShooting or MultipleShooting problems; got "
                            f"{type(transcription).__name__}")

    def minimise(self, problem, transcription, residuals, z, max_steps: int):
        """Minimise ``1/2 |residuals(rollout)|^2`` over the variables of ``transcription``, from
        its variables ``z``, in at most ``max_steps`` iterations (``problem`` in forward mode:
        :meth:`TrajectoryProblem.forward_mode`). ``residuals`` maps a :class:`Rollout`, whose
        defects are zero (FDDP closes the gaps itself), to a residual vector. Returns ``(z,
        iterations, converged, rollout, start)``: the transcription's variables, its rollout of
        them, and its rollout of the starting point."""
        stages = Stages(problem, transcription, residuals, z)
        dtype = stages.u.dtype
        rtol, atol = (default_tolerance(dtype, 1e-8, 1000) if tol is None else tol for tol in (self.rtol, self.atol))

        def step(s):
            # the first pass (fresh) evaluates the starting point: a trial without a step, then
            # its stage models; the loop carries them (they are not recomputed for a convergence
            # check, and no separate program simulates the start)
            it, lin, mu, n, fresh, _, start = s
            k0, k, K, grad = stages.backward(lin, mu)
            gaps = jnp.max(jnp.abs(lin.gap))
            converged = ~fresh & (gaps <= atol) & (grad <= atol + rtol * jnp.maximum(lin.cost, 1.0))
            d1, d2 = stages.predicted(lin, k0, k, K)
            search = fresh | (jnp.isfinite(d1) & jnp.isfinite(d2) & ~converged & (n < max_steps))
            k0, k, K = (jnp.where(fresh, 0.0, x) for x in (k0, k, K))

            def attempt(c):
                j, _, best = c
                alpha = jnp.where(fresh, 0.0, 0.5 ** j.astype(dtype))
                new = stages.trial(it.u, it.q, it.qd, lin.gap, k0, k, K, alpha, keep=fresh)
                change, model = new.cost - lin.cost, alpha * d1 + 0.5 * alpha**2 * d2
                # a tenth of a predicted decrease; while gaps are open, closing them may cost
                bound = jnp.where(model < 0, 0.1 * model, jnp.where(gaps > atol, 2.0 * model, 0.0))
                ok = fresh | (jnp.isfinite(new.cost) & (change <= bound))
                return j + 1, ok, jax.tree.map(lambda a, b: jnp.where(ok, a, b), new, best)

            j, ok, it = jax.lax.while_loop(lambda c: search & (c[0] < self.line_search) & ~c[1], attempt,
                                           (jnp.zeros((), jnp.int32), jnp.zeros((), bool), it))
            lin = jax.lax.cond(ok, lambda: stages.linearise(it.u, it.q, it.qd), lambda: lin)
            # the regularisation follows the accepted step: down after a full one, up after one
            # of a quarter or less, or none (or gains that are not finite: Q_uu not positive)
            grow = jnp.where(ok & (j <= 2), jnp.where(j == 1, 0.1, 1.0), 10.0)
            mu = jnp.where(~fresh & ~converged & (n < max_steps), jnp.clip(mu * grow, 1e-12, 1e12), mu)
            start = jax.tree.map(lambda a, b: jnp.where(fresh, a, b), it.rollout, start)
            return it, lin, mu, jnp.where(fresh, n, n + 1), jnp.zeros((), bool), converged, start

        # the last pass (max_steps) only checks convergence
        blank, lin = stages.placeholder()
        init = (blank, lin, jnp.asarray(self.damping, dtype), jnp.zeros((), jnp.int32), jnp.ones((), bool),
                jnp.zeros((), bool), blank.rollout)
        it, _, _, n, _, converged, start = jax.lax.while_loop(lambda s: (s[3] <= max_steps) & ~s[5], step, init)
        return stages.variables(it.u, it.q, it.qd), n - 1, converged, it.rollout, start
