# Prints 100 MB: the output cap kills it at 64,000 bytes.
# limits: max_output_bytes=64000
# killed_by: output_limit
# returncode: None
import sys

for _ in range(100):
    sys.stdout.write("x" * 1_000_000)
