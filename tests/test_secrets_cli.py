"""--protect, --no-protect, --rule, --rule-default and --allow-host on `loki` and `loki mcp`."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from cli_run import loki
from yggdrasil.loki.sandbox import isolation_status

SECRET = "s3cret-d00d"
namespaces = pytest.mark.skipif(not isolation_status().namespaces, reason="no namespaces here")


@pytest.fixture
def project(root: Path) -> Path:
    (root / ".env").write_text(f"TOKEN={SECRET}\n")
    (root / "local.sqlite").write_text(SECRET)
    (root / "notes.txt").write_text("notes\n")
    return root


def call(tmp_path: Path, root: Path, *args: str) -> tuple[int, str, str]:
    done = loki(tmp_path, "call", *args, "--root", str(root))
    return done.returncode, done.stdout, done.stderr


def test_call_refuses_protected_files(tmp_path: Path, project: Path) -> None:
    code, out, _ = call(tmp_path, project, "read_file", "path=.env")
    assert code == 1 and out.startswith("ERROR: .env is protected: it may hold secrets")
    assert SECRET not in out and "--no-protect" in out
    code, out, _ = call(tmp_path, project, "grep", "pattern=TOKEN", "include_ignored=true")
    assert code == 0 and SECRET not in out and "[skipped: 1 protected]" in out


@namespaces
def test_call_run_cannot_read_them(tmp_path: Path, project: Path) -> None:
    code, out, _ = call(tmp_path, project, "run", "command=cat .env notes.txt")
    assert code == 0 and out.startswith("exit=1")  # the tool answered; the command failed
    assert SECRET not in out and "Permission denied" in out and "notes" in out


def test_no_protect_and_protect(tmp_path: Path, project: Path) -> None:
    code, out, _ = call(tmp_path, project, "read_file", "path=.env", "--no-protect")
    assert code == 0 and SECRET in out
    code, out, _ = call(tmp_path, project, "read_file", "path=local.sqlite", "--protect", "*.sqlite")
    assert code == 1 and "local.sqlite is protected" in out
    code, out, _ = call(tmp_path, project, "read_file", "path=.env", "--protect", "*.sqlite")
    assert code == 1 and ".env is protected" in out  # --protect adds to the defaults
    code, out, _ = call(tmp_path, project, "read_file", "path=.env", "--no-protect",
                        "--protect", "*.sqlite")
    assert code == 0 and SECRET in out  # ... and with --no-protect it is the only glob


def test_rules_on_the_command_line(tmp_path: Path, project: Path) -> None:
    code, out, _ = call(tmp_path, project, "run", "command=touch made; git push", "--rule",
                        "deny:git push")
    assert code == 1 and "refused by the rule ('deny', 'git push')" in out
    assert not (project / "made").exists()
    code, out, err = call(tmp_path, project, "run", "command=make all", "--rule", "ask:make")
    assert code == 3 and out.startswith("REFUSED: user declined to run make all")
    assert "pass --yes" in err  # no terminal to ask
    code, out, _ = call(tmp_path, project, "run", "command=echo ok", "--rule", "ask:make", "--yes")
    assert code == 0 and "ok" in out
    code, out, _ = call(tmp_path, project, "run", "command=echo ok", "--rule-default", "deny")
    assert code == 1 and "matches no rule" in out
    code, _, err = call(tmp_path, project, "run", "command=ls", "--rule", "block:git push")
    assert code == 2 and "ACTION:COMMAND" in err


def test_allow_host_flags(tmp_path: Path, project: Path) -> None:
    done = loki(tmp_path, "tools", "--root", str(project), "--allow-host", "pypi.org",
                "--allow-host", "*.github.com")
    assert done.returncode == 0
    if isolation_status().namespaces:
        assert "network only to pypi.org, *.github.com over HTTP(S)" in done.stdout
    code, _, err = call(tmp_path, project, "run", "command=ls", "--allow-host", "pypi.org",
                        "--no-network")
    assert code == 2 and "contradict" in err
    code, _, err = call(tmp_path, project, "run", "command=ls", "--allow-host", "https://pypi.org")
    assert code == 2 and "no scheme" in err


# -- loki mcp --------------------------------------------------------------------------

def test_mcp_refuses_protected_files_and_takes_the_flags(project: Path) -> None:
    pytest.importorskip("mcp")
    from test_mcp import field, serve_and, text_of

    async def scenario(client: Any) -> list[Any]:
        return [await client.call_tool("read_file", {"path": ".env"}),
                await client.call_tool("run", {"command": "cat .env; git push"}),
                await client.call_tool("list_dir", {"path": "."})]

    (read, run, listing), _ = serve_and(sys.executable, project, scenario, "--rule", "deny:git push")
    assert field(read, "is_error") and ".env is protected" in text_of(read)
    assert field(run, "is_error") and "refused by the rule ('deny', 'git push')" in text_of(run)
    assert ".env  [protected]" in text_of(listing)
    if isolation_status().namespaces:
        (_, run, _), _ = serve_and(sys.executable, project, scenario, "--protect", "*.sqlite")
        assert SECRET not in text_of(run)

    async def read_all(client: Any) -> list[Any]:
        return [await client.call_tool("read_file", {"path": ".env"}),
                await client.call_tool("run", {"command": "cat .env"})]

    (read, run), _ = serve_and(sys.executable, project, read_all, "--no-protect")
    assert not field(read, "is_error") and SECRET in text_of(read) and SECRET in text_of(run)


@namespaces
def test_mcp_allow_host_routes_commands_through_the_proxy(project: Path) -> None:
    pytest.importorskip("mcp")
    import http.server

    from fake_servers import served
    from test_mcp import serve_and, text_of

    site = http.server.ThreadingHTTPServer(("127.0.0.1", 0), http.server.SimpleHTTPRequestHandler)
    url = f"http://127.0.0.1:{site.server_address[1]}/"
    probe = ("import os, urllib.request\n"
             "print('proxy', os.environ.get('HTTPS_PROXY', 'none'))\n"
             f"try: urllib.request.urlopen({url!r}, timeout=5); print('REACHED')\n"
             "except Exception as e: print('refused', type(e).__name__, e)")

    async def scenario(client: Any) -> list[Any]:
        return [await client.call_tool("run_python", {"code": probe})]

    with served(site):
        (limited,), _ = serve_and(sys.executable, project, scenario, "--allow-host", "pypi.org")
        (open_,), _ = serve_and(sys.executable, project, scenario)
    assert "proxy http://" in text_of(limited) and "REACHED" not in text_of(limited)
    assert "403" in text_of(limited) or "refused" in text_of(limited)
    assert "proxy none" in text_of(open_) and "REACHED" in text_of(open_)  # the flag made it

