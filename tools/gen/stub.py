"""The test libraries built from src/nccl_api.def: the recording stub (each
function records its arguments and writes known values to its outputs;
tests/conftest.py builds it) and the no-op library of the benchmarks.  Test
infrastructure, never a backend."""
from __future__ import annotations

from .api import C_TYPES, RETURNS, TABLE, Entry, Param
from .common import c_header

# --------------------------------------------------------------------------
# recording stub / no-op library

def _record_stmt(p: Param, e: Entry) -> list[str]:
    n = p.name
    k = p.kind
    if k in ("int_array", "cint_array"):
        ln = p.length
        return [f'    rec(" {n}={k}:0x%llx[", (unsigned long long)(uintptr_t){n});',
                f"    if ({n}) for (int i = 0; i < (int)({ln}); i++) rec(\"%s%d\", i ? \",\" : \"\", {n}[i]);",
                '    rec("]");']
    if k == "size_array":
        return [f'    rec(" {n}={k}:0x%llx[", (unsigned long long)(uintptr_t){n});',
                f"    if ({n}) for (int i = 0; i < stub_array_len; i++) rec(\"%s%llu\", i ? \",\" : \"\", (unsigned long long){n}[i]);",
                '    rec("]");']
    if k in ("team", "teamv"):
        return [f'    rec(" {n}={k}:%d,%d,%d", {n}.nRanks, {n}.rank, {n}.stride);']
    if k == "multimem":
        return [f'    rec(" {n}={k}:0x%llx", (unsigned long long)(uintptr_t){n}.mcBasePtr);']
    if k == "cstr":
        return [f'    rec(" {n}={k}:%s", {n} ? {n} : "(null)");']
    if "*" in C_TYPES[k] or k in ("comm", "stream", "win", "param"):
        s = [f'    rec(" {n}={k}:0x%llx", (unsigned long long)(uintptr_t){n});']
        if k in ("config", "cuid_ptr", "uid_array", "sigdesc", "devreqs", "collconfig"):
            s.append(f"    if (stub_deref && {n}) rec_bytes(\"{n}\", {n}, sizeof(*{n}));")
        if k == "devreqs":
            s.append(f"    if (stub_deref && {n}) rec_chains({n});")
        return s
    if k == "size":
        return [f'    rec(" {n}={k}:%llu", (unsigned long long){n});']
    if k == "uint":
        return [f'    rec(" {n}={k}:%u", {n});']
    if k in ("int", "dtype", "redop", "residence", "memstat", "result", "cftmode"):
        return [f'    rec(" {n}={k}:%d", (int){n});']
    if k == "uid":
        return [f'    rec(" {n}={k}:");', f"    rec_hex(&{n}, sizeof {n});"]
    raise AssertionError(k)


def _stub_requirement(e: Entry) -> str:
    """The C statements a *CreateRequirement of the stub fills its outReq with."""
    kinds = {p.kind: p.name for p in e.params}
    req = kinds.get("resreq", "")
    # only into memory the test says is real (stub_deref), never through fake pointers
    return f"if (stub_deref) {{ {_stub_requirement_fill(kinds, req)} }}"


def _stub_requirement_fill(kinds: dict[str, str], req: str) -> str:
    if "lsabar" in kinds:
        h = kinds["lsabar"]
        return (f"{h}->nBarriers = nBarriers; {req}->bufferSize = 64u * (size_t)nBarriers; "
                f"{req}->bufferAlign = 16; {req}->outBufferHandle = &{h}->bufHandle;")
    if "ginbar" in kinds:
        h = kinds["ginbar"]
        return (f"{req}->ginSignalCount = nBarriers; {req}->outGinSignalStart = &{h}->signal0;")
    if "lla2a" in kinds:
        h = kinds["lla2a"]
        return (f"{h}->nSlots = (uint32_t)nSlots; {req}->bufferSize = 32u * (size_t)nSlots; "
                f"{req}->bufferAlign = 16; {req}->outBufferHandle = &{h}->bufHandle;")
    return ""


