"""Limits declared once (Annotated hints) and the vendor flavors of Toolbox.schemas()."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any, Literal

import jsonschema
import pytest
from annotated_types import Ge, Interval, Len, MaxLen

from yggdrasil.loki.tools import Tool, Toolbox, filesystem_toolbox


def full_box(root: Path) -> Toolbox:
    return filesystem_toolbox(root, allow_web=True)


def props(box: Toolbox, name: str) -> dict[str, Any]:
    return box.tools[name].input_schema["properties"]


def test_runtime_limits_are_in_the_schema(root: Path) -> None:
    box = full_box(root)
    assert {k: v for k, v in props(box, "read_table")["rows"].items() if k != "description"} == {
        "type": "integer", "minimum": 0, "maximum": 1000, "default": 10}
    assert props(box, "query_table")["rows"]["minimum"] == 1
    for name in ("run", "run_python"):
        timeout = props(box, name)["timeout"]
        assert (timeout["exclusiveMinimum"], timeout["maximum"]) == (0, 3600)
    assert props(box, "read_file")["start"]["minimum"] == 1
    assert props(box, "read_file")["end"]["minimum"] == 0


def _outside(prop: dict[str, Any]) -> list[Any]:
    """Values just outside each numeric limit of a property."""
    found = []
    if "minimum" in prop:
        found.append(prop["minimum"] - 1)
    if "exclusiveMinimum" in prop:
        found.append(prop["exclusiveMinimum"])
    if "maximum" in prop:
        found.append(prop["maximum"] + 1)
    if found:  # NaN compares false with every bound; JSON decoding lets NaN and Infinity in
        found += [float("nan"), float("inf")]
    return found


def test_every_limit_shown_is_a_limit_checked(root: Path) -> None:
    """What the schema promises, bind_args enforces, before the tool runs."""
    (root / "t.csv").write_text("a\n1\n")
    box = full_box(root)
    required = {"path": "t.csv", "sql": "SELECT * FROM 't.csv'", "command": "touch ran",
                "code": "open('ran', 'w')", "url": "http://127.0.0.1:9/", "job": 1,
                "text": "x"}
    checked = 0
    for tool in box:
        for key, prop in tool.input_schema["properties"].items():
            for bad in _outside(prop):
                args = {k: v for k, v in required.items() if k in tool.input_schema["properties"]}
                out = box.call(tool.name, {**args, key: bad})
                assert out.startswith(f"ERROR: argument {key!r} must be "), (tool.name, key, out)
                assert f"got {bad!r}" in out
                checked += 1
    assert checked >= 8
    assert not (root / "ran").exists()  # no command ran with a bad timeout
    out = box.call("run", {"command": "true", "timeout": 0})
    assert out.startswith("ERROR: argument 'timeout' must be more than 0 and at most 3600, got 0")
    assert box.call("read_table", {"path": "t.csv", "rows": "1000"}).startswith("t.csv")


def test_a_users_tool_declares_limits_with_annotated_types(root: Path) -> None:
    def tag(name: Annotated[str, MaxLen(5)], labels: Annotated[list[str], Len(1, 3)],
            weight: Annotated[float, Interval(gt=0, lt=1)] = 0.5,
            count: Annotated[int, Ge(2)] | None = None) -> str:
        return f"{name} {labels} {weight} {count}"

    tool = Tool("tag", "tag a thing", {"name": "n", "labels": "l", "weight": "w", "count": "c"},
                tag)
    schema = tool.input_schema["properties"]
    assert schema["name"]["maxLength"] == 5
    assert (schema["labels"]["minItems"], schema["labels"]["maxItems"]) == (1, 3)
    assert (schema["weight"]["exclusiveMinimum"], schema["weight"]["exclusiveMaximum"]) == (0, 1)
    assert schema["count"] == {"type": "integer", "minimum": 2, "description": "c"}
    box = Toolbox()
    box.add(tool)
    assert box.call("tag", {"name": "abc", "labels": ["x"]}) == "abc ['x'] 0.5 None"
    assert "at most 5 characters" in box.call("tag", {"name": "abcdef", "labels": ["x"]})
    assert "at least 1 items and at most 3 items" in box.call("tag", {"name": "a", "labels": []})
    assert "more than 0 and less than 1" in box.call("tag", {"name": "a", "labels": ["x"],
                                                             "weight": 1})
    assert "at least 2" in box.call("tag", {"name": "a", "labels": ["x"], "count": 1})


def test_openai_strict_flavor(root: Path) -> None:
    box = full_box(root)
    for entry in box.schemas("openai-strict"):
        schema = entry["input_schema"]
        jsonschema.Draft202012Validator.check_schema(schema)
        assert entry["strict"] is True, entry["name"]
        assert schema["required"] == list(schema["properties"])
        assert schema["additionalProperties"] is False
        neutral = box.tools[entry["name"]].input_schema
        for key, prop in schema["properties"].items():
            assert "default" not in prop
            optional = key not in neutral["required"]
            assert ("null" in prop["type"]) is optional, (entry["name"], key)
            if optional and "default" in neutral["properties"][key]:
                assert "default" in prop["description"]
    rows = next(e for e in box.schemas("openai-strict") if e["name"] == "read_table")
    assert rows["input_schema"]["properties"]["rows"]["maximum"] == 1000


def test_a_strict_shaped_call_with_nulls_uses_the_defaults(root: Path) -> None:
    (root / "a.txt").write_text("one\ntwo\n")
    box = filesystem_toolbox(root)
    args = {"path": "a.txt", "start": None, "end": None, "symbol": None, "pages": None,
            "as_images": None, "rendered": None}
    jsonschema.validate(args, box.schemas("openai-strict")[1]["input_schema"])
    assert box.call("read_file", args) == "1\tone\n2\ttwo"


def test_find_symbol_kinds_are_an_enum_in_every_flavor(root: Path) -> None:
    """The kinds find_symbol checks are in its schema; each value shown is one it takes,
    and a model's slips (case, a plural) still bind where the schema is not enforced."""
    from yggdrasil.loki.code import KINDS
    from yggdrasil.loki.results import SymbolsFound

    box = filesystem_toolbox(root)
    kind = props(box, "find_symbol")["kind"]
    assert kind["type"] == "string" and "default" not in kind
    assert kind["enum"][:len(KINDS)] == list(KINDS)  # the kinds, then synonyms (def, fn...)
    assert {"def", "fn", "const"} <= set(kind["enum"])
    for value in kind["enum"]:  # shown means taken, by the toolbox and by the tool itself
        assert not box.invoke("find_symbol", {"name": "x", "kind": value}).is_error
        assert isinstance(box.tools["find_symbol"].run(name="x", kind=value), SymbolsFound)
    widget = box.call("find_symbol", {"name": "x", "kind": "widget"})
    assert widget.startswith("ERROR: argument 'kind' must be one of ['class', 'struct'")
    strict = next(e for e in box.schemas("openai-strict") if e["name"] == "find_symbol")
    shaped = strict["input_schema"]
    assert strict["strict"] is True and shaped["properties"]["kind"]["type"] == ["string", "null"]
    call = {"name": "x", "kind": None, "path": None, "include_ignored": None}
    jsonschema.validate(call, shaped)  # null: any kind, as in strict mode every key is sent
    jsonschema.validate({**call, "kind": "method"}, shaped)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({**call, "kind": "widget"}, shaped)
    assert not box.call("find_symbol", call).startswith("ERROR")
    gemini = next(e for e in box.schemas("gemini") if e["name"] == "find_symbol")
    assert gemini["input_schema"]["properties"]["kind"]["enum"] == kind["enum"]  # strings only


