"""Contacts with the ground and between bodies: collision shapes on bodies, detection against a
plane and between spheres and capsules, and a compliant contact model that enters every
formulation as external wrenches, and joint position limits enforced by the same laws.

    points = contact.contact_points(model, [("FL_FOOT", contact.point((0, 0, 0))), ...])
    ground = contact.Plane.horizontal(0.0)
    model_c = contact.CompliantContact(points, ground, contact.HuntCrossley(1e5, 0.5),
                                       contact.Friction(0.8, 1e-4))
    traj = mbjax.simulate(model, q0, qd0, 0.0, 2.0, method=contact.WithContacts(model_c))
"""

from .compliant import CompliantContact, Friction, HuntCrossley, PairContact, SpringDamper
from .dynamics import WithContacts
from .events import ContactEvent, lift_off, touch_down
from .ground import Contacts, Plane, plane_contacts
from .heightfield import Heightfield
from .limits import JointLimits, joint_limits, stops
from .mjcf import mjcf_contacts, mjcf_pairs
from .pairs import BodyPairs, body_pairs, segment_contacts
from .rigid import RigidContact, RigidPairs, StepResult, TimeStepping, rollout, step
from .urdf import urdf_contacts
from .shapes import ContactPoints, box, capsule, contact_points, frame_points, mesh, point, sphere

__all__ = [
    "BodyPairs", "CompliantContact", "ContactEvent", "ContactPoints", "Contacts", "Friction", "Heightfield", "HuntCrossley",
    "JointLimits", "PairContact", "Plane", "RigidContact", "RigidPairs", "SpringDamper", "StepResult", "TimeStepping",
    "WithContacts", "body_pairs", "box", "capsule",
    "contact_points", "frame_points", "joint_limits", "lift_off", "mesh", "mjcf_contacts", "mjcf_pairs", "plane_contacts",
    "point", "rollout", "segment_contacts", "sphere", "step", "stops", "touch_down", "urdf_contacts",
]
