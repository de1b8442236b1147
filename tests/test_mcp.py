"""`loki mcp` through the SDK's own client, over a real stdio subprocess.

Each test runs the server under this environment's mcp SDK and under the other major
version (``mcp_python``, see conftest); the client is this environment's SDK.
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp")

import anyio
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from cli_run import isolated
from yggdrasil.loki.tools import filesystem_toolbox

SRC = Path(__file__).resolve().parents[1] / "src"

Scenario = Callable[[ClientSession], Awaitable[Any]]


def field(obj: Any, name: str) -> Any:
    """A field of an SDK object by its snake_case (2.x) or camelCase (1.x) name."""
    camel = name.split("_")[0] + "".join(w.title() for w in name.split("_")[1:])
    return getattr(obj, name) if hasattr(obj, name) else getattr(obj, camel)


def serve_and(python: str, root: Path, scenario: Scenario, *flags: str,
              env: dict[str, str] | None = None) -> tuple[Any, str]:
    """Start `loki mcp --root ROOT FLAGS`, run ``scenario`` on a client session.

    Returns what the scenario returned and everything the server wrote on stderr.
    TMPDIR points away from the root so the root's files are treated as real assets.
    """
    scratch = root.parent / "system-tmp"
    scratch.mkdir(exist_ok=True)
    server = StdioServerParameters(
        command=python,
        args=["-m", "yggdrasil.loki", "mcp", "--root", str(root), *flags],
        env={"PYTHONPATH": str(SRC), "TMPDIR": str(scratch), "PATH": os.environ["PATH"],
             **isolated(), **(env or {})})  # no language server, the run's cache (conftest)
    errlog = root.parent / "server-stderr.txt"

    async def session() -> Any:
        with anyio.fail_after(60), errlog.open("w") as err:  # a guard against a hang, not a timing
            async with stdio_client(server, errlog=err) as (read, write), \
                    ClientSession(read, write) as client:
                await client.initialize()
                return await scenario(client)

    result = anyio.run(session)
    return result, errlog.read_text()


def text_of(result: Any) -> str:
    return "".join(part.text for part in result.content)


def test_lists_the_toolbox_schemas_unchanged_with_annotations(root: Path, mcp_python: str) -> None:
    async def scenario(client: ClientSession) -> Any:
        return (await client.list_tools()).tools

    tools, log = serve_and(mcp_python, root, scenario, "--web")
    expected = {tool.name: tool for tool in filesystem_toolbox(root, allow_web=True)}
    assert [t.name for t in tools] == list(expected)
    for tool in tools:
        own = expected[tool.name]
        hints = tool.annotations
        assert field(tool, "input_schema") == own.input_schema
        assert tool.description == own.description
        assert tool.title == hints.title == own.title
        # every hint said on every tool, each from the Tool itself
        assert field(hints, "read_only_hint") is own.read_only is (not own.mutates)
        assert field(hints, "destructive_hint") is (not own.read_only)
        assert field(hints, "idempotent_hint") is own.idempotent
        assert field(hints, "open_world_hint") is own.open_world is tool.name.startswith("web_")
    assert field(tools[0], "title") == "List a folder"
    # reading a job's output or the job list changes nothing: a client need not ask first
    by_name = {t.name: t.annotations for t in tools}
    assert field(by_name["job_output"], "read_only_hint") is True
    assert field(by_name["jobs"], "destructive_hint") is False
    assert field(by_name["read_file"], "read_only_hint") is True
    assert field(by_name["web_fetch"], "open_world_hint") is True
    assert field(by_name["job_stop"], "destructive_hint") is True
    assert field(by_name["run"], "read_only_hint") is False
    assert f"serving {len(expected)} tools" in log
    major = 1 if "mcp 1." in log else 2
    assert ("mcp 1." in log) is (major == 1) and ("mcp 2." in log) is (major == 2)


def test_read_only_server_lists_only_read_tools(root: Path, mcp_python: str) -> None:
    async def scenario(client: ClientSession) -> Any:
        return [t.name for t in (await client.list_tools()).tools]

    names, _ = serve_and(mcp_python, root, scenario, "--read-only")
    assert names == ["list_dir", "read_file", "find", "grep", "outline", "find_symbol", "repo_map",
                     "read_table", "query_table", "diagnostics"]


def test_reads_and_edits_a_file(root: Path, mcp_python: str) -> None:
    target = root / "app.py"
    target.write_text("debug = False\nprint('hi')\n")

    async def scenario(client: ClientSession) -> Any:
        read = await client.call_tool("read_file", {"path": "app.py"})
        edit = await client.call_tool("edit_file", {"path": "app.py", "old": "False",
                                                    "new": "True"})
        run = await client.call_tool("run", {"command": "echo to-stdout; echo to-stderr >&2"})
        return read, edit, run

    (read, edit, run), log = serve_and(mcp_python, root, scenario)
    assert (field(read, "is_error"), text_of(read)) == (False, "1\tdebug = False\n2\tprint('hi')")
    assert (field(edit, "is_error"), text_of(edit)) == (
        False, "edited app.py (1 replacement)\n--- app.py\n+++ app.py\n@@ -1,2 +1,2 @@\n"
        "-debug = False\n+debug = True\n print('hi')")
    assert target.read_text() == "debug = True\nprint('hi')\n"
    assert text_of(run) == "exit=0\nstdout:\nto-stdout\n\nstderr:\nto-stderr\n"
    assert "call edit_file" in log


def test_code_navigation_tools(root: Path, mcp_python: str) -> None:
    pytest.importorskip("tree_sitter_language_pack")
    (root / "shop.py").write_text("class Cart:\n    def total(self):\n        return 0\n")
    (root / "main.py").write_text("from shop import Cart\nprint(Cart().total())\n")

    async def scenario(client: ClientSession) -> Any:
        return [await client.call_tool(name, args) for name, args in [
            ("outline", {"path": "shop.py"}), ("find_symbol", {"name": "Cart.total"}),
            ("read_file", {"path": "shop.py", "symbol": "Cart.total"}),
            ("repo_map", {"budget": 300}), ("outline", {"path": "../outside"})]]

    (outline, found, read, mapped, escape), _ = serve_and(mcp_python, root, scenario, "--read-only")
    assert text_of(outline) == "class Cart  L1-3\n  method total(self)  L2-3"
    assert text_of(found) == "shop.py:2: method Cart.total(self)"
    assert text_of(read).split("\n")[:2] == ["2\t    def total(self):", "3\t        return 0"]
    assert field(read, "structured_content")["symbol"] == "Cart.total"  # the window is its lines
    assert text_of(mapped).split("\n")[1:3] == ["shop.py:", "  class Cart  L1-3"]
    assert field(escape, "is_error") and "escapes the agent root" in text_of(escape)


def test_every_tool_declares_an_output_schema_and_answers_structured_content(
        root: Path, mcp_python: str) -> None:
    (root / "notes.txt").write_text("one\ntwo\n")

    async def scenario(client: ClientSession) -> Any:
        tools = (await client.list_tools()).tools
        ran = await client.call_tool("run", {"command": "echo out; echo err >&2; exit 3"})
        escape = await client.call_tool("read_file", {"path": "../outside/secret.txt"})
        return tools, ran, escape

    (tools, ran, escape), _ = serve_and(mcp_python, root, scenario)
    for tool in tools:  # the client checked each answer against these (it raises if not)
        schema = field(tool, "output_schema")
        assert schema is not None and schema["type"] == "object", tool.name
    ran_data = field(ran, "structured_content")
    assert field(ran, "is_error") is False
    assert (ran_data["kind"], ran_data["exit_code"]) == ("command", 3)
    assert (ran_data["stdout"]["head"], ran_data["stderr"]["head"]) == ("out\n", "err\n")
    assert text_of(ran).startswith("exit=3\n")
    error = field(escape, "structured_content")
    assert field(escape, "is_error") is True
    assert (error["kind"], error["category"]) == ("error", "path")


def test_file_tools_answer_structured_content_their_output_schema_validates(
        root: Path, mcp_python: str) -> None:
    """read_file's window and edit_file's edits and diff arrive as structuredContent; the
    SDK's client checks each against the tool's outputSchema (and again here, on purpose),
    and a result broken on purpose fails that check."""
    (root / "app.py").write_text("def main():\n\tif ready:\n\t\treturn 1\n\treturn 0\n")
    calls = [("read_file", {"path": "app.py", "start": 2, "end": 3}),
             ("edit_file", {"path": "app.py", "old": "    if ready:\n        return 1",
                            "new": "    if ready:\n        return 2"}),
             ("list_dir", {}), ("write_file", {"path": "n.txt", "content": "n\n"}),
             ("apply_patch", {"patch": "*** Begin Patch\n*** Delete File: n.txt\n*** End Patch",
                              "dry_run": True}),
             ("undo_edit", {"path": "n.txt"})]

    async def scenario(client: ClientSession) -> Any:
        schemas = {t.name: field(t, "output_schema") for t in (await client.list_tools()).tools}
        results = []
        for name, args in calls:
            result = await client.call_tool(name, args)  # validated by the client itself
            await client.validate_tool_result(name, result)
            results.append(result)
        broken = results[0].model_copy(update={"structured_content": {
            **field(results[0], "structured_content"), "lines": "not a list"}})
        try:
            await client.validate_tool_result("read_file", broken)
        except RuntimeError as exc:
            refused = str(exc)
        else:
            refused = ""
        return schemas, results, refused

    (schemas, results, refused), _ = serve_and(mcp_python, root, scenario)
    assert "Invalid structured content returned by tool read_file" in refused
    read, edit, listing, written, patch, undone = (
        field(r, "structured_content") for r in results)
    assert not any(field(r, "is_error") for r in results)
    kinds = [schemas["read_file"]["$defs"][ref["$ref"].rsplit("/", 1)[1]]
             for ref in schemas["read_file"]["anyOf"]]  # a text window, or a media file's
    assert [k["properties"]["kind"]["const"] for k in kinds] == [
        "read", "image", "pdf", "notebook", "document"]
    assert (read["kind"], read["path"], read["content"], read["encoding"]) == (
        "read", "app.py", "text", "utf-8")
    assert (read["first"], read["last"], read["total"], read["lines"]) == (
        2, 3, 4, ["\tif ready:", "\t\treturn 1"])
    assert text_of(results[0]) == ("2\t\tif ready:\n3\t\t\treturn 1\n[showing lines 2-3 of 4; "
                                   "read_file(path='app.py', start=4) for more, or grep to find "
                                   "a line]")
    assert (edit["kind"], edit["path"], edit["replacements"], edit["warnings"]) == (
        "edit", "app.py", 1, [])
    assert edit["edits"] == [{"replacements": 1, "match": "loose", "ignored": ["indentation"]}]
    (hunk,) = edit["diff"]["hunks"]
    assert (hunk["old_start"], hunk["old_lines"], hunk["cut"]) == (1, 4, 0)
    assert [line for line in hunk["lines"] if line[0] in "-+"] == ["-\t\treturn 1", "+\t\treturn 2"]
    assert [(e["name"], e["kind"], e["size"]) for e in listing["entries"]] == [
        ("app.py", "file", (root / "app.py").stat().st_size)]
    assert (written["kind"], written["created"], written["bytes"]) == ("write", True, 2)
    assert (patch["dry_run"], [(f["op"], f["path"]) for f in patch["files"]]) == (
        True, [("D", "n.txt")])
    assert patch["files"][0]["diff"]["hunks"][0]["lines"] == ["-n"]
    assert (undone["kind"], undone["outcome"]) == ("undo", "removed")


def test_escape_and_unknown_tool_are_error_results(root: Path, mcp_python: str) -> None:
    async def scenario(client: ClientSession) -> Any:
        escape = await client.call_tool("read_file", {"path": "../outside/secret.txt"})
        write = await client.call_tool("write_file", {"path": "../x", "content": "pwned"})
        unknown = await client.call_tool("rm_rf", {})
        bad = await client.call_tool("read_file", {"path": "a", "end": "soon"})
        return escape, write, unknown, bad

    (escape, write, unknown, bad), _ = serve_and(mcp_python, root, scenario)
    assert field(escape, "is_error") and text_of(escape).startswith("ERROR: path '../outside/secret.txt' "
                                                          "escapes the agent root")
    assert "TOP SECRET" not in text_of(escape)
    assert field(write, "is_error") and "escapes the agent root" in text_of(write)
    assert not (root.parent / "x").exists()
    assert field(unknown, "is_error") and "available tools: list_dir" in text_of(unknown)
    assert field(bad, "is_error") and "'end' must be an integer" in text_of(bad)


def test_refusals_are_error_results_too() -> None:
    from yggdrasil.loki.mcp import call_result

    assert call_result("REFUSED: user declined to edit app.py")["isError"] is True
    assert call_result("ERROR: no")["isError"] is True
    assert call_result("exit=1\nstdout:\n\nstderr:\nERROR: in the output\n")["isError"] is False


def test_each_call_is_a_checkpoint_and_the_rewind_tool_is_a_setting(root: Path,
                                                                      mcp_python: str) -> None:
    (root / "a.txt").write_text("mine\n")

    async def names(client: ClientSession) -> Any:
        return [t.name for t in (await client.list_tools()).tools]

    listed, _ = serve_and(mcp_python, root, names)
    assert "rewind" not in listed  # off for the model by default

    async def scenario(client: ClientSession) -> Any:
        run = await client.call_tool("run", {"command": "echo agent > a.txt"})
        write = await client.call_tool("write_file", {"path": "b.txt", "content": "b"})
        steps = await client.call_tool("rewind", {})
        back = await client.call_tool("rewind", {"step": 0})
        return run, write, steps, back

    (run, write, steps, back), _ = serve_and(
        mcp_python, root, scenario, env={"LOKI_CHECKPOINTS__REWIND_TOOL": "true"})
    assert field(run, "structured_content")["exit_code"] == 0 and not field(write, "is_error")
    assert text_of(steps).splitlines()[1:] == ["1  run  1 file(s): a.txt",
                                               "2  write_file  1 file(s): b.txt"]
    structured = field(back, "structured_content")
    assert structured["kind"] == "rewind" and structured["step"] == 0
    assert structured["restored"] == [{"path": "a.txt", "action": "write"},
                                      {"path": "b.txt", "action": "remove"}]
    assert (root / "a.txt").read_text() == "mine\n" and not (root / "b.txt").exists()
