"""Plots of simulation results (matplotlib, an optional dependency: ``pip install matplotlib``).

Every function draws on a given matplotlib ``Axes`` (or makes a figure) and returns it, so the
plots compose: :func:`plot_trajectory` is joint positions, velocities, then the energy and
momentum drift panels when the trajectory recorded them.
"""

from __future__ import annotations

import numpy as np

PLOT_HINT = 'install it with `pip install matplotlib` (or `pip install -e ".[plot]"` in a clone of mbjax)'


def pyplot():
    """``matplotlib.pyplot``, or an ImportError that says how to install it."""
    try:
        import matplotlib.pyplot as plt
    except ImportError:
        raise ImportError(f"plotting needs matplotlib, which is not installed; {PLOT_HINT}") from None
    return plt


def finish(fig, path: str | None = None, dpi: int = 120):
    """Lay out a figure, then save it to ``path`` and close it (returns ``None``), or return it
    when ``path`` is ``None``."""
    fig.tight_layout()
    if path is None:
        return fig
    fig.savefig(path, dpi=dpi)
    pyplot().close(fig)
    return None


def _valid(traj):
    ts = np.asarray(traj.ts)
    if ts.ndim != 1:
        raise ValueError("plot one trajectory at a time: index a batched Trajectory first, e.g. "
                         "jax.tree.map(lambda x: x[0], batch)")
    return ts, np.isfinite(ts)


def coordinate_labels(model, n, kind):
    """Coordinate labels ``joint[k]`` from the model's q (``kind="q"``) or v slices."""
    if model is None:
        return [f"{kind}[{i}]" for i in range(n)]
    labels = [""] * n
    for j, name in enumerate(model.joint_names):
        sl = model.q_slice(j) if kind == "q" else model.v_slice(j)
        width = sl.stop - sl.start
        for k in range(sl.start, sl.stop):
            labels[k] = name if width == 1 else f"{name}[{k - sl.start}]"
    return labels


def plot_coordinates(traj, ax=None, model=None, kind: str = "q"):
    """Joint positions (``kind="q"``) or velocities (``"qd"``) against time."""
    plt = pyplot()
    ax = plt.subplots()[1] if ax is None else ax
    ts, ok = _valid(traj)
    x = np.asarray(traj.q if kind == "q" else traj.qd)[ok]
    for label, column in zip(coordinate_labels(model, x.shape[1], kind), x.T):
        ax.plot(ts[ok], column, label=label)
    ax.set_xlabel("time [s]")
    ax.set_ylabel("q [rad, m, quaternion]" if kind == "q" else "qd [rad/s, m/s]")
    if x.shape[1] <= 12:
        ax.legend(fontsize="small", ncol=2)
    ax.grid(alpha=0.3)
    return ax


def plot_drift(traj, ax=None, quantity: str = "energy"):
    """Relative drift ``|x(t) - x(0)| / |x(0)|`` of the recorded energy or momentum (log scale).

    The energy's is its balance, ``energy - work`` (the work of the applied forces, dampers
    included, taken out): what remains is integration error."""
    plt = pyplot()
    values = getattr(traj, quantity)
    if values is None:
        raise ValueError(f"the trajectory has no {quantity}; simulate with {quantity}=True")
    balance = quantity == "energy" and traj.work is not None
    if balance:
        values = values - traj.work
    ax = plt.subplots()[1] if ax is None else ax
    ts, ok = _valid(traj)
    x = np.asarray(values)[ok].reshape(ok.sum(), -1)
    scale = max(np.abs(x[0]).max(), np.finfo(float).tiny)
    drift = np.abs(x - x[0]).max(axis=1) / scale
    ax.semilogy(ts[ok][1:], np.maximum(drift[1:], np.finfo(float).eps * 1e-3), label=quantity)
    ax.set_xlabel("time [s]")
    ax.set_ylabel("relative energy-balance error" if balance else f"relative {quantity} drift")
    ax.grid(alpha=0.3, which="both")
    return ax


def plot_trajectory(traj, model=None, path: str | None = None):
    """A figure of positions, velocities and the recorded drifts; saved to ``path`` if given.

    **Returns:** the figure, or ``None`` when it was saved (and closed).
    """
    plt = pyplot()
    panels = ["q", "qd"] + [k for k in ("energy", "momentum") if getattr(traj, k) is not None]
    fig, axes = plt.subplots(len(panels), 1, figsize=(8, 2.4 * len(panels)), sharex=True, squeeze=False)
    for ax, panel in zip(axes[:, 0], panels):
        if panel in ("q", "qd"):
            plot_coordinates(traj, ax, model, panel)
        else:
            plot_drift(traj, ax, panel)
    for ax in axes[:-1, 0]:
        ax.set_xlabel("")
    if model is not None:
        axes[0, 0].set_title(model.name)
    return finish(fig, path)
