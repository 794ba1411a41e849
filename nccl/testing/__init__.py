"""pytest plugin: run a test body on N ranks, with plain ``pytest``, no GPU.

Active whenever nccl4py is installed (entry point ``pytest11``), or with
``pytest -p nccl.testing``::

    import numpy as np
    import pytest
    import nccl.core as nc

    @pytest.mark.nccl(nranks=4)
    def test_allreduce(comm, rank, nranks):
        x = np.full(8, rank, np.float32)
        comm.allreduce(x, x, nc.SUM)
        assert (x == sum(range(nranks))).all()

``@pytest.mark.nccl(nranks=N, timeout=S)`` runs the body on N ranks of the
host backend (``--nccl-backend`` chooses NCCL or RCCL, one GPU per rank),
one process each.  Fixtures: ``comm`` (a ``nccl.core.Communicator`` over all
ranks, destroyed after the test, aborted if the test failed on that rank),
``rank`` and ``nranks``.  ``nranks`` may also be a list (the test runs once
per value), or come from ``@pytest.mark.parametrize("nranks", [...])``.

The test passes only if every rank passes; a failure shows each failing
rank's traceback and output labelled ``rank R``; a rank still running after
``timeout`` seconds (default 60, ``--nccl-timeout``) fails the test with the
ranks named and their stacks; a failing or hung test also shows what the
ranks' flight records say (``python -m nccl.trace``: which rank skipped or
reordered which collective); a skip on every rank is a skip.

How it runs: the parent pytest keeps, per number of ranks, a pool of worker
processes, each a pytest session of its own that imports the test modules
(conftest.py files, fixtures and module-level code work as usual there) and
runs the test by node id; the parent turns the ranks' reports into one
report.  Fixtures of every scope are set up and torn down around each test
on the ranks.  Skip and xfail marks are evaluated once, in the parent.  See
docs/testing.md.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

import pytest

from nccl.testing import outcome, worker

if TYPE_CHECKING:
    from nccl.testing.pool import PoolManager

__all__ = ["DEFAULT_NRANKS", "DEFAULT_TIMEOUT", "NcclItem"]

DEFAULT_NRANKS = 2
DEFAULT_TIMEOUT = 60.0
STARTUP_TIMEOUT = 120.0  # for a pool's processes to import and collect

_MANAGER = pytest.StashKey["PoolManager"]()


# ----------------------------------------------------------------- options

def pytest_addoption(parser) -> None:
    group = parser.getgroup("nccl", "multi-rank tests (nccl4py)")
    group.addoption("--nccl-timeout", type=float, default=None, metavar="SECONDS",
                    help=f"default timeout of @pytest.mark.nccl tests (default "
                    f"{DEFAULT_TIMEOUT:g}); a test whose ranks are not done by then fails")
    group.addoption("--nccl-backend", choices=("host", "nccl", "rccl"), default="host",
                    help="library of the ranks: host (default, no GPU), nccl or rccl "
                    "(one GPU per rank)")


def pytest_configure(config) -> None:
    config.addinivalue_line(
        "markers", "nccl(nranks=2, timeout=None): run the test body on nranks ranks "
        "(processes) with the fixtures comm, rank and nranks (nccl4py)")
    timeout = config.getoption("nccl_timeout", None)
    if timeout is not None and not timeout > 0:
        raise pytest.UsageError(f"--nccl-timeout must be positive, got {timeout:g}")
    if worker.current() is None:
        from nccl.testing.pool import PoolManager

        config.stash[_MANAGER] = PoolManager(_worker_args(config),
                                             config.getoption("nccl_backend", "host"),
                                             str(config.invocation_params.dir),
                                             max(STARTUP_TIMEOUT, timeout or 0))


def pytest_unconfigure(config) -> None:
    manager = config.stash.get(_MANAGER, None)
    if manager is not None:
        manager.close()


def _worker_args(config) -> list[str]:
    """The command line of the ranks' pytest sessions (files are added per pool)."""
    args = ["-p", "nccl.testing", "-p", "no:cacheprovider", "-p", "no:skipping",
            "-o", "addopts=", "-q", "--capture=no", "--rootdir", str(config.rootpath),
            f"--import-mode={config.option.importmode}"]
    if config.inipath is not None:
        args += ["-c", str(config.inipath)]
    for name in getattr(config.known_args_namespace, "plugins", None) or []:
        if name != "nccl.testing":
            args += ["-p", name]
    for spec in getattr(config.known_args_namespace, "pythonwarnings", None) or []:
        args += ["-W", spec]
    return args


# -------------------------------------------------------------- collection

def _marker_nranks(marker):
    if "nranks" in marker.kwargs:
        return marker.kwargs["nranks"]
    return marker.args[0] if marker.args else DEFAULT_NRANKS


