"""The user-facing entry points run: examples/*.py, the notebook, README's code, the CLI and the
bundled models.

The scripts run as subprocesses, one per core at a time, all queued when the first of them is
needed. Their time is mostly XLA compilation, so they run with the XLA flags that conftest.py
sets (backend optimisation level 0 and the classic loop emitters instead of the fusion
emitters: these are smoke tests, not benchmarks), and with MBJAX_QUICK=1, which notebooks read
to run smaller batches. Measured one script at a time, all of them took 552 CPU-s so, against
742 with the fusion emitters (at level 0, except the five with hundreds of optimiser steps, at
XLA's default level, which was faster for them then: those five now take 22-31 % less).

Each example runs with ``--quick --out NAME`` (NAME: its key in SCRIPTS, a folder in the run's
directory) and the tests read its results from ``NAME/summary.json``, not from its printed text.
"""

from __future__ import annotations

import fcntl
import importlib.util
import json
import os
import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

import mbjax
from mbjax import cli

ROOT = Path(__file__).resolve().parents[1]
TIMEOUT_S = 900  # per script; generous for a loaded CI machine


def _has_example_robot_data() -> bool:
    try:
        mbjax.robots.example_robot_data_dir()
    except (ModuleNotFoundError, FileNotFoundError):
        return False
    return True


HAS_ERD = _has_example_robot_data()
HAS_PIN = importlib.util.find_spec("pinocchio") is not None
HAS_MPL = importlib.util.find_spec("matplotlib") is not None
HAS_MUJOCO = importlib.util.find_spec("mujoco") is not None

# Executes the code cells of a notebook in one namespace (no Jupyter needed), after checking
# that the file is clean nbformat 4 (no stored outputs).
NOTEBOOK_RUNNER = r"""
import json, sys
nb = json.load(open(sys.argv[1], encoding="utf-8"))
assert nb["nbformat"] == 4, nb["nbformat"]
ns = {"__name__": "__main__"}
for i, cell in enumerate(nb["cells"]):
    assert cell["cell_type"] in ("markdown", "code", "raw"), cell["cell_type"]
    if cell["cell_type"] != "code":
        continue
    assert cell["outputs"] == [] and cell["execution_count"] is None, f"cell {i} has stored outputs"
    src = "".join(cell["source"])
    assert not any(line.lstrip().startswith(("%", "!")) for line in src.splitlines()), "magics"
    exec(compile(src, f"<cell {i}>", "exec"), ns)
print("NOTEBOOK OK")
"""

README_RUNNER = r"""
import re, sys
text = open(sys.argv[1], encoding="utf-8").read()
blocks = re.findall(r"```python\n(.*?)```", text, re.S)
assert blocks, "no python code block in README.md"
for i, block in enumerate(blocks):
    exec(compile(block, f"<README block {i}>", "exec"), {"__name__": "__main__"})
print(f"README OK ({len(blocks)} blocks)")
"""


def _example(name: str, *extra: str, script: str | None = None) -> list[str]:
    """The arguments that run ``examples/<script or name>.py`` quickly, with its figures and
    summary.json in the folder ``name`` (relative to the run's directory)."""
    return [str(ROOT / "examples" / f"{script or name}.py"), *extra, "--quick", "--out", name]


def _notebook(name: str) -> list[str]:
    return ["-c", NOTEBOOK_RUNNER, str(ROOT / "notebooks" / f"{name}.ipynb")]


#: why a script is skipped: an optional dependency missing, and what installs it
NEEDS_ERD = 'needs example-robot-data (pip install -e ".[test]")'
NEEDS_PIN = 'needs Pinocchio and example-robot-data (pip install -e ".[test]")'
NEEDS_MUJOCO = 'needs MuJoCo (pip install -e ".[mjcf]" or ".[test]")'
NEEDS_MPL = 'needs matplotlib (pip install -e ".[plot]" or ".[test]")'

