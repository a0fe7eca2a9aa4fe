"""Robots: the models shipped inside mbjax, and URDFs of the ``example-robot-data`` package.

``example-robot-data`` (PyPI, installed with the ``test`` extra) ships its URDFs under a
``cmeel.prefix`` folder without an importable Python module; this finds them.
"""

from __future__ import annotations

import functools
from importlib import metadata
from pathlib import Path

from .model.urdf import load_urdf

#: name -> (path inside example-robot-data's robots/ folder, floating base)
EXAMPLE_ROBOTS = {
    "ur5": ("ur_description/urdf/ur5_robot.urdf", False),
    "panda": ("panda_description/urdf/panda.urdf", False),
    "solo12": ("solo_description/robots/solo12.urdf", True),
    "talos_reduced": ("talos_data/robots/talos_reduced.urdf", True),
    "talos_full": ("talos_data/robots/talos_full_v2.urdf", True),
    "double_pendulum": ("double_pendulum_description/urdf/double_pendulum_simple.urdf", False),
}


@functools.cache
def example_robot_data_dir() -> Path:
    """The ``robots/`` folder of the installed ``example-robot-data`` distribution."""
    try:
        dist = metadata.distribution("example-robot-data")
    except metadata.PackageNotFoundError:
        raise ModuleNotFoundError(
            "example-robot-data is not installed; install it with `pip install example-robot-data` "
            "(or mbjax's test extra: `pip install -e .[test]`)"
        ) from None
    for f in dist.files or ():
        parts = Path(str(f)).parts
        if "robots" in parts and str(f).endswith(".urdf"):
            k = parts.index("robots")
            return Path(dist.locate_file(Path(*parts[: k + 1])))
    raise FileNotFoundError("example-robot-data is installed but contains no robots/ folder")


def example_robot_path(name: str) -> Path:
    """Path to the URDF of a robot listed in ``EXAMPLE_ROBOTS``."""
    if name not in EXAMPLE_ROBOTS:
        raise KeyError(f"unknown example robot {name!r}; known: {sorted(EXAMPLE_ROBOTS)}")
    return example_robot_data_dir() / EXAMPLE_ROBOTS[name][0]


def load_example_robot(name: str, **kwargs):
    """Load a robot of ``example-robot-data`` (floating base where the robot has one).

    Keyword arguments go to :func:`mbjax.load_urdf`; mimic joints load as independent
    joints, as in Pinocchio.
    """
    kwargs.setdefault("floating_base", EXAMPLE_ROBOTS[name][1] if name in EXAMPLE_ROBOTS else False)
    kwargs.setdefault("mimic", "independent")
    return load_urdf(example_robot_path(name), **kwargs)
