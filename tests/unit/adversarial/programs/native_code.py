# Loads libc to call ptrace on the keeper.
# killed_by: None
# returncode: 1
# stderr-last: PermissionError: redraft sandbox: ctypes.dlopen is not allowed
import ctypes

ctypes.CDLL(None).ptrace(16, 1, 0, 0)
