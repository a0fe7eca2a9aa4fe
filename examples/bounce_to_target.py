"""A gradient through a bounce: the launch velocity that sends a ball through a target after it
bounces once, found with optax.

The ball (1 kg, radius 0.1 m) is thrown from 1 m up; the floor is a Hunt–Crossley law
(k = 2e4 N/m, alpha = 0.1 s/m: its force has no jump at touch-down, so the simulation is
differentiable through the impact), frictionless (regularised friction is stiffer in its
derivatives than in its motion during an impact: see the contacts page of the manual). The
target is where a throw at (1.6, 0.4, 1.0) m/s passes at T = 1 s, after one bounce (so that
it can be reached); the loss is the squared distance of the ball's centre at T from it, its
gradient with respect to the launch velocity comes from reverse mode through ``mbjax.simulate``
(adaptive Tsit5, rtol = atol = 1e-12: the derivative of an adaptive solve carries the error of
its step choices, 4e-5 of it at 1e-10), and ``optax.lbfgs`` (unit steps) follows it from a
throw at (1.2, 0.8, 0.3) m/s, which misses by 0.6 m.

Checks: the gradient at the first guess equals central differences (to 1e-5); the throw
found passes within 0.1 mm of the target in an independent re-simulation
(Dopri8 at 1e-12), touching the floor once on the way, and is the reference throw. With
matplotlib it draws the paths and the loss (``bounce_to_target.png``).

Run ``python examples/bounce_to_target.py [--out DIR]`` (the run is already quick).
"""

import time

from _common import Example  # first: float64 before any JAX array exists

import diffrax
import jax
import jax.numpy as jnp
import numpy as np
import optax

import mbjax
from mbjax import contact

example = Example(__doc__, quick=None)
ball = mbjax.ModelBuilder("ball").add_body("ball", joint="free", mass=1.0, inertia=np.eye(3) * 0.004).build()
floor = contact.CompliantContact(contact.contact_points(ball, [("ball", contact.sphere(0.1))]),
                                 contact.Plane.horizontal(0.0), contact.HuntCrossley(2e4, 0.1))
dynamics = contact.WithContacts(floor)
T = 1.0
q0 = jnp.asarray([0.0, 0.0, 1.0, 1.0, 0.0, 0.0, 0.0])


def flight(v, **options):
    """The ball's path (201 saved states over [0, T]) thrown at velocity v (3,)."""
    options = {"rtol": 1e-12, "atol": 1e-12} | options
    return mbjax.simulate(ball, q0, jnp.concatenate([v, jnp.zeros(3)]), 0.0, T, method=dynamics,
                          saveat=jnp.linspace(0.0, T, 201), **options)


def bounces(path):
    """How many times the ball touches the floor along ``path`` (its saved states)."""
    depth = np.asarray(jax.vmap(lambda q: floor.forces(ball, q, jnp.zeros(6))[0].depth[0])(path.q))
    return int(np.sum(np.diff((depth > 0).astype(int)) == 1))


def miss(v, target):
    """The squared distance from ``target`` of the ball's centre at T, and the centre."""
    centre = flight(v).q[-1, :3]
    return jnp.sum((centre - target) ** 2), centre


# one compiled program for everything below: the loss, its gradient and the centre at T
loss_and_grad = jax.jit(jax.value_and_grad(miss, has_aux=True))
REFERENCE = jnp.asarray([1.6, 0.4, 1.0])
TARGET = loss_and_grad(REFERENCE, jnp.zeros(3))[0][1]
guess = jnp.asarray([1.2, 0.8, 0.3])
start = time.perf_counter()
(value, _), grad = loss_and_grad(guess, TARGET)
h = 1e-4
fd = np.array([(loss_and_grad(guess + h * e, TARGET)[0][0] - loss_and_grad(guess - h * e, TARGET)[0][0]) / (2 * h)
               for e in np.eye(3)])
grad_error = float(np.max(np.abs(np.asarray(grad) - fd)) / np.max(np.abs(fd)))
print(f"the first guess misses by {np.sqrt(value):.3f} m; gradient {np.round(np.asarray(grad), 6)}, central "
      f"differences {np.round(fd, 6)}: {grad_error:.1e} apart")

# L-BFGS with unit steps (no line search, which would compile the simulation once more)
optimiser = optax.lbfgs(learning_rate=1.0, linesearch=None)
v, state, history = guess, optimiser.init(guess), []
for k in range(50):
    (value, _), grad = loss_and_grad(v, TARGET)
    history.append(float(value))
    if value < 1e-10:  # 10 µm
        break
    updates, state = optimiser.update(grad, state, v)
    v = optax.apply_updates(v, updates)
wall = time.perf_counter() - start
print(f"optax.lbfgs: {len(history) - 1} steps in {wall:.1f} s; launch velocity {np.round(np.asarray(v), 6)} m/s")

check = flight(v, solver=diffrax.Dopri8())
distance = float(jnp.linalg.norm(check.q[-1, :3] - TARGET))
touches = bounces(check)
print(f"independent re-simulation (Dopri8, 1e-12): passes {distance * 1e3:.4f} mm from the target at t = {T} s after "
      f"{touches} bounce(s)")
example.record(gradient_error=grad_error, steps=len(history) - 1, solve_seconds=wall, miss=distance, bounces=touches,
               launch_velocity=np.asarray(v), velocity_error=float(jnp.max(jnp.abs(v - REFERENCE))))

assert grad_error < 1e-5, "the gradient disagrees with central differences"
assert distance < 1e-4 and touches == 1, "the throw found misses the target"
assert float(jnp.max(jnp.abs(v - REFERENCE))) < 1e-4, "another throw than the reference's"


def draw(plt):
    fig, (a, b) = plt.subplots(1, 2, figsize=(11, 4))
    for path, label in ((flight(guess).q, "first guess"), (check.q, "found")):
        a.plot(np.hypot(path[:, 0], path[:, 1]), path[:, 2], label=label)
    a.plot(np.hypot(TARGET[0], TARGET[1]), TARGET[2], "k*", ms=12, label=f"target at t = {T} s")
    a.axhline(0.1, color="grey", lw=0.5)
    a.set(xlabel="distance travelled (m)", ylabel="height of the centre (m)", title="one bounce to the target")
    a.legend()
    b.semilogy(history)
    b.set(xlabel="optax.lbfgs step", ylabel="squared miss (m^2)", title="loss")
    return fig


example.figure("bounce_to_target.png", draw=draw)
