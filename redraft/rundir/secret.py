"""A run's secret: random bytes its directory keeps, which seed the hidden parts of its generated tasks.

A generator whose gold a candidate could rebuild from public code and a guessable seed (the pipeline
scenario's: a program that embeds the generator and tries seeds 0, 1, 2... would find its own task's
files and write the gold table) draws its hidden parts from the run's seed *and* this secret
(`redraft.scenarios.Scenario.hides_gold`). The secret is made with `secrets.token_bytes` the first time
a run reads it, in the directory that keeps it (a run's own; a comparison's or a tune's, which every run
of it shares, so their arms see the same tasks), and read back as is by every later invocation: a
resume makes the same tasks, a new directory new hidden parts.

Invariants: made once, whole (written aside, then linked into place, so two makers agree on the one that
landed and no reader sees half of one), and only in a directory that holds no result yet; never replaced (a
file of the wrong length, or none where results already are, is refused in one line: a new
secret would change the tasks under a resume); written nowhere else: not in the manifest,
a prompt, a frame, nor a sandbox, which sees only its own work directory.
"""

from __future__ import annotations

import contextlib
import os
import secrets
from dataclasses import dataclass, field
from pathlib import Path

from redraft.errors import UserError
from redraft.rundir.layout import RESULTS

SECRET = "secret"
"""The secret's file in the directory that keeps it."""
SECRET_BYTES = 32


@dataclass(frozen=True)
class RunSecret:
    """The secret a run's generated tasks are seeded with, kept in ``home``."""

    home: Path | None
    """The directory that keeps it: a run's own, or the comparison's or the tune's its runs share; None for
    what has no directory (an estimate of a new run), which reads a passing secret of its own."""
    keep: bool = True
    """Whether reading it makes it when there is none; False for what writes nothing (an estimate, a dry
    run), which then reads a passing secret of its own: tasks like the run's, not the same ones."""
    _passing: bytes = field(default_factory=lambda: secrets.token_bytes(SECRET_BYTES), repr=False, compare=False)

    def __repr__(self) -> str:  # never the bytes, whatever prints a run
        return f"RunSecret(home={str(self.home)!r}, keep={self.keep})"

    @property
    def path(self) -> Path | None:
        return self.home / SECRET if self.home is not None else None

    def read(self) -> bytes:
        """The secret: the kept one, made now if there is none and `keep`; `UserError` for a file that is
        not one."""
        path = self.path
        if path is None:
            return self._passing
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            return self._made(path) if self.keep else self._passing
        except OSError as exc:
            raise UserError(f"cannot read the run's secret {path}: {exc.strerror}") from None
        if len(data) != SECRET_BYTES:
            raise UserError(
                f"{path} holds {len(data)} bytes, not a run's secret of {SECRET_BYTES}: its tasks were made "
                "from the secret it held; restore it, or give a new --out"
            )
        return data

    def _made(self, path: Path) -> bytes:
        """A new secret at ``path``, linked into place whole; the one another maker linked first if it won.
        `UserError` where a run has finished tasks: they were made from a secret that is gone."""
        with contextlib.suppress(FileNotFoundError):
            if (path.parent / RESULTS).stat().st_size:
                raise UserError(
                    f"{path.parent} holds a run's results but not its secret (deleted, or a run of an older redraft): "
                    "its tasks cannot be made again; give a new --out"
                )
        aside = path.with_name(f".{SECRET}-{secrets.token_hex(8)}.tmp")
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            with open(aside, "xb") as file:
                os.fchmod(file.fileno(), 0o600)
                file.write(secrets.token_bytes(SECRET_BYTES))
            with contextlib.suppress(FileExistsError):
                os.link(aside, path)
        except OSError as exc:
            raise UserError(f"cannot keep the run's secret in {path.parent}: {exc.strerror}") from None
        finally:
            aside.unlink(missing_ok=True)
        return self.read()
