"""A real multi-node Ray on this machine, started the way users start one: ``ray start --head``, then
``ray start --address`` for each worker node, each raylet with its own ports, all under one temp dir.

Token authentication is on (``RAY_AUTH_MODE=token``; the token lives in the user's
``~/.ray/auth_token``, never printed). The head runs the dashboard, so the job
server (``ray job submit``) and the metrics agents (Prometheus text on
``metrics_port``) are there. Stopping kills this cluster's processes by pid (those
whose command line names its temp dir, and their children): ``ray stop`` would
stop every Ray on the machine.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from tests.support.chaos import children

VENV_BIN = Path(sys.executable).parent


_GIVEN: set[int] = set()
"""Ports handed out in this process: the system may offer a port it just closed again, and a `ray start`
given one port for two components refuses to start (`dashboard_agent_http is trying to use a port number ...
that is used by other components`)."""


def free_port() -> int:
    """A port free now on 127.0.0.1 that this process has not handed out before."""
    while True:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = int(s.getsockname()[1])
        if port not in _GIVEN:
            _GIVEN.add(port)
            return port


def ray_env() -> dict[str, str]:
    path = f"{VENV_BIN}{os.pathsep}{os.environ.get('PATH', '')}"
    return os.environ | {
        "RAY_AUTH_MODE": "token",
        "RAY_USAGE_STATS_ENABLED": "0",
        "RAY_metrics_report_interval_ms": "1000",
        "PATH": path,
    }


def _node_ports() -> list[str]:
    """Ports every raylet of one machine must not share."""
    return [
        f"--dashboard-agent-listen-port={free_port()}",
        f"--dashboard-agent-grpc-port={free_port()}",
        f"--runtime-env-agent-port={free_port()}",
        f"--metrics-export-port={free_port()}",
    ]


@dataclass
class RealCluster:
    workers: int = 2
    temp_dir: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="rd-")))
    port: int = field(default_factory=free_port)
    dashboard_port: int = field(default_factory=free_port)
    metrics_port: int = field(default_factory=free_port)
    address: str = ""

    @property
    def dashboard(self) -> str:
        return f"http://127.0.0.1:{self.dashboard_port}"

    def ray(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(VENV_BIN / "ray"), *args], env=ray_env(), capture_output=True, text=True, timeout=timeout
        )

    def start(self) -> RealCluster:
        ports = [p for p in _node_ports() if not p.startswith("--metrics-export-port")]
        head = self.ray(
            "start",
            "--head",
            f"--port={self.port}",
            "--num-cpus=1",
            f"--temp-dir={self.temp_dir}",
            "--include-dashboard=true",
            "--dashboard-host=127.0.0.1",
            f"--dashboard-port={self.dashboard_port}",
            f"--ray-client-server-port={free_port()}",
            f"--metrics-export-port={self.metrics_port}",
            *ports,
        )
        found = re.search(r"ray start --address='([^']+)'", head.stdout + head.stderr)
        assert head.returncode == 0 and found, (head.stdout + head.stderr)[-3000:]
        self.address = found[1]
        for _ in range(self.workers):
            worker = self.ray(
                "start", f"--address={self.address}", "--num-cpus=1", f"--temp-dir={self.temp_dir}", *_node_ports()
            )
            assert worker.returncode == 0, (worker.stdout + worker.stderr)[-3000:]
        self._wait_for_nodes(1 + self.workers)
        return self

    def _wait_for_nodes(self, count: int, timeout_s: float = 120) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            status = self.ray("status", f"--address={self.address}")
            if len(re.findall(r"^ \d+ node_", status.stdout, re.MULTILINE)) >= count:
                return
            time.sleep(1)
        raise AssertionError(f"{count} nodes did not come up: {status.stdout[-2000:]}")

    def pids(self) -> list[int]:
        """This cluster's processes: those whose command line names its temp dir, and their descendants."""
        mine = set()
        marker = str(self.temp_dir).encode()
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                try:
                    with open(f"/proc/{entry}/cmdline", "rb") as f:
                        if marker in f.read():
                            mine.add(int(entry))
                except OSError:
                    continue
        todo = list(mine)
        while todo:
            for child in children(todo.pop()):
                if child not in mine:
                    mine.add(child)
                    todo.append(child)
        return sorted(mine)

    def stop(self) -> None:
        for pid in self.pids():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