def test_string_enums_forgive_case_space_and_plurals_not_other_values(root: Path) -> None:
    box = Toolbox()

    @box.tool
    def pick(color: Literal["red", "green", "berry"] = "red") -> str:
        """Pick a color.

        Args:
            color: which
        """
        return color

    assert box.tools["pick"].input_schema["properties"]["color"]["enum"] == ["red", "green",
                                                                             "berry"]
    for slip, meant in (("RED", "red"), (" green ", "green"), ("Greens", "green"),
                        ("berries", "berry"), ("reds", "red")):
        assert box.call("pick", {"color": slip}) == meant
    for bad in ("blue", "gree", "redd", "ed", 3):
        assert box.call("pick", {"color": bad}).startswith(
            "ERROR: argument 'color' must be one of ['red', 'green', 'berry']"), bad
    # a slip forgiven as to its type is still checked as to its limits
    (root / "t.csv").write_text("a\n1\n")
    rows = filesystem_toolbox(root).call("read_table", {"path": "t.csv", "rows": "5000"})
    assert rows.startswith("ERROR: argument 'rows' must be between 0 and 1000, got 5000")


def test_tools_strict_mode_cannot_take_say_so(root: Path) -> None:
    box = Toolbox()

    @box.tool
    def anything(**options: Any) -> str:
        """Take any options."""
        return json.dumps(options)

    @box.tool
    def config(settings: dict[str, Any], note: str = "") -> str:
        """Store settings.

        Args:
            settings: a free-form object
            note: a note
        """
        return "ok"

    strict = {e["name"]: e for e in box.schemas("openai-strict")}
    assert strict["anything"]["strict"] is False
    assert strict["anything"]["input_schema"]["additionalProperties"] is True
    assert strict["config"]["strict"] is False
    assert strict["config"]["input_schema"]["properties"]["note"]["type"] == ["string", "null"]


