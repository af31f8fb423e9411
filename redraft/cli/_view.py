"""``redraft view``: the viewer over a folder of runs (`redraft.viewer`), or its static bundle.

Starlette and uvicorn (the ``view`` extra) are imported only when the command runs, never for ``--help``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer


def view_command(
    root: Annotated[
        Path, typer.Argument(metavar="ROOT", help="The folder of run directories, comparisons, tunes and judge cards.")
    ] = Path("runs"),
    host: Annotated[
        str, typer.Option(help="Address to listen on; beyond loopback every request needs the --token.")
    ] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port to listen on (0: a free one).")] = 8765,
    token: Annotated[
        str | None,
        typer.Option(help="Access token every request must carry (generated and printed for a non-loopback --host)."),
    ] = None,
    bundle: Annotated[
        Path | None, typer.Option(help="Write a static site of the pages into this folder instead (no live parts).")
    ] = None,
) -> None:
    """Browse runs in a local web app: live runs, every round, filters, your labels."""
    if bundle is not None:
        from redraft.viewer import write_bundle

        print(write_bundle(root, bundle))
        return
    from redraft.viewer import serve

    serve(root, host=host, port=port, token=token)
