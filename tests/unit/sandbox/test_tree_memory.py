"""A sandbox's memory is bounded for its whole process tree, not process by process: five children that each
try to hold 400 MB under a 512 MB limit hold one 400 MB block between them (each alone is under RLIMIT_AS,
so only the tree's memory cgroup can stop them). Run with the audit hook off, as the other OS-layer tests
are: the hook refuses ``os.fork`` but is no boundary (``_posixsubprocess`` goes around it)."""

from __future__ import annotations

import os
import textwrap

import pytest

from redraft.sandbox import SandboxLimits, memorygroup
from redraft.sandbox import _supervisor as supervisor

CHILDREN_HOLDING = textwrap.dedent(
    """
    import os, select

    EACH, CHILDREN = 400 * 2**20, 5
    held_r, held_w = os.pipe()
    hold_r, hold_w = os.pipe()
    for _ in range(CHILDREN):
        if os.fork() == 0:
            os.close(held_r)
            os.close(hold_w)
            block = b"\\x01" * EACH  # every page written: resident, charged
            os.write(held_w, os.getpid().to_bytes(8, "big"))
            os.read(hold_r, 1)  # held until the parent lets go
            os._exit(0)
    os.close(held_w)
    os.close(hold_r)
    holding, ended = set(), set()
    while len(holding | ended) < CHILDREN:  # each child either says it holds its block, or ends
        if select.select([held_r], [], [], 0.05)[0] and len(data := os.read(held_r, 8)) == 8:
            holding.add(int.from_bytes(data, "big"))
        while True:
            try:
                pid, _ = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                pid = 0
            if not pid:
                break
            ended.add(pid)
    print(f"holding {len(holding - ended)} of {CHILDREN}", flush=True)
    """
)


def machine_allows() -> str | None:
    """The cgroup version a group can be made with here (root, a memory controller we may write), or None."""
    group = memorygroup.make(64 * 2**20)
    memorygroup.remove(group)
    return group.version if group is not None else None


def groups_left() -> set[str]:
    return {path for parent, _ in memorygroup._parents() for path in os.listdir(parent) if path.startswith("redraft-")}


@pytest.mark.timeout(300)
def test_five_children_hold_no_more_than_the_limit_between_them() -> None:
    version = machine_allows()
    if version is None:
        pytest.skip("no memory cgroup can be made here: each process keeps RLIMIT_AS alone (the docs say so)")
    before = groups_left()
    limits = SandboxLimits(timeout_s=240.0, cpu_s=120, memory_mb=512)
    result = supervisor._run(CHILDREN_HOLDING, limits=limits, namespaces=True, audit_hook=False)
    assert f"memcg:{version}" in result.layers
    assert result.stdout == "holding 1 of 5\n", (result.stdout, result.stderr[-500:])  # 400 MB, not 2000
    assert groups_left() == before  # the run's group removed with its tree


def test_where_no_group_can_be_made_nothing_is_made_and_nothing_raises(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(memorygroup, "_parents", lambda: [("/proc/self", "v1")])  # no cgroup file system there
    assert memorygroup.make(512 * 2**20) is None
    assert memorygroup.join(None) is None
    memorygroup.remove(None)
