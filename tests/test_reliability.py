"""Issue 19: no crash, hang or silent NaN on the inputs users actually give."""

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mbjax
from mbjax import constraints


@pytest.fixture(scope="module")
def pendulum():
    return mbjax.load_bundled("double_pendulum")


# ------------------------------------------------------------------ 1. mixed float types
def test_mixed_float_inputs_are_promoted_to_the_model_dtype(pendulum):
    q, qd = jnp.array([0.3, 0.2]), jnp.array([0.5, -1.0])
    tau32 = np.array([0.1, -0.2], np.float32)
    expected = mbjax.aba(pendulum, q, qd, tau32.astype(np.float64))
    for method in ("aba", "crba", "kkt"):
        out = mbjax.forward_dynamics(pendulum, q, qd, tau32, method=method)
        assert out.dtype == jnp.float64
        np.testing.assert_allclose(out, expected, rtol=1e-10)
    assert mbjax.aba(pendulum, q.astype(np.float32), qd, tau32).dtype == jnp.float64
    state = jax.tree_util.tree_map(lambda x: x.astype(np.float32), mbjax.maximal_state(pendulum, q, qd))
    assert mbjax.maximal_dynamics(pendulum, state, tau32).qdd.dtype == jnp.float64
    # a float32 model rounds float64 inputs to float32
    m32 = pendulum.astype(jnp.float32)
    out = mbjax.aba(m32, q, qd, tau32.astype(np.float64))
    assert out.dtype == jnp.float32
    # float32 arithmetic: about 8 units of roundoff (1.2e-7) seen on this two-link chain
    np.testing.assert_allclose(out, expected, rtol=1e-5)


def test_mixed_float_simulate_and_assemble(pendulum):
    traj = mbjax.simulate(pendulum, jnp.array([0.3, 0.2]), np.zeros(2, np.float32), 0.0, 0.1)
    assert traj.qd.dtype == jnp.float64 and np.all(np.isfinite(traj.q))
    model, closures = constraints.four_bar()
    q = mbjax.assemble(model, closures, np.array([1.0, -0.6, 1.8], np.float32))
    assert q.dtype == jnp.float64
    assert np.max(np.abs(mbjax.loop_residual(model, closures, q))) < 1e-12


# ------------------------------------------------------------------ 6. smaller ones
_URDF = """<robot name="r"><link name="base"/>
<link name="arm"><inertial><mass value="1"/><inertia ixx="0.1" ixy="0" ixz="0" iyy="0.1" iyz="0" izz="0.1"/></inertial></link>
<joint name="shoulder" type="{type}"><parent link="base"/><child link="arm"/><axis xyz="{axis}"/>{extra}</joint>
</robot>"""


@pytest.mark.parametrize(
    "type_, axis, extra, match",
    [
        ("revolute", "0 0 1", '<limit lower="abc" upper="1" effort="1" velocity="1"/>', "joint 'shoulder'.*lower='abc'"),
        ("revolute", "0 0 1", '<limit lower="0" upper="nan" effort="1" velocity="1"/>', "joint 'shoulder'.*upper='nan'"),
        ("continuous", "0 0 1", '<limit effort="x" velocity="1"/>', "joint 'shoulder'.*effort='x'"),
        ("revolute", "0 0 1", '<dynamics damping="?"/><limit lower="0" upper="1"/>', "joint 'shoulder'.*damping='\\?'"),
        ("planar", "0 0 0", "", "joint 'shoulder'.*not a direction"),
        ("prismatic", "0 0 0", '<limit lower="0" upper="1"/>', "joint 'shoulder'.*not a direction"),
        ("planar", "0 0 inf", "", "joint 'shoulder'.*not a direction"),
    ],
)
def test_urdf_bad_joint_numbers_name_the_joint(type_, axis, extra, match):
    with pytest.raises(mbjax.URDFError, match=match):
        mbjax.load_urdf(_URDF.format(type=type_, axis=axis, extra=extra))