#: name -> (python's arguments, available, why not)
SCRIPTS = {
    "quickstart": (_example("quickstart"), HAS_ERD, NEEDS_ERD),
    "pendulum_energy": (_example("pendulum_energy"), True, ""),
    "contact_bounce": (_example("contact_bounce"), True, ""),
    "quadruped_stand": (_example("quadruped_stand"), True, ""),
    "quadruped_stand_rigid": (_example("quadruped_stand_rigid", "--contacts", "rigid", script="quadruped_stand"), True, ""),
    "batched_drops": (_example("batched_drops"), True, ""),
    "ragdoll_fall": (_example("ragdoll_fall"), HAS_MUJOCO, NEEDS_MUJOCO),
    "bounce_to_target": (_example("bounce_to_target"), True, ""),
    "compare_pinocchio": (_example("compare_pinocchio"), HAS_ERD and HAS_PIN, NEEDS_PIN),
    "notebook": (_notebook("quickstart"), HAS_ERD, NEEDS_ERD),
    "readme": (["-c", README_RUNNER, str(ROOT / "README.md")], True, ""),
    "notebook_mjcf": (_notebook("mjcf_quickstart"), HAS_MUJOCO, NEEDS_MUJOCO),
    "free_floating_loop": (_example("free_floating_loop"), True, ""),
    "free_floating_tracking": (_example("free_floating_tracking"), True, ""),
    "free_floating_planning": (_example("free_floating_planning"), True, ""),
    "notebook_free_floating": (_notebook("free_floating"), HAS_MPL, NEEDS_MPL),
    "notebook_batched": (_notebook("batched_simulation"), True, ""),
    "notebook_contacts": (_notebook("contacts"), True, ""),
    "simulate_conservation": (_example("simulate_conservation"), True, ""),
    "maximal_coordinates_drift": (_example("maximal_coordinates_drift"), True, ""),
    "four_bar": (_example("four_bar"), True, ""),
    "slider_crank": (_example("slider_crank"), True, ""),
    "four_bar_singular": (_example("four_bar_singular"), True, ""),
    "redundant_loop": (_example("redundant_loop"), True, ""),
    "kane_satellite": (_example("kane_satellite"), True, ""),
    "huang_double_pendulum": (_example("huang_double_pendulum"), True, ""),
    "stewart_platform": (_example("stewart_platform"), True, ""),
    "identify_panda": (_example("identify_panda"), HAS_ERD and HAS_PIN, NEEDS_PIN),
    "identify_panda_float32": (_example("identify_panda_float32", "--float32", script="identify_panda"),
                               HAS_ERD and HAS_PIN, NEEDS_PIN),
    "notebook_identification": (_notebook("identification"), True, ""),
    "swing_up": (_example("swing_up"), True, ""),
    "free_floating_reorientation": (_example("free_floating_reorientation"), True, ""),
    "free_floating_reorientation_lm": (_example("free_floating_reorientation_lm", "--solver", "lm",
                                                script="free_floating_reorientation"), True, ""),
    "stewart_trajectory": (_example("stewart_trajectory"), True, ""),
    "notebook_trajectory_optimisation": (_notebook("trajectory_optimisation"), HAS_MPL, NEEDS_MPL),
    "panda_point_to_point": (_example("panda_point_to_point"), HAS_ERD, NEEDS_ERD),
    "panda_point_to_point_float32": (_example("panda_point_to_point_float32", "--float32",
                                              script="panda_point_to_point"), HAS_ERD, NEEDS_ERD),
    "panda_point_to_point_fddp": (_example("panda_point_to_point_fddp", "--solver", "fddp",
                                           script="panda_point_to_point"), HAS_ERD, NEEDS_ERD),
}

