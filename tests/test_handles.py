"""Comm and Window: the 0.5+ handle objects, usable wherever 0.2 code used ints."""
from __future__ import annotations

import ctypes
import pickle

import pytest

from nccl import bindings
from nccl.bindings import Comm, Window


@pytest.mark.parametrize("cls", [Comm, Window])
def test_slot_is_live_and_stable(cls):
    h = cls()
    assert h.handle == 0 and not h
    slot = h.handle_ptr
    ctypes.c_void_p.from_address(slot).value = 0xC0FFEE  # what the library does
    assert h.handle == 0xC0FFEE and h and int(h) == 0xC0FFEE
    assert h.handle_ptr == slot


@pytest.mark.parametrize("cls", [Comm, Window])
def test_upstream_surface(cls):
    h = cls(handle=0x1234)
    assert h.handle == 0x1234
    assert type(h).__module__ == "nccl.bindings.nccl"
    assert repr(h).startswith(f"<nccl.bindings.nccl.{cls.__name__} handle=0x1234 object at 0x")
    assert cls(-1).handle == -1
    with pytest.raises(AttributeError):
        h.handle = 5  # type: ignore[misc]

    class Sub(cls):  # type: ignore[misc, valid-type]
        pass

    assert Sub(7).handle == 7


def test_behaves_as_the_integer_it_holds():
    c = Comm(0x1000)
    assert c == 0x1000 and 0x1000 == c and c == Comm(0x1000) and c != 0x1001
    assert c < 0x1001 and c >= 0x1000
    assert hash(c) == hash(0x1000) and {0x1000: "x"}[c] == "x"
    assert c + 8 == 0x1008 and type(c + 8) is int and 0x2000 - c == 0x1000
    assert c & 0xF00 == 0 and c | 1 == 0x1001 and c >> 4 == 0x100 and c // 2 == 0x800
    assert hex(c) == "0x1000" and f"{c:x}" == "1000" and [0, 1, 2][Comm(2)] == 2
    assert pickle.loads(pickle.dumps(c)) == c


def test_non_integers_refused():
    with pytest.raises(TypeError):
        Comm(1.5)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        Comm(None)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        Comm(0) + 1.5  # type: ignore[operator]
    assert Comm(3) != "3"


def test_accepted_where_an_int_handle_is(recording_stub):
    # A handle object passes its current value to the library as an int would.
    recording_stub.nccl4pyStubReset()
    bindings.comm_abort(Comm(0x5678))
    with_object = recording_stub.nccl4pyStubLastCall().decode()
    bindings.comm_abort(0x5678)
    assert recording_stub.nccl4pyStubLastCall().decode() == with_object
    assert "0x5678" in with_object


# ------------------------------------------- slots the library writes later

LATE_WRITER = r"""
#include <pthread.h>
#include <time.h>

int nanosleep(const struct timespec *req, struct timespec *rem); /* POSIX, hidden by -std=c11 */

static void *volatile late_slot;
static volatile int late_state; /* 0: nothing asked, 1: writing soon, 2: written */

static void *
late_write(void *arg)
{
    (void)arg;
    while (late_state != 3) { /* the test says when (after it dropped the handle) */
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
    *(void **)late_slot = (void *)0x5EED5EED;
    late_state = 2;
    return NULL;
}

/* A non-blocking init that fills *comm later, from another thread, as NCCL's
 * does with config.blocking = 0 (test library, never a backend). */
EXPORT ncclResult_t
ncclCommInitRankConfig(ncclComm_t *comm, int nranks, ncclUniqueId id, int rank,
                       ncclConfig_t *config)
{
    (void)nranks; (void)id; (void)rank; (void)config;
    pthread_t t;
    late_slot = comm;
    late_state = 1;
    if (pthread_create(&t, NULL, late_write, NULL) != 0)
        return ncclSystemError;
    pthread_detach(t);
    return ncclInProgress;
}

EXPORT void nccl4pyTestWriteNow(void) { late_state = 3; }
EXPORT int nccl4pyTestWritten(void) { return late_state == 2; }
"""

DROP_PENDING = r"""
import ctypes, gc, os, sys, time
import nccl.bindings as b

lib = ctypes.CDLL(os.environ["NCCL_LIBRARY"])
cfg = b.Config()
cfg.blocking = 0
h = b.comm_init_rank_config(2, bytes(128), 0, cfg)  # returns at once: ncclInProgress
assert isinstance(h, b.Comm) and h.handle == 0
old = id(h)
# everything the search allocates exists before the handle is freed (a range
# iterator, say, could take its memory first)
keep, reused, tries = [], None, iter(range(100000))
del h
gc.collect()
for _ in tries:  # the freed object's memory, taken by a new handle object
    o = b.Comm()
    keep.append(o)
    if id(o) == old:
        reused = o
        break
lib.nccl4pyTestWriteNow()  # now the library fills the slot it was given
deadline = time.time() + 30
while not lib.nccl4pyTestWritten() and time.time() < deadline:
    time.sleep(0.001)
assert lib.nccl4pyTestWritten()
bad = [hex(o.handle) for o in keep if o.handle]
print("reused" if reused is not None else "not reused", bad)
sys.exit(1 if bad else 0)
"""


def test_dropped_pending_handle_is_never_written_behind_its_back(stub_dir, tmp_path):
    """A Comm returned by a non-blocking init and dropped before the library
    fills its slot: the library writes later, and must not write into the
    memory of whatever object lives there now (nor into freed memory: under
    ASan with PYTHONMALLOC=malloc this would be a heap-use-after-free)."""
    import os
    import subprocess
    import sys

    from gen import api, stub
    from conftest import ROOT, cc, clean_env

    sanitized = bool(os.environ.get("NCCL4PY_SANITIZED_TREE"))
    src = tmp_path / "late_writer.c"
    src.write_text(stub.gen_stub_c(api.parse_table(), noop=False) + LATE_WRITER)
    lib = tmp_path / "liblate_writer.so"
    # under tools/sanitize.sh the library's late write is instrumented too, and
    # every Python object is malloc'd: a write into a freed object is reported
    subprocess.run([cc(), "-std=c11", "-Wall", "-Wextra", "-Werror", "-shared", "-fPIC",
                    f"-I{ROOT / 'src'}", "-DSTUB_OMIT_ncclCommInitRankConfig", "-o", str(lib),
                    str(src)] + (["-fsanitize=address"] if sanitized else []), check=True)
    env = clean_env(NCCL_LIBRARY=str(lib))
    if sanitized:
        env["PYTHONMALLOC"] = "malloc"
    p = subprocess.run([sys.executable, "-c", DROP_PENDING], env=env, capture_output=True,
                       text=True, timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr
    if not sanitized:
        assert p.stdout.startswith("reused"), p.stdout  # the case the check is about