def test_load_mjcf_refuses_a_urdf():
    path = mbjax.bundled_model_path("double_pendulum")
    with pytest.raises(mbjax.MJCFError, match="is a URDF.*mbjax.load_urdf"):
        mbjax.load_mjcf(path)
    with pytest.raises(mbjax.MJCFError, match="is a URDF"):
        mbjax.load_mjcf(open(path).read())


def test_simulate_refuses_tau_of_the_wrong_length(pendulum):
    q0, qd0 = jnp.array([0.3, 0.2]), jnp.zeros(2)
    for tau in (jnp.ones(1), jnp.ones(3), 1.0):
        with pytest.raises(ValueError, match=r"tau has shape .*expects \(2,\)"):
            mbjax.simulate(pendulum, q0, qd0, 0.0, 0.1, tau=tau)
    with pytest.raises(ValueError, match="a controller tau"):
        mbjax.simulate(pendulum, q0, qd0, 0.0, 0.1, tau=lambda t, q, qd: jnp.ones(1))


def test_assemble_says_when_the_loop_cannot_close():
    model, closures = constraints.four_bar(ground=5.0)  # 0.4 + 1.0 + 0.8 < 5: no closed configuration
    with pytest.raises(Exception, match="loops do not close.*residual between 1e\\+00 and 1e\\+01.*link lengths"):
        jax.block_until_ready(mbjax.assemble(model, closures, jnp.array([0.0, 0.0, 3.1])))
    model, closures = constraints.four_bar()
    with pytest.raises(Exception, match="still between .* and falling: raise max_steps"):
        jax.block_until_ready(mbjax.assemble(model, closures, jnp.array([1.0, -0.6, 1.8]), max_steps=1))


def test_negative_gains_and_tolerances_are_refused(pendulum):
    model, closures = constraints.four_bar()
    q = mbjax.assemble(model, closures, jnp.array([1.0, -0.6, 1.8]))
    z = jnp.zeros(3)
    cfd = mbjax.constrained_forward_dynamics
    with pytest.raises(ValueError, match="Baumgarte gains alpha and beta must be >= 0"):
        cfd(model, closures, q, z, z, alpha=-1.0)
    with pytest.raises(Exception, match="Baumgarte gains alpha and beta must be >= 0"):
        jax.block_until_ready(cfd(model, closures, q, z, z, beta=jnp.array(-1.0)))
    with pytest.raises(ValueError, match="Baumgarte gains"):
        mbjax.maximal_dynamics(pendulum, mbjax.maximal_state(pendulum, jnp.zeros(2), jnp.zeros(2)), jnp.zeros(2),
                               alpha=-2.0)
    with pytest.raises(ValueError, match="rcond"):
        cfd(model, closures, q, z, z, method="svd", rcond=-1e-3)
    with pytest.raises(ValueError, match="assemble: tol must be >= 0"):
        mbjax.assemble(model, closures, q, tol=-1e-9)
    with pytest.raises(ValueError, match="simulate: atol must be >= 0"):
        mbjax.simulate(pendulum, jnp.zeros(2), jnp.zeros(2), 0.0, 0.1, atol=-1e-6)
    with pytest.raises(ValueError, match="simulate: rtol must be >= 0"):
        mbjax.simulate(pendulum, jnp.zeros(2), jnp.zeros(2), 0.0, 0.1, rtol=float("nan"))


def test_jacfwd_of_simulate_names_forward_mode(pendulum):
    import diffrax

    def final(q0, **kwargs):
        return mbjax.simulate(pendulum, q0, jnp.zeros(2), 0.0, 0.05, saveat=[0.05], **kwargs).q[-1]

    q0 = jnp.array([0.3, 0.2])
    with pytest.raises(TypeError, match=r"adjoint=diffrax.ForwardMode\(\)"):
        jax.jacfwd(final)(q0)
    J = jax.jacfwd(lambda q: final(q, adjoint=diffrax.ForwardMode()))(q0)
    assert J.shape == (2, 2) and np.all(np.isfinite(J))


