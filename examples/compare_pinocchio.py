"""Compare mbjax with Pinocchio on TALOS (reduced): mass matrix, RNEA and ABA.

Needs Pinocchio and example-robot-data (``pip install -e ".[test]"``). The models match one
to one when mbjax orders the joints as Pinocchio does (``joint_order="pinocchio"``); the only
other difference is the free joint's quaternion, stored (w, x, y, z) by mbjax and
(x, y, z, w) by Pinocchio.

Run ``python examples/compare_pinocchio.py [robot] [samples] [--quick] [--out DIR]`` (default:
talos_reduced, 10 samples; ``--quick``: 3 samples unless given).
"""

import sys

from _common import Example  # first: float64 before any JAX array exists

import jax
import numpy as np
import pinocchio as pin

import mbjax


def options(parser):
    parser.add_argument("robot", nargs="?", default="talos_reduced", choices=sorted(mbjax.robots.EXAMPLE_ROBOTS),
                        help="an example-robot-data robot (default: talos_reduced)")
    parser.add_argument("samples", nargs="?", type=int, help="random states to compare (default: 10, 3 with --quick)")


example = Example(__doc__, quick="3 random states unless SAMPLES is given", options=options)
name = example.args.robot
samples = (3 if example.quick else 10) if example.args.samples is None else example.args.samples
floating = mbjax.robots.EXAMPLE_ROBOTS[name][1]
path = str(mbjax.example_robot_path(name))

model = mbjax.load_example_robot(name, joint_order="pinocchio")
pmodel = (pin.buildModelFromUrdf(path, pin.JointModelFreeFlyer()) if floating else pin.buildModelFromUrdf(path))
pdata = pmodel.createData()
print(model)
print(f"pinocchio: nq = {pmodel.nq}, nv = {pmodel.nv}, joints {pmodel.njoints - 1}")
assert (model.nq, model.nv) == (pmodel.nq, pmodel.nv)
assert list(model.joint_names) == [pmodel.names[i] for i in range(1, pmodel.njoints)], "joint order differs"


crba = jax.jit(mbjax.crba)
rnea = jax.jit(mbjax.rnea)
aba = jax.jit(mbjax.aba)


def rel(a, b):
    return float(np.max(np.abs(np.asarray(a) - b)) / max(np.max(np.abs(b)), 1e-300))


rng = np.random.default_rng(0)
worst = {"M (crba)": 0.0, "tau (rnea)": 0.0, "qdd (aba)": 0.0}
for k in range(samples):
    q = mbjax.random_configuration(model, jax.random.PRNGKey(k))
    qd, qdd, tau = (rng.standard_normal(model.nv) for _ in range(3))
    qp = mbjax.to_pinocchio_configuration(model, q)

    M_pin = pin.crba(pmodel, pdata, qp)
    M_pin = np.triu(M_pin) + np.triu(M_pin, 1).T  # Pinocchio fills the upper triangle
    worst["M (crba)"] = max(worst["M (crba)"], rel(crba(model, q), M_pin))
    worst["tau (rnea)"] = max(worst["tau (rnea)"], rel(rnea(model, q, qd, qdd), pin.rnea(pmodel, pdata, qp, qd, qdd)))
    worst["qdd (aba)"] = max(worst["qdd (aba)"], rel(aba(model, q, qd, tau), pin.aba(pmodel, pdata, qp, qd, tau)))

print(f"max relative difference over {samples} random states (max |mbjax - pin| / max |pin|):")
for key, val in worst.items():
    print(f"  {key:11s} {val:.2e}")
ok = all(v < 1e-9 for v in worst.values())
print("agreement:", "OK" if ok else "LARGER THAN EXPECTED")
example.record(robot=name, samples=samples, max_relative_difference=worst, agreement=ok)
sys.exit(0 if ok else 1)