def _out_stmt(p: Param, idx: int, e: Entry) -> list[str]:
    n = p.name
    k = p.kind
    # the length of another out: set with it
    owner = next((q for q in e.params if q.length == n and q.k.role == "out"), None)
    if owner is not None:
        if owner.kind == "out_cstr":
            return [f"    if (stub_write_outputs && {n}) *{n} = (int)strlen(stub_text);"]
        if owner.kind == "out_cstr_list":
            return [f"    if (stub_write_outputs && {n}) *{n} = STUB_NKEYS;"]
        if owner.kind == "out_bytes":
            cap = next(q.name for q in e.params if q.kind == "int")
            return [f"    if (stub_write_outputs && {n}) *{n} = {cap} < (int)sizeof stub_bytes "
                    f"? 0 : (int)sizeof stub_bytes;"]
    if k == "out_bytes":
        cap = next(q.name for q in e.params if q.kind == "int")
        return [f"    if (stub_write_outputs && {n} && {cap} >= (int)sizeof stub_bytes) "
                f"memcpy({n}, stub_bytes, sizeof stub_bytes);"]
    fill = {
        "out_ptr": f"*{n} = (void *)(uintptr_t)(STUB_OUT_BASE + {idx});",
        "out_comm": f"*{n} = (ncclComm_t)(uintptr_t)(STUB_OUT_BASE + {idx});",
        "out_win": f"*{n} = (ncclWindow_t)(uintptr_t)(STUB_OUT_BASE + {idx});",
        "out_int": f"*{n} = STUB_OUT_INT + {idx};",
        "out_result": f"*{n} = (ncclResult_t)stub_async_result;",
        "out_redop": f"*{n} = (ncclRedOp_t)(STUB_OUT_INT + {idx});",
        "out_u64": f"*{n} = STUB_OUT_U64 + {idx};",
        "out_param": f"*{n} = (ncclParamHandle_t)(uintptr_t)(STUB_OUT_BASE + {idx});",
        "out_i8": f"*{n} = (int8_t)-{idx};",
        "out_i16": f"*{n} = (int16_t)(-1000 - {idx});",
        "out_i32": f"*{n} = -(STUB_OUT_INT + {idx});",
        "out_i64": f"*{n} = -(int64_t)(STUB_OUT_U64 + {idx});",
        "out_u8": f"*{n} = (uint8_t)(200 + {idx} % 50);",
        "out_u16": f"*{n} = (uint16_t)(60000 + {idx});",
        "out_u32": f"*{n} = 4000000000u + {idx};",
        "out_leid": f"*{n} = 0xfffffff0u + {idx} % 8;",
        "out_size": f"*{n} = (size_t)STUB_OUT_U64 + {idx};",
        "out_cstr": f"*{n} = stub_text;",
        "out_cstr_list": f"*{n} = stub_keys;",
        "uid_ptr": f"for (int i = 0; i < NCCL_UNIQUE_ID_BYTES; i++) {n}->internal[i] = (char)(i * 7 + {idx});",
        "siminfo": f"{n}->estimatedTime = 1.5f + {idx};",
        "props": f"{n}->rank = 3; {n}->nRanks = 8; {n}->cudaDev = 5; {n}->nvmlDev = 6; "
                 f"{n}->ginType = (ncclGinType_t)5; {n}->railedGinType = (ncclGinType_t)4; "
                 f"{n}->deviceApiSupport = 1; {n}->nLsaTeams = 2;",
        # what a library writes: the header (its layout is the one reqs->version names),
        # fields at the same offset in every layout, and the handles the chains ask for
        "devcomm_out": f"{n}->magic = NCCL_API_MAGIC; "
                       f"{n}->version = stub_deref && reqs ? reqs->version : 0; "
                       f"{n}->rank = 3; {n}->nRanks = 8; {n}->lsaRank = 1; {n}->lsaSize = 4; "
                       "if (stub_deref) stub_fill_chains(reqs);",
        # what a *CreateRequirement writes: the resource and where its handle goes
        "resreq": _stub_requirement(e),
    }.get(k)
    if fill is None:
        return []
    # a 0.3.x caller passes the address of its own storage: only write where
    # the test allows it (stub_write_outputs), never through fake pointers
    return [f"    if (stub_write_outputs && {n}) {{ {fill} }}"]


