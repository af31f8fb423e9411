# A fork bomb: refused at the first fork (and RLIMIT_NPROC under uid 65534 would bound it anyway).
# limits: timeout_s=3
# killed_by: None
# returncode: 1
# stderr-last: PermissionError: redraft sandbox: os.fork is not allowed
import os

while True:
    os.fork()
