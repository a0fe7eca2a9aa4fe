"""Kinematic constraints: loop closures, their stabilisation and the solvers that enforce them."""

from .assembly import assemble, project, project_velocity
from .closures import JOINT_ROWS, LoopClosureBuilder, LoopClosures
from .huang import HuangJoints, huang_joints, huang_system
from .huang_models import DOUBLE_PENDULUM, STEWART_PRINTED, huang_double_pendulum, stewart_platform
from .stepping import STEP_METHODS, StepResult, rollout, step
from .closed_chain import ClosedChainDynamics, ConstrainedDynamics, constrained_forward_dynamics, constrained_vector_field
from .closure_kinematics import loop_jacobian, loop_kinematics, loop_residual
from .mechanisms import four_bar, slider_crank
from .solvers import METHODS, ClosureSolver
from ..dynamics.stabilization import baumgarte, critical
from .mjcf import load_mjcf_with_closures
