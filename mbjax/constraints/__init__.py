"""Kinematic constraints: loop closures, their stabilisation and the solvers that enforce them."""
