"""``redraft report``: the run's report.html and its task pages (`redraft.views.report`), or one task's page."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from redraft.errors import UserError

RunDir = Annotated[Path, typer.Argument(metavar="RUN_DIR", help="A run directory (the --out of `redraft run`).")]


def report_command(
    run_dir: RunDir,
    max_pages: Annotated[
        int | None,
        typer.Option(help="Write task pages for the first N tasks only (default 1,000; --all-pages for every task)."),
    ] = None,
    all_pages: Annotated[bool, typer.Option(help="Write a page for every task, however many.")] = False,
    task: Annotated[
        str | None, typer.Option(help="Write this one task's page only (one a capped report left out).")
    ] = None,
) -> None:
    """Write report.html: plots, tables, and pages of the first tasks."""
    from redraft.views.report import MAX_PAGES, write_report, write_task_page

    if max_pages is not None and max_pages < 0:
        raise UserError(f"--max-pages must be at least 0, got {max_pages}")
    if task is not None:
        print(write_task_page(run_dir, task))
        return
    print(write_report(run_dir, max_pages=None if all_pages else MAX_PAGES if max_pages is None else max_pages))
