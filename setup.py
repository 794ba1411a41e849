"""Build the C extension nccl._nccl and the host backend libnccl4py_host.so.

Only a C compiler is needed: no Cython, no CUDA or ROCm headers.
Set NCCL4PY_SANITIZE=1 to build both with AddressSanitizer and UBSan,
NCCL4PY_SANITIZE=thread to build both with ThreadSanitizer (for a TSan build of
the interpreter, e.g. a free-threaded one configured --with-thread-sanitizer).
"""
import os
import shutil
import subprocess
import sys
import sysconfig
from glob import glob

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext
from setuptools.errors import SetupError

HERE = os.path.dirname(os.path.abspath(__file__))
CFLAGS = ["-std=c11", "-O2", "-Wall", "-Wextra", "-fvisibility=hidden"]
_SANITIZERS = {
    "1": ["-fsanitize=address,undefined", "-fno-omit-frame-pointer",
          "-fno-sanitize-recover=undefined"],
    "thread": ["-fsanitize=thread", "-fno-omit-frame-pointer"],
}
_SANITIZE = os.environ.get("NCCL4PY_SANITIZE", "")
if _SANITIZE not in ("", "0", *_SANITIZERS):
    raise SetupError(f"NCCL4PY_SANITIZE={_SANITIZE!r}: use 1 to build with ASan and UBSan, "
                     "thread to build with TSan, 0 or unset for a normal build")
SAN = _SANITIZERS.get(_SANITIZE, [])
CFLAGS += SAN
LDFLAGS = SAN


def _regenerate():
    """Rewrite what the tables of src/*.def give (C and Python) when stale."""
    gen = os.path.join(HERE, "tools", "gen")
    if os.path.isdir(gen):
        subprocess.check_call([sys.executable, gen])


def host_sources():
    """The host backend's C sources.  None is a build error: a package without
    the host backend cannot run on a machine without a GPU (its default).  A
    missing file is a link error (--no-undefined below)."""
    sources = sorted(os.path.join("host", os.path.basename(s))
                     for s in glob(os.path.join(HERE, "host", "*.c"))
                     if not os.path.basename(s).startswith("test_"))
    if not sources:
        raise SetupError(
            f"the host backend's sources are missing ({os.path.join(HERE, 'host')}/*.c): "
            "this source tree or sdist is incomplete; build from a complete checkout or sdist")
    return sources


class BuildExt(build_ext):
    """Builds the extension, then the host backend as a plain shared library."""

    def run(self):
        sources = host_sources()  # before anything is compiled
        _regenerate()
        super().run()
        self.build_host_backend(sources)

    def build_extensions(self):
        # The compiler is set up by now (CC and sysconfig): say in one line
        # when it is not there, before anything is compiled.
        cc = getattr(self.compiler, "compiler_so", None) or [None]
        if cc[0] and shutil.which(cc[0]) is None:
            raise SetupError(
                f"nccl4py builds a C extension and no C compiler was found ({cc[0]!r}): "
                "install one (Debian/Ubuntu: apt-get install gcc; Fedora/RHEL: dnf install "
                "gcc; conda: conda install c-compiler) or set CC, then install again")
        super().build_extensions()

    def build_host_backend(self, sources):
        base = "." if self.inplace else self.build_lib
        outdir = os.path.join(base, "nccl", "_lib")
        os.makedirs(outdir, exist_ok=True)
        objects = self.compiler.compile(
            sources, output_dir=self.build_temp, include_dirs=["src"],
            depends=glob(os.path.join("host", "*.h")) + glob(os.path.join("src", "*.h"))
            + glob(os.path.join("src", "gen", "*.h")) + glob(os.path.join("src", "*.def")),
            extra_preargs=["-fPIC", "-pthread", "-D_GNU_SOURCE"],
            extra_postargs=CFLAGS + ["-Wshadow"])
        self.compiler.link_shared_object(
            objects, "libnccl4py_host.so", output_dir=outdir,
            extra_postargs=["-pthread", "-lrt", "-lm", "-Wl,--no-undefined"] + LDFLAGS)


# [project.optional-dependencies] (dynamic in pyproject.toml).  The test extra
# leaves mypy out on a free-threaded interpreter: its dependency ast-serialize
# has no free-threaded wheel (abi3 wheels do not load there) and its source
# build needs Rust crates; tests/test_typing.py then skips with the reason.
# No environment marker tells a free-threaded interpreter apart (PEP 780's
# sys_abi_features is a draft that pip does not implement), so the interpreter
# that builds the metadata decides: a wheel is built for one ABI anyway, and
# pip builds an sdist's metadata with the interpreter it installs for.
EXTRAS = {
    "test": ["pytest>=7", "ml_dtypes", "hypothesis", "mpi4py", "mpich", "matplotlib",
             "pytest-xdist", "build", "setuptools>=77"],
    "cu12": ["nvidia-nccl-cu12>=2.28.3,<=2.32.6"],
    "cu13": ["nvidia-nccl-cu13>=2.28.3,<=2.32.6"],
    "torch": ["torch"],
    "cupy": ["cupy"],
    "mpi": ["mpi4py"],
    "plot": ["matplotlib"],
}
FREE_THREADED = bool(sysconfig.get_config_var("Py_GIL_DISABLED"))
if not FREE_THREADED:
    EXTRAS["test"].append("mypy")

ext = Extension(
    "nccl._nccl",
    sources=sorted(glob("src/*.c")) + sorted(glob("src/gen/*.c")),
    include_dirs=["src"],
    depends=glob("src/*.h") + glob("src/gen/*.h") + glob("src/*.def"),
    libraries=["dl"],
    extra_compile_args=CFLAGS,
    extra_link_args=LDFLAGS,
)

setup(ext_modules=[ext], cmdclass={"build_ext": BuildExt}, extras_require=EXTRAS)
