"""Run ``python -m nccl.bench`` on the host backend with 2 ranks, and read
its nccl-tests output."""
from __future__ import annotations

import re
import subprocess
import sys

from conftest import clean_env

ROW = re.compile(r"^ {0,11}\d+  {1,12}\d+  +\S+  +\S+  +-?\d+(  +\S+  +\S+  +\S+  +\S+){2}$")


def bench(*args, env=None, timeout=120):
    return subprocess.run([sys.executable, "-m", "nccl.bench", "--nranks", "2", "--backend",
                           "host", *args], env=env or clean_env(), capture_output=True,
                          text=True, timeout=timeout)


def parse(text):
    """Blocks of nccl-tests output: {binary: {"rows": [...], "avg": float, ...}}."""
    blocks, cur = {}, None
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if line.startswith("# Collective test starting: "):
            cur = {"rows": [], "lines": []}
            blocks[line.split(": ")[1]] = cur
        if cur is None:
            continue
        cur["lines"].append(line)
        if line and not line.startswith("#"):
            assert ROW.match(line), repr(line)
            f = line.split()
            cur["rows"].append({"size": int(f[0]), "count": int(f[1]), "type": f[2],
                                "redop": f[3], "root": int(f[4]),
                                "oop": [float(f[5]), float(f[6]), float(f[7]), f[8]],
                                "ip": [float(f[9]), float(f[10]), float(f[11]), f[12]]})
        m = re.match(r"# Avg bus bandwidth    : (\S+) $", line)
        if m:
            cur["avg"] = float(m.group(1))
        if line.startswith("# Out of bounds values : "):
            cur["oob"] = line.split(": ")[1]
        if line.startswith("# Collective test concluded"):
            cur = None
    return blocks
