"""A run directory the code before 0.1.0 wrote (wire version 5) is refused in one line by every command that
opens it, and by a comparison or a tune that would resume one as a lane or an evaluation: never a traceback,
and nothing in it is written. The fixture is copied first: the checkout is never written into."""

from __future__ import annotations

import io
import shutil
from pathlib import Path

import msgpack
import msgspec
import pytest

from redraft.errors import RunDirVersionError, UserError
from redraft.protocols.messages import WIRE_VERSION, Task, encode
from redraft.rundir import WIRE_KEY, RunReader, check_wire
from redraft.rundir.layout import MANIFEST, TRACE, read_object, write_json
from redraft.rundir.store import resumable
from tests.support.paths import PRERELEASE_RUN
from tests.support.report_runs import redraft

SAID = (
    "was written by a pre-release version of redraft (wire version 5; this one reads wire version 1), "
    "so it cannot be read or resumed: start a new run with a new --out"
)
MODEL = "scripted:tests.support.replies:always_seven"


@pytest.fixture
def copy(tmp_path: Path) -> Path:
    root = tmp_path / "prerelease-run"
    shutil.copytree(PRERELEASE_RUN, root)
    return root


def files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def refused_in_one_line(done: object, root: Path) -> None:
    assert done.returncode == 2, done.stderr  # type: ignore[attr-defined]
    assert done.stderr.splitlines() == [f"redraft: error: {root} {SAID}"]  # type: ignore[attr-defined]


def test_the_fixture_is_a_pre_release_run() -> None:
    assert WIRE_VERSION == 1
    assert WIRE_KEY not in read_object(PRERELEASE_RUN / MANIFEST)
    frames = list(msgpack.Unpacker(io.BytesIO((PRERELEASE_RUN / TRACE).read_bytes()), raw=False))
    assert {f["v"] for f in frames} == {5} and frames[0]["kind"] == "task"  # read as a third party would
    with pytest.raises(RunDirVersionError) as refused:
        check_wire(PRERELEASE_RUN)
    assert str(refused.value) == f"{PRERELEASE_RUN} {SAID}" and "\n" not in str(refused.value)
    assert isinstance(refused.value, UserError)  # what the command line says in one line, exit code 2


def test_reading_or_resuming_it_is_refused_before_anything_else(copy: Path) -> None:
    before = files(copy)
    with pytest.raises(RunDirVersionError, match="pre-release"):
        RunReader(copy)
    manifest = read_object(copy / MANIFEST)
    for fingerprint in (manifest["fingerprint"], "another configuration's"):  # the version is told first
        with pytest.raises(RunDirVersionError, match="pre-release"):
            resumable(copy, {"fingerprint": fingerprint, "identity": {}})
    assert files(copy) == before


def test_a_directory_of_this_version_or_of_another_writer_is_not_refused(tmp_path: Path) -> None:
    root = tmp_path / "run"
    root.mkdir()
    task = Task(task_id="t", scenario="arithmetic", prompt="p")
    (root / TRACE).write_bytes(encode(task))
    check_wire(root)  # this version's frames
    (root / TRACE).write_bytes(encode(msgspec.structs.replace(task, v=9)))
    check_wire(root)  # a later writer's version: read as another writer's (its unknown fields kept)
    (root / TRACE).write_bytes(encode(msgspec.structs.replace(task, v=5)))
    write_json(root / MANIFEST, {WIRE_KEY: 5})
    check_wire(root)  # a release that says its version: not taken for the code before 0.1.0
    (root / MANIFEST).unlink()
    with pytest.raises(RunDirVersionError):
        check_wire(root)  # its manifest lost: its frames still tell
    (root / TRACE).write_bytes(b"\xc1 damaged from its first byte")
    check_wire(root)  # nothing to tell: the reader's own rules say what is damaged
    check_wire(tmp_path / "not made yet")


def test_a_new_run_s_manifest_records_the_wire_version() -> None:
    from redraft.config import RunConfig
    from tests.support.resolved import manifest_for

    assert manifest_for(RunConfig.build(scenario="arithmetic"), "r")[WIRE_KEY] == WIRE_VERSION


@pytest.mark.parametrize(
    "command",
    [
        ["report", "{root}"],
        ["trace", "{root}", "suite/pass-first"],
        ["export", "{root}", "--format", "csv"],
        ["run", "arithmetic", "--model", MODEL, "--samples", "2", "--max-rounds", "2", "--out", "{root}"],
    ],
    ids=lambda c: c[0],
)
def test_every_command_refuses_it_in_one_line(command: list[str], copy: Path) -> None:
    before = files(copy)
    refused_in_one_line(redraft(*(a.format(root=copy) for a in command)), copy)
    assert files(copy) == before


def test_a_comparison_with_such_a_lane_is_refused_in_one_line_before_ray_starts(tmp_path: Path) -> None:
    out = tmp_path / "comparison"
    lane = out / "arms" / "adversarial"
    shutil.copytree(PRERELEASE_RUN, lane)
    args = ["compare", "arithmetic", "--arms", "adversarial", "--model", MODEL, "--limit", "2", "--out", str(out)]
    refused_in_one_line(redraft(*args), lane)
    assert not (out / "ray.log").exists()


def test_a_tune_with_such_an_evaluation_is_refused_in_one_line_before_anything_is_written(tmp_path: Path) -> None:
    out = tmp_path / "tune"
    evaluation = out / "evaluations" / "c0" / "validation"
    shutil.copytree(PRERELEASE_RUN, evaluation)
    args = ["tune", "arithmetic", "--limit", "20", "--model", MODEL, "--out", str(out)]
    refused_in_one_line(redraft(*args), evaluation)
    assert sorted(p.name for p in out.iterdir()) == ["evaluations"]
