# A loop that never ends: the sandbox's wall clock stops it.
# limits: timeout_s=2 cpu_s=60
# killed_by: timeout
# returncode: None
while True:
    pass
