"""The rank side of tests/test_torch_backend.py: every check on every rank.

Started by tests/torch_ranks.py on 2 ranks (torchrun, env://) and on 4 ranks
(tcp://, then file:// and an explicit store).  Each ``check_*`` function runs
on all ranks in file order; a failure is recorded (with its traceback) and
the next check runs.  The results go to ``<results dir>/rank<R>.json``.

Usage: python torch_checks.py <results dir> <init method: env|tcp://...> [tail]
"""
from __future__ import annotations

import copy
import json
import math
import os
import sys
import time
import traceback
from datetime import timedelta

import torch
import torch.distributed as dist

import nccl.core as nc
import nccl.torch
from nccl.torch import UnsupportedError

RESULTS = sys.argv[1]
TIMEOUT = timedelta(seconds=60)
R = N = -1
GLOO = None
results: dict = {}
info: dict = {}

NATIVE = [torch.int8, torch.uint8, torch.int32, torch.uint32, torch.int64, torch.uint64,
          torch.float16, torch.float32, torch.float64, torch.bfloat16, torch.float8_e4m3fn,
          torch.float8_e5m2]
FP8 = (torch.float8_e4m3fn, torch.float8_e5m2)


def data(r: int, shape=(6,), dtype=torch.float32, salt: int = 0, top: int = 5):
    """Rank r's input: small integers 1..top (exact in every type, also summed)."""
    n = math.prod(shape)
    v = (torch.arange(n, dtype=torch.int64) * 7 + r * 3 + salt) % top + 1
    return v.reshape(shape).to(dtype)


def reduced(op: str, dtype=torch.float32, shape=(6,), salt: int = 0, top: int = 5, n=None):
    """The expected reduction of data() over ranks 0..n-1."""
    n = N if n is None else n
    wide = torch.int64 if not (dtype.is_floating_point or dtype.is_complex) else torch.float64
    xs = torch.stack([data(r, shape, wide, salt, top) for r in range(n)])
    out = {"SUM": xs.sum(0), "PRODUCT": xs.prod(0), "MIN": xs.min(0).values,
           "MAX": xs.max(0).values, "AVG": xs.sum(0) / n if wide is torch.float64
           else torch.div(xs.sum(0), n, rounding_mode="trunc")}[op]
    return out.to(dtype)


def same(a, b, what: str = "") -> None:
    assert a.dtype == b.dtype, f"{what}: dtype {a.dtype} != {b.dtype}"
    assert a.shape == b.shape, f"{what}: shape {tuple(a.shape)} != {tuple(b.shape)}"
    if a.dtype in FP8 or a.dtype == torch.bool:
        a, b = a.to(torch.float32), b.to(torch.float32)
    elif a.dtype == torch.complex32:
        a, b = torch.view_as_real(a), torch.view_as_real(b)
    assert torch.equal(a, b), f"{what}: {a.flatten()[:8].tolist()} != {b.flatten()[:8].tolist()}"


def refused(fn, *words, exc=UnsupportedError) -> str:
    try:
        fn()
    except exc as e:
        msg = str(e)
        for w in words:
            assert w in msg, f"{w!r} not in {msg!r}"
        return msg
    raise AssertionError(f"not refused: {words}")


OPS = {"SUM": dist.ReduceOp.SUM, "PRODUCT": dist.ReduceOp.PRODUCT, "MIN": dist.ReduceOp.MIN,
       "MAX": dist.ReduceOp.MAX, "AVG": dist.ReduceOp.AVG}


# ---------------------------------------------------------------- basics

def check_backend_and_registration():
    assert dist.get_backend() == "nccl4py_host", dist.get_backend()
    pg = dist.group.WORLD
    assert isinstance(pg, nccl.torch.HostProcessGroup), type(pg)
    assert pg.rank() == R and pg.size() == N
    assert pg.communicator.nranks == N and pg.communicator.rank == R
    assert "nccl4py_host" in dist.Backend.backend_list
    # CPU tensors without a named backend still default to gloo
    assert dist.Backend.default_device_backend_map["cpu"] == "gloo"
    info["uid_world"] = pg._uid.hex()


def check_all_reduce_ops_float32():
    for name, op in OPS.items():
        top = 2 if name == "PRODUCT" else 5
        t = data(R, top=top)
        dist.all_reduce(t, op=op)
        same(t, reduced(name, top=top), name)
    for factor in (2.5, torch.tensor([0.5])):
        t = data(R)
        dist.all_reduce(t, op=dist._make_nccl_premul_sum(factor))
        f = float(factor) if not isinstance(factor, torch.Tensor) else factor.item()
        same(t, (reduced("SUM", torch.float64) * f).to(torch.float32), f"premul {factor}")


def check_all_reduce_every_nccl_dtype():
    for dt in NATIVE:
        top = 2 if dt in FP8 else 5
        for name in ("SUM", "MAX", "MIN", "PRODUCT", "AVG"):
            if name == "AVG" and dt in FP8:
                continue  # the average of small integers is not exact in 2-3 mantissa bits
            t = data(R, dtype=dt, top=2 if name == "PRODUCT" else top)
            dist.all_reduce(t, op=OPS[name])
            exp = reduced(name, dt, top=2 if name == "PRODUCT" else top)
            if name == "AVG" and dt.is_floating_point:  # rounded once, from the exact sum
                exp = (reduced("SUM", torch.float64, top=top) / N).to(dt)
            same(t, exp, f"{dt} {name}")
        t = data(R, dtype=dt, top=top)
        dist.all_reduce(t, op=dist._make_nccl_premul_sum(2.0))
        same(t, (reduced("SUM", torch.float64, top=top) * 2).to(dt), f"{dt} premul")


def check_all_reduce_bool():
    b = torch.tensor([R == 0, False, True, R % 2 == 1])
    for name, exp in (("SUM", [True, False, True, N > 1]), ("MAX", [True, False, True, N > 1]),
                      ("PRODUCT", [N == 1, False, True, False]),
                      ("MIN", [N == 1, False, True, False])):
        t = b.clone()
        dist.all_reduce(t, op=OPS[name])
        same(t, torch.tensor(exp), f"bool {name}")
    refused(lambda: dist.all_reduce(b.clone(), op=dist.ReduceOp.AVG), "AVG on bool")


