# Fills its work directory: the 64 MB tmpfs says ENOSPC long before the host's disk.
# killed_by: None
# returncode: 0
# stdout: refused 28
try:
    for i in range(1000):
        with open(f"f{i}", "wb") as f:
            f.write(b"x" * 1_000_000)
    print("wrote 1 GB")
except OSError as exc:
    print("refused", exc.errno)
