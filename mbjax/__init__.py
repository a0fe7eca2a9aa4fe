"""mbjax: differentiable rigid multibody dynamics in JAX.

The whole public API is re-exported here; see README.md for conventions.
"""

from . import checks, constraints, spatial
from .constraints import (
    ClosedChainDynamics,
    ClosureSolver,
    ConstrainedDynamics,
    LoopClosureBuilder,
    LoopClosures,
    assemble,
    constrained_forward_dynamics,
    constrained_vector_field,
    loop_jacobian,
    loop_kinematics,
    loop_residual,
    project_velocity,
)
from .constraints import StepResult, huang_double_pendulum, huang_system, stewart_platform
from .animation import animate
from .compilation import jit
from .configuration import difference, integrate, neutral, normalize, random_configuration
from .dynamics.aba import aba
from .dynamics.crba import crba
from .dynamics.derivatives import aba_derivatives, rnea_derivatives
from .dynamics.rnea import rnea
from . import formulations, kane
from .kane import BuildingBlockJoint, KaneBuilder, KaneSystem, kane_dynamics, kane_kinetic_energy, kane_momentum
from .dynamics.protocol import Dynamics
from .methods import as_dynamics, forward_dynamics
from .dynamics.terms import (
    center_of_mass_jacobian,
    centroidal_momentum_matrix,
    generalized_gravity,
    kinetic_energy,
    momentum,
    nonlinear_effects,
    potential_energy,
)
from .dynamics.passive import passive_forces
from .interop import (
    from_mujoco_acceleration,
    from_mujoco_force,
    from_mujoco_velocity,
    from_pinocchio_configuration,
    to_mujoco_acceleration,
    to_mujoco_force,
    to_mujoco_velocity,
    to_pinocchio_configuration,
)
from .formulations.free_floating import (
    FloatingInertia,
    GeneralizedJacobian,
    base_velocity,
    floating_forward_dynamics,
    floating_inertia,
    floating_inverse_dynamics,
    floating_jacobians,
    floating_momentum,
    from_floating,
    generalized_jacobian,
    reaction_null_space,
    to_floating,
)
from .simulation.floating_control import FloatingComputedTorque
from .kinematics import (
    body_velocities,
    center_of_mass,
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
from .model.actuators import ActuatorControl, Actuators, load_mjcf_actuators
from .model.mjcf import MJCFError, load_mjcf
from .constraints import load_mjcf_with_closures
from .model.urdf import URDFError, load_urdf
from .robots import bundled_model_path, example_robot_path, load_bundled, load_example_robot
from . import contact, identify, plotting, simulation, trajopt
from .simulation import (
    DivergenceError, PD, ComputedTorque, FeedForward, PathReference, Setpoint, Trajectory, configuration_rate, joint_limit_event,
    shard_batch, simulate, simulate_batch,
)
from .formulations import (
    MaximalSolution,
    MaximalState,
    PrescribedBase,
    constraint_violation,
    joint_state,
    maximal_dynamics,
    maximal_state,
    maximal_state_derivative,
)

__version__ = "0.1.0"

__all__ = [
    "JOINT_TYPES", "Model", "jit", "URDFError", "load_urdf", "ModelBuilder", "Topology", "aba", "aba_derivatives", "rnea_derivatives", "body_velocities", "center_of_mass",
    "center_of_mass_jacobian", "centroidal_momentum_matrix", "bundled_model_path", "check_inertia", "crba", "difference", "example_robot_path", "load_bundled", "load_example_robot",
    "Dynamics", "as_dynamics", "forward_dynamics", "from_pinocchio_configuration", "to_pinocchio_configuration", "forward_kinematics", "frame_jacobian", "frame_jacobian_time_variation",
    "frame_placement", "frame_placements", "frame_velocity", "generalized_gravity", "incidence_matrix",
    "integrate", "kinetic_energy", "momentum", "neutral", "nonlinear_effects", "normalize", "path_matrix",
    "potential_energy", "random_configuration", "regular_labeling", "rnea", "spatial",
    "ActuatorControl", "Actuators", "MJCFError", "animate", "load_mjcf", "load_mjcf_actuators", "load_mjcf_with_closures", "passive_forces", "from_mujoco_velocity", "to_mujoco_velocity",
    "from_mujoco_acceleration", "to_mujoco_acceleration", "from_mujoco_force", "to_mujoco_force",
    # free-floating robots (Wilde et al. 2018)
    "FloatingInertia", "GeneralizedJacobian", "base_velocity", "floating_forward_dynamics", "floating_inertia",
    "floating_inverse_dynamics", "floating_jacobians", "floating_momentum", "from_floating",
    "generalized_jacobian", "reaction_null_space", "to_floating", "FloatingComputedTorque",
    "DivergenceError", "PD", "ComputedTorque", "FeedForward", "PathReference", "Setpoint", "Trajectory", "configuration_rate",
    "joint_limit_event", "plotting", "shard_batch", "simulate", "simulate_batch", "simulation",
    "formulations", "MaximalSolution", "MaximalState", "PrescribedBase", "constraint_violation", "joint_state",
    "maximal_dynamics", "maximal_state", "maximal_state_derivative",
    # closed chains (mbjax.constraints)
    "constraints", "ConstrainedDynamics", "LoopClosureBuilder", "LoopClosures", "assemble",
    "constrained_forward_dynamics", "constrained_vector_field", "loop_jacobian", "loop_kinematics",
    "loop_residual", "project_velocity", "ClosedChainDynamics", "ClosureSolver",
    # Kane's method with building-block joints (Sayers 1991, mbjax.kane)
    "kane", "BuildingBlockJoint", "KaneBuilder", "KaneSystem", "kane_dynamics", "kane_kinetic_energy", "kane_momentum",
    # Huang's singularity-free stepper (Huang et al. 2000)
    "StepResult", "huang_double_pendulum", "huang_system", "stewart_platform",
    # parameter identification (mbjax.identify)
    "identify",
    # trajectory optimisation (mbjax.trajopt)
    "trajopt",
    # contacts with the ground (mbjax.contact)
    "contact",
]
