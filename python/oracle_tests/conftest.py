"""The oracle tests (python/oracle_tests/oracles.py says what they are)."""

import sys
import pathlib

# The folder's helpers (oracles.py and the peers' runners) import by name.
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
