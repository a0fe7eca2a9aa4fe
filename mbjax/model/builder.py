"""Build a Model body by body, in Python (NumPy only: validation errors are plain exceptions)."""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import jax.numpy as jnp
import numpy as np

from .joints import JOINT_TYPES
from .model import Model
from .topology import Topology

WORLD = None  # parent of the root bodies


@dataclass
class _Body:
    name: str
    parent: str
    joint_type: str
    joint_name: str
    rotation: np.ndarray
    translation: np.ndarray
    axis: np.ndarray  # (2, 3)
    mass: float
    com: np.ndarray
    inertia: np.ndarray
    lower: np.ndarray
    upper: np.ndarray
    velocity_limit: np.ndarray
    effort_limit: np.ndarray
    armature: np.ndarray
    damping: np.ndarray
    stiffness: np.ndarray
    spring_reference: np.ndarray


class ModelBuilder:
    """Assemble a tree of rigid bodies, then ``build()`` a :class:`Model`.

    Example::

        b = ModelBuilder("pendulum")
        b.add_body("link", joint="revolute", axis=(0, 1, 0), mass=1.0,
                   com=(0, 0, -0.5), inertia=np.diag([0.1, 0.1, 0.01]))
        model = b.build()

    Bodies joined to their parent by a ``"fixed"`` joint are merged into their nearest movable
    ancestor (their inertia is added to it, as Pinocchio does for URDF); each such body
    remains a named frame. Every body, movable or merged, is a frame of the same name.
    """

    def __init__(self, name: str = "model", gravity=(0.0, 0.0, -9.81), inertia_check: str = "raise"):
        """``inertia_check``: what to do with a rotational inertia that no rigid body can have
        (a negative principal moment, or principal moments breaking the triangle inequality):
        ``"raise"`` (default) or ``"warn"`` and keep it as given. Many published URDFs have
        such inertias; Pinocchio accepts them silently, MuJoCo refuses them. The same option
        governs joints that move no inertia (a singular mass matrix, see ``build``)."""
        if inertia_check not in ("raise", "warn"):
            raise ValueError(f"inertia_check must be 'raise' or 'warn', not {inertia_check!r}")
        self.inertia_check = inertia_check
        self.name = name
        self.gravity = as_vector(gravity, 3, "gravity")
        self._bodies: dict[str, _Body] = {}
        self._frames: list[tuple[str, str, np.ndarray, np.ndarray]] = []

    def add_body(
        self,
        name: str,
        *,
        parent: str | None = WORLD,
        joint: str = "fixed",
        joint_name: str | None = None,
        axis=(0.0, 0.0, 1.0),
        axis2=(0.0, 1.0, 0.0),
        rotation=None,
        translation=(0.0, 0.0, 0.0),
        mass: float = 0.0,
        com=(0.0, 0.0, 0.0),
        inertia=None,
        lower=None,
        upper=None,
        velocity_limit=None,
        effort_limit=None,
        armature=0.0,
        damping=0.0,
        stiffness=0.0,
        spring_reference=None,
    ) -> "ModelBuilder":
        """Add body ``name`` joined to ``parent`` (a body name, or ``None`` for the world).

        **Arguments:**

        - ``joint``: ``"fixed"`` or one of ``revolute, continuous, prismatic, spherical,
          universal, cylindrical, planar, free``.
        - ``axis`` (and ``axis2`` for universal joints): joint axes in the joint frame.
        - ``rotation`` (3, 3), ``translation`` (3,): pose of the joint frame in the parent body
          frame (identity and zero by default). The body frame is the joint frame moved by
          the joint.
        - ``mass``, ``com`` (3,), ``inertia`` (3, 3): inertial data in the body frame; the
          inertia is about the centre of mass.
        - ``lower``, ``upper``: position limits, a scalar or one per configuration coordinate;
          ``velocity_limit``, ``effort_limit``, ``armature``: a scalar or one per velocity
          coordinate.
        - ``damping``, ``stiffness``: viscous damping and spring stiffness, a scalar or one per
          velocity coordinate; ``spring_reference`` (nq,): the spring's rest configuration
          (default: the joint's neutral configuration). See :func:`mbjax.passive_forces`.
        """
        if name in self._bodies:
            raise ValueError(f"a body named {name!r} already exists")
        if parent != WORLD and parent not in self._bodies:
            raise ValueError(f"parent {parent!r} of body {name!r} does not exist; add the parent first")
        if joint != "fixed" and joint not in JOINT_TYPES:
            raise ValueError(f"unknown joint type {joint!r} for body {name!r}; known: fixed, {', '.join(JOINT_TYPES)}")
        nq, nv = (0, 0) if joint == "fixed" else (JOINT_TYPES[joint].nq, JOINT_TYPES[joint].nv)
        R = np.eye(3) if rotation is None else as_rotation(rotation, f"rotation of body {name!r}")
        uses_axis = joint in ("revolute", "continuous", "prismatic", "cylindrical", "universal")
        axes = np.stack([
            as_unit(axis, f"axis of joint of {name!r}") if uses_axis else np.array([0.0, 0.0, 1.0]),
            as_unit(axis2, f"axis2 of joint of {name!r}") if joint == "universal" else np.array([0.0, 1.0, 0.0]),
        ])
        I = np.zeros((3, 3)) if inertia is None else np.asarray(inertia, dtype=float)
        try:
            check_inertia(float(mass), I, name)
        except NonPhysicalInertia as e:
            if self.inertia_check == "raise":
                raise
            warnings.warn(f"{e}; kept as given", stacklevel=2)
        self._bodies[name] = _Body(
            name=name,
            parent=parent,
            joint_type=joint,
            joint_name=joint_name or name,
            rotation=R,
            translation=as_vector(translation, 3, f"translation of body {name!r}"),
            axis=axes,
            mass=float(mass),
            com=as_vector(com, 3, f"com of body {name!r}"),
            inertia=0.5 * (I + I.T),
            lower=_per_coord(lower, nq, -np.inf, "lower", name),
            upper=_per_coord(upper, nq, np.inf, "upper", name),
            velocity_limit=_per_coord(velocity_limit, nv, np.inf, "velocity_limit", name),
            effort_limit=_per_coord(effort_limit, nv, np.inf, "effort_limit", name),
            armature=_per_coord(armature, nv, 0.0, "armature", name),
            damping=_per_coord(damping, nv, 0.0, "damping", name),
            stiffness=_per_coord(stiffness, nv, 0.0, "stiffness", name),
            spring_reference=(JOINT_TYPES[joint].neutral() if joint != "fixed" else np.zeros(0))
            if spring_reference is None else as_vector(spring_reference, nq, f"spring_reference of joint of {name!r}"),
        )
        if np.any(self._bodies[name].lower > self._bodies[name].upper):
            raise ValueError(f"joint of body {name!r} has lower limit above upper limit")
        for what in ("damping", "stiffness"):
            v = getattr(self._bodies[name], what)
            if not np.all(np.isfinite(v) & (v >= 0)):
                raise ValueError(f"{what} of joint of body {name!r} must be finite and >= 0")
        return self

    def add_frame(self, name: str, body: str | None, rotation=None, translation=(0.0, 0.0, 0.0)) -> "ModelBuilder":
        """Add a named frame rigidly attached to ``body`` (``None`` for the world)."""
        if body != WORLD and body not in self._bodies:
            raise ValueError(f"body {body!r} of frame {name!r} does not exist")
        R = np.eye(3) if rotation is None else as_rotation(rotation, f"rotation of frame {name!r}")
        self._frames.append((name, body, R, as_vector(translation, 3, f"translation of frame {name!r}")))
        return self

    # ---------------------------------------------------------------------------- build
    # numbers that overflow (a mass of 1e200) are refused at the end by the field's name, not as
    # NumPy warnings on the way
    @np.errstate(invalid="ignore", over="ignore")
    def build(self, dtype=None) -> Model:
        """Merge fixed joints, order the bodies depth-first and return the Model.

        ``dtype`` defaults to JAX's default float (float64 when ``jax_enable_x64`` is on).
        A joint that moves no inertia at the neutral configuration (its body and everything
        it carries massless, or a wheel with zero inertia and its centre of mass on its axis)
        makes the mass matrix singular: an error naming it, or a warning with
        ``inertia_check="warn"``.
        """
        if not self._bodies:
            raise ValueError("the model has no bodies")
        children: dict[str, list[str]] = {WORLD: []}
        for b in self._bodies.values():
            children.setdefault(b.parent, []).append(b.name)
        order: list[str] = []
        stack = list(reversed(children[WORLD]))
        while stack:  # depth-first, children in the order they were added
            n = stack.pop()
            order.append(n)
            stack.extend(reversed(children.get(n, [])))

        # Each body's movable "anchor" (itself or nearest movable ancestor) and its pose in it.
        anchor: dict[str, str] = {}
        pose: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        for n in order:
            b = self._bodies[n]
            if b.joint_type != "fixed":
                anchor[n], pose[n] = n, (np.eye(3), np.zeros(3))
            else:
                pa = anchor.get(b.parent, WORLD)
                Rp, pp = pose.get(b.parent, (np.eye(3), np.zeros(3)))
                anchor[n], pose[n] = pa, (Rp @ b.rotation, pp + Rp @ b.translation)

        movable = [n for n in order if self._bodies[n].joint_type != "fixed"]
        index = {n: i for i, n in enumerate(movable)}
        mass = {n: 0.0 for n in movable}
        mcom = {n: np.zeros(3) for n in movable}
        parts: dict[str, list] = {n: [] for n in movable}
        for n in order:
            a = anchor[n]
            if a == WORLD:
                continue
            b = self._bodies[n]
            R, p = pose[n]
            parts[a].append((b.mass, R @ b.com + p, R @ b.inertia @ R.T))
        bodies = []
        for n in movable:
            m, c, I = _lump(parts[n])
            mass[n], mcom[n] = m, c
            b = self._bodies[n]
            pa = anchor[b.parent] if b.parent != WORLD else WORLD
            Rp, pp = pose[b.parent] if b.parent != WORLD else (np.eye(3), np.zeros(3))
            bodies.append((b, -1 if pa == WORLD else index[pa], Rp @ b.rotation, pp + Rp @ b.translation, m, c, I))

        frames = [(n, -1 if anchor[n] == WORLD else index[anchor[n]], *pose[n]) for n in order]
        for fname, body, R, p in self._frames:
            a = WORLD if body == WORLD else anchor[body]
            Rb, pb = (np.eye(3), np.zeros(3)) if body == WORLD else pose[body]
            frames.append((fname, -1 if a == WORLD else index[a], Rb @ R, pb + Rb @ p))
        names = [f[0] for f in frames]
        dup = {x for x in names if names.count(x) > 1}
        if dup:
            raise ValueError(f"duplicate frame names: {sorted(dup)}")

        _check_joint_inertia(bodies, self.inertia_check)
        topo = Topology(
            name=self.name,
            body_names=tuple(b.name for b, *_ in bodies),
            parents=tuple(p for _, p, *_ in bodies),
            joint_names=tuple(b.joint_name for b, *_ in bodies),
            joint_types=tuple(b.joint_type for b, *_ in bodies),
            frame_names=tuple(names),
            frame_bodies=tuple(f[1] for f in frames),
        )
        if len(set(topo.joint_names)) != len(topo.joint_names):
            raise ValueError("joint names must be unique")
        dtype = jnp.zeros(()).dtype if dtype is None else dtype
        def arr(x, *shape):  # stacked rows of the given shape (also when there are none)
            return jnp.asarray(np.asarray(x, dtype=float).reshape((-1,) + shape), dtype=dtype)

        def cat(xs):
            return arr(np.concatenate(xs) if xs else np.zeros(0))

        model = Model(
            topology=topo,
            joint_rotation=arr([R for _, _, R, *_ in bodies], 3, 3),
            joint_translation=arr([p for _, _, _, p, *_ in bodies], 3),
            joint_axis=arr([b.axis for b, *_ in bodies], 2, 3),
            mass=arr([m for *_, m, _, _ in bodies]),
            com=arr([c for *_, c, _ in bodies], 3),
            inertia=arr([I for *_, I in bodies], 3, 3),
            armature=cat([b.armature for b, *_ in bodies]),
            damping=cat([b.damping for b, *_ in bodies]),
            stiffness=cat([b.stiffness for b, *_ in bodies]),
            spring_reference=cat([b.spring_reference for b, *_ in bodies]),
            lower=cat([b.lower for b, *_ in bodies]),
            upper=cat([b.upper for b, *_ in bodies]),
            velocity_limit=cat([b.velocity_limit for b, *_ in bodies]),
            effort_limit=cat([b.effort_limit for b, *_ in bodies]),
            frame_rotation=arr([f[2] for f in frames], 3, 3),
            frame_translation=arr([f[3] for f in frames], 3),
            gravity=arr(self.gravity),
        )
        # limits may be infinite; everything else must be a finite number of this dtype
        for field in ("joint_rotation", "joint_translation", "joint_axis", "mass", "com", "inertia", "armature",
                      "damping", "stiffness", "spring_reference", "frame_rotation", "frame_translation", "gravity"):
            if not np.all(np.isfinite(np.asarray(getattr(model, field)))):
                raise ValueError(f"model {self.name!r}: its {field} is not finite in {jnp.dtype(dtype).name} (a number "
                                 "too large for the dtype, or an overflow when fixed joints were merged); check the "
                                 "model's numbers and units")
        return model


