"""The run directory: its layout, its one writer, its one reader, its summary, a task's history.

The writer and every reader read ``results.jsonl`` by the same rule
(`redraft.rundir._results`), and decode what they read into the message Structs of
`redraft.protocols.messages`, so no module restates the run's format by hand.

See docs/architecture.md, section "The run directory's modules".
"""

from redraft.rundir._results import TaskEntry
from redraft.rundir._wire import WIRE_KEY, check_wire
from redraft.rundir.frames import Frame, GenericFrame, KnownFrame, decode_frame
from redraft.rundir.history import TaskHistory, build_history
from redraft.rundir.kinds import COMPARISON, JUDGE_CARD, RUN, TUNE, DirKind, check_kind, check_run
from redraft.rundir.labels import (
    LABELS,
    Judgements,
    Label,
    Preference,
    answer_digest,
    append_label,
    append_preference,
    current_labels,
    final_answers,
    read_judgements,
)
from redraft.rundir.layout import fingerprint, safe_name
from redraft.rundir.lock import DirectoryBusy, WriterLock, hold
from redraft.rundir.reader import RunReader, result_records, trace_bytes, trace_for
from redraft.rundir.secret import RunSecret
from redraft.rundir.store import RunStore
from redraft.rundir.summary import Change, Summary, refinement_change, summarize

__all__ = [
    "COMPARISON",
    "JUDGE_CARD",
    "LABELS",
    "RUN",
    "TUNE",
    "WIRE_KEY",
    "Change",
    "DirKind",
    "DirectoryBusy",
    "Frame",
    "GenericFrame",
    "Judgements",
    "KnownFrame",
    "Label",
    "Preference",
    "RunReader",
    "RunSecret",
    "RunStore",
    "Summary",
    "TaskEntry",
    "TaskHistory",
    "WriterLock",
    "answer_digest",
    "append_label",
    "append_preference",
    "build_history",
    "check_kind",
    "check_run",
    "check_wire",
    "current_labels",
    "decode_frame",
    "final_answers",
    "fingerprint",
    "hold",
    "read_judgements",
    "refinement_change",
    "result_records",
    "safe_name",
    "summarize",
    "trace_bytes",
    "trace_for",
]
