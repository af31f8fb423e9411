# Allocates 4 GB: RLIMIT_AS makes it a MemoryError inside the candidate.
# limits: memory_mb=256
# killed_by: None
# returncode: 1
# stderr-last: MemoryError
# stdout-not: allocated everything
chunks = []
for _ in range(40):
    chunks.append(bytearray(100_000_000))
print("allocated everything")
