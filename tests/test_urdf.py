"""URDF loading: every URDF of example-robot-data that Pinocchio loads, and bad files."""

import warnings

import numpy as np
import pytest

import mbjax

pin = pytest.importorskip("pinocchio", reason="Pinocchio (pip install pin) is the reference")


def _all_urdfs():
    try:
        root = mbjax.robots.example_robot_data_dir()
    except ModuleNotFoundError:
        return []
    return sorted(str(p.relative_to(root)) for p in root.rglob("*.urdf"))


@pytest.mark.parametrize("rel_path", _all_urdfs())
def test_loads_what_pinocchio_loads(rel_path):
    path = str(mbjax.robots.example_robot_data_dir() / rel_path)
    try:
        pm = pin.buildModelFromUrdf(path)
    except Exception:  # Pinocchio refuses it: nothing to match
        return
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # non-physical inertias of some published robots
        model = mbjax.load_urdf(path, mimic="independent", joint_order="pinocchio", inertia_check="warn")
    assert (model.nq, model.nv, model.nbodies) == (pm.nq, pm.nv, pm.njoints - 1)
    assert list(model.joint_names) == list(pm.names)[1:]
    assert list(model.parents) == [p - 1 for p in list(pm.parents)[1:]]
    for i in range(model.nbodies):
        Y = pm.inertias[i + 1]
        scale = max(1.0, abs(Y.mass), np.abs(Y.inertia).max())
        assert abs(float(model.mass[i]) - Y.mass) <= 1e-12 * scale
        if Y.mass > 0:
            assert np.abs(np.asarray(model.com[i]) - Y.lever).max() <= 1e-12 * max(1.0, np.abs(Y.lever).max())
        assert np.abs(np.asarray(model.inertia[i]) - Y.inertia).max() <= 1e-12 * scale
        P = pm.jointPlacements[i + 1]
        assert np.abs(np.asarray(model.joint_rotation[i]) - P.rotation).max() <= 1e-12
        assert np.abs(np.asarray(model.joint_translation[i]) - P.translation).max() <= 1e-12
    # every link of the file is a frame of the model, attached to the same joint as in Pinocchio
    for f, name in enumerate(model.frame_names):
        fid = pm.getFrameId(name, pin.FrameType.BODY)
        assert model.topology.frame_bodies[f] == pm.frames[fid].parentJoint - 1
        M = pm.frames[fid].placement
        assert np.abs(np.asarray(model.frame_rotation[f]) - M.rotation).max() <= 1e-12
        assert np.abs(np.asarray(model.frame_translation[f]) - M.translation).max() <= 1e-12


def test_whole_folder_was_found():
    assert len(_all_urdfs()) > 50


def test_floating_base_and_quaternion_order():
    model = mbjax.load_example_robot("solo12")
    assert model.joint_types[0] == "free" and model.joint_names[0] == "root_joint"
    q = np.asarray(mbjax.neutral(model))
    np.testing.assert_array_equal(q[:7], [0, 0, 0, 1, 0, 0, 0])  # (position, w, x, y, z)


URDF_OK = """<robot name="r">
  <link name="base"/>
  <link name="a"><inertial><origin xyz="0 0 0.1" rpy="0.1 0.2 0.3"/><mass value="1"/>
    <inertia ixx="0.1" ixy="0" ixz="0" iyy="0.2" iyz="0" izz="0.15"/></inertial></link>
  <joint name="j" type="revolute"><parent link="base"/><child link="a"/><axis xyz="0 0 1"/>
    <limit lower="-1" upper="1" effort="10" velocity="2"/></joint>
</robot>"""


def test_text_input_and_limits():
    model = mbjax.load_urdf(URDF_OK)
    assert model.nq == 1 and model.joint_names == ("j",)
    assert float(model.lower[0]) == -1 and float(model.upper[0]) == 1
    assert float(model.effort_limit[0]) == 10 and float(model.velocity_limit[0]) == 2
    # inertial origin rotation is applied: R I R^T
    from mbjax.model.urdf import rpy_to_rotation

    R = rpy_to_rotation([0.1, 0.2, 0.3])
    np.testing.assert_allclose(model.inertia[0], R @ np.diag([0.1, 0.2, 0.15]) @ R.T, atol=1e-15)


@pytest.mark.parametrize(
    "text, match",
    [
        ("<robot name='r'><link name='a'>", "malformed"),
        ("<robt/>", "starts with <robot>"),
        (URDF_OK.replace('<mass value="1"/>', ""), "no <mass"),
        (URDF_OK.replace('ixy="0" ', ""), "lacks ixy"),
        (URDF_OK.replace('<mass value="1"/>', '<mass value="-1"/>'), "mass -1"),
        (URDF_OK.replace('izz="0.15"', 'izz="0.5"'), "triangle inequality"),
        (URDF_OK.replace('ixx="0.1"', 'ixx="-0.1"'), "negative principal moment"),
        (URDF_OK.replace('<child link="a"/>', '<child link="b"/>'), "not defined"),
        (URDF_OK.replace('type="revolute"', 'type="screw"'), "type 'screw'"),
        (URDF_OK.replace('<axis xyz="0 0 1"/>', '<axis xyz="0 0 0"/>'), "zero vector"),
        (URDF_OK.replace('<axis xyz="0 0 1"/>', '<axis xyz="0 0"/>'), "expected 3 numbers"),
        (URDF_OK.replace('<axis xyz="0 0 1"/>', '<axis xyz="0 0 inf"/>'), "joint 'j'.*not a direction"),
        (URDF_OK.replace('rpy="0.1 0.2 0.3"', 'rpy="nan 0.2 0.3"'), "rpy of inertial of link 'a'.* is not finite"),
        (URDF_OK.replace('ixx="0.1"', 'ixx="inf"'), "link 'a': inertial values must be finite"),
        (URDF_OK.replace('<mass value="1"/>', '<mass value="1e200"/>').replace('xyz="0 0 0.1"', 'xyz="1e200 0 0.1"'),
         "its com is not finite in float64"),
        (
            URDF_OK.replace("</robot>", '<joint name="k" type="fixed"><parent link="a"/><child link="base"/></joint></robot>'),
            "cycle",
        ),
        (URDF_OK.replace("</robot>", '<link name="c"/></robot>'), "2 root links"),
        (
            URDF_OK.replace('<limit lower', '<mimic joint="x"/><limit lower'),
            "mimic='independent'",
        ),
    ],
)
def test_bad_urdf(text, match):
    with pytest.raises(ValueError, match=match):
        mbjax.load_urdf(text)


def test_missing_file():
    with pytest.raises(FileNotFoundError):
        mbjax.load_urdf("/no/such/robot.urdf")
