# Burns CPU under a long wall clock: RLIMIT_CPU stops it first.
# limits: timeout_s=30 cpu_s=1
# killed_by: cpu_limit
# returncode: -24
while True:
    pass