# ------------------------------------------------------------------------------ helpers
class NonPhysicalInertia(ValueError):
    """A rotational inertia that no rigid body can have."""


def check_inertia(mass: float, inertia: np.ndarray, name: str, tol: float = 1e-10) -> None:
    """Raise ``ValueError`` unless (mass, inertia about the CoM) is physically possible.

    A rigid body has mass >= 0 and a symmetric rotational inertia whose principal moments are
    non-negative and satisfy the triangle inequality I_a + I_b >= I_c.
    """
    if not np.isfinite(mass) or mass < 0:
        raise ValueError(f"body {name!r} has mass {mass}; a mass must be finite and >= 0")
    I = np.asarray(inertia, dtype=float)
    if I.shape != (3, 3):
        raise ValueError(f"inertia of body {name!r} has shape {I.shape}; expected (3, 3)")
    if not np.all(np.isfinite(I)):
        raise ValueError(f"inertia of body {name!r} is not finite")
    scale = max(1.0, float(np.abs(I).max()))
    if np.abs(I - I.T).max() > 1e-8 * scale:
        raise ValueError(f"inertia of body {name!r} is not symmetric: {I.tolist()}")
    ev = np.linalg.eigvalsh(0.5 * (I + I.T))
    if ev[0] < -tol * scale:
        raise NonPhysicalInertia(
            f"inertia of body {name!r} has a negative principal moment {ev[0]:.6g}; it is not physical. "
            "Fix the model, or pass inertia_check='warn' to load it anyway"
        )
    if ev[0] + ev[1] < ev[2] - tol * scale - 1e-9 * ev[2]:
        raise NonPhysicalInertia(
            f"inertia of body {name!r} violates the triangle inequality (principal moments "
            f"{ev[0]:.6g}, {ev[1]:.6g}, {ev[2]:.6g}: the two smallest must add up to at least the largest). "
            "Fix the model, or pass inertia_check='warn' to load it anyway"
        )


