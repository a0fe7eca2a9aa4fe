"""The stick-and-frame animation writes a GIF whose frames show the motion."""

from __future__ import annotations

import numpy as np
import pytest

import mbjax
from mbjax.animation import animate

pytest.importorskip("matplotlib", reason="animations need matplotlib (pip install mbjax[plot])")
Image = pytest.importorskip("PIL.Image", reason="the GIF writer needs Pillow (installed with matplotlib)")


def test_gif_frames_follow_the_motion(tmp_path):
    model = mbjax.load_bundled("double_pendulum")
    ts = np.linspace(0.0, 1.0, 11)
    qs = np.stack([1.5 * ts, -2.0 * ts], 1)  # both joints turn
    path = animate(model, ts, qs, tmp_path / "swing.gif", fps=5, dpi=40)
    assert (tmp_path / "swing.gif").stat().st_size > 0
    with Image.open(path) as im:
        assert im.n_frames == 6  # 1 s at 5 frames per second, both ends included
        frames = []
        for k in (0, im.n_frames - 1):
            im.seek(k)
            frames.append(np.asarray(im.convert("RGB"), dtype=float))
    assert frames[0].std() > 0  # something is drawn
    assert np.abs(frames[0] - frames[1]).mean() > 0.1  # and it moved


def test_bad_requests(tmp_path):
    model = mbjax.load_bundled("double_pendulum")
    ts, qs = np.zeros(2), np.zeros((2, 2))
    with pytest.raises(ValueError, match="gif or .mp4"):
        animate(model, ts, qs, tmp_path / "a.avi")
    with pytest.raises(ValueError, match=r"qs \(T, 2\)"):
        animate(model, ts, np.zeros((3, 2)), tmp_path / "a.gif")


def test_cli_simulate_plot_and_animate(tmp_path, capsys):
    """``mbjax simulate MODEL --plot --animate`` writes a figure and a GIF that moves."""
    from mbjax import cli

    png, gif = tmp_path / "run.png", tmp_path / "run.gif"
    argv = ["simulate", "double_pendulum", "--duration", "1", "--quiet", "--plot", str(png), "--animate", str(gif)]
    assert cli.main(argv) == 0
    assert "animation" in capsys.readouterr().out
    assert png.stat().st_size > 0 and gif.stat().st_size > 0
    with Image.open(gif) as im:
        assert im.n_frames > 2
        im.seek(0)
        first = np.asarray(im.convert("RGB"), dtype=float)
        im.seek(im.n_frames - 1)
        last = np.asarray(im.convert("RGB"), dtype=float)
    assert first.std() > 0 and np.abs(first - last).mean() > 0.1
