"""The wheel a release ships: built from a copy of the checkout, installed alone in a fresh venv, it says its
version and makes a whole run (its prompts, its scenarios' entry points) and a report (its templates).

The build runs in a copy of the tracked files (setuptools writes ``build/`` and ``*.egg-info`` beside the
source, never into the checkout). The fresh venv gets the wheel without its dependencies, and sees this
venv's site-packages through a ``.pth`` line (found at run time): nothing is installed from the network, and
this venv's editable redraft is not what runs (a ``.pth`` line adds a directory, never the ``.pth`` files in
it, and the fresh venv's own site-packages come first). A local Ray of its own, as ``redraft run`` starts.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
import tomllib
from pathlib import Path

from redraft.protocols.messages import WIRE_VERSION
from redraft.rundir import result_records
from tests.support.paths import REPO_ROOT

REPLIES = '''
def seven(request):
    """Every draft answers 7 (the run has no critic)."""
    return "Answer: 7"
'''
TASKS = 3


def run(*args: str | Path, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    done = subprocess.run([str(a) for a in args], capture_output=True, text=True, cwd=cwd, env=env, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return done


def test_the_wheel_installs_alone_says_its_version_and_runs(tmp_path: Path) -> None:
    tracked = run("git", "ls-files", "-z", cwd=REPO_ROOT).stdout.split("\0")
    source = tmp_path / "source"
    for name in filter(None, tracked):
        if (REPO_ROOT / name).is_file():
            (source / name).parent.mkdir(parents=True, exist_ok=True)
            (source / name).write_bytes((REPO_ROOT / name).read_bytes())
    run(sys.executable, "-m", "pip", "wheel", source, "--no-deps", "-w", tmp_path / "dist", "-q", cwd=tmp_path)
    [wheel] = (tmp_path / "dist").glob("redraft-*.whl")
    declared = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert wheel.name == f"redraft-{declared}-py3-none-any.whl"

    venv = tmp_path / "venv"
    run(sys.executable, "-m", "venv", "--without-pip", venv, cwd=tmp_path)
    python = venv / "bin" / "python"
    run(sys.executable, "-m", "pip", "--python", python, "install", "--no-deps", "-q", wheel, cwd=tmp_path)
    site = run(python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])", cwd=tmp_path).stdout
    ours = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}  # this venv's: the dependencies
    (Path(site.strip()) / "redraft-test-dependencies.pth").write_text("".join(f"{p}\n" for p in sorted(ours)))

    (tmp_path / "replies").mkdir()
    (tmp_path / "replies" / "wheel_replies.py").write_text(REPLIES)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "RAY_ADDRESS")}
    env |= {"PYTHONPATH": str(tmp_path / "replies"), "PATH": f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"}
    imported = run(python, "-c", "import redraft; print(redraft.__file__)", cwd=tmp_path, env=env).stdout.strip()
    assert Path(imported).is_relative_to(venv), imported  # the wheel's, not this checkout's editable install

    redraft = venv / "bin" / "redraft"
    assert run(redraft, "--version", cwd=tmp_path, env=env).stdout == f"redraft {declared}\n"
    out = tmp_path / "run"
    args = ["run", "arithmetic", "--model", "scripted:wheel_replies:seven", "--strategy", "none"]
    args += ["--samples", "1", "--max-rounds", "1", "--limit", str(TASKS), "--out", str(out)]
    run(redraft, *args, cwd=tmp_path, env=env)
    records = result_records(out)
    assert len(records) == TASKS and all(r["answer"] == "7" and r["error"] is None for r in records)
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["versions"]["redraft"] == declared and manifest["wire_version"] == WIRE_VERSION
    assert manifest["identity"]["prompts"]  # the built-in prompts.toml, from the wheel
    run(redraft, "report", str(out), cwd=tmp_path, env=env)  # the report's templates, from the wheel
    assert (out / "report.html").read_text().count("<html") == 1