# ------------------------------------------------------------------ 5. command-line options
@pytest.mark.parametrize(
    "argv, match",
    [
        (["demo", "--duration", "nan"], "--duration: must be a finite number in"),
        (["demo", "--duration", "inf"], "--duration: must be a finite number in"),
        (["demo", "--duration", "-1"], "--duration: must be a finite number in"),
        (["demo", "--duration", "abc"], "--duration: 'abc' is not a number"),
        (["demo", "--dt", "0"], "--dt: must be a finite number in"),
        (["demo", "--dt", "10", "--duration", "1"], "--dt: must be a finite number in"),
        (["demo", "--dt", "0.5", "--duration", "0.1"], "--dt 0.5 is longer than --duration 0.1"),
        (["demo", "--dt", "1e-9"], "2e\\+09 steps, more than 1e\\+07"),
        (["demo", "--damping", "-5"], "--damping: must be a finite number in \\[0"),
        (["demo", "--amplitude", "nan"], "--amplitude: must be a finite number"),
        (["demo", "--seed", "-1"], "--seed: must be a finite number in \\[0"),
        (["demo", "--seed", "1.5"], "--seed: '1.5' is not an integer"),
        (["simulate", "double_pendulum", "--duration", "nan"], "--duration: must be a finite number"),
        (["simulate", "double_pendulum", "--method", "xyz"], "--method: invalid choice: 'xyz'"),
        (["simulate", "double_pendulum", "--rtol", "0"], "--rtol: must be a finite number in \\[1e-14, 0.1\\]"),
        (["simulate", "double_pendulum", "--amplitude", "inf"], "--amplitude: must be a finite number"),
    ],
)
def test_cli_refuses_bad_options_at_parse_time(argv, match, capsys):
    from mbjax import cli

    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert re.search(match, err), err


def test_cli_methods_are_forward_dynamics_methods(capsys):
    from mbjax import cli
    from mbjax.methods import METHODS

    assert set(cli.METHODS) == set(METHODS)
    # a method that does not apply to the model: its message, exit 1, no traceback
    assert cli.main(["simulate", "double_pendulum", "--method", "momentum", "--duration", "0.01", "--quiet"]) == 1
    assert "is not free-floating" in capsys.readouterr().err


# ------------------------------------------------------------------ 4. singular mass matrices, f_ext
def _wheel(check="raise", **wheel):
    b = mbjax.ModelBuilder("cart", inertia_check=check)
    b.add_body("chassis", joint="prismatic", axis=(1, 0, 0), mass=5.0, inertia=np.eye(3))
    b.add_body("wheel", parent="chassis", joint="revolute", axis=(0, 1, 0), translation=(0.2, 0, 0), **wheel)
    return b.build()


@pytest.mark.parametrize(
    "wheel",
    [
        dict(mass=1.0, com=(0, 0.05, 0)),  # all-zero inertia, centre of mass on the axis
        dict(mass=1.0, inertia=np.diag([0.1, 0.0, 0.1])),  # inertia, but none about the axis
        dict(),  # massless leaf
    ],
)
def test_joint_that_moves_no_inertia_is_refused_at_load(wheel):
    with pytest.raises(ValueError, match="joint 'wheel' \\(revolute\\) moves no inertia.*mass matrix is singular"):
        _wheel(**wheel)


def test_point_mass_on_a_spherical_joint_is_refused():
    b = mbjax.ModelBuilder()
    b.add_body("ball", joint="spherical", mass=1.0)
    with pytest.raises(ValueError, match="joint 'ball' \\(spherical\\) moves no inertia"):
        b.build()


