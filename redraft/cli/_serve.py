"""``redraft serve``: its options (``redraft run``'s model, loop and budget options as every request's defaults,
and the server's own), made into `redraft.serving.ServeSettings`."""

from __future__ import annotations

import inspect
import time
from pathlib import Path
from typing import Any

import typer

from redraft.cli._options import Placed, _in_panel_order, _option, _run_options

SERVED_SETTINGS = frozenset(
    {
        *("model", "drafter", "critic", "verifier", "escalate", "temperature", "max_tokens", "cache", "prompts"),
        *("strategy", "samples", "max_rounds", "threshold", "patience", "seed", "patch", "prices"),
        *("task_budget_usd", "task_budget_tokens", "task_budget_calls", "address"),
    }
)
"""``redraft run``'s options that ``redraft serve`` takes: the requests' defaults, the cluster, where traces go."""
SERVER = "Server"
LIMITS = "Limits"
PANELS = ("Model", "Loop", "Budgets", SERVER, LIMITS, "Output", "Runtime")


def serve_parameters() -> list[inspect.Parameter]:
    """The run options `SERVED_SETTINGS` names, then the server's own."""
    placed = [p for p in _run_options() if p[1].name in SERVED_SETTINGS]
    placed = [(panel if panel in PANELS else "Runtime", parameter) for panel, parameter in placed]
    return _in_panel_order(placed + _server_options(), PANELS)


def _many(panel: str, name: str, flag: str, text: str) -> Placed:
    option = typer.Option(None, flag, help=text, rich_help_panel=panel)
    return panel, inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=option, annotation=list[str] | None)


def _server_options() -> list[Placed]:
    key = typer.Option(
        None,
        "--api-key",
        envvar="REDRAFT_SERVE_API_KEY",
        help="The key clients send (Authorization: Bearer KEY); also REDRAFT_SERVE_API_KEY.",
        rich_help_panel=SERVER,
        show_envvar=False,
    )
    return [
        _option(SERVER, "host", "--host", "Address to listen on (without a key: loopback only).", default="127.0.0.1"),
        _option(SERVER, "port", "--port", "Port to listen on.", default=8000),
        (SERVER, inspect.Parameter("api_key", inspect.Parameter.KEYWORD_ONLY, default=key, annotation=str | None)),
        _option(SERVER, "api_keys_file", "--api-keys-file", "A file of accepted keys, one a line.", kind=Path),
        _many(SERVER, "check", "--check", "NAME=MODULE:FUNCTION: a check requests may name (repeatable)."),
        _many(
            SERVER,
            "alias",
            "--alias",
            "NAME=redraft/STRATEGY or NAME=redraft/STRATEGY/MODEL: a model name to serve (repeatable).",
        ),
        _option("Output", "out", "--out", "Where traces go: a run directory per day and replica (default runs/serve)."),
        _option(SERVER, "max_replicas", "--max-replicas", "Replicas Ray Serve may scale up to.", default=4),
        _option(
            SERVER, "in_process", "--in-process", "Serve in this process, without Ray (one replica).", default=False
        ),
        _option(
            SERVER,
            "fleet_idle",
            "--fleet-idle",
            "Seconds without a request after which a replica stops its role actors (started again on the next).",
            default=600.0,
        ),
        _option(LIMITS, "request_timeout", "--request-timeout", "Seconds a request's loop may run.", default=300.0),
        _option(
            LIMITS,
            "drain_timeout",
            "--drain-timeout",
            "On Ctrl-C or SIGTERM, seconds the requests in flight have to finish (and be recorded).",
            default=5.0,
        ),
        _option(LIMITS, "max_request_bytes", "--max-request-bytes", "Largest request body.", default=1_000_000),
        _option(LIMITS, "max_tokens_limit", "--max-tokens-limit", "Most max_tokens a request may ask.", default=4096),
        _option(LIMITS, "max_samples", "--max-samples", "Most samples a request may ask.", default=8),
        _option(LIMITS, "max_rounds_limit", "--max-rounds-limit", "Most rounds a request may ask.", default=8),
        _option(
            LIMITS, "usd_per_day", "--usd-per-day", "Refuse requests once this much is spent in a day.", kind=float
        ),
    ]


def serve_command(**given: Any) -> None:
    """Serve refinement behind an OpenAI-compatible endpoint (POST /v1/chat/completions), on Ray Serve."""
    from redraft.cli._signals import stop_on_signals
    from redraft.config import RunConfig
    from redraft.serving import serve_here, serve_on_ray, served_summary

    settings, address = served_settings(given)
    RunConfig.build(**settings.run).validate()
    started = time.time()
    said = (
        f"requests in flight have {settings.drain_s:g} s (--drain-timeout) to finish and be recorded; "
        "a second signal stops at once"
    )
    with stop_on_signals(said) as stop:
        if given["in_process"]:
            serve_here(settings, stop.event)
        else:
            serve_on_ray(settings, address=address, max_replicas=given["max_replicas"], stop=stop.event)
    print(served_summary(settings, started), flush=True)


def served_settings(given: dict[str, Any]) -> tuple[Any, str | None]:
    """The `ServeSettings` of the command's options, and the cluster's address; `UserError` for a bad one."""
    from redraft.serving import ServeSettings, key_digests, named_pairs

    run = {name: value for name, value in given.items() if name in SERVED_SETTINGS and value is not None}
    address = run.pop("address", None)
    out = str(Path(given["out"] or "runs/serve").absolute())  # the replicas' working directory is not ours
    settings = ServeSettings(
        run=run,
        checks=named_pairs(given["check"] or [], "--check", "NAME=MODULE:FUNCTION"),
        aliases=named_pairs(given["alias"] or [], "--alias", "NAME=redraft/STRATEGY[/MODEL]"),
        host=given["host"],
        port=given["port"],
        key_digests=key_digests(given["api_key"], given["api_keys_file"]),
        out=out,
        request_timeout_s=given["request_timeout"],
        drain_s=given["drain_timeout"],
        max_request_bytes=given["max_request_bytes"],
        max_tokens=given["max_tokens_limit"],
        max_samples=given["max_samples"],
        max_rounds=given["max_rounds_limit"],
        usd_per_period=given["usd_per_day"],
        fleet_idle_s=given["fleet_idle"],
    )
    settings.validate()
    return settings, address


serve_command.__signature__ = inspect.Signature(serve_parameters())  # type: ignore[attr-defined]
