"""Tool and Toolbox: registration checks, schemas, spec, and call never raising."""

from __future__ import annotations

import json
import tempfile
from typing import Literal

import pytest
from pydantic import BaseModel

import yggdrasil.loki
from yggdrasil.loki.errors import ToolDefinitionError, ToolError
from yggdrasil.loki.tools import Tool, Toolbox, filesystem_toolbox


def greet(name: str, times: int = 1, loud: bool = False) -> str:
    """Say hello.

    Args:
        name: who to greet
        times: how often
        loud: shout it
    """
    text = " ".join([f"hello {name}"] * times)
    return text.upper() if loud else text


def test_public_api_is_exactly_documented() -> None:
    import yggdrasil.loki.tools as tools

    assert tools.__all__ == ["DEFAULT_PROTECTED", "McpServer", "Observation", "Tool",
                             "ToolResult", "Toolbox", "filesystem_toolbox", "sandbox_status"]
    assert yggdrasil.loki.Toolbox is Toolbox


def test_schema_is_derived_from_type_hints_and_params() -> None:
    tool = Tool("greet", "Say hello", {"name": "who", "times": "how often", "loud": "shout"}, greet)
    schema = tool.input_schema
    assert schema["required"] == ["name"]
    assert schema["properties"]["name"] == {"type": "string", "description": "who"}
    assert schema["properties"]["times"] == {"type": "integer", "description": "how often", "default": 1}
    assert schema["properties"]["loud"]["type"] == "boolean"
    json.dumps(tool.to_dict())  # the plain form is JSON-serialisable


def test_literal_and_list_hints() -> None:
    def pick(mode: Literal["a", "b"], tags: list[str] | None = None) -> str:
        return mode

    tool = Tool("pick", "pick", {"mode": "m", "tags": "t"}, pick)
    assert tool.input_schema["properties"]["mode"]["enum"] == ["a", "b"]
    assert tool.input_schema["properties"]["tags"]["items"] == {"type": "string"}


@pytest.mark.parametrize(
    ("name", "params"),
    [
        ("not an identifier", {"name": "who"}),
        ("greet", {"name": "who", "nope": "not an argument"}),
        ("greet", {}),  # required argument 'name' undocumented
    ],
)
def test_bad_tools_fail_at_registration(name: str, params: dict[str, str]) -> None:
    with pytest.raises(ToolDefinitionError):
        Tool(name, "d", params, greet)


def test_from_function_reads_docstring() -> None:
    tool = Tool.from_function(greet)
    assert tool.description == "Say hello."
    assert tool.params == {"name": "who to greet", "times": "how often", "loud": "shout it"}


def test_add_get_duplicate_and_decorator() -> None:
    box = Toolbox()

    @box.tool
    def shout(text: str) -> str:
        """Shout it.

        Args:
            text: what to shout
        """
        return text.upper()

    assert "shout" in box and box.get("shout") is not None and len(box) == 1
    assert box.call("shout", {"text": "hi"}) == "HI"
    with pytest.raises(ToolDefinitionError):
        box.add(Tool.from_function(shout))


def test_spec_has_every_tool_and_param(root) -> None:
    box = filesystem_toolbox(root)
    spec = box.spec()
    for tool in box:
        assert tool.signature() in spec
        for param, text in tool.params.items():
            assert f"- {param}: {text}" in spec
    assert "write_file(path, content)  [changes files]" in spec


def test_call_turns_every_mistake_into_an_observation() -> None:
    def boom(x: int) -> str:
        raise RuntimeError("kaput")

    def refuse(x: int) -> str:
        raise ToolError("not like that")

    box = Toolbox()
    box.add(Tool("greet", "g", {"name": "n", "times": "t", "loud": "l"}, greet))
    box.add(Tool("boom", "b", {"x": "x"}, boom))
    box.add(Tool("refuse", "r", {"x": "x"}, refuse))
    assert box.call("nope", {}).startswith("ERROR: unknown tool 'nope'; available tools: greet, boom")
    assert "missing required argument 'name'" in box.call("greet", {})
    assert "has no argument 'nam'; it takes: name, times, loud" in box.call("greet", {"nam": "x"})
    assert "must be an integer" in box.call("greet", {"name": "x", "times": "many"})
    assert box.call("greet", {"name": "x", "times": "2", "loud": "true"}) == "HELLO X HELLO X"
    assert box.call("greet", {"name": "x", "times": None}) == "hello x"
    assert "must be a JSON object" in box.call("greet", ["x"])  # type: ignore[arg-type]
    assert box.call("boom", {"x": 1}) == "ERROR: boom failed: RuntimeError: kaput"
    assert box.call("refuse", {"x": 1}) == "ERROR: not like that"


def test_call_never_raises_for_a_bad_name() -> None:
    box = Toolbox()
    box.add(Tool("greet", "g", {"name": "n", "times": "t", "loud": "l"}, greet))
    assert box.call(["greet"], {}).startswith("ERROR: unknown tool ['greet']")  # type: ignore[arg-type]
    assert box.call(None, {}).startswith("ERROR: unknown tool None")  # type: ignore[arg-type]


def test_record_keeps_first_touch_order_even_after_outside_edits() -> None:
    box = Toolbox()
    box.record("a")
    box.record("b")
    box.changed[0] = "c"
    box.record("c")
    box.record("a")
    assert box.changed == ["c", "b", "a"]


def test_call_caps_a_flooding_tool() -> None:
    box = Toolbox()
    box.add(Tool("flood", "f", {}, lambda: "x" * 1_000_000))
    out = box.call("flood", {})
    assert box.outputs.tokens.count(out) <= box.outputs.observation  # the cap is in tokens
    assert "characters) cut from the middle" in out


