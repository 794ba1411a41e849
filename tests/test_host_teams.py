"""Host backend: the team functions of NCCL's device API on one machine."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from conftest import clean_env
from host_ctypes import PRELUDE
from test_host_collectives import host_available

pytestmark = pytest.mark.skipif(not host_available(), reason="host backend not built")


TEAMS = PRELUDE + r"""
n = 4
comms = (P * n)()
assert lib.ncclCommInitAll(comms, n, None) == 0
t = lambda team: [team.nRanks, team.rank, team.stride]
out = []
for r in range(n):
    cm = comms[r]
    world, lsa, rail = lib.ncclTeamWorld(cm), lib.ncclTeamLsa(cm), lib.ncclTeamRail(cm)
    out.append({
        "world": t(world), "lsa": t(lsa), "rail": t(rail),
        "world_to_world": [lib.ncclTeamRankToWorld(cm, world, i) for i in range(n)],
        "world_to_lsa": [lib.ncclTeamRankToLsa(cm, world, i) for i in range(n)],
        "lsa_to_world": [lib.ncclTeamRankToWorld(cm, lsa, i) for i in range(n)],
        "rail_to_world": [lib.ncclTeamRankToWorld(cm, rail, 0)],
        "rail_to_lsa": [lib.ncclTeamRankToLsa(cm, rail, 0)],
        "outside": [lib.ncclTeamRankToWorld(cm, world, n), lib.ncclTeamRankToWorld(cm, world, -1),
                    lib.ncclTeamRankToLsa(cm, rail, 1)],
    })
msgs = {}
# a team that is not one of this communicator's: too large, wrong position, bad stride
for label, team in {"too_large": Team(n + 1, 0, 1), "not_me": Team(n, 1, 1),
                    "stride": Team(2, 0, 0), "rank": Team(2, 2, 1)}.items():
    msgs[label] = [lib.ncclTeamRankToWorld(comms[0], team, 0), last_error()]
lib.ncclTeamRankToWorld(comms[0], lib.ncclTeamWorld(comms[0]), 9)
msgs["member"] = [-1, last_error()]
msgs["null_comm"] = [t(lib.ncclTeamWorld(None)), lib.ncclTeamRankToWorld(None, Team(1, 0, 1), 0),
                     last_error()]
for cm in comms:
    assert lib.ncclCommDestroy(cm) == 0
print(json.dumps({"ranks": out, "msgs": msgs}), flush=True)
"""


def test_teams_on_one_machine():
    p = subprocess.run([sys.executable, "-c", TEAMS], env=clean_env(), capture_output=True,
                       text=True, timeout=120)
    assert p.returncode == 0, p.stderr[-3000:]
    res = json.loads(p.stdout)
    n = 4
    for r, got in enumerate(res["ranks"]):
        assert got["world"] == [n, r, 1]
        assert got["lsa"] == [n, r, 1]          # one machine: lsa is the world
        assert got["rail"] == [1, 0, n]          # nRanks/lsaSize, rank/lsaSize, lsaSize
        assert got["world_to_world"] == list(range(n))
        assert got["world_to_lsa"] == list(range(n))
        assert got["lsa_to_world"] == list(range(n))
        assert got["rail_to_world"] == [r] and got["rail_to_lsa"] == [r]
        assert got["outside"] == [-1, -1, -1]
    m = res["msgs"]
    for label in ("too_large", "not_me", "stride", "rank"):
        assert m[label][0] == -1, (label, m[label])
        assert "is not a team of this communicator" in m[label][1], (label, m[label])
    assert "rank 9 is not a member of a team of 4 ranks" in m["member"][1]
    assert m["null_comm"][:2] == [[0, 0, 0], -1]
    assert "communicator is NULL" in m["null_comm"][2]
