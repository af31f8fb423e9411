# Signals the keeper (PID 1 of its namespace) and every process it may reach.
# root: yes
# killed_by: None
# returncode: 1
# stderr-last: ProcessLookupError: [Errno 3] No such process
import contextlib
import os
import signal

with contextlib.suppress(PermissionError):
    os.kill(1, signal.SIGKILL)
os.kill(-1, signal.SIGKILL)
print("survived")
