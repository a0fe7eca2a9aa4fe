"""Robots: the models shipped inside mbjax, and URDFs of the ``example-robot-data`` package.

``example-robot-data`` (PyPI, installed with the ``test`` extra) ships its URDFs under a
``cmeel.prefix`` folder without an importable Python module; this finds them.
"""

from __future__ import annotations

import functools
from importlib import metadata
from pathlib import Path

import equinox as eqx
import jax.numpy as jnp

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


# ------------------------------------------------------------------ models shipped with mbjax
#: name -> floating base by default, for the URDFs in ``mbjax/models/``
BUNDLED_MODELS = {
    "acrobot": False,
    "double_pendulum": False,
    "quadruped": True,
    "space_robot": True,
}
#: bundled models that live in orbit: loaded with zero gravity
_ZERO_GRAVITY = ("space_robot",)


def _bundled_resource(name: str):
    from importlib import resources

    if name not in BUNDLED_MODELS:
        raise KeyError(f"unknown bundled model {name!r}; bundled: {sorted(BUNDLED_MODELS)}")
    res = resources.files("mbjax").joinpath("models", f"{name}.urdf")
    if not res.is_file():
        raise FileNotFoundError(
            f"the bundled model {name!r} is missing from the installed package ({res}); "
            "reinstall mbjax (the URDFs are package data, mbjax/models/*.urdf)"
        )
    return res


def bundled_model_path(name: str) -> Path:
    """Path to the URDF of a model shipped inside mbjax (``BUNDLED_MODELS``).

    ``"double_pendulum"``: two rods on revolute joints about y, fixed base (nq = nv = 2).
    ``"quadruped"``: a box torso with four two-link legs (8 revolute joints), meant to be
    loaded with a floating base (nq = 15, nv = 14).
    ``"space_robot"``: a 150 kg satellite bus with a 7-joint arm and a ``"tool"`` frame,
    floating base and zero gravity (nq = 14, nv = 13), for the free-floating formulation.
    """
    res = _bundled_resource(name)
    path = Path(str(res))
    if not path.is_file():  # installed in a zip archive: no file system path
        raise FileNotFoundError(
            f"mbjax is installed as an archive, so {name!r} has no file path; "
            "use mbjax.load_bundled(name), which reads the URDF text directly"
        )
    return path


def load_bundled(name: str, **kwargs):
    """Load a model shipped inside mbjax (``BUNDLED_MODELS``, see :func:`bundled_model_path`).

    The quadruped and the space robot get a floating base unless ``floating_base=False`` is
    passed, and the space robot zero gravity; other keyword arguments go to
    :func:`mbjax.load_urdf`.
    """
    res = _bundled_resource(name)
    kwargs.setdefault("floating_base", BUNDLED_MODELS[name])
    model = load_urdf(res.read_text(encoding="utf-8"), **kwargs)
    if name in _ZERO_GRAVITY:
        model = eqx.tree_at(lambda m: m.gravity, model, jnp.zeros_like(model.gravity))
    return model
