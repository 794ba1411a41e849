"""bench/core_overhead.py's timing loops: the loop that ``loop()`` builds is
the one written by hand (the same instructions per iteration), so that the
per-call figures measure the call and nothing the factory adds."""
from __future__ import annotations

import importlib.util

import pytest

from conftest import ROOT


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("core_overhead",
                                                  ROOT / "bench" / "core_overhead.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def f(*args, **kwargs):
    return None


def positional(n, f=f, a0=1, a1=2, a2=3):
    for _ in range(n):
        f(a0, a1, a2)


def keyword(n, f=f, a0=1, a1=2, a2=3, kw_config=4):
    for _ in range(n):
        f(a0, a1, a2, config=kw_config)


def unpacked(n, f=f, a0=(1, 2)):
    for _ in range(n):
        f(*a0)


def code(fn):
    c = fn.__code__
    return c.co_code, c.co_consts, c.co_names, c.co_varnames, c.co_argcount, fn.__defaults__


@pytest.mark.parametrize("by_hand, args, kwargs", [
    (positional, lambda bench: (1, 2, 3), {}),
    (keyword, lambda bench: (1, 2, 3), {"config": 4}),
    (unpacked, lambda bench: (bench.Star((1, 2)),), {}),
])
def test_loop_is_the_hand_written_loop(bench, by_hand, args, kwargs):
    assert code(bench.loop(f, *args(bench), **kwargs)) == code(by_hand)


def test_star_binds_a_plain_tuple(bench):
    # f(*a) copies a tuple subclass into a new tuple on every call
    run = bench.loop(f, bench.Star([1, 2]))
    assert type(run.__defaults__[1]) is tuple


def test_loop_calls(bench):
    seen = []
    bench.loop(lambda *a, **k: seen.append((a, k)), 1, bench.Star((2, 3)), x=4)(3)
    assert seen == [((1, 2, 3), {"x": 4})] * 3
