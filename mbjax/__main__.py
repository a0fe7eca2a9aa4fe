"""``python -m mbjax``: the command line interface (see :mod:`mbjax.cli`)."""

import sys

from .cli import run

sys.exit(run())
