"""pytest configuration shared by every test module (markers are declared in pyproject.toml).

`make test` (CI) runs everything; `make test-fast` leaves out the e2e tests."""

import os
import signal
import stat

import pytest

# make test runs three workers on a 2-core host, each starting engines that load OpenBLAS. With
# its default of a thread per core every BLAS call spins threads against the other workers'
# (a quick session here: 5.0 s of system time against 1.4 s with one thread). The tests compare
# timings within a run, never against a fixed figure, so one BLAS thread per process changes no
# verdict; the subprocesses the tests start inherit it. A value set outside is kept.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")


def pytest_configure(config):
    # A shell starts a background job (`make test &`) with SIGINT ignored, and every process it
    # starts inherits that, the harness under test too until its handler is in; the Ctrl-C
    # tests need it delivered as a terminal would.
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def pytest_collection_modifyitems(config, items):
    """The end-to-end files first, the longest first: make test hands each to its own worker at
    the start (with --no-loadscope-reorder), and the short files fill the third worker and then
    the others, instead of the long ones starting last and running alone at the end."""
    longest = ("test_asv_e2e.py", "test_foreign_e2e.py", "test_pr_check_e2e.py", "test_history_e2e.py")

    def rank(item):
        name = item.nodeid.split("::")[0].rsplit("/", 1)[-1]
        return longest.index(name) if name in longest else len(longest)
    items.sort(key=rank)   # stable: the order within each file is kept


@pytest.fixture(autouse=True)
def _dev_null_survives():
    """The tests run as root in CI and some hand /dev/null to the CLI as an output: a test that
    ever replaced or removed it would break every later subprocess (git, asv) far from its cause,
    so the test that did it fails here, by name."""
    yield
    mode = os.stat("/dev/null").st_mode if os.path.exists("/dev/null") else 0
    assert stat.S_ISCHR(mode), "this test removed or replaced /dev/null (restore: mknod -m 666 /dev/null c 1 3)"
