"""Kane's method for tree-topology systems with building-block joints (Sayers 1991).

- :mod:`~mbjax.kane.joints`: the building-block joint (Tables 1, 3, 4).
- :mod:`~mbjax.kane.system`: system description, composite bodies (Eqs. 15-18), categories.
- :mod:`~mbjax.kane.partial_velocities`: Tables 7 and 9, kinematical equations (Eqs. 1, 20-29).
- :mod:`~mbjax.kane.equations`: mass matrix (Eq. 40), force array (Eq. 42), M u' = f.
- :mod:`~mbjax.kane.models`: Kane's method for ordinary mbjax Models, and converters.
- :mod:`~mbjax.kane.sayers_satellite`: the satellite of Table 2 as a ready model.
"""

from .equations import KaneDynamics, kane_dynamics, kane_kinetic_energy, kane_momentum
from .joints import BuildingBlockJoint, nominal_orientation
from .partial_velocities import KaneKinematics, coordinate_rates, kinematical_equations, system_kinematics
from .models import kane_forward_dynamics_from, kane_speeds, state_to_model, to_model
from .sayers_satellite import satellite
from .system import CompositeBodies, KaneBuilder, KaneSystem, composite_bodies

__all__ = [
    "BuildingBlockJoint", "CompositeBodies", "KaneBuilder", "KaneDynamics", "KaneKinematics", "KaneSystem", "composite_bodies",
    "coordinate_rates", "kane_dynamics", "kane_kinetic_energy", "kane_momentum", "kinematical_equations",
    "nominal_orientation", "system_kinematics", "kane_forward_dynamics_from", "kane_speeds", "state_to_model",
    "to_model", "satellite",
]
