"""mbjax: differentiable rigid multibody dynamics in JAX.

The whole public API is re-exported here; see README.md for conventions.
"""

from . import checks, constraints, spatial
from .constraints import (
    ConstrainedDynamics,
    LoopClosureBuilder,
    LoopClosures,
    assemble,
    constrained_forward_dynamics,
    constrained_vector_field,
    loop_jacobian,
    loop_kinematics,
    loop_residual,
    project,
    project_velocity,
)
from .configuration import difference, integrate, neutral, normalize, random_configuration
from .dynamics.aba import aba
from .dynamics.crba import crba
from .dynamics.rnea import rnea
from .dynamics.terms import (
    centroidal_momentum_matrix,
    forward_dynamics,
    generalized_gravity,
    kinetic_energy,
    momentum,
    nonlinear_effects,
    potential_energy,
)
from .interop import from_pinocchio_configuration, to_pinocchio_configuration
from .kinematics import (
    body_velocities,
    center_of_mass,
    center_of_mass_jacobian,
    forward_kinematics,
    frame_jacobian,
    frame_jacobian_time_variation,
    frame_placement,
    frame_placements,
    frame_velocity,
)
from .model.builder import ModelBuilder, check_inertia
from .model.joints import JOINT_TYPES
from .model.model import Model
from .model.topology import Topology, incidence_matrix, path_matrix, regular_labeling
from .model.urdf import URDFError, load_urdf
from .robots import bundled_model_path, example_robot_path, load_bundled, load_example_robot

__version__ = "0.1.0"

__all__ = [
    "JOINT_TYPES", "Model", "URDFError", "load_urdf", "ModelBuilder", "Topology", "aba", "body_velocities", "center_of_mass",
    "center_of_mass_jacobian", "centroidal_momentum_matrix", "bundled_model_path", "check_inertia", "crba", "difference", "example_robot_path", "load_bundled", "load_example_robot",
    "forward_dynamics", "from_pinocchio_configuration", "to_pinocchio_configuration", "forward_kinematics", "frame_jacobian", "frame_jacobian_time_variation",
    "frame_placement", "frame_placements", "frame_velocity", "generalized_gravity", "incidence_matrix",
    "integrate", "kinetic_energy", "momentum", "neutral", "nonlinear_effects", "normalize", "path_matrix",
    "potential_energy", "random_configuration", "regular_labeling", "rnea", "spatial",
    # closed chains (mbjax.constraints)
    "constraints", "ConstrainedDynamics", "LoopClosureBuilder", "LoopClosures", "assemble",
    "constrained_forward_dynamics", "constrained_vector_field", "loop_jacobian", "loop_kinematics",
    "loop_residual", "project", "project_velocity",
]