def test_read_only_and_web_flags(root) -> None:
    ro = filesystem_toolbox(root, read_only=True)
    assert set(ro.tools) == {"list_dir", "read_file", "find", "grep", "outline", "find_symbol",
                             "repo_map", "read_table", "query_table", "diagnostics"}
    rw = filesystem_toolbox(root, allow_shell=False)
    mutating = {"write_file", "edit_file", "apply_patch", "undo_edit", "run_python", "run",
                "job_input", "job_stop", "edit_notebook"}
    assert mutating | {"job_output", "jobs"} <= set(rw.tools)  # reading jobs changes nothing
    assert all(t.mutates == (t.name in mutating) for t in rw)
    assert not any(name.startswith("web_") for name in rw.tools)


def test_missing_root_is_a_clear_error(tmp_path) -> None:
    with pytest.raises(ToolError, match="not an existing folder"):
        filesystem_toolbox(tmp_path / "nope")


def test_import_does_no_work() -> None:
    import subprocess
    import sys

    code = ("import sys, yggdrasil.loki; "
            "print(sorted(m for m in sys.modules if m.startswith(('polars', 'yggdrasil.loki.'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_an_error_quoting_a_huge_argument_is_capped() -> None:
    def boom(x: str) -> str:
        raise RuntimeError(x)

    box = Toolbox()
    box.add(Tool("boom", "b", {"x": "x"}, boom))
    for text in (box.call("n" * 2_000_000, {}), box.call("boom", {"x": "y" * 2_000_000})):
        assert text.startswith("ERROR:")
        assert box.outputs.tokens.count(text) <= box.outputs.observation  # capped in tokens
        assert len(text) < 2_000_000 // 4


# -- typed results -----------------------------------------------------------------------


class Count(BaseModel):
    words: int
    longest: str


def test_a_custom_tool_may_answer_a_pydantic_model() -> None:
    box = Toolbox()

    @box.tool
    def count(text: str) -> Count:
        """Count the words.

        Args:
            text: the text
        """
        words = text.split()
        return Count(words=len(words), longest=max(words, key=len))

    done = box.invoke("count", {"text": "a bb ccc"})
    assert done.ok and done.data == Count(words=3, longest="ccc")
    assert json.loads(done.text) == {"words": 3, "longest": "ccc"}
    assert done.structured() == {"words": 3, "longest": "ccc"}
    assert box.get("count").output_schema["properties"]["words"] == {"title": "Words",  # type: ignore[index]
                                                                    "type": "integer"}


def test_a_custom_tool_of_text_has_no_data_and_keeps_its_prefixes() -> None:
    box = Toolbox()
    box.add(Tool("echo", "say it", {"text": "what"}, lambda text: text))
    assert box.invoke("echo", {"text": "fine"}).data is None
    said = box.invoke("echo", {"text": "REFUSED: not today"})
    assert said.refused and not said.is_error and said.text == "REFUSED: not today"
    assert box.invoke("echo", {"text": "ERROR: broken"}).is_error
    assert box.get("echo").output_schema is None


def test_a_tool_answering_neither_text_nor_a_model_is_an_error_saying_what_is_allowed() -> None:
    box = Toolbox()
    box.add(Tool("answer", "the answer", {}, lambda: 42))
    done = box.invoke("answer", {})
    assert done.is_error and done.data.category == "output"  # type: ignore[union-attr]
    assert done.text == ("ERROR: answer returned int; a tool returns a str or a pydantic "
                         "model")


def test_errors_and_refusals_are_typed_with_their_category_and_rule(
        tmp_path, monkeypatch: pytest.MonkeyPatch,
        tmp_path_factory: pytest.TempPathFactory) -> None:
    # the system temp dir elsewhere: the root's files are real assets, their edits asked about
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path_factory.mktemp("systemtmp")))
    (tmp_path / "app.py").write_text("x = 1\n")
    box = filesystem_toolbox(tmp_path, confirm=lambda action: False,
                             rules=[("deny", "git push")])
    unknown = box.invoke("reed_file", {})
    assert unknown.is_error and unknown.data.category == "unknown_tool"  # type: ignore[union-attr]
    escape = box.invoke("read_file", {"path": "../x"})
    assert escape.data.category == "path"  # type: ignore[union-attr]
    bad = box.invoke("read_file", {"path": "app.py", "end": "soon"})
    assert bad.is_error and bad.data.category == "argument"  # type: ignore[union-attr]
    denied = box.invoke("run", {"command": "git push origin main"})
    assert denied.is_error and denied.data.category == "denied"  # type: ignore[union-attr]
    assert denied.data.rule == "('deny', 'git push')"  # type: ignore[union-attr]
    declined = box.invoke("write_file", {"path": "app.py", "content": "x = 2\n"})
    assert declined.refused and not declined.is_error
    assert (declined.data.verb, declined.data.path) == ("overwrite", "app.py")  # type: ignore[union-attr]
    assert (tmp_path / "app.py").read_text() == "x = 1\n"


def test_a_before_call_refusal_is_typed_and_after_call_keeps_the_data(tmp_path) -> None:
    box = filesystem_toolbox(
        tmp_path, before_call=lambda tool, args: "not now" if tool == "list_dir" else None,
        after_call=lambda tool, args, text: text + "\n[checked]")
    refused = box.invoke("list_dir", {})
    assert refused.refused and refused.text == "REFUSED: not now"
    assert refused.data.rule == "before_call"  # type: ignore[union-attr]
    ran = box.invoke("run", {"command": "exit 4"})
    assert ran.text.endswith("\n[checked]") and ran.data.exit_code == 4  # type: ignore[union-attr]
