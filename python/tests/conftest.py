"""Shared fixtures: the pipeplan CLI to compare the module against."""

import os
import pathlib
import subprocess
import sys

import pytest

HERE = pathlib.Path(__file__).resolve().parent
SOURCE_DIR = pathlib.Path(os.environ.get("PIPEPLAN_SOURCE_DIR", HERE.parent.parent))


def _find_cli():
    if os.environ.get("PIPEPLAN_CLI"):
        return pathlib.Path(os.environ["PIPEPLAN_CLI"])
    for build in ("build", "build-core"):
        candidate = SOURCE_DIR / build / "pipeplan"
        if candidate.exists():
            return candidate
    return None


_FLAG_NAMES = {"-p": "pp_degree", "-m": "num_microbatches", "-v": "stages_per_rank"}


def python_spelling(text):
    """The CLI's text with shape fixes spelled as the Python keywords
    (the CLI says `-p 2`, the library and Python `pp_degree 2`)."""
    import re
    return re.sub(r"(?<![\w-])(-[pmv]) (?=-?\d)", lambda m: _FLAG_NAMES[m.group(1)] + " ", text)


class Cli:
    """Runs the pipeplan binary: run(args) -> CompletedProcess (text)."""

    def __init__(self, path):
        self.path = path

    def run(self, *args, input=None, cwd=None):
        return subprocess.run([str(self.path), *map(str, args)], input=input, cwd=cwd,
                              capture_output=True, text=True, timeout=120)

    def out(self, *args, **kwargs):
        """stdout of a run that must succeed."""
        r = self.run(*args, **kwargs)
        assert r.returncode == 0, (args, r.returncode, r.stderr)
        return r.stdout

    def error(self, *args, **kwargs):
        """(exit code, message) of a run that fails with 'pipeplan: error: MESSAGE'."""
        r = self.run(*args, **kwargs)
        assert r.returncode != 0, (args, r.stdout)
        prefix = "pipeplan: error: "
        lines = [l for l in r.stderr.splitlines() if l.startswith(prefix)]
        assert lines, r.stderr
        return r.returncode, lines[-1][len(prefix):]


@pytest.fixture(scope="session")
def cli():
    path = _find_cli()
    if path is None or not path.exists():
        pytest.fail("the pipeplan CLI was not found: set PIPEPLAN_CLI (ctest does)")
    return Cli(path)


@pytest.fixture(scope="session")
def source_dir():
    return SOURCE_DIR


@pytest.fixture(scope="session")
def interop_dir():
    return SOURCE_DIR / "tests" / "interop"
