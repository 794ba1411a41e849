"""Handles belong to the communicator that made them.

A PreMulSum op, a window, a team (and the teams of device-communicator
requirements) made on communicator A and used with communicator B is
NcclInvalid naming both, before anything reaches the library: the library
would look the handle up in B's tables (a PreMulSum op id of A is whatever
op B has with that id).  At the low level a ``Window`` object remembers the
communicator it was registered on; int handles (the 0.2 style) carry
nothing and are passed on as they are.
"""
from __future__ import annotations

import numpy as np
import pytest

import nccl.bindings as b
import nccl.core as nc
from nccl._errors import NcclInvalid
from conftest import host_available
from stub_comm import COMM

OTHER = COMM + 0x1000


def names_both(e, made=COMM, used=OTHER):
    msg = str(e.value)
    assert f"{made:#x}" in msg and f"{used:#x}" in msg, msg


@pytest.fixture
def comms(stub):
    return nc.Communicator(COMM), nc.Communicator(OTHER)


def test_pre_mul_sum_op_of_another_communicator(comms, stub):
    a, other = comms
    x = np.ones(4, np.float32)
    y = np.zeros(4, np.float32)
    a.allreduce(x, y, nc.SUM)
    other.allreduce(x, y, nc.SUM)  # both know their size and rank now
    for op in (a.create_pre_mul_sum(2.0), a.create_pre_mul_sum(np.array([3.0], np.float32)),
               a.create_pre_mul_sum(np.zeros(1, np.float32), nc.NcclDataType.FLOAT32)):
        calls = stub.nccl4pyStubCallCount()
        for call in (lambda: other.allreduce(x, y, op), lambda: other.reduce(x, y, op, 0),
                     lambda: other.reduce_scatter(x, y[:4], op)):
            with pytest.raises(NcclInvalid, match="op was created on communicator") as e:
                call()
            names_both(e)
        assert stub.nccl4pyStubCallCount() == calls
        a.allreduce(x, y, op)  # its own communicator
        assert stub.nccl4pyStubCallCount() == calls + 1
        a.allreduce(x, y, int(op))  # an int is passed on as it is
        other.allreduce(x, y, nc.SUM)


def test_window_of_another_communicator(comms):
    a, other = comms
    buf = np.zeros(16, np.float32)
    win = a.register_window(buf)
    with pytest.raises(NcclInvalid, match="peer_window was registered on communicator") as e:
        other.put_signal(np.ones(4, np.float32), 1, win)
    names_both(e)
    a.put_signal(np.ones(4, np.float32), 1, win)


def test_teams_of_another_communicator(comms):
    a, other = comms
    for name in ("team_world", "team_lsa", "team_rail"):
        team = getattr(a, name)
        for call in (lambda: other.team_rank_to_world(team, 0),
                     lambda: other.team_rank_to_lsa(team, 0)):
            with pytest.raises(NcclInvalid, match="team was made by communicator") as e:
                call()
            names_both(e)
        a.team_rank_to_world(team, 0)
        assert team == getattr(other, name)  # a team compares by its values
    hand_made = nc.NCCLTeam(4, 0, 1)  # a team by value belongs to no communicator
    other.team_rank_to_world(hand_made, 0)
    for req in (nc.NCCLDevCommRequirements(teams=[nc.TeamRequirement(a.team_world)]),
                nc.NCCLDevCommRequirements(resources=[nc.LsaBarrierRequirement(a.team_lsa, 1)]),
                nc.NCCLDevCommRequirements(resources=[nc.GinBarrierRequirement(a.team_world, 1)])):
        with pytest.raises(NcclInvalid, match="team was made by communicator") as e:
            other.create_dev_comm(req)
        names_both(e)


def test_window_queries_with_a_team_of_another_communicator(comms):
    a, other = comms
    win = other.register_window(np.zeros(16, np.float32))
    with pytest.raises(NcclInvalid, match="cft_team was made by communicator") as e:
        win.get_cft_le_info(0, a.team_cft())
    names_both(e, COMM, OTHER)
    win.get_cft_le_info(0, other.team_cft())


def test_multimem_handle_of_another_communicator(comms):
    a, other = comms
    team = a.team_world
    dev = a.create_dev_comm(nc.NCCLDevCommRequirements(
        teams=[nc.TeamRequirement(team, multimem=True)]))
    mm = dev.multimem_handle(team)
    with pytest.raises(NcclInvalid, match="multimem was made by communicator") as e:
        other.register_window(np.zeros(16, np.float32)).get_multimem_device_pointer(mm)
    names_both(e)
    a.register_window(np.zeros(16, np.float32)).get_multimem_device_pointer(mm)
    with pytest.raises(NcclInvalid, match="team was made by communicator"):
        dev.multimem_handle(other.team_world)


def test_low_level_window_objects_remember_their_communicator(stub):
    buf = np.zeros(16, np.float32)
    for comm in (COMM, b.Comm(COMM)):
        win = b.comm_window_register(comm, buf.ctypes.data, buf.nbytes, 0)
        assert isinstance(win, b.Window)
        for call in (lambda: b.comm_window_deregister(OTHER, win),
                     lambda: b.comm_window_deregister(b.Comm(OTHER), win),
                     lambda: b.win_get_user_ptr(OTHER, win),
                     lambda: b.put_signal(buf.ctypes.data, 4, 7, 1, win, 0, 0, 0, 0, OTHER, 0)):
            with pytest.raises(NcclInvalid, match="win.* was registered on communicator") as e:
                call()
            names_both(e)
        b.win_get_user_ptr(COMM, win)
        b.put_signal(buf.ctypes.data, 4, 7, 1, win, 0, 0, 0, 0, comm, 0)
        b.comm_window_deregister(comm, win)
        # 0.2-style ints carry no communicator: passed on unchanged
        b.comm_window_deregister(OTHER, int(win))
        b.comm_window_deregister(OTHER, b.Window(int(win)))  # made by hand: no owner


def test_window_registered_in_a_group_belongs_to_its_communicator(stub):
    buf = np.zeros(16, np.float32)
    b.group_start()
    win = b.comm_window_register(COMM, buf.ctypes.data, buf.nbytes, 0)
    b.group_end()
    with pytest.raises(NcclInvalid, match="registered on communicator"):
        b.comm_window_deregister(OTHER, win)
    b.comm_window_deregister(COMM, win)


@pytest.mark.skipif(not host_available(), reason="host backend not built")
@pytest.mark.nccl(nranks=[2])
def test_pre_mul_sum_of_a_split_on_the_host_backend(comm, check):
    """A PreMulSum op of a split, used on its parent: refused (it used to run
    the parent's op with the same id: scalar 100 instead of 10)."""
    child = comm.split(0, comm.rank)
    try:
        x = np.full(4, float(comm.rank + 1), np.float32)
        y = np.zeros(4, np.float32)
        own = comm.create_pre_mul_sum(100.0, nc.NcclDataType.FLOAT32)
        op = child.create_pre_mul_sum(10.0, nc.NcclDataType.FLOAT32)
        assert int(own) == int(op)  # the same id in the two communicators
        check.expect_invalid("the child's op on the parent",
                             lambda: comm.allreduce(x, y, op), "op was created on communicator")
        child.allreduce(x, y, op)
        check.check("the child's op on the child", y, np.full(4, 30.0, np.float32),
                    nc.NcclDataType.FLOAT32)
        check.assert_ok()
    finally:
        child.destroy()