def check_all_reduce_widened_int16_uint16():
    for dt in (torch.int16, torch.uint16):
        for name in ("SUM", "MAX", "MIN", "PRODUCT", "AVG"):
            t = data(R, dtype=dt)
            dist.all_reduce(t, op=OPS[name])
            same(t, reduced(name, dt), f"{dt} {name}")
    # wraps like an int16 sum
    t = torch.tensor([30000, -30000, 7], dtype=torch.int16)
    dist.all_reduce(t)
    exp = torch.tensor([30000 * N, -30000 * N, 7 * N], dtype=torch.int64).to(torch.int16)
    same(t, exp, "int16 wrap")
    # the average of the exact sum
    t = torch.tensor([30000, -30001], dtype=torch.int16)
    dist.all_reduce(t, op=dist.ReduceOp.AVG)
    same(t, torch.tensor([30000, -30001], dtype=torch.int16), "int16 avg")
    # a strided int16 view
    x = torch.zeros(4, 6, dtype=torch.int16)
    x[:, ::3] = R + 1
    v = x[:, ::3]
    dist.all_reduce(v)
    assert (v == N * (N + 1) // 2).all() and (x[:, 1] == 0).all()


def check_all_reduce_complex():
    for dt in (torch.complex64, torch.complex128, torch.complex32):
        base = torch.tensor([1 + 2j, -3 + 0.5j, 0.25 - 1j], dtype=torch.complex128)
        t = (base * (R + 1)).to(dt)
        dist.all_reduce(t)
        same(t, (base * (N * (N + 1) / 2)).to(dt), f"{dt} SUM")
        t = (base * (R + 1)).to(dt)
        dist.all_reduce(t, op=dist.ReduceOp.AVG)
        same(t, (base * ((N + 1) / 2)).to(dt), f"{dt} AVG")
        t = (base * (R + 1)).to(dt)
        dist.all_reduce(t, op=dist._make_nccl_premul_sum(2.0))
        same(t, (base * (N * (N + 1))).to(dt), f"{dt} premul")
        for name in ("MIN", "MAX", "PRODUCT"):
            # torch refuses MIN and MAX itself; the backend refuses all three
            refused(lambda: dist.all_reduce(t, op=OPS[name]), exc=(UnsupportedError, ValueError))
            opts = dist.AllreduceOptions()
            opts.reduceOp = OPS[name]
            refused(lambda: dist.group.WORLD.allreduce([t], opts), f"ReduceOp.{name} on {dt}",
                    "SUM, AVG")
    # a conj view: the reduction sees the logical values and writes them back
    # (torch's all_reduce refuses conj views itself; reduce and the process
    # group's allreduce reach the backend)
    z = torch.tensor([1 + 1j, 2 - 3j]) * (R + 1)
    c = z.conj()
    assert c.is_conj()
    dist.group.WORLD.allreduce([c], dist.AllreduceOptions()).wait()
    same(c.resolve_conj(), (torch.tensor([1 - 1j, 2 + 3j]) * (N * (N + 1) / 2)), "conj")
    c = (torch.tensor([1 + 1j, 2 - 3j]) * (R + 1)).conj()
    dist.reduce(c, 0)
    if R == 0:
        same(c.resolve_conj(), (torch.tensor([1 - 1j, 2 + 3j]) * (N * (N + 1) / 2)), "reduce conj")
    c = torch.tensor([1 + 1j, 2 - 3j]).conj() if R == 0 else torch.zeros(2, dtype=torch.complex64)
    opts = dist.BroadcastOptions()
    opts.rootRank = 0
    dist.group.WORLD.broadcast([c], opts).wait()  # torch's broadcast refuses conj views
    same(c.resolve_conj(), torch.tensor([1 - 1j, 2 + 3j]), "broadcast conj")
    # a neg view of real numbers (the imaginary part of a conj view)
    z = torch.tensor([1 + 1j, 2 - 3j]) * (R + 1)
    im = z.conj().imag
    assert im.is_neg()
    dist.all_reduce(im)
    same(z.imag, torch.tensor([1.0, -3.0]) * (N * (N + 1) / 2), "neg view")


def check_all_reduce_refusals():
    t = torch.ones(3, dtype=torch.int32)
    for op in ("BAND", "BOR", "BXOR"):
        refused(lambda: dist.all_reduce(t, op=getattr(dist.ReduceOp, op)), f"ReduceOp.{op}",
                "no bitwise", "gloo")
    for dt in (torch.float8_e4m3fnuz, torch.float8_e8m0fnu):
        refused(lambda: dist.all_reduce(torch.ones(2, dtype=dt)), str(dt), "to(torch.float32)")
    refused(lambda: dist.all_reduce(torch.ones(2, device="meta")), "meta", "CPU tensors")
    refused(lambda: dist.all_reduce(torch.ones(2, dtype=torch.int32),
                                    op=dist._make_nccl_premul_sum(0.5)), "must be an integer")
    q = torch.quantize_per_tensor(torch.ones(2), 0.1, 0, torch.quint8)
    refused(lambda: dist.broadcast(q, 0), "quantized")
    refused(lambda: dist.all_reduce(torch.ones(2).to_sparse()), "to_dense")
    # the group still works after every refusal (nothing reached the library)
    t = data(R)
    dist.all_reduce(t)
    same(t, reduced("SUM"), "after refusals")


def check_strided_and_odd_layouts():
    # gloo gives wrong results for these; nccl4py_host stages them
    x = torch.arange(24, dtype=torch.float32).reshape(4, 6) * (R + 1)
    v = x[:, ::2]
    dist.all_reduce(v)
    exp = torch.arange(24, dtype=torch.float32).reshape(4, 6)
    exp[:, ::2] *= N * (N + 1) / 2
    exp[:, 1::2] *= R + 1
    same(x, exp, "x[:, ::2]")
    y = (torch.arange(12, dtype=torch.float64).reshape(3, 4) * (R + 1)).t()
    dist.all_reduce(y, op=dist.ReduceOp.MAX)
    same(y, (torch.arange(12, dtype=torch.float64).reshape(3, 4) * N).t(), "transposed")
    # broadcast into a strided view, of a non-NCCL dtype
    z = torch.zeros(3, 8, dtype=torch.complex64)
    if R == 0:
        z[:, ::4] = torch.tensor([[1 + 1j, 2], [3, 4j], [5, 6]])
    dist.broadcast(z[:, ::4], 0)
    same(z[:, ::4], torch.tensor([[1 + 1j, 2], [3, 4j], [5, 6]], dtype=torch.complex64),
         "broadcast strided")
    assert (z[:, 1] == 0).all()
    # gather into non-contiguous outputs
    outs = [torch.zeros(2, 4)[:, ::2] for _ in range(N)]
    dist.all_gather(outs, torch.tensor([[R, R + 0.5], [-R, 1.0]]))
    for r, o in enumerate(outs):
        same(o, torch.tensor([[r, r + 0.5], [-r, 1.0]]), f"all_gather out {r}")
    out = torch.zeros(2 * N, 3).t()  # 3 x 2N, non-contiguous
    dist.all_gather_into_tensor(out, torch.full((3, 2), float(R)).t().contiguous().t())
    flat = out.contiguous().reshape(-1)  # logical order: rank r's 6 values at r*6
    same(flat, torch.arange(N).repeat_interleave(6).to(torch.float32), "all_gather_into_tensor")
    # reduce_scatter_tensor from a strided input into a strided output
    big = torch.zeros(N * 4, 2)
    big[:, 0] = torch.arange(N * 4, dtype=torch.float32) + R
    o = torch.zeros(4, 3)
    dist.reduce_scatter_tensor(o[:, 1], big[:, 0])
    exp = (torch.arange(N * 4, dtype=torch.float32) * N + N * (N - 1) / 2)[R * 4:(R + 1) * 4]
    same(o[:, 1], exp, "reduce_scatter_tensor strided")
    assert (o[:, 0] == 0).all() and (o[:, 2] == 0).all()
    # a parameter that requires grad
    p = torch.nn.Parameter(torch.full((3,), float(R + 1)))
    dist.all_reduce(p.data)
    dist.broadcast(p, 0)
    same(p.detach(), torch.full((3,), N * (N + 1) / 2), "requires_grad")
    # an expanded view cannot receive
    e = torch.zeros(1).expand(4)
    refused(lambda: dist.all_reduce(e), "share memory", exc=nc.NcclInvalid)


def check_broadcast_every_root_and_dtype():
    for root in range(N):
        for dt in NATIVE + [torch.bool, torch.int16, torch.complex128, torch.float8_e4m3fnuz]:
            src = data(root, (5,), torch.float32).to(dt)
            t = src.clone() if R == root else torch.zeros(5, dtype=dt)
            dist.broadcast(t, root)
            same(t, src, f"root {root} {dt}")


def check_reduce_every_root():
    for root in range(N):
        for name in ("SUM", "MAX", "AVG"):
            t = data(R)
            mine = t.clone()
            dist.reduce(t, root, op=OPS[name])
            if R == root:
                same(t, reduced(name), f"reduce root {root} {name}")
            else:
                same(t, mine, "non-root unchanged")
        t = data(R, dtype=torch.int16)
        dist.reduce(t, root)
        if R == root:
            same(t, reduced("SUM", torch.int16), "reduce int16")


def check_all_gather_variants():
    outs = [torch.empty(3) for _ in range(N)]
    dist.all_gather(outs, data(R, (3,)))
    for r in range(N):
        same(outs[r], data(r, (3,)), "all_gather")
    # uneven sizes: one broadcast per rank
    outs = [torch.empty(r + 1, dtype=torch.int64) for r in range(N)]
    dist.all_gather(outs, torch.arange(R + 1) * 10 + R)
    for r in range(N):
        same(outs[r], torch.arange(r + 1) * 10 + r, "uneven all_gather")
    # into a tensor, out of place and in place (the input is this rank's chunk)
    for dt in (torch.float32, torch.bfloat16, torch.complex64, torch.bool):
        out = torch.empty(N * 4, dtype=dt)
        dist.all_gather_into_tensor(out, data(R, (4,)).to(dt))
        same(out, torch.cat([data(r, (4,)).to(dt) for r in range(N)]), f"agit {dt}")
    out = torch.zeros(N * 4)
    out[R * 4:(R + 1) * 4] = data(R, (4,))
    dist.all_gather_into_tensor(out, out[R * 4:(R + 1) * 4])
    same(out, torch.cat([data(r, (4,)) for r in range(N)]), "agit in place")
    if hasattr(dist, "all_gather_single"):
        out = torch.empty(N, 2)
        dist.all_gather_single(out, data(R, (1, 2)))
        same(out, torch.cat([data(r, (1, 2)) for r in range(N)]), "all_gather_single")
    # all_gather_coalesced (deprecated in torch, still routed here)
    outs = [[torch.empty(2) for _ in range(N)], [torch.empty(3) for _ in range(N)]]
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        dist.all_gather_coalesced(outs, [data(R, (2,)), data(R, (3,), salt=1)])
    for r in range(N):
        same(outs[0][r], data(r, (2,)), "coalesced 0")
        same(outs[1][r], data(r, (3,), salt=1), "coalesced 1")


def check_reduce_scatter_variants():
    inputs = [data(R, (3,), salt=r) for r in range(N)]
    out = torch.empty(3)
    dist.reduce_scatter(out, inputs)
    same(out, reduced("SUM", salt=R, shape=(3,)), "reduce_scatter list")
    # uneven: one reduce per rank
    inputs = [data(R, (r + 1,), salt=r) for r in range(N)]
    out = torch.empty(R + 1)
    dist.reduce_scatter(out, inputs, op=dist.ReduceOp.MAX)
    same(out, reduced("MAX", shape=(R + 1,), salt=R), "uneven reduce_scatter")
    for dt in (torch.float32, torch.int16, torch.complex64, torch.bfloat16):
        inp = torch.cat([data(R, (2,), salt=r) for r in range(N)]).to(dt)
        out = torch.empty(2, dtype=dt)
        dist.reduce_scatter_tensor(out, inp)
        same(out, reduced("SUM", torch.float64, (2,), salt=R).to(dt), f"rst {dt}")
    # in place: the output is this rank's part of the input
    inp = torch.cat([data(R, (2,), salt=r) for r in range(N)])
    dist.reduce_scatter_tensor(inp[R * 2:(R + 1) * 2], inp, op=dist.ReduceOp.MIN)
    same(inp[R * 2:(R + 1) * 2], reduced("MIN", shape=(2,), salt=R), "rst in place")


def check_all_to_all_variants():
    inp = torch.arange(N * 2, dtype=torch.float32) + 100 * R
    out = torch.empty(N * 2)
    dist.all_to_all_single(out, inp)
    exp = torch.cat([torch.arange(R * 2, R * 2 + 2, dtype=torch.float32) + 100 * r
                     for r in range(N)])
    same(out, exp, "all_to_all_single even")
    # in place
    dist.all_to_all_single(inp, inp)
    same(inp, exp, "all_to_all_single in place")
    # uneven splits: rank R sends r+1 rows of 2 to rank r
    in_splits = [r + 1 for r in range(N)]
    out_splits = [R + 1] * N
    rows = torch.cat([torch.full((r + 1, 2), float(R * 10 + r)) for r in range(N)])
    out = torch.empty(sum(out_splits), 2)
    dist.all_to_all_single(out, rows, out_splits, in_splits)
    exp = torch.cat([torch.full((R + 1, 2), float(r * 10 + R)) for r in range(N)])
    same(out, exp, "uneven all_to_all_single")
    # uneven, in place in one buffer (same splits both ways)
    sq = [1] * N
    buf = torch.arange(N, dtype=torch.int64) + 10 * R
    dist.all_to_all_single(buf, buf, sq, sq)
    same(buf, torch.arange(N) * 10 + R, "uneven in place")
    # lists, uneven, odd dtype
    ins = [torch.full((r + 1,), R * 10 + r, dtype=torch.int16) for r in range(N)]
    outs = [torch.empty(R + 1, dtype=torch.int16) for _ in range(N)]
    dist.all_to_all(outs, ins)
    for r in range(N):
        same(outs[r], torch.full((R + 1,), r * 10 + R, dtype=torch.int16), "all_to_all list")


def check_gather_scatter():
    for root in sorted({0, N - 1}):
        gl = [torch.empty(3) for _ in range(N)] if R == root else None
        dist.gather(data(R, (3,)), gl, dst=root)
        if R == root:
            for r in range(N):
                same(gl[r], data(r, (3,)), "gather")
        sl = [data(r, (2,), torch.bfloat16) for r in range(N)] if R == root else None
        out = torch.empty(2, dtype=torch.bfloat16)
        dist.scatter(out, sl, src=root)
        same(out, data(R, (2,), torch.bfloat16), "scatter")


def _zero_size_calls(g, dt):
    """Every collective of torch.distributed on zero-element tensors of dtype dt."""
    def e(shape=(0,)):
        return torch.empty(shape, dtype=dt)

    def ring():
        if R % 2 == 0:
            dist.send(e(), (R + 1) % N, group=g)
            dist.recv(e(), (R - 1) % N, group=g)
        else:
            dist.recv(e(), (R - 1) % N, group=g)
            dist.send(e(), (R + 1) % N, group=g)

    def batch():
        for w in dist.batch_isend_irecv([dist.P2POp(dist.isend, e(), (R + 1) % N, group=g),
                                         dist.P2POp(dist.irecv, e(), (R - 1) % N, group=g)]):
            w.wait()

    root = N - 1
    return {
        "all_reduce": lambda: dist.all_reduce(e(), group=g),
        "all_reduce coalesced": lambda: dist.all_reduce_coalesced([e(), e((0, 3))], group=g),
        "broadcast": lambda: dist.broadcast(e(), root, group=g),
        "reduce": lambda: dist.reduce(e(), root, group=g),
        "all_gather": lambda: dist.all_gather([e() for _ in range(N)], e(), group=g),
        "all_gather_into_tensor": lambda: dist.all_gather_into_tensor(e(), e(), group=g),
        "gather": lambda: dist.gather(e(), [e() for _ in range(N)] if R == root else None,
                                      dst=root, group=g),
        "scatter": lambda: dist.scatter(e(), [e() for _ in range(N)] if R == root else None,
                                        src=root, group=g),
        "reduce_scatter": lambda: dist.reduce_scatter(e(), [e() for _ in range(N)], group=g),
        "reduce_scatter_tensor": lambda: dist.reduce_scatter_tensor(e(), e(), group=g),
        "reduce_scatter_tensor 2-d": lambda: dist.reduce_scatter_tensor(e((0, 3)), e((0, 3)),
                                                                        group=g),
        "all_to_all": lambda: dist.all_to_all([e() for _ in range(N)],
                                              [e() for _ in range(N)], group=g),
        "all_to_all_single": lambda: dist.all_to_all_single(e(), e(), group=g),
        "all_to_all_single 2-d": lambda: dist.all_to_all_single(e((0, 3)), e((0, 3)), group=g),
        "all_to_all_single splits": lambda: dist.all_to_all_single(e(), e(), [0] * N, [0] * N,
                                                                   group=g),
        "send/recv": ring,
        "batch_isend_irecv": batch,
        "barrier": lambda: dist.barrier(group=g),
    }


def _outcome(fn) -> str:
    try:
        fn()
        return "ok"
    except Exception as e:
        return f"{type(e).__name__}: {e}"


def check_zero_size_tensors_like_gloo():
    """Every collective with zero elements does what gloo's does (succeeds,
    on every rank alike), also for dtypes gloo lacks."""
    ours, gloos = _zero_size_calls(None, torch.float32), _zero_size_calls(GLOO, torch.float32)
    got = {name: (_outcome(fn), _outcome(gloos[name])) for name, fn in ours.items()}
    bad = {name: o for name, o in got.items() if o[0] != o[1]}
    assert not bad, f"zero-size calls differ from gloo (ours, gloo): {bad}"
    assert all(o == ("ok", "ok") for o in got.values()), got
    for dt in (torch.int16, torch.complex64, torch.bool, torch.float8_e4m3fnuz):
        calls = _zero_size_calls(None, dt)
        if dt is torch.float8_e4m3fnuz:  # refused by the reductions, also when empty
            calls = {k: v for k, v in calls.items() if "reduce" not in k}
        bad = {name: o for name, fn in calls.items() if (o := _outcome(fn)) != "ok"}
        assert not bad, f"zero-size {dt}: {bad}"


def _fails_on_every_rank(call, *words) -> None:
    """call() on a group of its own fails on this rank with a mismatch naming
    *words*, at the call or (a rank that waits for nobody in it) at the
    group's next call; the group is then destroyed."""
    g = dist.new_group(list(range(N)))
    err = None
    try:
        call(g)
        dist.barrier(group=g)
    except nc.NCCLError as e:
        err = e
    dist.destroy_process_group(g)
    assert err is not None, f"mismatched call passed on rank {R}"
    msg = str(err)
    assert "mismatched collective calls" in msg, msg
    for w in words:
        assert w in msg, f"{w!r} not in {msg!r}"


def check_mismatched_dtypes_fail_on_every_rank():
    """Ranks passing different dtypes that the library would see alike
    (int16 widened to int32 or moved as bytes, bool as uint8) fail, naming
    both dtypes."""
    def by_rank(first, other):
        return first if R == 0 else other

    dt = by_rank(torch.int16, torch.int32)
    _fails_on_every_rank(lambda g: dist.all_reduce(torch.ones(4, dtype=dt), group=g),
                         "torch.int16", "int32")
    dt = by_rank(torch.int16, torch.uint16)
    _fails_on_every_rank(lambda g: dist.broadcast(torch.full((4,), -1, dtype=dt), 0, group=g),
                         "torch.int16", "torch.uint16")
    n = by_rank(4, 8)
    dt = by_rank(torch.int16, torch.uint8)
    _fails_on_every_rank(lambda g: dist.all_gather([torch.empty(n, dtype=dt) for _ in range(N)],
                                                   torch.ones(n, dtype=dt), group=g),
                         "torch.int16", "uint8")
    dt = by_rank(torch.bool, torch.uint8)
    _fails_on_every_rank(lambda g: dist.all_reduce(torch.ones(4, dtype=dt), group=g),
                         "torch.bool", "uint8")
    dt = by_rank(torch.float8_e4m3fnuz, torch.uint8)  # moved as bytes
    _fails_on_every_rank(lambda g: dist.all_gather_into_tensor(
        torch.empty(4 * N, dtype=dt), torch.zeros(4, dtype=dt), group=g),
                         "torch.float8_e4m3fnuz", "uint8")
    # the same dtype on every rank still works, on a group of its own
    g = dist.new_group(list(range(N)))
    t = torch.full((4,), 3, dtype=torch.int16)
    dist.all_reduce(t, group=g)
    same(t, torch.full((4,), 3 * N, dtype=torch.int16), "int16 after the mismatches")
    dist.destroy_process_group(g)


def _refused_alike(call, bad: set, *words) -> None:
    """call(g) on a group of its own, where the ranks in *bad* pass arguments
    that are refused: they raise NcclInvalid naming *words* before anything
    is written; the others fail with an NCCLError naming the refusal, at the
    call or at the group's next one.  When every rank is bad, the group
    goes on."""
    g = dist.new_group(list(range(N)))
    err = None
    try:
        call(g)
        dist.barrier(group=g)
    except Exception as e:
        err = e
    if bad == set(range(N)):
        t = torch.ones(2)
        dist.all_reduce(t, group=g)
        assert t.tolist() == [float(N)] * 2
    dist.destroy_process_group(g)
    assert err is not None, f"passed on rank {R}"
    if R in bad:
        assert isinstance(err, nc.NcclInvalid), repr(err)
        for w in words:
            assert w in str(err), f"{w!r} not in {err}"
    else:
        assert isinstance(err, nc.NCCLError), repr(err)
        assert "arguments refused on that rank" in str(err), str(err)


def check_hostile_outputs_refused_on_every_rank():
    """An output list the results cannot be copied into exactly (a stride-0
    view, two outputs over the same memory) is refused before the call on
    the rank that passes it, and its peers fail too."""
    last = N - 1
    sentinel = torch.full((1,), -7.0)

    def gather_into(outs_of_bad, bad, gather=False):
        def call(g):
            outs = outs_of_bad() if R in bad else [torch.empty(4) for _ in range(N)]
            if gather:
                dist.gather(torch.ones(4), outs if R == last else None, dst=last, group=g)
            else:
                dist.all_gather(outs, torch.ones(4), group=g)
        return call

    def expanded():
        return [torch.empty(4) for _ in range(N - 1)] + [sentinel.expand(4)]

    _refused_alike(gather_into(expanded, {last}), {last}, "share memory", "stride 0")
    assert sentinel.item() == -7.0  # not written
    _refused_alike(gather_into(expanded, {last}, gather=True), {last}, "share memory")
    assert sentinel.item() == -7.0
    _refused_alike(gather_into(expanded, set(range(N))), set(range(N)), "share memory")

    def overlapping():
        x = torch.zeros(4 * N + 2)
        return [x[2 * r:2 * r + 4] for r in range(N)]

    _refused_alike(gather_into(overlapping, set(range(N))), set(range(N)), "share memory")
    _refused_alike(gather_into(overlapping, {0}), {0}, "outputs 0 and 1 share memory")
    # the other refusals of arguments fail the peers too
    op = dist.ReduceOp.SUM if R == 0 else dist.ReduceOp.BAND
    _refused_alike(lambda g: dist.all_reduce(torch.ones(4), op=op, group=g), set(range(1, N)),
                   "no bitwise")
    # layouts that can take a result exactly are not refused
    base = torch.zeros(2 * 4 * N)
    outs = [base[r::2 * N][:4] if r % 2 else torch.zeros(4)._neg_view() for r in range(N)]
    dist.all_gather(outs, torch.full((4,), float(R)))
    for r, o in enumerate(outs):
        assert o.tolist() == [float(r)] * 4, (r, o)
    chunks = list(torch.zeros(4 * N).chunk(N))  # views of one tensor, side by side
    dist.all_gather(chunks, torch.full((4,), float(R)))
    assert torch.cat(chunks).tolist() == [float(r) for r in range(N) for _ in range(4)]


def check_barrier_and_work_objects():
    dist.barrier()
    t = data(R)
    w = dist.all_reduce(t, async_op=True)  # on the lane: done when waited for
    assert w.wait() is True
    assert w.is_completed() and w.is_success()
    fut = w.get_future()
    assert fut.done()
    same(fut.value()[0], reduced("SUM"), "future value")
    assert w.result()[0] is t
    w = dist.barrier(async_op=True)
    w.wait()
    out = torch.empty(N)
    w = dist.all_gather_into_tensor(out, torch.tensor([float(R)]), async_op=True)
    w.wait()
    same(out, torch.arange(N, dtype=torch.float32), "async all_gather")
    done = []
    w = dist.all_reduce(torch.ones(1), async_op=True)
    w.get_future().then(lambda f: done.append(f.value()[0].item())).wait()
    assert done == [float(N)], done
    # a call without async_op is complete when it returns
    w = dist.all_reduce(torch.ones(1))
    assert w is None or w.is_completed()
    w = dist.group.WORLD.allreduce([torch.ones(1)])
    assert w.is_completed() and w.wait() is True


def check_async_lane():
    """async_op collectives run on the group's lane, in order with
    everything else; their futures complete there."""
    M = 1 << 19  # 2 MiB of float32
    big = torch.full((M,), float(R + 1))
    small = torch.ones(4)
    w = dist.all_reduce(big, async_op=True)
    dist.all_reduce(small)  # runs after the lane has drained
    w.wait()
    assert dist.group.WORLD._lane is not None
    assert (big == N * (N + 1) / 2).all() and (small == N).all()
    ts = [torch.full((M,), float(R + i)) for i in range(3)]
    ws = [dist.all_reduce(t, async_op=True) for t in ts]
    for w in reversed(ws):
        w.wait()
    for i, t in enumerate(ts):
        assert (t == N * (N - 1) / 2 + N * i).all(), i
        assert ws[i].is_completed() and ws[i].is_success()
    # a callback on the lane's thread issuing another collective: it runs there
    y = torch.ones(M)
    x = torch.ones(M)
    fut = dist.all_reduce(x, async_op=True).get_future()
    chained = fut.then(lambda f: (dist.all_reduce(y, async_op=True).wait(),
                                  f.value()[0][0].item())[1])
    assert chained.wait() == N and (y == N).all()
    # all-gather and reduce-scatter into tensors, async
    out = torch.empty(N * M)
    w1 = dist.all_gather_into_tensor(out, torch.full((M,), float(R)), async_op=True)
    rs = torch.empty(M)
    w2 = dist.reduce_scatter_tensor(rs, torch.ones(N * M), async_op=True)
    w2.wait()
    w1.wait()
    assert (out.view(N, M) == torch.arange(N).view(N, 1)).all() and (rs == N).all()
    # a PREMUL_SUM after queued calls: its factor is not set before they ran
    a = torch.ones(M)
    wa = dist.all_reduce(a, op=dist._make_nccl_premul_sum(2.0), async_op=True)
    b = torch.ones(M)
    dist.all_reduce(b, op=dist._make_nccl_premul_sum(3.0))
    wa.wait()
    assert (a == 2 * N).all() and (b == 3 * N).all()
    # sends and receives wait for the lane's calls first
    z = torch.ones(M)
    wz = dist.all_reduce(z, async_op=True)
    got = torch.empty(4)
    s = dist.isend(torch.full((4,), float(R)), (R + 1) % N)
    r = dist.irecv(got, (R - 1) % N)
    r.wait()
    s.wait()
    assert wz.is_completed() and (z == N).all() and (got == (R - 1) % N).all()
    # functional collectives of large tensors too
    import torch.distributed._functional_collectives as fc

    q = fc.wait_tensor(fc.all_reduce(torch.ones(M), "sum", dist.group.WORLD))
    assert (q == N).all()


def check_ddp_large_buckets_parity_with_gloo():
    """Buckets above the lane's threshold: DDP's all-reduces overlap backward."""
    from torch.nn.parallel import DistributedDataParallel as DDP

    torch.manual_seed(0)
    base = torch.nn.Sequential(torch.nn.Linear(256, 1024), torch.nn.ReLU(),
                               torch.nn.Linear(1024, 512))
    g = torch.Generator().manual_seed(R)
    batches = [(torch.randn(4, 256, generator=g), torch.randn(4, 512, generator=g))
               for _ in range(2)]
    ours = _train(DDP(copy.deepcopy(base), bucket_cap_mb=2), batches)
    assert dist.group.WORLD._lane is not None
    theirs = _train(DDP(copy.deepcopy(base), process_group=GLOO, bucket_cap_mb=2), batches)
    _compare([p.detach() for p in ours.parameters()], [p.detach() for p in theirs.parameters()],
             "DDP 2 MiB buckets")


# ------------------------------------------------------- point-to-point

def check_send_recv_ring():
    nxt, prv = (R + 1) % N, (R - 1) % N
    got = torch.empty(4, dtype=torch.float64)
    mine = torch.full((4,), float(R), dtype=torch.float64)
    if R % 2 == 0:
        dist.send(mine, nxt)
        dist.recv(got, prv)
    else:
        dist.recv(got, prv)
        dist.send(mine, nxt)
    assert (got == prv).all(), got
    # isend/irecv, waited in either order, and strided receive buffers
    recv = torch.zeros(3, 4)
    ws = dist.isend(torch.full((3, 2), float(R)), nxt), dist.irecv(recv[:, ::2], prv)
    ws[1].wait()
    ws[0].wait()
    assert (recv[:, ::2] == prv).all() and (recv[:, 1::2] == 0).all()
    assert ws[0].is_completed() and ws[1].is_completed()


def check_batch_isend_irecv_and_16mib_exchange():
    peer = R ^ 1 if (R ^ 1) < N else R
    big = torch.full((4 << 20,), float(R))  # 16 MiB
    got = torch.empty_like(big)
    reqs = dist.batch_isend_irecv([dist.P2POp(dist.isend, big, peer),
                                   dist.P2POp(dist.irecv, got, peer)])
    for q in reqs:
        q.wait()
    assert got[0] == peer and got[-1] == peer
    # a symmetric exchange with isend first on both ranks, waited in order
    got2 = torch.empty_like(big)
    s = dist.isend(big, peer)
    r = dist.irecv(got2, peer)
    s.wait()
    r.wait()
    assert got2[0] == peer and got2[-1] == peer
    # a ring over every rank in one batch
    nxt, prv = (R + 1) % N, (R - 1) % N
    a = torch.empty(1 << 20)
    reqs = dist.batch_isend_irecv([dist.P2POp(dist.irecv, a, prv),
                                   dist.P2POp(dist.isend, torch.full((1 << 20,), R + 0.5), nxt)])
    fut = reqs[0].get_future()
    assert fut.done()
    for q in reqs:
        q.wait()
    assert a[7] == prv + 0.5


def check_p2p_runs_at_the_next_collective():
    # rank 0 sends, then all-reduces before waiting; rank 1 waits for the
    # message first: the all-reduce must run the queued send first
    if N < 2:
        return
    x = torch.zeros(1 << 18)
    if R == 0:
        w = dist.isend(torch.ones(1 << 18), 1)
        t = torch.ones(1)
        dist.all_reduce(t)
        assert w.is_completed()
        w.wait()
    elif R == 1:
        dist.recv(x, 0)
        t = torch.ones(1)
        dist.all_reduce(t)
        assert x.sum() == 1 << 18
    else:
        t = torch.ones(1)
        dist.all_reduce(t)
    assert t.item() == N


def check_p2p_refusals():
    refused(lambda: dist.send(torch.ones(1), (R + 1) % N, tag=3), "tag", "order")
    refused(lambda: dist.recv(torch.ones(1)), "any source", "src=")
    if N > 1:
        refused(lambda: dist.monitored_barrier(), "GLOO", exc=ValueError)
        refused(lambda: dist.group.WORLD.monitored_barrier(), "monitored_barrier", "dist.barrier")


def check_coalescing_manager():
    from torch.distributed.distributed_c10d import _coalescing_manager

    ts = [data(R, (3,), salt=i) for i in range(3)]
    with _coalescing_manager(async_ops=True) as cm:
        for t in ts:
            dist.all_reduce(t)
    cm.wait()
    for i, t in enumerate(ts):
        same(t, reduced("SUM", shape=(3,), salt=i), f"coalesced all_reduce {i}")
    outs = [torch.empty(N * 2) for _ in range(2)]
    with _coalescing_manager():
        for i, o in enumerate(outs):
            dist.all_gather_into_tensor(o, data(R, (2,), salt=i))
    for i, o in enumerate(outs):
        same(o, torch.cat([data(r, (2,), salt=i) for r in range(N)]), "coalesced agit")
    outs = [torch.empty(2) for _ in range(2)]
    with _coalescing_manager():
        for i, o in enumerate(outs):
            dist.reduce_scatter_tensor(o, torch.cat([data(R, (2,), salt=r + i)
                                                     for r in range(N)]))
    for i, o in enumerate(outs):
        same(o, reduced("SUM", shape=(2,), salt=R + i), "coalesced rst")
    # the device form runs the block's ops as they come
    t = data(R)
    with _coalescing_manager(device=torch.device("cpu")):
        dist.broadcast(t, 0)
    same(t, data(0), "coalesced broadcast")


def check_object_collectives():
    objs = [None] * N
    dist.all_gather_object(objs, {"rank": R, "s": "x" * R})
    assert objs == [{"rank": r, "s": "x" * r} for r in range(N)], objs
    lst = [{"a": 1}, [2, 3]] if R == 0 else [None, None]
    dist.broadcast_object_list(lst, 0)
    assert lst == [{"a": 1}, [2, 3]]
    g = [None] * N if R == 0 else None
    dist.gather_object(("r", R), g, dst=0)
    if R == 0:
        assert g == [("r", r) for r in range(N)]
    out = [None]
    dist.scatter_object_list(out, [f"to{r}" for r in range(N)] if R == 0 else None, src=0)
    assert out == [f"to{R}"]
    if N > 1:
        if R == 0:
            dist.send_object_list([{"k": 5}], dst=1)
        elif R == 1:
            got = [None]
            dist.recv_object_list(got, src=0)
            assert got == [{"k": 5}]


def check_functional_collectives():
    t0 = time.monotonic()
    import torch.distributed._functional_collectives as fc
    info["seconds fc import"] = time.monotonic() - t0

    g = dist.group.WORLD
    w = fc.wait_tensor
    same(w(fc.all_reduce(data(R), "sum", g)), reduced("SUM"), "fc all_reduce")
    ag = getattr(fc, "all_gather_single", None) or fc.all_gather_tensor
    same(w(ag(data(R, (2, 3)), 0, g)), torch.cat([data(r, (2, 3)) for r in range(N)]),
         "fc all_gather")
    rs = getattr(fc, "reduce_scatter_single", None) or fc.reduce_scatter_tensor
    y = rs(torch.cat([data(R, (2,), salt=r) for r in range(N)]), "sum", 0, g)
    same(w(y), reduced("SUM", shape=(2,), salt=R), "fc reduce_scatter")
    z = fc.all_to_all_single(torch.arange(N, dtype=torch.float32) + 10 * R, None, None, g)
    same(w(z), torch.arange(N, dtype=torch.float32) * 10 + R, "fc all_to_all")
    same(w(fc.broadcast(data(R), 0, g)), data(0), "fc broadcast")
    xs = fc.all_reduce_coalesced([data(R), data(R, salt=1)], "max", g)
    same(w(xs[0]), reduced("MAX"), "fc coalesced")
    same(w(xs[1]), reduced("MAX", salt=1), "fc coalesced 1")


def check_dtensor_redistribute():
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Partial, Replicate, Shard, distribute_tensor

    mesh = init_device_mesh("cpu", (N,))
    full = torch.arange(N * 4 * 3, dtype=torch.float32).reshape(N * 4, 3)
    d = distribute_tensor(full, mesh, [Shard(0)])
    same(d.to_local(), full[R * 4:(R + 1) * 4], "shard")
    same(d.redistribute(mesh, [Replicate()]).to_local(), full, "shard -> replicate")
    same(d.full_tensor(), full, "full_tensor")
    s1 = d.redistribute(mesh, [Shard(1)]) if 3 % N == 0 else None
    if s1 is not None:
        same(s1.full_tensor(), full, "shard(0) -> shard(1)")
    from torch.distributed.tensor import DTensor

    p = DTensor.from_local(torch.full((2, 2), float(R + 1)), mesh, [Partial()])
    same(p.redistribute(mesh, [Replicate()]).to_local(), torch.full((2, 2), N * (N + 1) / 2),
         "partial -> replicate")
    rp = distribute_tensor(full, mesh, [Replicate()]).redistribute(mesh, [Shard(0)])
    same(rp.to_local(), full[R * 4:(R + 1) * 4], "replicate -> shard")


# ------------------------------------------------------------- groups

def check_new_group_and_outsiders():
    if N < 2:
        return
    half = list(range(N // 2))
    g = dist.new_group(half)
    other = dist.new_group(list(range(N // 2, N)))
    if R in half:
        assert isinstance(g, nccl.torch.HostProcessGroup)
        assert g.communicator.nranks == len(half)
        # many calls while the other ranks do not take part
        t = torch.ones(1)
        for _ in range(50):
            dist.all_reduce(t, group=g)
        assert t.item() == len(half) ** 50
    else:
        assert g == dist.GroupMember.NON_GROUP_MEMBER
        t = torch.ones(1)
        dist.all_reduce(t, group=other)
        assert t.item() == N - len(half)
    dist.barrier()


def check_new_subgroups():
    if N < 4:
        return
    cur, subs = dist.new_subgroups(2)
    t = torch.tensor([float(R)])
    dist.all_reduce(t, group=cur)
    assert t.item() == (R // 2) * 4 + 1, t
    assert cur.size() == 2 and cur.communicator.nranks == 2


def check_device_mesh_dims():
    if N < 4:
        return
    from torch.distributed.device_mesh import init_device_mesh

    mesh = init_device_mesh("cpu", (2, N // 2), mesh_dim_names=("dp", "tp"))
    dp, tp = mesh.get_group("dp"), mesh.get_group("tp")
    assert isinstance(dp, nccl.torch.HostProcessGroup) and isinstance(tp, nccl.torch.HostProcessGroup)
    assert dp.communicator is not tp.communicator
    t = torch.tensor([float(R)])
    dist.all_reduce(t, group=tp)
    row = R // (N // 2)
    assert t.item() == sum(range(row * (N // 2), (row + 1) * (N // 2))), t
    t = torch.tensor([float(R)])
    dist.all_reduce(t, group=dp)
    col = R % (N // 2)
    assert t.item() == col + (col + N // 2), t


# ------------------------------------------------- training parity with gloo

class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.w1 = torch.nn.Linear(8, 16)
        self.w2 = torch.nn.Linear(16, 8)

    def forward(self, x):
        return self.w2(torch.relu(self.w1(x)))


def _batches(steps: int = 3):
    g = torch.Generator().manual_seed(1000 + R)
    return [(torch.randn(4, 8, generator=g), torch.randn(4, 8, generator=g))
            for _ in range(steps)]


def _train(model, batches, lr=0.05):
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    for x, y in batches:
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
    return model


def _compare(a_params, b_params, what: str) -> None:
    worst = 0.0
    for a, b in zip(a_params, b_params, strict=True):
        worst = max(worst, (a - b).abs().max().item())
    info[f"{what} max |difference| vs gloo"] = worst
    if N <= 2:  # two summands: the same float result in any order
        assert worst == 0.0, f"{what}: differs from gloo by {worst}"
    else:  # the order of a sum of 4 differs between the libraries: last bits
        assert worst < 1e-5, f"{what}: differs from gloo by {worst}"


def check_ddp_parity_with_gloo():
    from torch.nn.parallel import DistributedDataParallel as DDP

    torch.manual_seed(0)
    base = Net()
    ours = _train(DDP(copy.deepcopy(base)), _batches())
    theirs = _train(DDP(copy.deepcopy(base), process_group=GLOO), _batches())
    _compare([p.detach() for p in ours.parameters()], [p.detach() for p in theirs.parameters()],
             "DDP")
    # the replicas agree
    for p in ours.parameters():
        q = p.detach().clone()
        dist.broadcast(q, 0)
        same(q, p.detach(), "DDP replicas")


def check_fsdp2_parity_with_gloo():
    from torch.distributed.device_mesh import DeviceMesh, init_device_mesh
    from torch.distributed.fsdp import fully_shard

    torch.manual_seed(0)
    base = Net()
    ours = copy.deepcopy(base)
    theirs = copy.deepcopy(base)
    fully_shard(ours.w1, mesh=init_device_mesh("cpu", (N,)))
    fully_shard(ours, mesh=init_device_mesh("cpu", (N,)))
    gmesh = DeviceMesh.from_group(GLOO, "cpu")
    fully_shard(theirs.w1, mesh=gmesh)
    fully_shard(theirs, mesh=gmesh)
    _train(ours, _batches())
    _train(theirs, _batches())
    _compare([p.full_tensor() for p in ours.parameters()],
             [p.full_tensor() for p in theirs.parameters()], "FSDP2")


def check_tensor_parallel_parity_with_gloo():
    from torch.distributed.device_mesh import DeviceMesh, init_device_mesh
    from torch.distributed.tensor.parallel import (ColwiseParallel, RowwiseParallel,
                                                   parallelize_module)

    torch.manual_seed(0)
    base = Net()
    plan = {"w1": ColwiseParallel(), "w2": RowwiseParallel()}
    ours = parallelize_module(copy.deepcopy(base), init_device_mesh("cpu", (N,)), plan)
    theirs = parallelize_module(copy.deepcopy(base), DeviceMesh.from_group(GLOO, "cpu"), plan)
    g = torch.Generator().manual_seed(7)  # the same batches on every rank (replicated input)
    batches = [(torch.randn(4, 8, generator=g), torch.randn(4, 8, generator=g)) for _ in range(3)]
    _train(ours, batches)
    _train(theirs, batches)
    _compare([p.full_tensor() for p in ours.parameters()],
             [p.full_tensor() for p in theirs.parameters()], "TP")


# --------------------------------------- PyTorch's own "nccl4py" backend's calls

def check_pytorch_nccl4py_backend_calls():
    """The nccl.core calls PyTorch's CUDA-only "nccl4py" backend makes, in its
    forms, on this package's host backend (CPU tensors, int streams)."""
    store = dist.distributed_c10d._get_default_store()
    key = "nccl4py_uid_check"
    if R == 0:
        uid = nc.get_unique_id()
        store.set(key, bytes(uid))
    else:
        store.wait([key])
        uid = nc.UniqueId.from_bytes(bytes(store.get(key)))
    comm = nc.Communicator.init(nranks=N, rank=R, unique_id=uid)
    s = 0  # torch.cuda.Stream.cuda_stream is an int
    try:
        t = data(R)
        with nc.group():
            comm.allreduce(t, t, nc.SUM, stream=s)
        same(t, reduced("SUM"), "allreduce in a group")
        for name, op in (("PRODUCT", nc.PROD), ("MIN", nc.MIN), ("MAX", nc.MAX),
                         ("AVG", nc.AVG)):
            t = data(R, top=2)
            comm.allreduce(t, t, op, stream=s)
            exp = reduced(name, top=2)
            if name == "AVG":
                exp = (reduced("SUM", torch.float64, top=2) / N).to(torch.float32)
            same(t, exp, name)
        custom = comm.create_pre_mul_sum(torch.tensor([3.0], dtype=torch.float32))
        t = data(R)
        comm.allreduce(t, t, custom, stream=s)
        custom.close()
        same(t, reduced("SUM") * 3, "pre_mul_sum")
        t = data(R)
        comm.reduce(t, t, nc.SUM, root=0, stream=s)
        if R == 0:
            same(t, reduced("SUM"), "reduce")
        t = data(R) if R == 0 else torch.zeros(6)
        comm.broadcast(t, t, 0, stream=s)
        same(t, data(0), "broadcast")
        flat = torch.empty(N * 6)
        comm.allgather(data(R), flat, stream=s)
        same(flat, torch.cat([data(r) for r in range(N)]), "allgather")
        inp = data(R)
        if R == 0:
            flat = torch.empty(N * 6)
            comm.gather(inp, flat, root=0, stream=s)
            same(flat, torch.cat([data(r) for r in range(N)]), "gather")
        else:
            comm.gather(inp, inp, root=0, stream=s)
        out = torch.empty(2)
        if R == 0:
            comm.scatter(torch.cat([data(r, (2,)) for r in range(N)]), out, root=0, stream=s)
        else:
            comm.scatter(out, out, root=0, stream=s)
        same(out, data(R, (2,)), "scatter")
        out = torch.empty(2)
        comm.reduce_scatter(torch.cat([data(R, (2,), salt=r) for r in range(N)]), out, nc.SUM,
                            stream=s)
        same(out, reduced("SUM", shape=(2,), salt=R), "reduce_scatter")
        a2a = torch.empty(N)
        comm.alltoall(torch.arange(N, dtype=torch.float32) + 10 * R, a2a, stream=s)
        same(a2a, torch.arange(N, dtype=torch.float32) * 10 + R, "alltoall")
        got = torch.empty(3)
        nc.group_start()
        comm.send(torch.full((3,), float(R)), (R + 1) % N, stream=s)
        comm.recv(got, (R - 1) % N, stream=s)
        nc.group_end()
        assert (got == (R - 1) % N).all()
        # split: the group of the low half, the others opt out
        ranks = list(range(max(N // 2, 1)))
        child = comm.split(color=min(ranks) if R in ranks else None,
                           key=ranks.index(R) if R in ranks else 0)
        if R in ranks:
            assert child.is_valid and child.nranks == len(ranks)
            t = torch.ones(1)
            child.allreduce(t, t, nc.SUM, stream=s)
            assert t.item() == len(ranks)
            child.finalize()
            child.destroy()
        else:
            assert not child.is_valid
        # abort: a child of every rank, used, then aborted (as on a failure)
        spare = comm.split(color=0, key=R)
        t = torch.ones(1)
        spare.allreduce(t, t, nc.SUM, stream=s)
        assert t.item() == N
        spare.abort()
        assert not spare.is_valid
        barrier = torch.zeros(1)
        comm.allreduce(barrier, barrier, nc.SUM, stream=s)
        comm.finalize()
        comm.destroy()
        assert not comm.is_valid
    except BaseException:
        if comm.is_valid:
            comm.abort()
        raise


def check_group_only_its_members_create():
    """The last check that makes a group: torch 2.14 counts a group made with
    use_local_synchronization=True on its members only, so the groups made
    after it are named differently on the other ranks (gloo's hang too)."""
    if N < 2:
        return
    if R in (0, N - 1):
        g2 = dist.new_group([0, N - 1], use_local_synchronization=True)
        t = torch.tensor([float(R)])
        dist.all_reduce(t, group=g2)
        assert t.item() == N - 1
        info["uid_local_group"] = g2._uid.hex()
    dist.barrier()


# ------------------------------------------------------------ the job

def run_checks() -> None:
    for name, fn in list(globals().items()):
        if name.startswith("check_") and callable(fn):
            t0 = time.monotonic()
            try:
                fn()
                results[name] = "ok"
            except BaseException:
                results[name] = "FAIL\n" + traceback.format_exc()
            info[f"seconds {name}"] = round(time.monotonic() - t0, 3)


def shm_segments() -> list:
    return sorted(p for p in os.listdir("/dev/shm") if p.startswith("nccl4py-"))


def segment(uid_hex: str) -> str:
    return "nccl4py-" + uid_hex[16:48]


def tail_init_methods(tmpdir: str) -> None:
    """After the checks: destroy (segments gone), then file:// and an explicit
    store, each with a collective, a subgroup and destroy."""
    uids = [info["uid_world"]] + ([info["uid_local_group"]] if "uid_local_group" in info else [])
    dist.destroy_process_group()
    gone = all(segment(u) not in shm_segments() for u in uids)
    results["tail_destroy_releases_shm"] = "ok" if gone else f"FAIL {uids} {shm_segments()}"
    for how in ("file", "store"):
        try:
            if how == "file":
                dist.init_process_group("nccl4py_host", init_method=f"file://{tmpdir}/init",
                                        rank=R, world_size=N, timeout=TIMEOUT)
            else:
                store = dist.FileStore(f"{tmpdir}/store", N)
                dist.init_process_group("nccl4py_host", store=store, rank=R, world_size=N,
                                        timeout=TIMEOUT)
            t = data(R)
            dist.all_reduce(t)
            same(t, reduced("SUM"), how)
            g = dist.new_group(list(range(N)))
            t = torch.ones(1)
            dist.all_reduce(t, group=g)
            assert t.item() == N
            u = [dist.group.WORLD._uid.hex(), g._uid.hex()]
            dist.destroy_process_group()
            assert all(segment(x) not in shm_segments() for x in u), (u, shm_segments())
            results[f"tail_init_{how}"] = "ok"
        except BaseException:
            results[f"tail_init_{how}"] = "FAIL\n" + traceback.format_exc()


def main() -> None:
    global R, N, GLOO
    method = sys.argv[2]
    if method == "env":
        dist.init_process_group("nccl4py_host", timeout=TIMEOUT)
    else:
        dist.init_process_group("nccl4py_host", init_method=method,
                                rank=int(os.environ["RANK"]),
                                world_size=int(os.environ["WORLD_SIZE"]), timeout=TIMEOUT)
    R, N = dist.get_rank(), dist.get_world_size()
    GLOO = dist.new_group(backend="gloo")
    info["torch"] = torch.__version__
    run_checks()
    if len(sys.argv) > 3 and sys.argv[3] == "tail":
        tail_init_methods(os.path.dirname(os.path.abspath(RESULTS)))
    elif dist.is_initialized():
        dist.destroy_process_group()
    with open(os.path.join(RESULTS, f"rank{R}.json"), "w") as f:
        json.dump({"rank": R, "results": results, "info": info}, f)


if __name__ == "__main__":
    main()