def _lump(parts):
    """Mass, CoM and inertia about the CoM of rigidly joined parts given in one frame."""
    m = sum(p[0] for p in parts)
    if m <= 0:
        return 0.0, np.zeros(3), sum((p[2] for p in parts), np.zeros((3, 3)))
    c = sum(p[0] * p[1] for p in parts) / m
    I = np.zeros((3, 3))
    for mi, ci, Ii in parts:
        d = ci - c
        I += Ii + mi * (d @ d * np.eye(3) - np.outer(d, d))
    return m, c, I


def _check_joint_inertia(bodies, policy):
    """Refuse (``policy="raise"``) or warn about joints that move no inertia.

    At the neutral configuration, the inertia a joint sees is ``D = S^T I^C S + armature``, with
    ``I^C`` the composite spatial inertia of the body and everything it carries: a zero
    eigenvalue of D (a massless subtree, a wheel with zero inertia and its centre of mass on
    its axis, a point mass on a spherical joint) is a zero eigenvalue of the mass matrix.
    """
    n = len(bodies)
    Rw, pw, IC, S = np.zeros((n, 3, 3)), np.zeros((n, 3)), np.zeros((n, 6, 6)), []
    for i, (b, parent, R, p, m, c, I) in enumerate(bodies):
        R0, p0 = (Rw[parent], pw[parent]) if parent >= 0 else (np.eye(3), np.zeros(3))
        Rw[i], pw[i] = R0 @ R, p0 + R0 @ p
        X = _skew(Rw[i] @ c + pw[i])
        # spatial inertia about the world origin, (linear, angular): [[m E, -m[c]], [m[c], I + m [c]^T [c]]]
        IC[i] = np.block([[m * np.eye(3), -m * X], [m * X, Rw[i] @ I @ Rw[i].T + m * X.T @ X]])
        joint = JOINT_TYPES[b.joint_type]
        Sb = np.asarray(joint.motion_subspace(b.axis[None], joint.neutral()[None]))[0]
        w = Sb[:, 3:] @ Rw[i].T
        S.append(np.concatenate([Sb[:, :3] @ Rw[i].T + np.cross(pw[i], w), w], axis=1))
    for i in range(n - 1, -1, -1):
        if bodies[i][1] >= 0:
            IC[bodies[i][1]] += IC[i]
    D = [S[i] @ IC[i] @ S[i].T + np.diag(bodies[i][0].armature) for i in range(n)]
    smallest = [np.linalg.eigvalsh(d)[0] for d in D]
    scale = max((np.abs(d).max() for d in D), default=0.0)
    for i in range(n):
        if smallest[i] <= 1e-12 * scale:
            b = bodies[i][0]
            message = (
                f"joint {b.joint_name!r} ({b.joint_type}) moves no inertia: body {b.name!r} and the bodies it carries "
                "have no mass or rotational inertia along one of its motions, so the mass matrix is singular and "
                f"forward dynamics (aba) is undefined. Give {b.name!r} a rotational inertia about the joint axis (a wheel "
                "whose centre of mass is on its axis needs one) or mass off the axis, or joint armature; "
                "inertia_check='warn' loads it anyway (for kinematics)"
            )
            if policy == "raise":
                raise ValueError(message)
            warnings.warn(message, stacklevel=3)


