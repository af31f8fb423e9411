"""The candidate's audit hook: defence in depth, not a boundary. Standard library only: launcher.py loads it by path.

Invariant: once `install_audit_hook` ran, the events a contained program has no business with
(starting processes, sockets, ``ctypes``) and writes or file-system changes outside the work
directory raise a ``PermissionError`` whose message says what was refused. The OS layers
(launcher.py, namespaces.py) are the boundary: ``ctypes`` or ``_posixsubprocess`` can bypass a
hook. Nothing here runs on import.
"""

from __future__ import annotations

import os
import sys
from typing import Any

DENIED_EVENTS = frozenset({
    "os.system", "os.exec", "os.posix_spawn", "os.spawn", "os.fork", "os.forkpty", "subprocess.Popen", "pty.spawn",
    "socket.connect", "socket.bind", "socket.sendto", "socket.sendmsg",
    "socket.getaddrinfo", "socket.gethostbyname", "socket.gethostbyaddr", "socket.getnameinfo",
    "ctypes.dlopen", "ctypes.dlsym", "ctypes.call_function",
})  # fmt: skip
# Events that change the file system, and which of their arguments are paths.
PATH_EVENTS = {
    "os.remove": (0,), "os.rmdir": (0,), "os.mkdir": (0,), "os.rename": (0, 1), "os.symlink": (1,),
    "os.link": (1,), "os.chmod": (0,), "os.chown": (0,), "os.truncate": (0,), "os.utime": (0,),
    "shutil.rmtree": (0,), "os.mkfifo": (0,), "os.mknod": (0,),
}  # fmt: skip
WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_TRUNC


def install_audit_hook(workdir: str) -> None:
    """Defence in depth: forbidden actions raise a readable PermissionError (not a boundary)."""
    real = os.path.realpath
    allowed = real(workdir) + os.sep
    devnull = os.devnull

    def inside(path: Any) -> bool:
        if isinstance(path, int) or path is None:
            return True  # an already open descriptor
        full = real(os.fsdecode(path))
        return full == devnull or (full + os.sep).startswith(allowed)

    def hook(event: str, args: tuple[Any, ...]) -> None:
        if event in DENIED_EVENTS:
            raise PermissionError(f"redraft sandbox: {event} is not allowed")
        if event == "open" and args[2] & WRITE_FLAGS and not inside(args[0]):
            raise PermissionError(f"redraft sandbox: writing {args[0]!r} outside the work directory")
        if event in PATH_EVENTS and not all(inside(args[i]) for i in PATH_EVENTS[event]):
            raise PermissionError(f"redraft sandbox: {event} outside the work directory")

    sys.addaudithook(hook)
