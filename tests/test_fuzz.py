"""Fuzzing (issue 19): random bad input to the loaders, the dynamics, ``simulate`` and the CLI
either succeeds with finite output or raises a documented mbjax error, quickly; never a crash
inside JAX, a hang or NaN output."""

import math

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import mbjax
from mbjax import cli

#: the errors mbjax documents (docs/errors.md, "Errors you can meet"); URDFError and MJCFError are ValueErrors
DOCUMENTED = (ValueError, TypeError, eqx.EquinoxRuntimeError)

NUMBERS = st.one_of(
    st.sampled_from(["nan", "inf", "-inf", "-1", "0", "1e-12", "1e12", "abc", "", "1e400", "0x10"]),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
)


# ------------------------------------------------------------------ loaders
_URDF = """<robot name="r"><link name="base"/>
<link name="arm"><inertial><origin xyz="{com}"/><mass value="{mass}"/>
<inertia ixx="{i}" ixy="0" ixz="0" iyy="{i}" iyz="0" izz="{i}"/></inertial></link>
<joint name="j" type="{type}"><parent link="base"/><child link="arm"/><origin xyz="{xyz}"/><axis xyz="{axis}"/>
<limit lower="{lower}" upper="{upper}" effort="{effort}" velocity="1"/><dynamics damping="{damping}"/></joint>
</robot>"""

TRIPLES = st.one_of(st.tuples(NUMBERS, NUMBERS, NUMBERS).map(" ".join), st.sampled_from(["0 0 1", "0 0 0", "1 0", ""]))


@settings(max_examples=150, deadline=2000, suppress_health_check=[HealthCheck.too_slow])
@given(type_=st.sampled_from(["revolute", "continuous", "prismatic", "planar", "floating", "fixed", "screw"]),
       com=TRIPLES, xyz=TRIPLES, axis=TRIPLES, mass=NUMBERS, i=NUMBERS, lower=NUMBERS, upper=NUMBERS,
       effort=NUMBERS, damping=NUMBERS)
def test_urdf_loader(type_, com, xyz, axis, mass, i, lower, upper, effort, damping):
    text = _URDF.format(type=type_, com=com, xyz=xyz, axis=axis, mass=mass, i=i, lower=lower, upper=upper,
                        effort=effort, damping=damping)
    try:
        model = mbjax.load_urdf(text)
    except ValueError:
        return
    for leaf in (model.mass, model.com, model.inertia, model.joint_translation, model.joint_axis, model.damping):
        assert np.all(np.isfinite(leaf))


# ------------------------------------------------------------------ dynamics and simulate
@pytest.fixture(scope="module")
def pendulum():
    return mbjax.load_bundled("double_pendulum")


ENTRIES = st.sampled_from([0.0, 0.3, -2.0, 1e3, np.nan, np.inf, -np.inf])
VECTORS = st.tuples(st.integers(1, 3), st.sampled_from([np.float64, np.float32, np.int32]), ENTRIES).map(
    lambda a: np.full(a[0], a[2]).astype(a[1]) if a[1] is not np.int32 or np.isfinite(a[2]) else np.zeros(a[0], a[1])
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(q=VECTORS, qd=VECTORS, tau=VECTORS, method=st.sampled_from(["aba", "crba", "kkt"]))
def test_forward_dynamics(pendulum, q, qd, tau, method):
    try:
        out = jax.block_until_ready(mbjax.forward_dynamics(pendulum, q, qd, tau, method=method))
    except DOCUMENTED:
        return
    assert out.shape == (2,) and out.dtype == pendulum.dtype and np.all(np.isfinite(out))


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(tau=st.one_of(VECTORS, ENTRIES.map(lambda x: np.full(2, x))),
       t1=st.sampled_from([0.05, 1e-9, -0.1, np.nan, np.inf]), rtol=st.sampled_from([None, 0.0, -1.0, 1e-6]))
def test_simulate(pendulum, tau, t1, rtol):
    try:
        traj = mbjax.simulate(pendulum, jnp.array([0.3, 0.2]), jnp.zeros(2), 0.0, t1, tau=tau, rtol=rtol,
                              saveat=[t1] if np.isfinite(t1) and t1 > 0 else None)
        jax.block_until_ready(traj.q)
    except (*DOCUMENTED, mbjax.DivergenceError):
        return
    assert np.all(np.isfinite(traj.q)) and np.all(np.isfinite(traj.qd))


# ------------------------------------------------------------------ command line
OPTIONS = {"demo": ("--duration", "--dt", "--damping", "--amplitude", "--seed"),
           "simulate": ("--duration", "--rtol", "--amplitude", "--seed", "--method")}


@settings(max_examples=300, deadline=1000)
@given(command=st.sampled_from(sorted(OPTIONS)), data=st.data())
def test_cli_options(command, data):
    """Every option is parsed to a finite value within its bounds, or refused with exit 2."""
    names = data.draw(st.lists(st.sampled_from(OPTIONS[command]), unique=True, max_size=3))
    argv = [command] + (["double_pendulum"] if command == "simulate" else [])
    for name in names:
        argv += [name, data.draw(NUMBERS if name != "--method" else st.sampled_from(["aba", "xyz", "nan"]))]
    try:
        args = cli.build_parser().parse_args(argv)
        problem = cli.check_options(args)
    except SystemExit as e:
        assert e.code == 2
        return
    if problem is not None:
        return
    for name in ("duration", "dt", "damping", "amplitude", "rtol"):
        value = getattr(args, name, 0.0)
        assert math.isfinite(value) and value >= 0
    assert args.duration > 0 and args.seed >= 0 and getattr(args, "method", "aba") in cli.METHODS
    if command == "demo":
        assert 0 < args.dt <= args.duration and args.duration / args.dt <= cli.MAX_DEMO_STEPS


def test_cli_subnormal_time_step_is_refused():
    """A --dt so small that --duration / --dt overflows is refused with a message, not an OverflowError."""
    args = cli.build_parser().parse_args(["demo", "--dt", "2.2e-308", "--duration", "2"])
    assert "more than" in cli.check_options(args)
