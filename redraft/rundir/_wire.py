"""Which wire version wrote a run directory, and the refusal of one written before the wire restarted at 1.

The code before redraft 0.1.0 wrote wire versions up to 5, with values no release writes (``-1`` for "no
candidate", an empty stance) and frames of kinds and fields that changed since: it is never read nor resumed.
Such a directory is told by two facts together: its manifest has no ``wire_version`` (every manifest a release
writes has one) and its trace's first frame carries one of the pre-release versions (2 to 5; a frame of a later
release's version in a directory without that key is another writer's, read as such). `check_wire` is asked by
every command that opens a run directory (`RunReader`, a resume), and by a comparison or a tune for each of its
lanes or evaluations before anything starts, so the refusal is one line, never a traceback.
"""

from __future__ import annotations

from pathlib import Path

import msgpack

from redraft.errors import RunDirVersionError
from redraft.protocols.messages import WIRE_VERSION
from redraft.rundir.layout import MANIFEST, TRACE, read_object

WIRE_KEY = "wire_version"
"""The manifest's key for the wire version its writer wrote."""
PRE_RELEASE = range(2, 6)
"""The wire versions the code before 0.1.0 wrote that no release has (yet) reused in a directory without
``wire_version``."""


def check_wire(root: Path) -> None:
    """`RunDirVersionError` (one line) if ``root`` was written by a pre-release redraft; nothing otherwise (a
    directory of this version, one not made yet, or one with nothing to tell)."""
    version = pre_release_version(root)
    if version is not None:
        raise RunDirVersionError(
            f"{root} was written by a pre-release version of redraft (wire version {version}; this one reads "
            f"wire version {WIRE_VERSION}), so it cannot be read or resumed: start a new run with a new --out"
        )


def pre_release_version(root: Path) -> int | None:
    """The wire version of ``root``'s frames when a pre-release redraft wrote them, else None."""
    if WIRE_KEY in read_object(root / MANIFEST):
        return None
    version = first_frame_version(root)
    return version if version in PRE_RELEASE else None


def first_frame_version(root: Path) -> int | None:
    """The ``v`` of the first frame of ``root``'s trace (None: no trace, no whole first frame, or no version)."""
    try:
        with open(root / TRACE, "rb") as trace:
            first = next(msgpack.Unpacker(trace, raw=False, strict_map_key=False), None)
    except (OSError, ValueError, msgpack.UnpackException):  # missing, unreadable, or damaged from its first byte
        return None
    version = first.get("v") if isinstance(first, dict) else None
    return version if type(version) is int else None
