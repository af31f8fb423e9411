"""``redraft export``: a run as a flat table (`redraft.views.export`), or as spans sent to an OTLP/HTTP endpoint
(`redraft.telemetry`). The command's options are checked here, each fault one `UserError` line."""

from __future__ import annotations

from pathlib import Path

from redraft.errors import UserError, unknown_name

FORMATS = ("parquet", "csv", "otel")
TABLE_DEFAULT = "results"


def export_run(run_dir: Path, fmt: str, table: str, out_path: Path | None, endpoint: str | None) -> str:
    """Export the run at ``run_dir`` as the options say; the line the command prints."""
    if fmt not in FORMATS:
        raise unknown_name("--format", fmt, FORMATS)
    if fmt == "otel":
        return _spans(run_dir, table, out_path, endpoint)
    if endpoint is not None:
        raise UserError("--endpoint is where --format otel sends spans; a table is written to a file (--out)")
    from redraft.views.export import export

    if out_path is not None and out_path.is_dir():
        raise UserError(f"--out {out_path} is a directory: give the file to write, e.g. {out_path / 'results.csv'}")
    if out_path is not None and not (under := _nearest_existing(out_path.absolute().parent)).is_dir():
        raise UserError(f"--out {out_path}: {under} is not a directory, so nothing can be made under it")
    try:
        path, rows = export(run_dir, fmt, table=table, out=out_path)
    except OSError as exc:  # the --out place: under a file, a directory nobody may write in (/proc/self)
        raise UserError(f"cannot export to {exc.filename or out_path}: {exc.strerror}") from None
    return f"{path} ({rows} rows)"


def _spans(run_dir: Path, table: str, out_path: Path | None, endpoint: str | None) -> str:
    from redraft.telemetry import export_run as send

    if endpoint is None:
        raise UserError(
            "--format otel sends spans to an OTLP/HTTP endpoint: give it, e.g. --endpoint http://127.0.0.1:4318"
        )
    if out_path is not None or table != TABLE_DEFAULT:
        raise UserError("--format otel sends every span of the run to --endpoint: --out and --table are for tables")
    url, spans = send(run_dir, endpoint)
    return f"{url} ({spans} spans)"


def _nearest_existing(path: Path) -> Path:
    return next(p for p in (path, *path.parents) if p.exists())
