"""The files a sandboxed run is handed, and the files collected from it when it has ended (the caller's side).

A run may be given input files (``files``: name -> bytes), written into its work directory beside the source
before the launcher starts; the launcher carries them under the tmpfs it mounts there, as it carries the
source. A run may name output files (``outputs``), collected once it has ended: inside a mount namespace the
launcher copies each out of the tmpfs into the host work directory's `OUTBOX` (through the descriptor it
holds of that directory: the tmpfs hides its path); without one they are read where the candidate wrote them.
Either way only regular files of exactly the names asked for are read, never through a symbolic link and
never a FIFO or a device, each up to `SandboxLimits.max_collect_bytes`; what was not collected is reported
with why (missing, not a regular file, too large).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence

from redraft.sandbox._limits import SANDBOX_UID, SandboxLimits
from redraft.sandbox.namespaces import read_regular

NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
"""A file name a run may be handed or asked for: no directory, no leading dot."""
OUTBOX = ".outbox"


def check_exchange(files: Mapping[str, bytes], outputs: Sequence[str], source: str, limits: SandboxLimits) -> None:
    """`ValueError` for a name that is not a plain file name (or is the source's), or inputs over their cap."""
    for name in [*files, *outputs]:
        if not NAME.fullmatch(name) or name == source:
            raise ValueError(f"sandbox file name {name[:80]!r} must match {NAME.pattern} and not be {source!r}")
    size = sum(len(data) for data in files.values())
    if size > limits.max_input_bytes:
        raise ValueError(
            f"the sandbox's input files hold {size:,} bytes, over max_input_bytes {limits.max_input_bytes:,}"
        )


def write_inputs(workdir: str, files: Mapping[str, bytes]) -> None:
    """Each input file into the (new, empty) work directory, readable by the candidate's uid."""
    for name, data in files.items():
        fd = os.open(os.path.join(workdir, name), os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "wb") as out:
            out.write(data)
            if os.geteuid() == 0:
                os.fchown(out.fileno(), SANDBOX_UID, SANDBOX_UID)


def collect(
    workdir: str, outputs: Sequence[str], limit: int, *, from_outbox: bool, reasons: Mapping[str, str] | None = None
) -> tuple[dict[str, bytes], dict[str, str]]:
    """The output files read back (by name), and why each other one was not (``reasons``: the launcher's, for
    the files it did not copy out)."""
    collected: dict[str, bytes] = {}
    said = reasons or {}
    try:
        where = os.path.join(workdir, OUTBOX) if from_outbox else workdir
        directory = os.open(where, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except OSError:  # nothing was copied out: the launcher's reasons, where it gave them
        return collected, {name: said.get(name, "not written") for name in outputs}
    missing: dict[str, str] = {}
    try:
        for name in outputs:
            got = read_regular(directory, name, limit)
            if isinstance(got, bytes):
                collected[name] = got
            else:
                missing[name] = said.get(name, got)
    finally:
        os.close(directory)
    return collected, missing
