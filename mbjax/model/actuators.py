"""MuJoCo's actuators (joint transmissions) as a map from controls to joint torques.

For each actuator k acting on a hinge or slide joint with gear g_k, MuJoCo computes
(mjModel conventions; activation dynamics excluded):

    length l = g q_j,   velocity v = g qd_j,   c = clamp(ctrl_k, ctrlrange)
    force f = (g0 + g1 l + g2 v) c + (b0 + b1 l + b2 v),   clamped to forcerange
    tau_j += g f,   then tau_j is clamped to the joint's actuatorfrcrange

with (g0, g1, g2) = gainprm[:3] (only g0 for gaintype "fixed") and (b0, b1, b2) = biasprm[:3]
(zero for biastype "none"). ``motor``, ``position``, ``velocity`` and ``general`` actuators
with these gain and bias types are covered. Actuators on other transmissions (tendons, sites,
bodies, ball and free joints), with activation dynamics, or with MuJoCo 4's actuator armature,
damping or delay are refused by name.
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from .mjcf import MJCFError, import_mujoco, compile_mjcf


class Actuators(eqx.Module):
    """Joint torques ``tau = actuators(q, qd, ctrl)`` (nv,) of MuJoCo actuators, from
    :func:`load_mjcf_actuators`; ``actuators.control(ctrl)`` is a ``tau(t, q, qd)`` for
    :func:`mbjax.simulate`. Array fields are differentiable (e.g. gains)."""

    names: tuple = eqx.field(static=True)
    nv: int = eqx.field(static=True)
    qpos: tuple = eqx.field(static=True)  # q index of each actuator's joint
    dof: tuple = eqx.field(static=True)  # velocity index
    gear: jax.Array  # (nu,)
    gain: jax.Array  # (nu, 3): force per unit control, affine in (length, velocity)
    bias: jax.Array  # (nu, 3)
    ctrl_range: jax.Array  # (nu, 2), +-inf where unlimited
    force_range: jax.Array  # (nu, 2)
    joint_force_range: jax.Array  # (nv, 2): the joints' actuatorfrcrange, +-inf where none

    @property
    def nu(self) -> int:
        return len(self.names)

    def __call__(self, q, qd, ctrl):
        ctrl = jnp.asarray(ctrl)
        if ctrl.shape != (self.nu,):
            raise ValueError(f"ctrl has shape {ctrl.shape}; the model has {self.nu} actuators {self.names}")
        dof = np.asarray(self.dof, np.int32)
        length = self.gear * jnp.take(q, np.asarray(self.qpos, np.int32))
        velocity = self.gear * jnp.take(qd, dof)
        affine = jnp.stack([jnp.ones_like(length), length, velocity], -1)
        c = jnp.clip(ctrl, self.ctrl_range[:, 0], self.ctrl_range[:, 1])
        force = jnp.sum(self.gain * affine, -1) * c + jnp.sum(self.bias * affine, -1)
        force = jnp.clip(force, self.force_range[:, 0], self.force_range[:, 1])
        tau = jnp.zeros(self.nv, force.dtype).at[dof].add(self.gear * force)
        return jnp.clip(tau, self.joint_force_range[:, 0], self.joint_force_range[:, 1])

    def control(self, ctrl) -> "ActuatorControl":
        """A controller for :func:`mbjax.simulate`: ``ctrl`` is an array (nu,) or a function
        ``ctrl(t, q, qd)``."""
        return ActuatorControl(self, ctrl)


class ActuatorControl(eqx.Module):
    """``tau(t, q, qd) = actuators(q, qd, ctrl(t, q, qd))``."""

    actuators: Actuators
    ctrl: object

    def __call__(self, t, q, qd):
        ctrl = self.ctrl(t, q, qd) if callable(self.ctrl) else self.ctrl
        return self.actuators(q, qd, ctrl)


def load_mjcf_actuators(source, dtype=None) -> Actuators:
    """The actuators of an MJCF model, for the :class:`mbjax.Model` that :func:`mbjax.load_mjcf`
    builds from the same source (same q and v layout as MuJoCo's qpos and qvel).

    **Arguments:** ``source``: a path, MJCF text or ``mujoco.MjModel``; ``dtype``: of the arrays.
    """
    mujoco = import_mujoco()
    m = compile_mjcf(source)
    names = tuple(mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_ACTUATOR, k) or f"actuator{k}" for k in range(m.nu))
    refused = [f"{names[k]!r}: {why}" for k in range(m.nu) if (why := _unsupported(mujoco, m, k))]
    if refused:
        raise MJCFError("mbjax cannot model these actuators:\n  - " + "\n  - ".join(refused))
    gain_fixed = m.actuator_gaintype == int(mujoco.mjtGain.mjGAIN_FIXED)
    gain = np.array(m.actuator_gainprm[:, :3], float)
    gain[gain_fixed, 1:] = 0.0
    bias = np.array(m.actuator_biasprm[:, :3], float)
    bias[m.actuator_biastype == int(mujoco.mjtBias.mjBIAS_NONE)] = 0.0
    clamp_ctrl = not m.opt.disableflags & int(mujoco.mjtDisableBit.mjDSBL_CLAMPCTRL)
    joints = m.actuator_trnid[:, 0]
    joint_range = np.tile([-np.inf, np.inf], (m.nv, 1))
    for j in range(m.njnt):
        if m.jnt_actfrclimited[j]:
            joint_range[m.jnt_dofadr[j]] = m.jnt_actfrcrange[j]
    dtype = dtype or jnp.result_type(float)

    def limits(limited, ranges):
        return jnp.asarray(np.where(np.asarray(limited, bool)[:, None], ranges, [-np.inf, np.inf]), dtype)

    return Actuators(
        names=names, nv=int(m.nv),
        qpos=tuple(int(i) for i in m.jnt_qposadr[joints]), dof=tuple(int(i) for i in m.jnt_dofadr[joints]),
        gear=jnp.asarray(m.actuator_gear[:, 0], dtype), gain=jnp.asarray(gain, dtype), bias=jnp.asarray(bias, dtype),
        ctrl_range=limits(m.actuator_ctrllimited * clamp_ctrl, m.actuator_ctrlrange),
        force_range=limits(m.actuator_forcelimited, m.actuator_forcerange),
        joint_force_range=jnp.asarray(joint_range, dtype),
    )


def _unsupported(mujoco, m, k):
    """Why actuator k is outside this module's scope, or ''."""
    jt, enum = mujoco.mjtJoint, int  # MuJoCo's enums compare with ints only after int()
    if int(m.actuator_trntype[k]) != enum(mujoco.mjtTrn.mjTRN_JOINT):
        return "transmission other than a joint (tendon, site, body, slider-crank)"
    if int(m.jnt_type[m.actuator_trnid[k, 0]]) not in (enum(jt.mjJNT_HINGE), enum(jt.mjJNT_SLIDE)):
        return "acts on a ball or free joint"
    if int(m.actuator_dyntype[k]) != enum(mujoco.mjtDyn.mjDYN_NONE):
        return "activation dynamics"
    if int(m.actuator_gaintype[k]) not in (enum(mujoco.mjtGain.mjGAIN_FIXED), enum(mujoco.mjtGain.mjGAIN_AFFINE)):
        return "gain type other than fixed or affine (muscle, user)"
    if int(m.actuator_biastype[k]) not in (enum(mujoco.mjtBias.mjBIAS_NONE), enum(mujoco.mjtBias.mjBIAS_AFFINE)):
        return "bias type other than none or affine"
    for field in ("armature", "damping", "dampingpoly", "delay"):  # MuJoCo 4's actuator terms
        if np.any(getattr(m, f"actuator_{field}", np.zeros((m.nu, 1)))[k]):
            return f"{field} on the actuator"
    if getattr(m, "actuator_ctrlnum", np.ones(m.nu))[k] != 1:
        return "several controls per actuator"
    return ""
