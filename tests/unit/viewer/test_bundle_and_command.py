"""``redraft view --bundle``: the same pages as static files, linked to each other, nothing written in the root;
and the command itself: its help without the server's libraries, a real server on 127.0.0.1 printing its URL,
and a bind beyond loopback only with a token."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path
from urllib.parse import unquote

import pytest

from redraft.errors import UserError
from redraft.rundir import safe_name
from redraft.viewer import write_bundle
from tests.support.paths import REPO_ROOT


def _files(root: Path) -> dict[str, int]:
    return {str(p.relative_to(root)): p.stat().st_mtime_ns for p in root.rglob("*") if p.is_file()}


def test_a_bundle_writes_every_page_linked_and_nothing_in_the_root(root: Path, tmp_path: Path) -> None:
    before = _files(root)
    index = write_bundle(root, tmp_path / "site")
    assert _files(root) == before
    pages = sorted((tmp_path / "site").rglob("*.html"))
    assert index in pages and len(pages) > 12
    for page in pages:
        html = page.read_text()
        for href in re.findall(r'(?:href|src)="([^"#?]+)"', html):
            if not href.startswith(("http", "data:")):
                assert (page.parent / unquote(href)).resolve().is_file(), (page, href)
        assert '<form class="review"' not in html and 'method="post"' not in html
        assert "alert(&#34;pwned&#34;)" in html or "alert(" not in html
    hostile = (tmp_path / "site" / "d" / "mixed" / "task" / f"{safe_name('suite/html')}.html").read_text()
    assert "&lt;script&gt;alert(&#34;pwned&#34;)&lt;/script&gt;" in hostile and "<script" not in hostile
    assert (tmp_path / "site" / "d" / "cmp" / "arms" / "shallow" / "task" / f"{safe_name('suite/late')}.html").is_file()
    listing = index.read_text()
    assert 'href="d/mixed/index.html"' in listing and 'href="d/cmp/index.html"' in listing


def test_a_bundle_inside_the_root_is_refused(root: Path) -> None:
    with pytest.raises(UserError, match="inside the root"):
        write_bundle(root, root / "site")


def _redraft(*args: str, **kwargs: object) -> subprocess.Popen[str]:
    env = os.environ | {"PYTHONPATH": str(REPO_ROOT)}
    return subprocess.Popen(
        [sys.executable, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=REPO_ROOT
    )


def test_the_help_does_not_load_the_server_s_libraries() -> None:
    code = "import sys; from redraft.cli import main\ntry: main(['view', '--help'])\nexcept SystemExit: pass\n"
    code += "print(sorted(m for m in sys.modules if m.split('.')[0] in ('starlette', 'uvicorn')))"
    done = _redraft("-c", code)
    out, err = done.communicate(timeout=120)
    assert done.returncode == 0, err
    assert out.strip().splitlines()[-1] == "[]" and "--bundle" in out


_open = urllib.request.build_opener(urllib.request.ProxyHandler({})).open  # straight to 127.0.0.1


def _url(process: subprocess.Popen[str]) -> str:
    assert process.stdout is not None
    line = process.stdout.readline()  # the first line says where it listens
    found = re.search(r"(http://\S+)", line)
    assert found is not None, (line, process.stderr.read() if process.stderr else "")
    return found.group(1)


def test_the_command_serves_on_loopback_and_prints_its_url(root: Path) -> None:
    server = _redraft("-m", "redraft.cli", "view", str(root), "--port", "0")
    try:
        url = _url(server)
        assert url.startswith("http://127.0.0.1:") and "token" not in url
        with _open(url + "run?d=mixed", timeout=60) as answer:
            assert answer.status == 200 and b"suite/late" in answer.read()
    finally:
        server.terminate()
        server.wait(timeout=60)


def test_a_bind_beyond_loopback_generates_a_token_and_asks_for_it(root: Path) -> None:
    server = _redraft("-m", "redraft.cli", "view", str(root), "--port", "0", "--host", "0.0.0.0")
    try:
        url = _url(server)
        token = re.search(r"\?token=(\S+)$", url)
        assert token is not None and len(token.group(1)) >= 20
        bare = url.split("?")[0].replace("0.0.0.0", "127.0.0.1")
        with pytest.raises(urllib.error.HTTPError) as refused:
            _open(bare, timeout=60)
        assert refused.value.code == 403
        with _open(f"{bare}?token={token.group(1)}", timeout=60) as answer:
            assert answer.status == 200
    finally:
        server.terminate()
        server.wait(timeout=60)


def test_without_the_view_extra_the_command_names_it(root: Path) -> None:
    code = "import sys; sys.modules['uvicorn'] = None\nfrom redraft.cli import main\n"
    code += f"main(['view', {str(root)!r}, '--port', '0'])"
    done = _redraft("-c", code)
    _, err = done.communicate(timeout=120)
    assert done.returncode == 2
    assert (
        err.strip()
        == "redraft: error: redraft view needs the view extra (uvicorn is missing): pip install 'redraft[view]'"
    )
