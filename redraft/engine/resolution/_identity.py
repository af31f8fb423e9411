"""A run's identity (what decides its results), the manifest its run directory keeps, and its ``--out`` checked.

The identity is the experiment's settings, every prompt template's version (a prompts file's text hashes
too) and a task file's and a judge's rubric's path and content hash; its hash, the fingerprint, lets a rerun
with the same ``--out`` resume and refuses one that would mix two configurations (`redraft.rundir.RunStore`).
"""

from __future__ import annotations

import importlib.metadata
import os
import platform
import tempfile
import time
from pathlib import Path
from typing import Any

import msgspec

from redraft.config import RunConfig
from redraft.engine.prompt_files import fingerprinted, overrides
from redraft.engine.prompts import Prompts
from redraft.errors import UserError
from redraft.protocols.messages import WIRE_VERSION
from redraft.rundir import WIRE_KEY, fingerprint
from redraft.rundir.store import new_run_uid


def identity(
    config: RunConfig,
    prompts: Prompts,
    also: Prompts | None = None,
    *,
    tasks: dict[str, str] | None = None,
    rubric: dict[str, str] | None = None,
) -> dict[str, Any]:
    """What decides the run's results (the fingerprint's input), ``prompts`` the templates the run loaded (over the
    built-in ones and ``also``'s: the judge's); ``tasks`` and ``rubric`` its task file's and its rubric's path and
    hash (`TaskFile.identity`), taken from the reads that checked them."""
    data: dict[str, Any] = msgspec.to_builtins(config.experiment)
    data["prompts"] = fingerprinted(prompts)  # the versions, not the file's path
    data["prompt_overrides"] = overrides(prompts, also)  # empty without a prompts file
    if config.experiment.tasks is not None:
        assert tasks is not None, "a task file's hash comes from the read that checked it"
        data["tasks"] = tasks
    if config.experiment.rubric is not None:
        assert rubric is not None, "a rubric's hash comes from the read that loaded it"
        data["rubric"] = rubric  # its content decides the grades
    return data


def manifest(config: RunConfig, ident: dict[str, Any], run_id: str) -> dict[str, Any]:
    """The run directory's ``manifest.json``: the config (flat, without the machine's ``out`` path), its
    identity and fingerprint, the wire version its frames are written at, package versions, start time."""
    return {
        "run_id": run_id,
        "run_uid": new_run_uid(),
        "started_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "config": config.flat() | {"out": None},
        "identity": ident,
        "fingerprint": fingerprint(ident),
        WIRE_KEY: WIRE_VERSION,
        "versions": _versions(),
    }


def _versions() -> dict[str, str]:
    versions = {"python": platform.python_version()}
    for dist in ("redraft", "ray", "msgspec", "llama_cpp_python", "openai", "anthropic"):
        try:
            versions[dist] = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            continue
    return versions


def check_out(out: Path) -> None:
    """``--out`` is a directory redraft can write in, or a path it can create; one `UserError` line otherwise.

    Checked before anything starts: a file, a device (``/dev/null``), a directory nobody may write in
    (``/proc/self``) or a path under a file would otherwise fail only once the run directory is made.
    """
    if out.exists() or out.is_symlink():
        if not out.is_dir():
            raise UserError(f"--out {out} is not a directory: give a run directory, or a path that does not exist yet")
        place = out
    else:
        place = next(p for p in out.absolute().parents if p.exists())
        if not place.is_dir():
            raise UserError(f"--out {out}: {place} is not a directory, so nothing can be made under it")
    try:  # the only test that holds for root, read-only mounts and /proc alike: write something there
        descriptor, probe = tempfile.mkstemp(dir=place, prefix=".redraft-write-test-")
        os.close(descriptor)
        os.unlink(probe)
    except OSError as exc:
        raise UserError(f"--out {out}: cannot write in {place} ({exc.strerror}); choose another directory") from None