def pytest_generate_tests(metafunc) -> None:
    marker = metafunc.definition.get_closest_marker("nccl")
    if marker is None:
        return
    values = _marker_nranks(marker)
    if isinstance(values, (list, tuple)):
        if "nranks" not in metafunc.fixturenames:
            metafunc.fixturenames.append("nranks")
        metafunc.parametrize("nranks", list(values), ids=[f"{n}ranks" for n in values])


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(session, config, items) -> None:
    if worker.current() is not None:
        return
    files = sorted({str(item.path) for item in items
                    if isinstance(item, pytest.Function) and item.get_closest_marker("nccl")})
    if not files:
        return
    config.stash[_MANAGER].args += files
    for i, item in enumerate(items):
        if isinstance(item, pytest.Function) and item.get_closest_marker("nccl"):
            assert item.parent is not None
            items[i] = NcclItem.from_parent(item.parent, name=item.name, function=item)


class NcclItem(pytest.Item):
    """A ``@pytest.mark.nccl`` test as the parent runs it: on the ranks."""

    def __init__(self, *, function: pytest.Function, **kwargs) -> None:
        super().__init__(**kwargs)
        self.function = function
        self.own_markers = list(function.own_markers)
        self.keywords.update(function.keywords)
        self.extra_keyword_matches.update(function.extra_keyword_matches)

    @property
    def obj(self):
        return self.function.obj

    def reportinfo(self):
        return self.function.reportinfo()

    def settings(self) -> tuple[int, float]:
        """(number of ranks, timeout) of this test; UsageError when invalid."""
        marker = self.get_closest_marker("nccl")
        assert marker is not None  # only marked tests become NcclItems
        callspec = getattr(self.function, "callspec", None)
        if callspec is not None and "nranks" in callspec.params:
            nranks = callspec.params["nranks"]
        else:
            nranks = _marker_nranks(marker)
        if isinstance(nranks, bool) or not isinstance(nranks, int) or nranks < 1:
            raise pytest.UsageError(f"{self.nodeid}: nranks must be a positive integer, "
                                    f"got {nranks!r}")
        timeout = marker.kwargs.get("timeout")
        if timeout is None:
            timeout = self.config.getoption("nccl_timeout") or DEFAULT_TIMEOUT
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not timeout > 0:
            raise pytest.UsageError(f"{self.nodeid}: timeout must be a positive number of "
                                    f"seconds, got {timeout!r}")
        from nccl._launch import limits

        problem = limits.check_nranks(nranks, host=self.config.getoption("nccl_backend")
                                      == "host", oversubscribe=True)
        if problem is not None:
            raise pytest.UsageError(f"{self.nodeid}: {problem.replace('-n ', 'nranks=', 1)}")
        return nranks, float(timeout)

    def runtest(self) -> None:
        from nccl.testing.pool import PoolError

        nranks, timeout = self.settings()
        manager = self.config.stash[_MANAGER]
        try:
            pool = manager.pool(nranks)
            results = pool.run(self.nodeid, timeout)
        except PoolError as exc:
            raise outcome.RanksFailed(str(exc)) from None
        except BaseException:  # Ctrl-C and the like: no rank may outlive us
            manager.kill()
            raise
        sections = outcome.add_sections(self, results)
        if self.config.getoption("capture") == "no":  # -s: show what the ranks printed
            for title, content in sections:
                print(f"--- {title} ---\n{content}", end="" if content.endswith("\n") else "\n")
        outcome.conclude(self.nodeid, nranks, timeout, results, pool.diagnosis)

    def repr_failure(self, excinfo, style=None):
        if excinfo.errisinstance(outcome.RanksFailed):
            return str(excinfo.value)
        return super().repr_failure(excinfo, style=style)


# ---------------------------------------------------------------- fixtures

def _worker_or_fail(name: str):
    state = worker.current()
    if state is None:
        pytest.fail(f"the {name!r} fixture is for tests marked @pytest.mark.nccl(nranks=N)",
                    pytrace=False)
    return state


@pytest.fixture
def nranks() -> int:
    """The number of ranks of this test."""
    return _worker_or_fail("nranks").nranks


@pytest.fixture
def rank() -> int:
    """This rank's number, 0 .. nranks-1."""
    return _worker_or_fail("rank").rank


@pytest.fixture
def comm(request):
    """A ``nccl.core.Communicator`` over every rank of the test (a fresh one
    per test), destroyed after the test, or aborted if the test failed here."""
    state = _worker_or_fail("comm")
    import nccl.core as nc

    communicator = nc.Communicator.init(state.nranks, state.rank,
                                        nc.UniqueId.from_bytes(state.uid))
    try:
        yield communicator
    finally:
        if os.environ.get("NCCL4PY_TRACE_DIR"):  # its record, for a diagnosis of the test
            try:
                communicator.dump_trace()
            except Exception:  # noqa: BLE001 - a diagnosis aid never fails the test
                pass
    if communicator.is_valid:
        if request.node.stash.get(worker.FAILED_KEY, False):
            communicator.abort()
        else:
            communicator.destroy()


def in_rank() -> bool:
    """True inside a rank of a multi-rank test (also from conftest.py code)."""
    return os.environ.get(worker.RANK_ENV) is not None
