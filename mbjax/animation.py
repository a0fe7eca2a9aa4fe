"""3-D stick-and-frame animation of a motion, written as GIF or MP4 with matplotlib.

Each body is drawn as a stick from its parent's origin to its own (a root on a fixed base:
from its joint's anchor), each frame of the model (URDF fixed links, MJCF bodies and sites) as
a thinner stick from its body's origin, and every body frame as a small red-green-blue (x, y,
z) triad. The view is fixed over the whole motion, so that what moves on the screen moves in
the world, unless it follows a floating base.
"""

from __future__ import annotations

import os

import jax
import numpy as np

from .kinematics import forward_kinematics, frame_placements
from .model.model import Model
from .progress import Progress

_NEEDS_MPL = 'animate needs matplotlib: install it with `pip install matplotlib` (or `pip install "mbjax[plot]"`)'


def _world_poses(model: Model, qs):
    """Body rotations (T, nb, 3, 3), body origins (T, nb, 3), frame origins (T, nf, 3)."""
    (R, p), (_, pf) = jax.vmap(lambda q: (forward_kinematics(model, q), frame_placements(model, q)))(qs)
    return np.asarray(R), np.asarray(p), np.asarray(pf)


def _segments(model: Model, p, pf):
    """Stick segments (T, ns, 2, 3) between body origins, and (T, nk, 2, 3) body-to-frame."""
    T = p.shape[0]
    sticks = []
    for i, parent in enumerate(model.parents):
        if parent >= 0:
            start = p[:, parent]
        elif model.joint_types[i] != "free":
            start = np.broadcast_to(np.asarray(model.joint_translation[i], dtype=float), (T, 3))
        else:
            continue
        sticks.append(np.stack([start, p[:, i]], 1))
    links = [np.stack([p[:, b], pf[:, f]], 1)
             for f, b in enumerate(model.topology.frame_bodies)
             if b >= 0 and np.abs(pf[:, f] - p[:, b]).max() > 1e-9]
    empty = np.zeros((T, 0, 2, 3))
    return (np.stack(sticks, 1) if sticks else empty), (np.stack(links, 1) if links else empty)