STUB_PRELUDE = r"""
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include "nccl_api.h"

#define EXPORT __attribute__((visibility("default")))
#define STUB_OUT_BASE 0x5eed0000ULL
#define STUB_OUT_INT 4200
#define STUB_OUT_U64 ((uint64_t)1 << 40)

static char stub_buf[8192];
static size_t stub_len;
static long stub_calls;
static int stub_result;
static int stub_async_result;
static int stub_array_len;
static int stub_deref;
static int stub_write_outputs = 1;
static const char stub_text[] = "stub-text";
#define STUB_NKEYS 3
static const char *stub_keys[STUB_NKEYS] = {"STUB_KEY_A", "STUB_KEY_B", "STUB_KEY_C"};
static const unsigned char stub_bytes[6] = {1, 2, 3, 250, 0, 7};

static void rec(const char *fmt, ...)
{
    if (stub_len >= sizeof stub_buf - 1)
        return;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(stub_buf + stub_len, sizeof stub_buf - stub_len, fmt, ap);
    va_end(ap);
    if (n > 0)
        stub_len += (size_t)n;
    if (stub_len >= sizeof stub_buf)
        stub_len = sizeof stub_buf - 1;
}

static void rec_hex(const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++)
        rec("%02x", b[i]);
}

static void rec_bytes(const char *name, const void *p, size_t n)
{
    rec(" *%s=", name);
    rec_hex(p, n);
}

/* The team and resource chains of device-communicator requirements:
 * " teams=nRanks,rank,stride,multimem,hasHandle;..." and
 * " resources=bufferSize,bufferAlign,ginSignalCount,ginCounterCount;..." */
static void rec_chains(const ncclDevCommRequirements_t *r)
{
    rec(" teams=");
    for (const ncclTeamRequirements_t *t = r->teamRequirementsList; t; t = t->next)
        rec("%s%d,%d,%d,%d,%d", t == r->teamRequirementsList ? "" : ";", t->team.nRanks,
            t->team.rank, t->team.stride, (int)t->multimem, t->outMultimemHandle != NULL);
    rec(" resources=");
    for (const ncclDevResourceRequirements_t *q = r->resourceRequirementsList; q; q = q->next)
        rec("%s%zu,%zu,%d,%d", q == r->resourceRequirementsList ? "" : ";", q->bufferSize,
            q->bufferAlign, q->ginSignalCount, q->ginCounterCount);
}

/* ncclDevCommCreate's handles: the i-th resource gets buffer handle 0x100 + i
 * and signal start 0x200 + i, the i-th multimem team base STUB_OUT_BASE + 0x1000 + i. */
static void stub_fill_chains(const ncclDevCommRequirements_t *r)
{
    if (r == NULL)
        return;
    unsigned i = 0;
    for (const ncclDevResourceRequirements_t *q = r->resourceRequirementsList; q; q = q->next, i++) {
        if (q->outBufferHandle)
            *q->outBufferHandle = 0x100u + i;
        if (q->outGinSignalStart)
            *q->outGinSignalStart = 0x200u + i;
    }
    i = 0;
    for (const ncclTeamRequirements_t *t = r->teamRequirementsList; t; t = t->next, i++)
        if (t->outMultimemHandle)
            t->outMultimemHandle->mcBasePtr = (void *)(uintptr_t)(STUB_OUT_BASE + 0x1000u + i);
}

static void begin(const char *name)
{
    stub_len = 0;
    stub_buf[0] = 0;
    stub_calls++;
    rec("%s", name);
}

#ifdef STUB_HOST_MEMORY
/* Pose as a host-memory library (like the host backend), so that nccl.core
 * accepts NumPy buffers while the stub records what reaches the C ABI. */
EXPORT int nccl4pyHostBackend(void) { return NCCL4PY_ABI_VERSION_CODE; }
#endif

EXPORT const char *nccl4pyStubLastCall(void) { return stub_buf; }
EXPORT long nccl4pyStubCallCount(void) { return stub_calls; }
EXPORT void nccl4pyStubSetResult(int r) { stub_result = r; }
EXPORT void nccl4pyStubSetAsyncResult(int r) { stub_async_result = r; }
EXPORT void nccl4pyStubSetArrayLen(int n) { stub_array_len = n; }
EXPORT void nccl4pyStubSetDeref(int on) { stub_deref = on; }
EXPORT void nccl4pyStubSetWriteOutputs(int on) { stub_write_outputs = on; }
EXPORT void nccl4pyStubReset(void)
{
    stub_len = 0;
    stub_buf[0] = 0;
    stub_calls = 0;
    stub_result = 0;
    stub_async_result = 0;
    stub_array_len = 0;
    stub_deref = 0;
    stub_write_outputs = 1;
}
"""


def gen_stub_c(entries: list[Entry], noop: bool) -> str:
    """The recording stub (each function records its arguments, writes known
    values to its out-parameters and returns stub_result; an int function
    returns STUB_OUT_INT + its index) or the no-op library."""
    out = [c_header(TABLE, "Test and benchmark library, never a real backend.")]
    if noop:
        out.append('#include "nccl_api.h"\n#define EXPORT __attribute__((visibility("default")))\n')
    else:
        out.append(STUB_PRELUDE)
    for idx, e in enumerate(entries):
        sym = e.symbols[0]
        out.append(f"#ifndef STUB_OMIT_{sym}")
        out.append(f"EXPORT {e.proto(sym)}")
        out.append("{")
        if noop:
            for p in e.params:
                out.append(f"    (void){p.name};")
            if e.ret == "status":
                if sym == "ncclGetVersion":
                    out.append(f"    *{e.params[0].name} = NCCL4PY_ABI_VERSION_CODE;")
                out.append("    return ncclSuccess;")
            else:
                out += [f"    {line}" for line in RETURNS[e.ret].noop]
        else:
            out.append(f'    begin("{sym}");')
            for p in e.params:
                out += _record_stmt(p, e)
            if e.ret == "status":
                for p in e.params:
                    out += _out_stmt(p, idx, e)
                out.append("    return (ncclResult_t)stub_result;")
            elif sym == "ncclGetErrorString":
                out.append('    static char msg[64];')
                out.append('    snprintf(msg, sizeof msg, "stub error string %d", (int)result);')
                out.append("    return msg;")
            else:
                out += [f"    {line.format(idx=idx)}" for line in RETURNS[e.ret].stub]
        out.append("}")
        out.append("#endif")
        out.append("")
    return "\n".join(out)