def test_joints_that_move_inertia_load():
    b = mbjax.ModelBuilder()  # a massless link carrying a mass
    b.add_body("link", joint="revolute", axis=(0, 1, 0))
    b.add_body("arm", parent="link", joint="revolute", axis=(0, 1, 0), translation=(0, 0, -1), mass=1.0,
               com=(0, 0, -0.5))
    models = [_wheel(mass=1.0, com=(0, 0.05, 0.01)),  # mass off the axis
              _wheel(mass=1.0, armature=0.01),  # rotor inertia
              b.build()]
    for model in models:  # accepted because they are not singular: M is positive definite
        q = mbjax.integrate(model, mbjax.neutral(model), jnp.full(model.nv, 0.3))  # the arm bent, not straight
        eig = np.linalg.eigvalsh(np.asarray(mbjax.crba(model, q)))
        assert eig.min() > 1e-6 * eig.max(), (model.name, eig)


def test_singular_mass_matrix_raises_in_forward_dynamics():
    with pytest.warns(UserWarning, match="moves no inertia"):
        model = _wheel("warn", mass=1.0, com=(0, 0.05, 0))
    q, z = jnp.zeros(2), jnp.zeros(2)
    for method in ("aba", "crba"):
        with pytest.raises(Exception, match="mass matrix is singular"):
            jax.block_until_ready(mbjax.forward_dynamics(model, q, z, z, method=method))


def test_non_finite_external_forces_are_refused(pendulum):
    q, z = jnp.array([0.3, 0.2]), jnp.zeros(2)
    f = jnp.zeros((pendulum.nbodies, 6)).at[1, 2].set(jnp.nan)
    with pytest.raises(Exception, match="f_ext contains NaN or infinite values"):
        jax.block_until_ready(mbjax.forward_dynamics(pendulum, q, z, z, f_ext=f))
    with pytest.raises(Exception, match="f_ext contains NaN or infinite values"):
        jax.block_until_ready(mbjax.forward_dynamics(pendulum, q, z, z, f_ext=f.at[1, 2].set(jnp.inf), method="kkt"))
    with pytest.raises(Exception, match="f_ext contains NaN"):
        jax.block_until_ready(mbjax.maximal_dynamics(pendulum, mbjax.maximal_state(pendulum, q, z), z, f_ext=f))
    model, closures = constraints.four_bar()
    qc = mbjax.assemble(model, closures, jnp.array([1.0, -0.6, 1.8]))
    with pytest.raises(Exception, match="f_ext contains NaN"):
        fc = jnp.full((model.nbodies, 6), jnp.nan)
        jax.block_until_ready(mbjax.constrained_forward_dynamics(model, closures, qc, jnp.zeros(3), jnp.zeros(3), f_ext=fc))
    with pytest.raises(ValueError, match=r"f_ext has shape \(6,\)"):
        mbjax.forward_dynamics(pendulum, q, z, z, f_ext=jnp.zeros(6))


# ------------------------------------------------------------------ 2. dtype-aware default tolerances
def test_float32_defaults_follow_the_dtype(pendulum):
    from mbjax.checks import default_tolerance

    assert default_tolerance(jnp.float64, 1e-8, 1000) == 1e-8
    assert default_tolerance(jnp.float32, 1e-8, 1000) == pytest.approx(1000 * np.finfo(np.float32).eps, rel=1e-12)
    m32 = pendulum.astype(jnp.float32)
    q0, qd0 = jnp.array([0.3, 0.2]), jnp.zeros(2)
    traj = mbjax.simulate(m32, q0, qd0, 0.0, 1.0, max_steps=1000)
    assert traj.q.dtype == jnp.float32 and int(traj.stats["num_steps"]) < 500
    # float32 rounding accumulated over the run (5e-7 seen); the float32 step tolerance is 1.2e-4
    np.testing.assert_allclose(traj.q, mbjax.simulate(pendulum, q0, qd0, 0.0, 1.0).q, atol=1e-5)

    model, closures = constraints.four_bar()
    model = model.astype(jnp.float32)
    closures = jax.tree_util.tree_map(lambda x: x.astype(jnp.float32) if jnp.issubdtype(x.dtype, jnp.floating) else x,
                                      closures)
    q = mbjax.assemble(model, closures, jnp.array([1.0, -0.6, 1.8]))
    assert q.dtype == jnp.float32
    assert np.max(np.abs(mbjax.loop_residual(model, closures, q))) <= default_tolerance(jnp.float32, 1e-12, 100)