def animate(model: Model, ts, qs, path, fps: int = 30, speed: float = 1.0, max_frames: int = 300,
            title: str | None = None, triads: bool = True, follow: bool | None = None, dpi: int = 80,
            progress: bool = False) -> str:
    """Write a 3-D stick-and-frame animation of the motion ``qs`` sampled at times ``ts``.

    **Arguments:**

    - ``model``: the :class:`Model` that moves.
    - ``ts`` (T,): increasing sample times in s; ``qs`` (T, nq): the configurations.
    - ``path``: output file, ``.gif`` (Pillow, always available with matplotlib) or ``.mp4``
      (needs the ``ffmpeg`` program).
    - ``fps``: frames per second of the video; ``speed``: playback speed (2 = twice real time).
      The video shows the sample nearest to each frame's time; at most ``max_frames`` frames
      (a longer motion plays faster than ``speed``).
    - ``title``: text above the picture (default: the model's name); ``triads``: draw each
      body's axes; ``follow``: move the view with the bodies' mean position (default: when the
      model has a floating base, which otherwise falls out of sight); ``dpi``: resolution; ``progress``: a progress bar (tqdm) while writing.

    **Returns:** ``path`` as a string.
    """
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        from matplotlib import animation
    except ImportError:
        raise ModuleNotFoundError(_NEEDS_MPL) from None
    ts, qs = np.asarray(ts, dtype=float), np.asarray(qs)
    if ts.ndim != 1 or qs.shape != (ts.shape[0], model.nq) or ts.shape[0] == 0:
        raise ValueError(f"ts must be (T,) and qs (T, {model.nq}); got {ts.shape} and {qs.shape}")
    if np.any(np.diff(ts) < 0):
        raise ValueError("ts must be increasing")
    if fps <= 0 or speed <= 0 or max_frames < 1:
        raise ValueError("fps, speed and max_frames must be positive")
    path = str(path)
    ext = os.path.splitext(path)[1].lower()
    if ext == ".gif":
        writer = animation.PillowWriter(fps=fps)
    elif ext == ".mp4":
        if not animation.writers.is_available("ffmpeg"):
            raise RuntimeError("writing .mp4 needs the ffmpeg program, which was not found; install it "
                               "(e.g. `apt-get install ffmpeg`) or write a .gif")
        writer = animation.FFMpegWriter(fps=fps)
    else:
        raise ValueError(f"unknown animation format {ext!r}: use .gif or .mp4")

    n = int(min(max_frames, np.floor((ts[-1] - ts[0]) * fps / speed) + 1))
    times = np.linspace(ts[0], ts[-1], n)
    pick = np.clip(np.searchsorted(ts, times), 1, len(ts) - 1) if len(ts) > 1 else np.zeros(n, int)
    if len(ts) > 1:  # the nearer of the two neighbouring samples
        pick = np.where(times - ts[pick - 1] < ts[pick] - times, pick - 1, pick)
    R, p, pf = _world_poses(model, qs[pick])
    sticks, links = _segments(model, p, pf)

    points = np.concatenate([p, pf, sticks.reshape(n, -1, 3)], 1)  # (n, k, 3)
    if follow is None:
        follow = any(t == "free" and parent < 0 for t, parent in zip(model.joint_types, model.parents))
    if follow:  # the view moves with the bodies' mean position
        centres = p.mean(1)
        half = float(np.abs(points - centres[:, None]).max())
    else:
        lo, hi = points.reshape(-1, 3).min(0), points.reshape(-1, 3).max(0)
        centres = np.broadcast_to(0.5 * (lo + hi), (n, 3))
        half = 0.5 * float((hi - lo).max())
    half = 1.1 * max(half, 1e-3)
    axis_len = 0.12 * half

    fig = plt.figure(figsize=(6, 6))
    ax = fig.add_subplot(projection="3d")
    ax.set_box_aspect((1, 1, 1))
    ax.set_xlabel("x [m]")
    ax.set_ylabel("y [m]")
    ax.set_zlabel("z [m]")
    stick_lines = [ax.plot([], [], [], "-", color="0.2", lw=3, solid_capstyle="round")[0] for _ in range(sticks.shape[1])]
    link_lines = [ax.plot([], [], [], "-", color="0.5", lw=1.5)[0] for _ in range(links.shape[1])]
    joints = ax.plot([], [], [], "o", color="tab:blue", ms=4)[0]
    triad_lines = [[ax.plot([], [], [], "-", color=c, lw=1.5)[0] for c in ("tab:red", "tab:green", "tab:blue")]
                   for _ in range(model.nbodies if triads else 0)]
    label = ax.set_title("")
    name = model.name if title is None else title

    def draw(k):
        for a, set_lim in enumerate((ax.set_xlim, ax.set_ylim, ax.set_zlim)):
            set_lim(centres[k, a] - half, centres[k, a] + half)
        for line, seg in zip(stick_lines, sticks[k]):
            line.set_data_3d(*seg.T)
        for line, seg in zip(link_lines, links[k]):
            line.set_data_3d(*seg.T)
        joints.set_data_3d(*p[k].T)
        for i, lines in enumerate(triad_lines):
            for a, line in enumerate(lines):
                line.set_data_3d(*np.stack([p[k, i], p[k, i] + axis_len * R[k, i, :, a]]).T)
        label.set_text(f"{name}   t = {times[k]:.2f} s")
        return []

    anim = animation.FuncAnimation(fig, draw, frames=n, blit=False)
    with Progress(n, "animating", "frames", progress) as bar:
        try:
            anim.save(path, writer=writer, dpi=dpi, progress_callback=lambda i, total: bar.update(1))
        finally:
            plt.close(fig)
    return path