class _Launched:
    """The scripts, run ``os.cpu_count()`` at a time in the background (a thread pool of
    subprocesses), in the order of SCRIPTS; each has TIMEOUT_S from its own start.

    ``workdir`` is shared by the pytest-xdist workers: a worker that needs a script's result
    while another runs it waits for that run (a file lock per script) instead of starting a
    second one, so each script runs once however the tests are distributed."""

    def __init__(self, workdir: Path):
        self.workdir = workdir
        self.env = dict(os.environ, MPLBACKEND="Agg", PYTHONUNBUFFERED="1", MBJAX_QUICK="1")
        self.pool = ThreadPoolExecutor(max_workers=os.cpu_count() or 2)
        self.futures = {name: self.pool.submit(self._once, name, args)
                        for name, (args, available, _) in SCRIPTS.items() if available}

    def _once(self, name, args):
        """The script's (exit status, log): run here, or read from another worker's run."""
        result = self.workdir / f"{name}.result.json"
        with open(self.workdir / f"{name}.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if not result.exists():
                result.write_text(json.dumps(self._run(name, args)), encoding="utf-8")
        return tuple(json.loads(result.read_text(encoding="utf-8")))

    def _run(self, name, args):
        log = self.workdir / f"{name}.log"
        with open(log, "w", encoding="utf-8") as out:
            proc = subprocess.Popen([sys.executable, *args], cwd=self.workdir, env=self.env, stdout=out,
                                    stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
            try:
                rc = proc.wait(timeout=TIMEOUT_S)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
                rc = "timeout"
        return rc, log.read_text(encoding="utf-8")

    def result(self, name):
        return self.futures[name].result()

    def close(self):
        """Cancel the scripts not started; wait for the running ones (each ends within its
        timeout): another worker may be waiting for their results (killing them gave that
        worker's test an exit status of -9)."""
        for future in self.futures.values():
            future.cancel()
        self.pool.shutdown(wait=True)


@pytest.fixture(scope="module")
def launched(tmp_path_factory, worker_id):
    # each pytest-xdist worker has its own base temporary directory; their parent is the
    # run's, shared by the workers
    base = tmp_path_factory.getbasetemp()
    workdir = (base if worker_id == "master" else base.parent) / "examples"
    workdir.mkdir(exist_ok=True)
    runs = _Launched(workdir)
    yield runs
    runs.close()


def _run(launched, name):
    args, available, why = SCRIPTS[name]
    if not available:
        pytest.skip(why)
    rc, log = launched.result(name)
    assert rc == 0, f"{name} exited with {rc}:\n{log[-6000:]}"
    return log


def _summary(launched, name, figure: str | list | None = None) -> dict:
    """The results an example wrote to ``name/summary.json``, after checking that it ran and, with
    matplotlib, saved ``figure`` (a file name, or a list of them) there (and no figure without
    matplotlib)."""
    _run(launched, name)
    out = launched.workdir / name
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    assert summary["quick"], summary
    figures = [figure] if isinstance(figure, str) else list(figure or [])
    assert summary["figures"] == (figures if HAS_MPL else []), summary["figures"]
    for saved in summary["figures"]:
        assert (out / saved).stat().st_size > 0, saved
    return summary


# ---------------------------------------------------------------------------- scripts
def test_quickstart_example(launched):
    summary = _summary(launched, "quickstart")
    assert summary["batched_aba_shape"][0] == 1024
    assert summary["aba_rnea_round_trip"] < 1e-9


def test_contact_bounce_example(launched):
    """The box slides at Coulomb's rate (the regularised friction's error is O(v_s^2 / v^2),
    1e-8 here) and the ball's bounces lose height by more than e^2 each (gravity acts during the
    contact) but not by much more."""
    summary = _summary(launched, "contact_bounce", "contact_bounce.png")
    assert abs(summary["slope_acceleration"] / summary["coulomb_acceleration"] - 1) < 1e-6
    ratios = np.divide(summary["apex_heights"][1:4], summary["apex_heights"][:3])
    assert np.all(ratios < summary["restitution"] ** 2) and np.all(ratios > 0.8 * summary["restitution"] ** 2), ratios


def test_batched_drops_example(launched):
    """Every ball of the batch leaves the floor as the closed-form damped oscillator says (to
    the adaptive solver's accuracy across the touch-down, where the damping force jumps), and
    a heavier ball bounces higher."""
    s = _summary(launched, "batched_drops", "batched_drops.png")
    assert s["balls"] == 64 and s["bounce_error"] < 1e-7, s
    assert 0.05 < s["apex_light"] < s["apex_heavy"] < 0.5, s


def test_ragdoll_fall_example(launched):
    """The MJCF ragdoll, knocked over by a thrown ball (a contact between bodies), lands on the
    floor: its energy never rises (1e-6 of it at most between saved states), no shape sinks
    2 cm into the floor or another body, and its fall is drawn and animated."""
    s = _summary(launched, "ragdoll_fall", ["ragdoll_fall.png", "ragdoll_fall.gif"])
    assert s["energy_rise"] <= 1e-6 * s["energy_start"] and s["energy_end"] < 0.8 * s["energy_start"], s
    # the bound is the compliant model's: a few mm under the impacts at k = 5e5 N/m (measured 9 and 3 mm)
    assert 0.0 < s["depth_floor"] < 0.02 and 0.0 < s["depth_bodies"] < 0.02 and s["pairs_hit"] > 0, s
    assert s["pelvis_end"] < 0.4, s  # from 0.921 m: toppled


def test_bounce_to_target_example(launched):
    """The gradient through a bounce equals central differences, and optax's L-BFGS finds the
    throw that reaches the target after one bounce (re-simulated independently)."""
    s = _summary(launched, "bounce_to_target", "bounce_to_target.png")
    # gradient against central differences (h = 1e-4 through adaptive solves at 1e-12, whose
    # truncation and step choices bound the agreement: measured 2.3e-6 relative); the miss is
    # the optimiser's stopping rule (squared miss 1e-10, i.e. 10 µm; measured 8.4e-6 m)
    assert s["gradient_error"] < 1e-5 and s["miss"] < 1e-4 and s["bounces"] == 1, s
    # a miss of 10 µm leaves the launch velocity that far from the reference's, amplified by the
    # bounce in its vertical component (measured 4.6e-5 m/s): an optimisation result
    assert s["velocity_error"] < 1e-4 and s["steps"] < 50, s


def test_quadruped_stand_example(launched):
    """The quadruped on its feet: base height steady and feet still once settled, the ground
    carrying its weight, and after a drop from 0.5 m it is back on its feet at its standing
    height. The bounds are what is left of the settling motion in the quick run's second half
    (measured: height range 1.3e-8 m, slip 1.1e-5 m, load 1.7e-9 relative, standing height
    reached to 2.6e-7 m, and to 2.6e-10 m after the drop), with a margin of 30-100x; the
    script's own checks are 1 mm."""
    s = _summary(launched, "quadruped_stand", "quadruped_stand.png")
    assert s["height_range"] <= 1e-6 and s["feet_slip"] <= 1e-4 and abs(s["load_error"]) <= 1e-6, s
    assert abs(s["final_height"] - s["standing_height"]) <= 1e-5, s
    assert abs(s["drop_final_height"] - s["standing_height"]) <= 1e-8 and s["drop_lowest_height"] > 0.3, s


def test_quadruped_stand_rigid_example(launched):
    """The same with rigid feet (time stepping): they do not sink, so the robot stands at the
    posture's height; the ground carries its weight. (The quick run's second half is still
    settling: 4e-8 m of height and 6e-5 m of slip; over the full run's second half 7e-13 and
    2e-10 m. The standing height is reached to 2.9e-7 m, and to 6e-11 m after the drop.)"""
    s = _summary(launched, "quadruped_stand_rigid", "quadruped_stand_rigid.png")
    assert s["height_range"] <= 1e-6 and s["feet_slip"] <= 2e-4 and abs(s["load_error"]) <= 1e-6, s
    assert abs(s["final_height"] - s["standing_height"]) <= 1e-5, s
    assert abs(s["drop_final_height"] - s["standing_height"]) <= 1e-8 and s["drop_lowest_height"] > 0.3, s


def test_pendulum_energy_example(launched):
    drifts = _summary(launched, "pendulum_energy", "pendulum_energy.png")["energy_drift"]
    assert len(drifts) == 2 and drifts[1] < drifts[0]  # first order: smaller dt, smaller drift


def test_compare_pinocchio_example(launched):
    summary = _summary(launched, "compare_pinocchio")
    assert summary["agreement"] and max(summary["max_relative_difference"].values()) < 1e-9, summary


def test_simulate_conservation_example(launched):
    summary = _summary(launched, "simulate_conservation", "simulate_conservation.png")
    drifts = [summary[k] for k in ("pendulum_energy_drift", "arm_energy_drift", "arm_momentum_drift")]
    assert max(drifts) < 1e-10, drifts


def test_maximal_coordinates_drift_example(launched):
    drift = _summary(launched, "maximal_coordinates_drift", "maximal_coordinates_drift.png")["hinge_separation"]
    assert len(drift) == 2 and drift[1] < drift[0]  # Baumgarte keeps the hinges together


def test_quickstart_notebook(launched):
    assert "NOTEBOOK OK" in _run(launched, "notebook")


def test_mjcf_notebook(launched):
    log = _run(launched, "notebook_mjcf")
    assert "NOTEBOOK OK" in log
    error = float(re.search(r"max \|qacc_mbjax - qacc_mujoco\| / max \|qacc_mujoco\| = (\S+)", log).group(1))
    assert error < 1e-9
    if HAS_MPL:
        assert (launched.workdir / "mjcf_quickstart.gif").stat().st_size > 0


def test_free_floating_examples(launched):
    """Wilde et al.'s examples: the loop turns the base, the CoM stays and momentum is conserved
    (asserted by the script); J* predicts the tool velocity; the plan reaches its target."""
    assert _summary(launched, "free_floating_loop", "free_floating_loop.png")["base_rotation_deg"] > 0.5
    summary = _summary(launched, "free_floating_tracking", "free_floating_tracking.png")
    assert summary["velocity_prediction_error"] <= 1e-8
    summary = _summary(launched, "free_floating_planning", "free_floating_planning.png")
    # an optimisation result, not a numerical tolerance: the planner's cost trades the base
    # attitude against the arm's effort, and --quick runs few optax steps (1.8e-4 rad seen)
    assert summary["simulated_attitude_error"] < 1e-3


def test_kane_satellite_example(launched):
    """Sayers' satellite: the servos reach their targets and momentum is conserved."""
    summary = _summary(launched, "kane_satellite", "kane_satellite.png")
    assert (round(summary["turntable_deg"], 1), round(summary["camera_tilt_deg"], 1)) == (90.0, 30.0), summary
    drifts = [summary["linear_momentum_drift"], summary["angular_momentum_drift"]]
    assert max(drifts) < 1e-9, drifts


def test_free_floating_notebook(launched):
    assert "NOTEBOOK OK" in _run(launched, "notebook_free_floating")


def test_batched_simulation_notebook(launched):
    """The notebook asserts energy conservation in the batch, the exact-model controller and
    its gradient against a central difference."""
    log = _run(launched, "notebook_batched")
    assert "NOTEBOOK OK" in log
    assert float(re.search(r"largest difference from the unsharded run: (\S+)", log).group(1)) <= 1e-12


def test_contacts_notebook(launched):
    """The notebook asserts its closed forms: a bounce's restitution (1e-9), a block on a slope
    (1e-13 m), the standing quadruped (1e-9), a batch of drops, and a gradient through contact
    against central differences (1e-6)."""
    log = _run(launched, "notebook_contacts")
    assert "NOTEBOOK OK" in log and "64 drops" in log


def test_identify_panda_example(launched):
    """Identification from Pinocchio data: noise-free base parameters come back, every body of
    the consistent fit is real, and it predicts held-out torques better than least squares."""
    summary = _summary(launched, "identify_panda", "identify_panda.png")
    assert summary["noise_free_error"] <= 1e-8
    assert summary["every_body_real"]
    held_out = summary["held_out_rms_error"]
    assert held_out["physically consistent"] < held_out["least squares"], held_out


def test_identify_panda_example_float32(launched):
    """The same identification in float32 (``--float32``: jax_enable_x64 off, so the model, the
    data and every computation are float32), beside the float64 run."""
    summary = _summary(launched, "identify_panda_float32", "identify_panda_float32.png")
    assert summary["dtype"] == "float32"
    assert (summary["base_parameters"], summary["parameters"]) == (62, 91)  # as in float64
    cond = summary["condition_number"][1]  # of the optimised trajectory
    # noise-free least squares: the relative error is at most cond(W_b) times the relative
    # error of W and tau, ~10 units of float32 roundoff (1.2e-7) in the regressor's entries:
    # 7e-5 at cond 57; 4e-7 to 2e-6 seen (float64: 1.4e-15)
    err = summary["noise_free_error"]
    assert err <= 10 * cond * np.finfo(np.float32).eps, (err, cond)
    assert summary["every_body_real"]
    # with 1 % noise the held-out torques are as good as the noise allows, not as float32
    # (1e-6 of 14 N m): an unbiased fit errs by about sigma sqrt(rank / rows) = 0.01 * 13.8 N m *
    # sqrt(62 / 700) = 0.04 N m; float32: 0.019-0.021 and 0.026-0.028, float64 (other random
    # draws): 0.018 and 0.016
    noise_limited = 0.01 * summary["true_rms"] * np.sqrt(62 / 700)
    for name in ("least squares", "physically consistent"):
        held_out = summary["held_out_rms_error"][name]
        assert held_out <= 2 * noise_limited, (name, held_out, noise_limited)


def test_identification_notebook(launched):
    log = _run(launched, "notebook_identification")
    assert "NOTEBOOK OK" in log and "every body real: True" in log


def test_readme_code(launched):
    assert "README OK" in _run(launched, "readme")


def test_notebook_mirrors_example():
    """The notebook runs the same calls as examples/quickstart.py."""
    nb = json.loads((ROOT / "notebooks" / "quickstart.ipynb").read_text(encoding="utf-8"))
    code = "".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code")
    script = (ROOT / "examples" / "quickstart.py").read_text(encoding="utf-8")
    for call in ("load_example_robot", "rnea", "crba", "aba", "frame_jacobian", "jax.vmap", "jax.grad"):
        assert call in code and call in script, call


def test_readme_set_up_commands():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    for command in ("pip install -e . && mbjax demo", 'pip install -e ".[test]" && python -m pytest -q'):
        assert command in readme and command in ci, command


# ---------------------------------------------------------------------------- bundled models
@pytest.mark.parametrize("name, nq, nv, mass", [("acrobot", 2, 2, 2.0), ("double_pendulum", 2, 2, 1.8),
                                                  ("quadruped", 15, 14, 11.8), ("space_robot", 14, 13, 172.5)])
def test_bundled_models(name, nq, nv, mass):
    model = mbjax.load_bundled(name)
    assert (model.nq, model.nv) == (nq, nv)
    assert float(model.mass.sum()) == pytest.approx(mass)
    assert mbjax.bundled_model_path(name).is_file()
    same = mbjax.load_urdf(mbjax.bundled_model_path(name), floating_base=mbjax.robots.BUNDLED_MODELS[name])
    assert same.joint_names == model.joint_names


@pytest.mark.skipif(not HAS_PIN, reason="Pinocchio (pip install pin, in the test extra) is the reference")
@pytest.mark.parametrize("name", ["acrobot", "double_pendulum", "quadruped", "space_robot"])
def test_bundled_models_match_pinocchio(name):
    import jax
    import pinocchio as pin

    floating = mbjax.robots.BUNDLED_MODELS[name]
    path = str(mbjax.bundled_model_path(name))
    pm = pin.buildModelFromUrdf(path, pin.JointModelFreeFlyer()) if floating else pin.buildModelFromUrdf(path)
    pd = pm.createData()
    model = mbjax.load_bundled(name, joint_order="pinocchio")
    q = np.asarray(mbjax.random_configuration(model, jax.random.PRNGKey(3)))
    qp = q.copy()
    if floating:
        qp[3:7] = q[[4, 5, 6, 3]]
    M = pin.crba(pm, pd, qp)
    M = np.triu(M) + np.triu(M, 1).T
    np.testing.assert_allclose(np.asarray(mbjax.crba(model, q)), M, rtol=1e-12, atol=1e-12)
    assert pin.computeTotalMass(pm) == pytest.approx(float(model.mass.sum()), rel=1e-12)


def test_unknown_bundled_model():
    with pytest.raises(KeyError, match="quadruped"):
        mbjax.load_bundled("nope")


# ---------------------------------------------------------------------------- command line
def test_cli_demo(capsys):
    assert cli.main(["demo", "--duration", "0.2", "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "nq = 2, nv = 2" in out and "200 steps" in out
    initial = float(re.search(r"initial (\S+) J", out).group(1))
    final = float(re.search(r"final +(\S+) J", out).group(1))
    assert abs(final - initial) < 1e-9 * abs(initial)  # passive: Tsit5's error at dt = 1 ms
    assert float(re.search(r"relative drift (\S+)", out).group(1)) < 1e-9
    assert "final CoM" in out and "compilation included" in out


def test_cli_demo_quadruped_stands_on_the_floor(capsys):
    """``mbjax demo --model quadruped``: dropped 2 cm onto the floor, it stands on its rigid feet
    at its posture's height, still, and the ground carries its weight."""
    assert cli.main(["demo", "--model", "quadruped", "--duration", "0.6", "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "rigid contacts at 4 points (FL_FOOT, FR_FOOT, HL_FOOT, HR_FOOT)" in out and "600 steps" in out
    height, posture = (float(x) for x in re.search(r"base height (\S+) m \(posture (\S+) m\)", out).groups())
    assert abs(height - posture) < 1e-9  # measured 0
    assert float(re.search(r"height range (\S+) m", out).group(1)) < 1e-9  # measured 0
    assert float(re.search(r"feet slip (\S+) m", out).group(1)) < 1e-9  # measured 7e-13
    assert float(re.search(r"weight - 1 (\S+)", out).group(1)) < 1e-9  # measured 1e-13
    assert "does not stand still" not in out


def test_cli_standing_run_records_on_one_stride_across_chunks(monkeypatch):
    """The standing run's records lie on one global stride across its compiled chunks (here 3
    chunks of 40 steps, every 6th step kept): their base heights equal one uninterrupted rollout's."""
    import jax.numpy as jnp

    from mbjax import contact

    monkeypatch.setattr(cli, "CHUNK_STEPS", 40)
    model = mbjax.load_bundled("quadruped")
    run = cli.standing_run(model, 0.12, 1e-3, max_records=20, progress=False)
    assert run["steps"] == 120 and len(run["t"]) == 21
    np.testing.assert_allclose(run["t"], 6e-3 * np.arange(21), atol=1e-15)
    feet = contact.RigidContact(contact.frame_points(model, run["feet_names"]), contact.Plane.horizontal(0.0),
                                cli.FLOOR_FRICTION)
    kp, kd = run["gains"]
    posture = mbjax.neutral(model).at[2].set(run["standing_height"])
    on = jnp.ones(model.nv).at[:6].set(0.0)
    pd = mbjax.PD(model, kp * on, kd * on, mbjax.Setpoint(posture, jnp.zeros(model.nv)))
    traj, _ = contact.rollout(model, contact.TimeStepping(feet, iterations=cli.SWEEPS), posture.at[2].add(cli.DROP_HEIGHT),
                              jnp.zeros(model.nv), pd, 1e-3, 120)
    np.testing.assert_allclose(run["height"], np.asarray(traj.q[::6, 2]), atol=1e-12)


def test_cli_simulation_conserves_energy():
    """Passive motion of the floating quadruped (free joint integrated on SE(3))."""
    model = mbjax.load_bundled("quadruped")
    q0, qd0 = cli.initial_state(model, seed=1)
    run = cli.passive_run(model, q0, qd0, 0.2, 1e-3, progress=False)
    E = run["kinetic"] + run["potential"]
    assert run["t"][-1] == pytest.approx(0.2) and run["q"].shape == (201, model.nq)
    assert np.abs(E - E[0]).max() < 1e-9 * run["kinetic"].max()
    quat = run["q"][:, 3:7]
    np.testing.assert_allclose(np.linalg.norm(quat, axis=1), 1.0, atol=1e-12)
    # free fall: the centre of mass follows c0 + v0 t + g t^2 / 2
    com0, t = run["com"][0], run["t"][-1]
    vcom0 = np.asarray(mbjax.center_of_mass_jacobian(model, q0)) @ qd0
    expected = com0 + vcom0 * t + 0.5 * np.asarray(model.gravity) * t**2
    np.testing.assert_allclose(run["com"][-1], expected, atol=1e-9)  # Tsit5 at dt = 1 ms: integration error only


def test_cli_info(capsys):
    assert cli.main(["info", str(mbjax.bundled_model_path("quadruped")), "--floating-base"]) == 0
    out = capsys.readouterr().out
    assert "nq = 15, nv = 14" in out
    for token in ("root_joint", "free", "FL_HFE", "revolute", "7:8", "[-1.8, 1.8]", "FR_FOOT"):
        assert token in out, token


def test_cli_errors(capsys, tmp_path):
    assert cli.main(["info", "no_such_model"]) == 1
    assert "unknown model" in capsys.readouterr().err
    mimic = tmp_path / "mimic.urdf"
    mimic.write_text(
        '<robot name="m"><link name="a"/><link name="b"><inertial><mass value="1"/>'
        '<inertia ixx="1" ixy="0" ixz="0" iyy="1" iyz="0" izz="1"/></inertial></link>'
        '<link name="c"><inertial><mass value="1"/><inertia ixx="1" ixy="0" ixz="0" iyy="1" iyz="0" izz="1"/>'
        '</inertial></link>'
        '<joint name="j1" type="continuous"><parent link="a"/><child link="b"/></joint>'
        '<joint name="j2" type="continuous"><parent link="b"/><child link="c"/><mimic joint="j1"/></joint></robot>'
    )
    assert cli.main(["info", str(mimic)]) == 1
    assert "--mimic independent" in capsys.readouterr().err
    assert cli.main(["info", str(mimic), "--mimic", "independent"]) == 0
    assert cli.main(["demo", "--dt", "-1"]) == 2


def test_cli_plot(capsys, tmp_path):
    out = tmp_path / "run.png"
    rc = cli.main(["demo", "--duration", "0.05", "--quiet", "--plot", str(out)])
    if HAS_MPL:
        assert rc == 0 and out.stat().st_size > 0
    else:
        assert rc == 1 and not out.exists()
        assert "pip install matplotlib" in capsys.readouterr().err


def test_python_dash_m_mbjax():
    proc = subprocess.run([sys.executable, "-m", "mbjax", "--help"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and "demo" in proc.stdout and "info" in proc.stdout


def test_huang_examples(launched):
    summary = _summary(launched, "huang_double_pendulum", "huang_double_pendulum.png")
    assert summary["hinge_force_difference"] < 1e-6
    summary = _summary(launched, "stewart_platform", "stewart_platform.png")
    assert summary["unknown_reactions"] == 39
    paper = summary["runs"]["huang, dt = 0.002 (paper)"]
    assert paper["completed"] and paper["end"] == summary["duration"] == 0.3, summary["runs"]


def test_closed_chain_examples(launched):
    """Loop closures: drift stays at round-off, the slider follows exact kinematics, the change
    point is passed with a regularised solver, and redundant rows give the independent motion."""
    assert max(_summary(launched, "four_bar", "four_bar.png")["max_residual"].values()) < 1e-8
    assert _summary(launched, "slider_crank", "slider_crank.png")["kinematics_error"] < 1e-8
    assert _summary(launched, "four_bar_singular", "four_bar_singular.png")["theta_error"]["damped"] < 1e-6
    difference = _summary(launched, "redundant_loop", "redundant_loop.png")["difference_from_independent"]
    assert max(difference.values()) < 1e-8, difference


#: the trajectory-optimisation examples, which assert their own results too (an independent
#: re-simulation at rtol = atol = 1e-12 ends within 1e-3 of the goal, inside the limits, and
#: convergence). Name -> the summary's errors at the horizon.
TRAJOPT_EXAMPLES = {"swing_up": ("position_error", "velocity_error"),
                    "free_floating_reorientation": ("attitude_error", "velocity_error"),
                    "free_floating_reorientation_lm": ("attitude_error", "velocity_error"),
                    "panda_point_to_point": ("position_error", "velocity_error"),
                    "panda_point_to_point_fddp": ("position_error", "velocity_error")}


@pytest.mark.parametrize("name", TRAJOPT_EXAMPLES)
def test_trajectory_optimisation_examples(launched, name):
    summary = _summary(launched, name, f"{name}.png")
    errors = [summary[key] for key in TRAJOPT_EXAMPLES[name]]
    # the accuracy target of an open-loop re-simulation of an optimised, partly chaotic motion
    # (issue 21: 1e-3 rad and rad/s), not a numerical tolerance
    assert max(errors) <= 1e-3, errors


def test_trajectory_optimisation_notebook(launched):
    """The notebook asserts convergence and its re-simulation."""
    assert "NOTEBOOK OK" in _run(launched, "notebook_trajectory_optimisation")


def test_panda_point_to_point_float32(launched):
    """``--float32`` (jax_enable_x64 off): converged to the float32 feasibility tolerance (1000
    units of roundoff, 1.2e-4; the script asserts convergence, the limits and the goal).
    The float32 re-simulation then ends further from the goal than the optimiser's own rollout:
    float32 accelerations are ~10 units of roundoff off (2e-4 rad/s^2 at 150 rad/s^2), the
    re-simulation's adaptive steps run at rtol 1.2e-5, and this open-loop motion doubles such
    differences every 0.125 s (float32 and float64 rollouts of the same torques: 4e-6 rad/s
    apart at 0.5 s, 1e-4 at 1 s). Seen: up to 9e-5 rad and 1.0e-3 rad/s, depending on the
    rounding of the dynamics kernels, within the example's float32 3e-3 (rtol x 2^8); float64:
    3e-7 and 2e-6 against 1e-3."""
    summary32 = _summary(launched, "panda_point_to_point_float32", "panda_point_to_point_float32.png")
    summary64 = _summary(launched, "panda_point_to_point", "panda_point_to_point.png")
    assert summary32["dtype"] == "float32" and summary32["converged"]
    errors32, errors64 = ([s["position_error"], s["velocity_error"]] for s in (summary32, summary64))
    assert max(errors32) <= 3e-3 and max(errors64) <= 1e-5, (errors32, errors64)


def test_every_script_is_checked():
    """No script is launched without a test waiting for it (the fixture kills it unchecked)."""
    source = Path(__file__).read_text(encoding="utf-8")
    checked = set(re.findall(r'_(?:run|summary)\(launched, "(\w+)"', source)) | set(TRAJOPT_EXAMPLES)
    assert not set(SCRIPTS) - checked, set(SCRIPTS) - checked


def test_stewart_trajectory_example(launched):
    """Rest-to-rest motion of the closed-chain Stewart platform: the independent re-simulation
    reaches the goal pose at rest and the loops stay closed (the script asserts convergence)."""
    summary = _summary(launched, "stewart_trajectory", "stewart_trajectory.png")
    pose, velocity, residual = (summary[k] for k in ("pose_error", "velocity_error", "max_loop_residual"))
    # pose and velocity: the open-loop re-simulation's accuracy target (as for the other trajectory
    # examples), not a numerical tolerance; the loop residual is held to 1e-9
    assert pose <= 1e-3 and velocity <= 1e-3 and residual <= 1e-9, (pose, velocity, residual)