# ------------------------------------------------------------------ 2. float32 identification and trajectory optimisation
def _rotated_arm():
    """Four revolute joints whose frames turn by -+pi/2 about x, as panda's do: in float32 the
    cancellations that zero some regressor columns leave ~1e-8 of the largest there (1e-17 in
    float64)."""
    def rx(a):
        return np.array([[1.0, 0.0, 0.0], [0.0, np.cos(a), -np.sin(a)], [0.0, np.sin(a), np.cos(a)]])

    b, parent = mbjax.ModelBuilder("arm"), None
    for i, (a, t) in enumerate(zip((0.0, -np.pi / 2, np.pi / 2, np.pi / 2),
                                   ((0, 0, 0.333), (0, 0, 0), (0, -0.316, 0), (0.0825, 0, 0)))):
        b.add_body(f"link{i}", parent=parent, joint="revolute", rotation=rx(a), translation=t, mass=1.0 + i,
                   com=(0.01 * i, -0.02, 0.03), inertia=np.diag([0.021, 0.031, 0.026]), lower=-2.0, upper=2.0)
        parent = f"link{i}"
    return b.build()


def test_float32_base_parameters_and_excitation_condition():
    from mbjax import identify

    model = _rotated_arm()
    m32 = model.astype(jnp.float32)
    layout = identify.ParameterLayout.of(model, armature=True, viscous=True, coulomb=True)
    rng = np.random.default_rng(0)
    q = jax.vmap(lambda k: mbjax.random_configuration(model, k))(jax.random.split(jax.random.PRNGKey(0), 100))
    qd, qdd = rng.normal(size=(2, 100, model.nv))
    W64 = identify.stacked_regressor(model, q, qd, qdd, layout)
    W32 = identify.stacked_regressor(m32, q, qd, qdd, layout)
    assert W32.dtype == jnp.float32
    base = identify.base_parameters(W64)
    # the float64 zero-column threshold (1e-12) counted two rounded zero columns as acting: 34
    assert base.rank == identify.base_parameters(W32).rank == 32

    # cond(W_b) of an exciting trajectory, float32 against float64 on the same (float32) inputs:
    # from the R of W = QR the error is at most ~eps cond (1.6e-4 here; 2e-6 seen); the normal
    # equations W^T W were 9 % off (their error is eps cond^2)
    traj = identify.FourierTrajectory.random(jax.random.PRNGKey(1), jnp.zeros(model.nv, jnp.float32), 5, 10.0,
                                             velocity=0.5)
    ts = jnp.linspace(0.0, 10.0, 100, endpoint=False, dtype=jnp.float32)
    c32 = identify.condition_number(m32, traj, ts, base, layout)
    as64 = lambda x: jax.tree_util.tree_map(lambda a: a.astype(jnp.float64), x)  # noqa: E731
    c64 = float(identify.condition_number(m32.astype(jnp.float64), as64(traj), as64(ts), base, layout))
    assert c32.dtype == jnp.float32 and c64 > 1e3
    assert abs(float(c32) / c64 - 1) <= c64 * np.finfo(np.float32).eps, (float(c32), c64)


