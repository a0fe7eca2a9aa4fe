"""Simulation with diffrax: ``simulate``, trajectories, controllers, events, batches."""

from ..configuration import configuration_rate
from .batching import batch_mesh, shard_batch, simulate_batch
from .controllers import PD, ComputedTorque, FeedForward, PathReference, Setpoint
from .events import JointLimitEvent, joint_limit_event
from .integration import DivergenceError, simulate
from .trajectory import Trajectory

__all__ = [
    "DivergenceError", "PD", "ComputedTorque", "FeedForward", "JointLimitEvent", "PathReference", "Setpoint",
    "Trajectory", "batch_mesh", "configuration_rate", "joint_limit_event", "shard_batch", "simulate",
    "simulate_batch",
]