def test_gemini_flavor_is_the_openapi_subset(root: Path) -> None:
    box = full_box(root)

    @box.tool
    def ping() -> str:
        """Answer pong."""
        return "pong"

    gemini = {e["name"]: e["input_schema"] for e in box.schemas("gemini")}
    assert gemini["ping"] is None  # Gemini rejects an object without properties
    text = json.dumps(gemini)
    for banned in ("additionalProperties", "exclusiveMinimum", "exclusiveMaximum", '"null"'):
        assert banned not in text
    timeout = gemini["run"]["properties"]["timeout"]
    assert timeout["type"] == "number" and timeout["maximum"] == 3600
    assert timeout["description"].endswith("(more than 0)")
    assert gemini["read_table"]["properties"]["rows"]["minimum"] == 0


def test_anthropic_and_neutral_flavors_keep_the_schema(root: Path) -> None:
    box = full_box(root)
    neutral = box.schemas()
    assert box.schemas("anthropic") == neutral == box.schemas("neutral")
    assert [e["input_schema"] for e in neutral] == [t.input_schema for t in box]
    for entry in neutral:
        jsonschema.Draft202012Validator.check_schema(entry["input_schema"])
    neutral[0]["input_schema"]["properties"].clear()  # a copy: the tool's schema is intact
    assert box.tools["list_dir"].input_schema["properties"]
    with pytest.raises(ValueError, match="flavor must be one of"):
        box.schemas("openai")  # type: ignore[arg-type]


def test_tool_hints_for_clients(root: Path) -> None:
    box = full_box(root)
    assert box.tools["run_python"].title == "Run Python code"
    assert box.tools["read_file"].title == "Read file"
    assert [t.name for t in box if t.open_world] == ["web_fetch", "web_table", "web_image"]
    assert {t.name for t in box if t.idempotent} == {
        "list_dir", "read_file", "find", "grep", "outline", "find_symbol", "repo_map",
        "read_table", "query_table", "diagnostics", "write_file", "undo_edit", "web_fetch",
        "jobs"}
