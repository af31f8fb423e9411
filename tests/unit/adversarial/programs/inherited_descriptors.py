# Hunts for descriptors of the sandbox's own pipes (the lifeline, the status pipe) to cut them.
# killed_by: None
# returncode: 0
# stdout: [0, 1, 2, 3]
import os

print(sorted(int(fd) for fd in os.listdir("/proc/self/fd")))  # 3: the listing's own descriptor
