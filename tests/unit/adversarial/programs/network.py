# Tries the loopback, a public resolver and a DNS lookup: the network namespace is empty.
# killed_by: None
# returncode: 0
# stdout-not: connected
# stdout: refused refused
import socket

outcomes = []
for address in [("127.0.0.1", 22), ("1.1.1.1", 53)]:
    try:
        socket.create_connection(address, timeout=2).close()
        outcomes.append("connected")
    except OSError:
        outcomes.append("refused")
print(" ".join(outcomes))
