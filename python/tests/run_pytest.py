"""Runs one pytest file for ctest.

Exit codes: pytest's, except that a missing pytest is 77 (ctest's
SKIP_RETURN_CODE: the suite is reported as skipped, with the fix) and
"no tests collected" (pytest's 5) is a failure, since every test file
collects tests; under a PYTEST_ADDOPTS filter (-k ...) that selects nothing,
or when the module skipped itself (an oracle test whose peer package is not
installed here, python/oracle_tests/oracles.py), it is a skip instead.
"""

import os
import sys

try:
    import pytest
except ImportError:
    print("pytest is not installed for %s: apt-get install python3-pytest" % sys.executable)
    # The oracle tests must run in CI (python/oracle_tests/oracles.py).
    if os.environ.get("PIPEPLAN_ORACLE_RUN") == "1" and os.environ.get("CI") == "true":
        sys.exit(1)
    sys.exit(77)

NO_TESTS_COLLECTED = 5

class ModuleSkips:
    """Counts modules that skipped themselves while being collected."""

    def __init__(self):
        self.skipped = 0

    def pytest_collectreport(self, report):
        if report.skipped:
            self.skipped += 1


def main():
    args = sys.argv[1:] + ["-q", "-rs", "-p", "no:cacheprovider"]
    skips = ModuleSkips()
    code = pytest.main(args, plugins=[skips])
    if code == NO_TESTS_COLLECTED:
        if skips.skipped:
            sys.exit(77)  # the reason is in pytest's summary (-rs)
        if os.environ.get("PYTEST_ADDOPTS"):
            print("no tests selected by PYTEST_ADDOPTS=%r" % os.environ["PYTEST_ADDOPTS"])
            sys.exit(77)
        print("no tests were collected from %s: the file or its test names are broken" % sys.argv[1:])
        sys.exit(1)
    sys.exit(int(code))


# A test that spawns processes (torch.multiprocessing, python/oracle_tests/
# torch_pp.py) re-imports this file as __mp_main__ in each child: only the
# parent runs pytest.
if __name__ == "__main__":
    main()
