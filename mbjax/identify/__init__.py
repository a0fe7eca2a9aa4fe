"""Identification of dynamic parameters from data (``mbjax.identify``).

- the regressor ``tau = Y(q, qd, qdd) theta`` (:func:`regressor`, :func:`stacked_regressor`)
  with ``theta`` laid out by a :class:`ParameterLayout` (ten inertial parameters per body,
  armature, viscous and Coulomb friction);
- base parameters by rank-revealing QR (:func:`base_parameters`);
- least squares (:func:`least_squares`) and physically consistent identification
  (:func:`physically_consistent`, log-Cholesky parametrisation of the pseudo-inertia);
- output-error identification through :func:`mbjax.simulate` (:func:`output_error`);
- exciting trajectories (:class:`FourierTrajectory`, :func:`condition_number`,
  :func:`optimize_excitation`).
"""

from .base import BaseParameters, base_parameters
from .consistent import ConsistentFit, nearest_consistent, physically_consistent
from .excitation import FourierTrajectory, base_regressor_over, condition_number, optimize_excitation
from .linear_fit import LeastSquaresFit, least_squares
from .log_cholesky import (
    entropic_divergence,
    is_physically_consistent,
    log_cholesky_from_parameters,
    parameters_from_log_cholesky,
    parameters_from_pseudo_inertia,
    pseudo_inertia,
)
from .optimize import Minimization, minimize
from .simulation_error import OutputErrorFit, output_error, simulation_residuals
from .parameters import (
    INERTIAL_NAMES,
    DynamicParameters,
    ParameterLayout,
    dynamic_parameters,
    inertia_from_parameters,
    inertial_parameters,
    with_dynamic_parameters,
    world_inertia_from_parameters,
)
from .inverse_dynamics import regressor, stacked_regressor

__all__ = [
    "BaseParameters", "ConsistentFit", "DynamicParameters", "FourierTrajectory", "INERTIAL_NAMES",
    "LeastSquaresFit", "Minimization", "ParameterLayout", "base_parameters", "base_regressor_over",
    "condition_number", "dynamic_parameters", "entropic_divergence", "inertia_from_parameters",
    "inertial_parameters", "is_physically_consistent", "least_squares", "log_cholesky_from_parameters",
    "minimize", "nearest_consistent", "optimize_excitation", "output_error", "parameters_from_log_cholesky",
    "parameters_from_pseudo_inertia", "physically_consistent", "pseudo_inertia", "regressor",
    "simulation_residuals", "OutputErrorFit", "stacked_regressor", "with_dynamic_parameters",
    "world_inertia_from_parameters",
]