def _skew(v):
    return np.array([[0.0, -v[2], v[1]], [v[2], 0.0, -v[0]], [-v[1], v[0], 0.0]])


def as_vector(x, n, what):
    a = np.asarray(x, dtype=float).reshape(-1)
    if a.shape != (n,) or not np.all(np.isfinite(a)):
        raise ValueError(f"{what} must be {n} finite numbers; got {x!r}")
    return a


def as_unit(x, what):
    a = as_vector(x, 3, what)
    a = a / max(np.abs(a).max(), 1.0)  # no overflow in the norm of huge entries
    n = np.linalg.norm(a)
    if n < 1e-12:
        raise ValueError(f"{what} is the zero vector; give a direction")
    return a / n


def as_rotation(R, what):
    R = np.asarray(R, dtype=float)
    if R.shape != (3, 3) or not np.all(np.isfinite(R)):
        raise ValueError(f"{what} must be a finite 3x3 rotation matrix")
    if np.abs(R @ R.T - np.eye(3)).max() > 1e-6 or np.linalg.det(R) < 0:
        raise ValueError(f"{what} is not a rotation matrix (R R^T != E or det R != 1)")
    return R


def _per_coord(x, n, default, what, body):
    if x is None:
        return np.full(n, default)
    a = np.asarray(x, dtype=float).reshape(-1)
    if a.size == 1:
        return np.full(n, a[0])
    if a.size != n:
        raise ValueError(f"{what} of joint of body {body!r} has {a.size} values; expected 1 or {n}")
    return a
