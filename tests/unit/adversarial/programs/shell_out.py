# Replaces itself with a shell.
# killed_by: None
# returncode: 1
# stderr-last: PermissionError: redraft sandbox: os.exec is not allowed
import os

os.execv("/bin/sh", ["sh", "-c", "id; cat /etc/shadow"])