def test_float32_nearest_consistent_bodies_have_a_log_cholesky_factor():
    """A floor of 1e-10 trace on the pseudo-inertia's eigenvalues is below float32's rounding of
    J = V diag(lam) V^T: 112 of 200 repaired bodies had no Cholesky factor (NaN)."""
    from mbjax import identify

    rng = np.random.default_rng(0)
    pis = []
    for _ in range(50):  # triangle inequality broken: I_xx > I_yy + I_zz
        m, c = rng.uniform(0.5, 5.0), rng.normal(size=3) * 0.1
        Ic = np.diag(rng.uniform(0.01, 0.1, 3))
        Ic[0, 0] = Ic[1, 1] + Ic[2, 2] + rng.uniform(0.0, 0.05)
        IO = Ic + m * (c @ c * np.eye(3) - np.outer(c, c))
        pis.append([m, *(m * c), IO[0, 0], IO[0, 1], IO[1, 1], IO[0, 2], IO[1, 2], IO[2, 2]])
    pi = jnp.asarray(pis, jnp.float32)
    assert not bool(jnp.any(identify.is_physically_consistent(pi)))
    fixed = identify.nearest_consistent(pi)
    assert fixed.dtype == jnp.float32 and bool(jnp.all(identify.is_physically_consistent(fixed)))
    assert bool(jnp.all(jnp.isfinite(identify.log_cholesky_from_parameters(fixed))))


def _acrobot_problem():
    import diffrax

    from mbjax import trajopt

    model = mbjax.load_bundled("acrobot")  # in the current default float
    return trajopt.TrajectoryProblem(model, jnp.zeros(2), jnp.zeros(2), 1.0, 5, substeps=4, solver=diffrax.Dopri8(),
                                     costs=[trajopt.Effort(weight=1e-2)],
                                     constraints=[trajopt.TerminalState(jnp.array([0.8, -0.5]), jnp.zeros(2)),
                                                  trajopt.TorqueLimits(-12.0, 12.0)])


#: run in a fresh process with x64 off: toggling ``jax.enable_x64`` inside a process leaves
#: traces behind that a later float64 program in the same process fails to lower with
#: (a float32 constant in a float64 broadcast; seen with tests/test_trajopt.py after this)
FLOAT32_TRAJOPT = """
import sys
import jax
import jax.numpy as jnp
import numpy as np
sys.path.insert(0, sys.argv[1])
from test_reliability import _acrobot_problem
from mbjax import trajopt
from mbjax.checks import default_tolerance

assert not jax.config.jax_enable_x64
problem = _acrobot_problem()
guess = 5.0 * jax.random.uniform(jax.random.PRNGKey(7), (5, 2), minval=-1, maxval=1)
solution = trajopt.solve(problem, guess, progress=False)
check = solution.resimulate(problem)
feasible = default_tolerance(jnp.float32, 1e-8, 1000)  # 1.2e-4
assert problem.model.dtype == solution.u.dtype == check.q.dtype == jnp.float32
assert bool(solution.converged) and float(solution.violation) <= feasible, solution.summary()
assert int(check.stats["num_steps"]) < 1000
# the terminal state is feasible to 1.2e-4; the re-simulation adds float32 rounding, ~1e-5
# over this short motion (6e-5 rad and 5e-5 rad/s seen; float64: 5e-7, 2e-6)
error = np.abs(np.concatenate([np.asarray(check.q[-1]) - [0.8, -0.5], np.asarray(check.qd[-1])]))
assert error.max() <= 2 * feasible, error
# FDDP with its default tolerances (float32's) converges to the same motion. Each solver stops
# feasible to 1.2e-4 with its cost settled to 1.2e-4 (relative) per multiplier update, so the
# two stopping points may differ by a few times that: 4 x 1.2e-4 (measured 5.3e-5)
fddp = trajopt.solve(problem, guess, optimiser=trajopt.FDDP(), progress=False)
assert bool(fddp.converged) and float(fddp.violation) <= feasible, fddp.summary()
assert abs(float(fddp.cost) - float(solution.cost)) <= 4 * feasible * float(solution.cost), (fddp.cost, solution.cost)
print("FLOAT32 OK")
"""


