"""A tune's directory: what decides its results (``tune-manifest.json``), its splits (``splits.json``) and its
starting candidate, each read on a resume and checked against the settings given now.

A dry run reads and checks them and writes none (``write=False``): ``--dry-run`` leaves ``--out`` as it found
it, or absent.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec

from redraft.config import RunConfig
from redraft.engine.prompt_files import load_prompts
from redraft.errors import UserError
from redraft.protocols.messages import Task
from redraft.tuning._edits import entries_of, prompts_file
from redraft.tuning._journal import PromptCandidate, TuneJournal
from redraft.tuning._search import START
from redraft.tuning._splits import Splits, check_disjoint, labelled_splits, split_tasks

if TYPE_CHECKING:
    from redraft.tuning._api import TuneSettings

MANIFEST = "tune-manifest.json"
PAYER = "payer"
"""The manifest's key for the tune's own id, which no setting decides and a resume keeps."""
SPLITS_FILE = "splits.json"

_FREE = frozenset(
    {"out", "budget_usd", "budget_tokens", "budget_calls", "budget_seconds", "max_tasks_in_flight", "verbose"}
    | {"address", "cache", "limit", "dry_run", "redo_untraced"}
)
"""Settings a resume may change: where and how it runs, how much more it may spend (the splits check the tasks)."""


def default_out() -> Path:
    return Path("runs") / f"tune-{time.strftime('%Y%m%d-%H%M%S')}-{uuid.uuid4().hex[:6]}"


def read_splits(
    out: Path, tasks: list[Task], settings: TuneSettings, seed: int, *, write: bool, labelled: Iterable[str] = ()
) -> Splits:
    """The splits of the tasks (``labelled``: the tasks people labelled, which are train, with ``--train-labels``);
    on a resume the recorded ones, which must be what the tasks and labels give now."""
    chosen = list(labelled)
    made = labelled_splits(tasks, chosen, settings.split, seed) if chosen else split_tasks(tasks, settings.split, seed)
    path = out / SPLITS_FILE
    if path.exists():
        try:
            recorded = msgspec.json.decode(path.read_bytes(), type=Splits)
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            raise UserError(f"{path}: not the splits of a tune ({exc})") from None
        check_disjoint(recorded, tasks)
        if recorded != made:
            raise UserError(
                f"{path}: the tasks, --split, --seed or the labelled tasks (--train-labels) changed since this tune "
                "began; use another --out"
            )
        return recorded
    check_disjoint(made, tasks)
    if write:
        out.mkdir(parents=True, exist_ok=True)
        path.write_bytes(msgspec.json.format(msgspec.json.encode(made)))
    return made


def read_manifest(out: Path, config: RunConfig, settings: TuneSettings, *, write: bool) -> str:
    """What decides the tune's results; a resume whose settings differ is refused, naming the first. The tune's
    payer (whose money its proposer's calls are, `CallSettings.payer`), kept from its first invocation."""
    decides = {k: v for k, v in config.flat().items() if k not in _FREE} | {
        "sections": list(settings.sections),
        "minibatch": settings.minibatch,
        "split": list(settings.split),
        "examples": settings.examples,
        "proposer": settings.proposer,
        "train_labels": None if settings.train_labels is None else str(settings.train_labels),
    }
    decides = json.loads(json.dumps(decides, default=str))
    path = out / MANIFEST
    if path.exists():
        recorded: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
        payer = str(recorded.pop(PAYER, "") or f"tune@{out.name}")
        for key in sorted(set(recorded) | set(decides)):
            if recorded.get(key) != decides.get(key):
                raise UserError(
                    f"{out} holds a tune with other settings ({key}: {recorded.get(key)!r} then, "
                    f"{decides.get(key)!r} now); use another --out"
                )
        return payer
    payer = uuid.uuid4().hex
    if write:
        path.write_text(json.dumps(decides | {PAYER: payer}, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    return payer


def start_candidate(out: Path, journal: TuneJournal, prompts: str | None) -> PromptCandidate:
    """The starting prompts as candidate c0 (recorded once)."""
    if START in journal.candidates:
        return journal.candidates[START]
    entries = entries_of(load_prompts(prompts))
    path = prompts_file(entries, {}, out / "prompts" / f"{START}.toml")
    start = PromptCandidate(
        id=START, parent=None, iteration=None, section=None, reason="", entries=entries, file=str(path.relative_to(out))
    )
    journal.add(start)
    return start
