# Dereferences NULL: the crash is the candidate's, reported as its signal.
# killed_by: signal
# returncode: -11
import ctypes

ctypes.string_at(0)
