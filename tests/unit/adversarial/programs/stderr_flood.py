# Writes 100 MB to stderr, the stream a traceback summary would read.
# limits: max_output_bytes=64000
# killed_by: output_limit
# returncode: None
import sys

for _ in range(100):
    sys.stderr.write("Traceback (most recent call last):\n" * 30_000)
