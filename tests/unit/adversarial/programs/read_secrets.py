# Looks for the caller's API keys in its environment.
# killed_by: None
# returncode: 0
# stdout: ['HOME', 'LANG', 'LC_ALL', 'PATH', 'TMPDIR']
# stdout-not: sk-redraft
import os

print(sorted(os.environ))
print([v for v in os.environ.values() if v.startswith("sk-")])
