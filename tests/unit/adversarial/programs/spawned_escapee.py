# Spawns a detached shell that leaves the session (setsid) and sleeps, through _posixsubprocess, which the
# audit hook does not see: the PID namespace takes it down with the candidate.
# limits: timeout_s=5
# killed_by: None
# returncode: 0
# stdout: spawned
import _posixsubprocess
import os

r, w = os.pipe()
args = [b"/bin/sh", b"-c", b"setsid sleep 600 </dev/null >/dev/null 2>&1 &"]
_posixsubprocess.fork_exec(  # the signature of Python 3.11, the version CI runs
    args,
    [b"/bin/sh"],
    True,
    (),
    None,
    None,
    -1,
    -1,
    -1,
    -1,
    -1,
    -1,
    r,
    w,
    True,
    False,
    0,
    None,
    None,
    None,
    -1,
    None,
    False,
)
print("spawned", flush=True)
