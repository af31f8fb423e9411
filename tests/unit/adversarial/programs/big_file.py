# Writes a 20 MB file: RLIMIT_FSIZE refuses it (EFBIG).
# limits: max_file_bytes=10000000
# killed_by: None
# returncode: 0
# stdout: refused 27
try:
    with open("big.bin", "wb") as f:
        f.write(b"x" * 20_000_000)
    print("wrote")
except OSError as exc:
    print("refused", exc.errno)
