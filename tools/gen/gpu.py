"""src/gpu_runtime.def, the GPU runtime layer: the runtime functions
(src/gen/gpu_api.h), the method table of the gpu_runtime_* Python functions
(src/gen/gpu_methods.h), their typed entries of nccl/_nccl.pyi and the
names of nccl/_runtime.py."""
from __future__ import annotations

import ast
from dataclasses import dataclass
import textwrap
from pathlib import Path

from .common import ROOT, Output, c_header, c_literal, line_table

TABLE = "src/gpu_runtime.def"
HEADER = c_header(TABLE)


@dataclass
class RuntimeFn:
    id: str
    ret: str
    params: str
    hip: list[str]
    cuda: list[str]


@dataclass
class PyFn:
    name: str
    cfunc: str
    signature: str          # "(a: int, b: int = 1) -> None"
    summary: str

    @property
    def args(self) -> ast.arguments:
        fn = ast.parse(f"def f{self.signature}: ...").body[0]
        assert isinstance(fn, ast.FunctionDef)
        return fn.args

    @property
    def returns(self) -> str:
        fn = ast.parse(f"def f{self.signature}: ...").body[0]
        assert isinstance(fn, ast.FunctionDef) and fn.returns is not None
        return ast.unparse(fn.returns)

    @property
    def meth(self) -> str:
        a = self.args
        if not a.args:
            return "METH_NOARGS"
        if len(a.args) == 1 and not a.defaults:
            return "METH_O"
        return "METH_FASTCALL"

    def params(self, typed: bool) -> str:
        a = self.args
        first_default = len(a.args) - len(a.defaults)
        parts = []
        for i, arg in enumerate(a.args):
            s = arg.arg
            if typed and arg.annotation is not None:
                s += f": {ast.unparse(arg.annotation)}"
            if i >= first_default:
                d = ast.unparse(a.defaults[i - first_default])
                s += f" = {d}" if typed else f"={d}"
            parts.append(s)
        if parts:
            parts.append("/")  # positional only
        return ", ".join(parts)

    def docstring(self) -> str:
        a = self.args
        lines = [f"gpu_runtime_{self.name}({self.params(False)})", "--", "", self.summary, "",
                 f"nccl._runtime.{self.name}; implemented by {self.cfunc} in src/gpu_runtime.c."]
        if a.args:
            lines += ["", "Arguments:"]
            for arg in a.args:
                t = ast.unparse(arg.annotation) if arg.annotation is not None else "Any"
                lines.append(f"  {arg.arg} ({t})")
        lines += ["", f"Returns: {self.returns}.", "", RAISES]
        return "\n".join(lines)


# The end of every docstring (one C macro in the method table).
RAISES = """Raises:
  GpuRuntimeError: the runtime returned an error status (its value is .status,
    the C function .function), lacks the function, or cannot be loaded.
  TypeError, OverflowError, ValueError: an argument has the wrong type or value."""


def parse_table(path: Path | None = None) -> tuple[list[RuntimeFn], list[PyFn]]:
    path = ROOT / TABLE if path is None else path
    fns, pys = [], []
    for where, cols in line_table(path):
        if cols[0] == "fn" and len(cols) == 6:
            fns.append(RuntimeFn(cols[1], cols[2], cols[3], cols[4].split("/"),
                                 cols[5].split("/")))
        elif cols[0] == "py" and len(cols) == 5:
            p = PyFn(*cols[1:])
            try:
                p.args, p.returns  # noqa: B018 - parse now, fail here
            except (SyntaxError, AssertionError):
                raise SystemExit(f"{where}: bad signature {p.signature!r}")
            pys.append(p)
        else:
            raise SystemExit(f"{where}: expected 'fn' with 6 columns or 'py' with 5")
    for f in fns:
        if len(f.hip) > 2 or len(f.cuda) > 2:
            raise SystemExit(f"{path}: {f.id}: at most one fallback symbol per runtime")
    return fns, pys


def gen_header(fns: list[RuntimeFn]) -> str:
    out = [HEADER, "#ifndef NCCL4PY_GEN_GPU_API_H", "#define NCCL4PY_GEN_GPU_API_H", "",
           "/* X(id, return type, (parameters), HIP symbol, CUDA symbol,",
           " *   HIP fallback symbol or \"\", CUDA fallback symbol or \"\") */",
           "#define N4P_GPU_API(X) \\"]
    for i, f in enumerate(fns):
        alt_h = f'"{f.hip[1]}"' if len(f.hip) > 1 else '""'
        alt_c = f'"{f.cuda[1]}"' if len(f.cuda) > 1 else '""'
        end = " \\" if i < len(fns) - 1 else ""
        out.append(f"    X({f.id}, {f.ret}, ({f.params}), {f.hip[0]}, {f.cuda[0]}, {alt_h}, "
                   f"{alt_c}){end}")
    out += ["", "#endif", ""]
    return "\n".join(out)


def gen_methods(pys: list[PyFn]) -> str:
    out = [HEADER, "/* The method table of the gpu_runtime_* functions: included once by",
           " * src/gpu_runtime.c, after the functions it names. */",
           "", "/* The end of every docstring. */", "#define N4P_GPU_RAISES \\"]
    out += [f"    {c_literal(line + chr(10))} \\" for line in RAISES.split("\n")[:-1]]
    out += [f"    {c_literal(RAISES.split(chr(10))[-1])}", "",
            "static PyMethodDef n4p_gpu_methods[] = {"]
    for p in pys:
        cast = "(PyCFunction)(void (*)(void))" if p.meth == "METH_FASTCALL" else "(PyCFunction)"
        out.append(f'    {{"gpu_runtime_{p.name}", {cast}{p.cfunc}, {p.meth},')
        # one string literal a paragraph
        paras = p.docstring().removesuffix(RAISES).split("\n\n")[:-1]
        out += [f"     {c_literal(para + chr(10) * 2)}" for para in paras]
        out.append("     N4P_GPU_RAISES},")
    out += ["    {NULL, NULL, 0, NULL},", "};", "", "#undef N4P_GPU_RAISES", ""]
    return "\n".join(out)


def gen_pyi(table: tuple[list[RuntimeFn], list[PyFn]]) -> list[str]:
    return [f"def gpu_runtime_{p.name}({p.params(True)}) -> {p.returns}: ..." for p in table[1]]


def gen_runtime_block(pys: list[PyFn]) -> str:
    out = [f"{p.name} = _nccl.gpu_runtime_{p.name}" for p in pys]
    names = ", ".join(f'"{p.name}"' for p in pys)
    out.append(f"__all__ += [{names}]")
    # keep the line length of the rest of the file
    last = out.pop()
    out += textwrap.wrap(last, 99, subsequent_indent="    ", break_long_words=False,
                         break_on_hyphens=False)
    return "\n".join(out)


def generate(root: Path = ROOT) -> Output:
    fns, pys = parse_table(root / TABLE)
    out = Output()
    out.files["src/gen/gpu_api.h"] = gen_header(fns)
    out.files["src/gen/gpu_methods.h"] = gen_methods(pys)
    out.block("nccl/_nccl.pyi", "gpu runtime", TABLE, gen_pyi((fns, pys)))
    out.block("nccl/_runtime.py", "functions", TABLE, gen_runtime_block(pys).split("\n"))
    return out
