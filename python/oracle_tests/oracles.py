"""Helpers of the oracle tests: the real torch, torchtitan, Megatron-Core and
DeepSpeed, imported from the project's Python environment (scripts/venv.sh,
pins in scripts/oracles.txt), judge pipeplan's interop claims.

require(name) imports a peer package. In CI (CI=true, or
PIPEPLAN_REQUIRE_ORACLES=1) a missing package fails the test: the oracle must
run there. Elsewhere the test is skipped and the reason printed.
"""

import importlib
import os
import pathlib
import subprocess

import pytest

HERE = pathlib.Path(__file__).resolve().parent
SOURCE_DIR = pathlib.Path(os.environ.get("PIPEPLAN_SOURCE_DIR", HERE.parent.parent))


def oracles_required():
    return os.environ.get("CI") == "true" or os.environ.get("PIPEPLAN_REQUIRE_ORACLES") == "1"


def require(name):
    """The imported module `name`, or a skip (a failure in CI) naming why not."""
    try:
        return importlib.import_module(name)
    except Exception as e:  # ImportError, or a peer that fails while importing
        why = "%s is not importable here (%s: %s); scripts/venv.sh installs it" % (
            name, type(e).__name__, e)
        if oracles_required():
            pytest.fail(why + " (CI runs every oracle test)", pytrace=False)
        pytest.skip(why, allow_module_level=True)


def require_executor():
    """The path of exec_transformer (pipeplan's executor on torch_pp's model), or a
    skip (a failure in CI) when the executor was not built (no LibTorch)."""
    path = os.environ.get("PIPEPLAN_EXEC_TRANSFORMER", "")
    if path and os.path.exists(path):
        return path
    why = ("pipeplan's executor was not built here (no LibTorch; PIPEPLAN_EXEC_TRANSFORMER=%r)"
           % path)
    if oracles_required():
        pytest.fail(why + " (CI builds it)", pytrace=False)
    pytest.skip(why)


def version_of(dist):
    """The installed version of a distribution (e.g. 'torch'), for messages and docs."""
    from importlib.metadata import version
    return version(dist)


def cli():
    """The pipeplan binary under test (PIPEPLAN_CLI, else build/pipeplan)."""
    if os.environ.get("PIPEPLAN_CLI"):
        return pathlib.Path(os.environ["PIPEPLAN_CLI"])
    for build in ("build", "build-core"):
        candidate = SOURCE_DIR / build / "pipeplan"
        if candidate.exists():
            return candidate
    pytest.fail("the pipeplan binary was not found: set PIPEPLAN_CLI", pytrace=False)


def run_cli(*args, check=True, cwd=None, input=None):
    """Runs pipeplan with args (str() of each); CompletedProcess with text."""
    proc = subprocess.run([str(cli())] + [str(a) for a in args], capture_output=True,
                          text=True, cwd=cwd, input=input, timeout=600)
    if check and proc.returncode != 0:
        raise AssertionError("pipeplan %s: exit %d\n%s%s" % (
            " ".join(map(str, args)), proc.returncode, proc.stdout, proc.stderr))
    return proc
