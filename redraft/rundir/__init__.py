"""The run directory: its layout, its one writer, its one reader, its summary, a task's history.

```
layout     file names, the config fingerprint, JSON files, task page names
results    results.jsonl: a task's line, and the one rule for reading lines back, record by record
frames     trace frames decoded into the message Structs (unknown kinds and fields kept); a task's range checked
recovery   what a resume keeps of a damaged directory, and what it sets aside in *.damaged files
store      RunStore, the writer (the driver's), and what a resume keeps
lock       writer.lock: one writer per directory (a run's, a comparison's, a tune's, a judge card's)
kinds      which directories redraft writes into: new, empty, or its own kind's; never a docs tree
wire       the wire version a directory was written at: one a pre-release redraft wrote is refused in one line
reader     RunReader: records streamed, one task's frames by seeking (and decompressing: blocks)
blocks     the trace's compressed blocks: a task's frames one zstd frame, against the run's dictionary
prefix     verified.json: the prefix of the files the writer vouches a resume need not verify again
index      tasks.index: where each task's line is, so one task is found without reading them all (`trace_for`)
summary    Summary (summary.json, the end table) and summarize
secret     RunSecret: the random bytes a run keeps to seed its generated tasks' hidden parts
history    one task's rounds, candidates, critiques, decisions and best-so-far diffs
```

The writer and every reader read ``results.jsonl`` by the same rule
(`redraft.rundir._results`), and decode what they read into the message Structs of
`redraft.protocols.messages`, so no module restates the run's format by hand.
"""

from redraft.rundir._results import TaskEntry
from redraft.rundir._wire import WIRE_KEY, check_wire
from redraft.rundir.frames import Frame, GenericFrame, KnownFrame, decode_frame
from redraft.rundir.history import TaskHistory, build_history
from redraft.rundir.kinds import COMPARISON, JUDGE_CARD, RUN, TUNE, DirKind, check_kind, check_run
from redraft.rundir.layout import fingerprint, safe_name
from redraft.rundir.lock import DirectoryBusy, WriterLock, hold
from redraft.rundir.reader import RunReader, result_records, trace_bytes, trace_for
from redraft.rundir.secret import RunSecret
from redraft.rundir.store import RunStore
from redraft.rundir.summary import Change, Summary, refinement_change, summarize

__all__ = [
    "COMPARISON",
    "JUDGE_CARD",
    "RUN",
    "TUNE",
    "WIRE_KEY",
    "Change",
    "DirKind",
    "DirectoryBusy",
    "Frame",
    "GenericFrame",
    "KnownFrame",
    "RunReader",
    "RunSecret",
    "RunStore",
    "Summary",
    "TaskEntry",
    "TaskHistory",
    "WriterLock",
    "build_history",
    "check_kind",
    "check_run",
    "check_wire",
    "decode_frame",
    "fingerprint",
    "hold",
    "refinement_change",
    "result_records",
    "safe_name",
    "summarize",
    "trace_bytes",
    "trace_for",
]