def test_float32_trajectory_optimisation_with_default_settings():
    """float32 as JAX runs it by default (x64 off): the float64 defaults (feasible to 1e-8,
    re-simulation at rtol = atol = 1e-12) never converged, and the re-simulation crawled to
    max_steps (minutes); they now follow the dtype, for Levenberg–Marquardt and FDDP alike."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    env = {k: v for k, v in os.environ.items() if k != "JAX_ENABLE_X64"}
    out = subprocess.run([sys.executable, "-c", FLOAT32_TRAJOPT, str(Path(__file__).parent)], env=env,
                         capture_output=True, text=True, timeout=900)
    assert out.returncode == 0 and "FLOAT32 OK" in out.stdout, out.stdout[-2000:] + out.stderr[-4000:]


def test_float32_trajectory_problem_with_x64_on():
    """A float32 model while x64 is on: float64 targets are rounded like every input; the
    default inner solver keeps the problem's float32, and optimistix's Levenberg–Marquardt,
    which cannot take it, says what to do instead."""
    import optimistix as optx

    from mbjax import trajopt

    problem = _acrobot_problem()
    problem = trajopt.TrajectoryProblem(problem.model.astype(jnp.float32), jnp.zeros(2), jnp.zeros(2), 1.0, 5,
                                        costs=problem.costs, constraints=problem.constraints)
    single = trajopt.SingleShooting()
    out = jax.eval_shape(lambda u: problem.residuals(single.rollout(problem, u)), jnp.zeros((5, 2), jnp.float32))
    assert [r.dtype for r in out] == [jnp.float32] * 3
    solution = trajopt.solve(problem, jnp.zeros((5, 2)), constraints=trajopt.AugmentedLagrangian(iterations=1),
                             inner_steps=3, progress=False)
    assert solution.u.dtype == jnp.float32 and bool(jnp.all(jnp.isfinite(solution.u)))
    assert solution.trajectory.q.dtype == jnp.float32
    with pytest.raises(ValueError, match="float32 problem with jax_enable_x64 on.*leave jax_enable_x64 off"):
        trajopt.solve(problem, jnp.zeros((5, 2)), optimiser=optx.LevenbergMarquardt(rtol=1e-4, atol=1e-4),
                      progress=False)


# ------------------------------------------------------------------ 8. identification's rank decision
def _nearly_dependent(delta, seed=0):
    """8 independent columns, an exact combination, and a combination perturbed by ``delta``."""
    rng = np.random.default_rng(seed)
    A = rng.normal(size=(200, 8))
    z = rng.normal(size=200)
    z -= A @ np.linalg.lstsq(A, z, rcond=None)[0]
    c = A[:, 2] + A[:, 3]
    return np.column_stack([A, A[:, 0] + A[:, 1], c + delta * np.linalg.norm(c) / np.linalg.norm(z) * z])


def test_base_parameter_rank_does_not_flip_near_the_threshold():
    import warnings

    from mbjax import identify

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a clear gap: no warning
        ranks = {identify.base_parameters(_nearly_dependent(d)).rank for d in (3e-10, 5e-10, 2e-9, 5e-9)}
    assert ranks == {8}
    assert identify.base_parameters(_nearly_dependent(0.1)).rank == 9
    assert identify.base_parameters(_nearly_dependent(2e-9), rank_tol=1e-9).rank == 9  # an explicit threshold


def test_base_parameters_warn_without_a_clear_gap():
    from mbjax import identify

    rng = np.random.default_rng(1)
    a, z = rng.normal(size=200), rng.normal(size=(200, 13))
    W = np.column_stack([a + 10.0**-k * z[:, k] for k in range(13)])  # pivots fall by 10 per column
    with pytest.warns(UserWarning, match="rank of W is not clear-cut"):
        identify.base_parameters(W)


# ------------------------------------------------------------------ 3. divergence in simulate
def test_divergence_is_reported_with_its_time_and_causes(pendulum):
    unstable = mbjax.PD(pendulum, -100.0, -10.0, mbjax.Setpoint(jnp.zeros(2), jnp.zeros(2)))
    q0, qd0 = jnp.array([0.3, 0.2]), jnp.zeros(2)
    # limits=False: the pendulum's stops at +-pi would hold the runaway
    for max_steps in (100_000, None):  # None used to run forever
        with pytest.raises(mbjax.DivergenceError, match=r"diverged after t = 0\.0\d+ .*unstable controller"):
            mbjax.simulate(pendulum, q0, qd0, 0.0, 1.0, tau=unstable, max_steps=max_steps, limits=False)
    with pytest.raises(Exception, match="the system diverged: .*unstable controller"):  # inside vmap: no time
        jax.block_until_ready(mbjax.simulate_batch(pendulum, jnp.stack([q0, q0]), jnp.stack([qd0, qd0]), 0.0, 1.0,
                                                   tau=unstable, limits=False))


def test_zero_tolerances_are_refused(pendulum):
    with pytest.raises(Exception, match="rtol and atol are both 0"):
        jax.block_until_ready(mbjax.simulate(pendulum, jnp.array([0.3, 0.2]), jnp.zeros(2), 0.0, 0.1, rtol=0.0,
                                             atol=0.0).q)


# ------------------------------------------------------------------ 7. energy balance, not drift
def test_energy_balance_accounts_for_dissipation_controls_and_wrenches(pendulum):
    import equinox as eqx

    damped = eqx.tree_at(lambda m: (m.damping, m.stiffness), pendulum, (jnp.full(2, 0.5), jnp.full(2, 2.0)))
    q0, qd0 = jnp.array([1.0, -0.5]), jnp.array([0.5, 1.0])
    traj = mbjax.simulate(damped, q0, qd0, 0.0, 2.0, energy=True)
    scale = abs(float(traj.energy[0]))
    assert abs(float(traj.energy[-1] - traj.energy[0])) > 1e-2 * scale  # the dampers take energy out
    assert float(traj.work[-1]) < 0.0 and np.max(np.abs(traj.energy_error)) < 1e-7 * scale
    # a controller and a constant external wrench do work too
    pd = mbjax.PD(pendulum, 5.0, 0.5, mbjax.Setpoint(jnp.array([0.2, 0.1]), jnp.zeros(2)))
    f = jnp.zeros((pendulum.nbodies, 6)).at[-1].set(jnp.array([1.0, 0.0, 0.5, 0.0, 0.2, 0.0]))
    traj = mbjax.simulate(pendulum, q0, qd0, 0.0, 2.0, tau=pd, f_ext=f, energy=True)
    assert np.max(np.abs(traj.energy_error)) < 1e-7 * scale < np.max(np.abs(traj.work))


def test_cli_simulate_reports_the_energy_balance(tmp_path, capsys):
    from mbjax import cli

    urdf = tmp_path / "damped.urdf"
    urdf.write_text(open(mbjax.bundled_model_path("double_pendulum")).read().replace('damping="0.0"', 'damping="0.3"'))
    assert cli.main(["simulate", str(urdf), "--duration", "1", "--quiet"]) == 0
    out = capsys.readouterr().out
    assert float(re.search(r"\(dissipated (\S+) J\)", out).group(1)) > 0.1
    assert float(re.search(r"E\(t\) - E\(0\) - work\(t\): largest relative drift (\S+)", out).group(1)) < 1e-7


def test_simulate_refuses_non_finite_times(pendulum):
    for t1 in (np.nan, np.inf):
        with pytest.raises(Exception, match="t0 and t1 must be finite"):
            jax.block_until_ready(mbjax.simulate(pendulum, jnp.array([0.3, 0.2]), jnp.zeros(2), 0.0, t1).q)
