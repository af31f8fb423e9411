# Opens files until it cannot: RLIMIT_NOFILE (EMFILE).
# killed_by: None
# returncode: 0
# stdout: refused 24
held = []
try:
    for _ in range(100_000):
        held.append(open("/dev/null"))  # noqa: SIM115
    print("opened all")
except OSError as exc:
    print("refused", exc.errno)
