"""``python -m redraft.cli``: the ``redraft`` command."""

from redraft.cli import main

main()
