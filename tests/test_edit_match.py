"""edit_file's forgiving matcher on real files: each rung, its refusals, and what it writes."""

from __future__ import annotations

from pathlib import Path

import pytest

from yggdrasil.loki.tools import Toolbox, ToolResult

TABS = "class A:\n\tdef f(self):\n\t\tif self.x:\n\t\t\treturn 1\n\t\treturn 2\n"


def edit(box: Toolbox, path: str, old: str, new: str, **more: object) -> ToolResult:
    return box.invoke("edit_file", {"path": path, "old": old, "new": new, **more})


def landed(done: ToolResult) -> list[tuple[int, str, list[str]]]:
    """How each edit of a call landed: (places, exact or loose, what was ignored)."""
    assert done.ok, done.text
    return [(e.replacements, e.match, e.ignored) for e in done.data.edits]


def test_spaces_for_the_files_tabs_land_and_new_lines_get_tabs(root: Path, box: Toolbox) -> None:
    (root / "a.py").write_text(TABS)
    out = edit(box, "a.py", "    if self.x:\n        return 1",
               "    if self.x:\n        log(self)\n        return 1")
    # DESIGN.md's shape of a loose match, and its diff
    assert out.text.splitlines()[0] == "edited a.py (1 replacement; matched ignoring indentation)"
    assert landed(out) == [(1, "loose", ["indentation"])]
    assert (root / "a.py").read_text() == TABS.replace(
        "\t\t\treturn 1\n", "\t\t\tlog(self)\n\t\t\treturn 1\n")
    assert "+\t\t\tlog(self)" in out.data.diff.hunks[0].lines
    assert "+\t\t\tlog(self)" in out.text


@pytest.mark.parametrize("shift", ["", "  ", "            "])
def test_dedented_or_over_indented_blocks_land_reindented(root: Path, box: Toolbox,
                                                          shift: str) -> None:
    src = "def f():\n    for i in x:\n        if i:\n            go(i)\n    done()\n"
    (root / "f.py").write_text(src)
    old = f"{shift}for i in x:\n{shift}    if i:\n{shift}        go(i)"
    new = f"{shift}for i in x:\n{shift}    if i:\n{shift}        go(i)\n{shift}    else:\n{shift}        stop(i)"
    out = edit(box, "f.py", old, new)
    assert landed(out) == [(1, "loose", ["indentation"])]
    assert (root / "f.py").read_text() == src.replace(
        "            go(i)\n", "            go(i)\n        else:\n            stop(i)\n")


def test_two_space_indents_map_onto_four(root: Path, box: Toolbox) -> None:
    src = "def f():\n    if a:\n        b()\n"
    (root / "f.py").write_text(src)
    edit(box, "f.py", "def f():\n  if a:\n    b()", "def f():\n  if a:\n    b()\n    if c:\n      d()")
    assert (root / "f.py").read_text() == "def f():\n    if a:\n        b()\n        if c:\n            d()\n"


def test_trailing_whitespace_is_forgiven_and_unchanged_lines_keep_it(root: Path,
                                                                    box: Toolbox) -> None:
    (root / "t.md").write_text("# Title   \nline one  \nline two\n")
    out = edit(box, "t.md", "# Title\nline one\nline two", "# Title\nline one\nline 2")
    assert landed(out) == [(1, "loose", ["trailing whitespace"])]
    assert (root / "t.md").read_text() == "# Title   \nline one  \nline 2\n"


def test_line_endings(root: Path, box: Toolbox) -> None:
    (root / "crlf.txt").write_bytes(b"a\r\nb\r\nc\r\n")
    assert landed(edit(box, "crlf.txt", "a\nb", "a\nB\nb2")) == [(1, "exact", [])]
    assert (root / "crlf.txt").read_bytes() == b"a\r\nB\r\nb2\r\nc\r\n"
    (root / "lf.txt").write_bytes(b"a\nb\nc\n")
    out = edit(box, "lf.txt", "a\r\nb", "a\r\nB")
    assert landed(out) == [(1, "loose", ["line endings"])]
    assert (root / "lf.txt").read_bytes() == b"a\nB\nc\n"
    (root / "mixed.txt").write_bytes(b"x\r\ny\r\nz\nw\r\n")  # mostly CRLF, one LF line
    edit(box, "mixed.txt", "x\ny\nz", "x\nY\nz\nnew")
    assert (root / "mixed.txt").read_bytes() == b"x\r\nY\r\nz\nnew\r\nw\r\n"


def test_typographic_punctuation(root: Path, box: Toolbox) -> None:
    (root / "q.py").write_text("msg = 'it is'  # a - b\nother = 1\n")
    out = edit(box, "q.py", "msg = \u2018it is\u2019  # a \u2013 b",
               "msg = \u2018it is\u2019  # a \u2013 b\nmore = \u201cyes\u201d")
    assert landed(out) == [(1, "loose", ["typographic punctuation"])]
    assert (root / "q.py").read_text() == "msg = 'it is'  # a - b\nmore = \"yes\"\nother = 1\n"


def test_curly_quotes_the_file_has_are_kept(root: Path, box: Toolbox) -> None:
    (root / "doc.txt").write_text("He said \u201chi\u201d.\nEnd.\n")
    edit(box, "doc.txt", 'He said "hi".\nEnd.', 'He said "hi".\nThe end.')
    assert (root / "doc.txt").read_text() == "He said \u201chi\u201d.\nThe end.\n"


def test_typography_on_a_changed_line_is_kept_where_the_text_stays(root: Path, box: Toolbox) -> None:
    (root / "doc.md").write_text("Use \u201cfoo\u201d \u2014 not bar\u00a0baz.\nWait\u2026 done.\n")
    out = edit(box, "doc.md", 'Use "foo" - not bar baz.\nWait... done.',
               'Use "foo" - not qux baz.\nWait... finished.\nAdded "line" - here.')
    assert landed(out) == [(1, "loose", ["typographic punctuation"])]
    assert (root / "doc.md").read_text() == (
        "Use \u201cfoo\u201d \u2014 not qux\u00a0baz.\nWait\u2026 finished.\n"
        'Added "line" - here.\n')  # an added line is the model's own text
    (root / "d.md").write_text("a \u2014 b\n")
    edit(box, "d.md", "a - b", "a -- b")  # the model changed the dash itself: its text wins
    assert (root / "d.md").read_text() == "a -- b\n"


@pytest.mark.parametrize(("old", "why"), [
    ("    if self.y:\n        return 1", "another identifier"),
    ("    if self.x:\n        return 3", "another number"),
    ("    if not self.x:\n        return 1", "an added word"),
    ("    if self.x:\n        return 1\n        return 2", "a line the file does not have there"),
    ("    if self.x:\n    return 1", "another block structure"),
])
def test_a_content_difference_is_never_bridged(root: Path, box: Toolbox, old: str, why: str) -> None:
    (root / "a.py").write_text(TABS)
    out = edit(box, "a.py", old, "    pass")
    assert out.is_error and out.text.startswith("ERROR: old was not found in a.py."), why
    assert (root / "a.py").read_text() == TABS
    assert box.changed == []


def test_two_places_at_a_loose_rung_are_refused_and_listed(root: Path, box: Toolbox) -> None:
    src = "def f():\n\tx = 1\n\ty = 2\n\ndef g():\n\tx = 1\n\ty = 2\n"
    (root / "d.py").write_text(src)
    out = edit(box, "d.py", "    x = 1\n    y = 2", "    x = 9\n    y = 2")
    assert out.text == ("ERROR: old appears 2x in d.py when indentation is ignored (at lines 2-3, "
                        "6-7); include more surrounding lines so it is unique, or pass "
                        "replace_all=true to replace every one")
    assert (root / "d.py").read_text() == src
    out = edit(box, "d.py", "    x = 1\n    y = 2", "    x = 9\n    y = 2", replace_all=True)
    assert out.text.splitlines()[0] == "edited d.py (2 replacements; matched ignoring indentation)"
    assert landed(out) == [(2, "loose", ["indentation"])] and out.data.replacements == 2
    assert (root / "d.py").read_text() == src.replace("\tx = 1", "\tx = 9")


def test_overlapping_exact_places_are_ambiguous(root: Path, box: Toolbox) -> None:
    (root / "o.txt").write_text("a\na\na\n")
    out = edit(box, "o.txt", "a\na", "b\nb")
    assert out.text.startswith("ERROR: old appears 2x in o.txt (at lines 1, 2)")
    assert (root / "o.txt").read_text() == "a\na\na\n"


def test_a_looser_rung_is_not_tried_when_a_stricter_one_matches(root: Path, box: Toolbox) -> None:
    """Exactly one place with trailing spaces stripped, two when indentation is ignored: the
    first rung that matches anywhere decides, so the edit lands at the one place."""
    (root / "r.py").write_text("x = 1  \nif a:\n    x = 1\n")
    out = edit(box, "r.py", "x = 1\nif a:", "x = 2\nif a:")
    assert landed(out) == [(1, "loose", ["trailing whitespace"])]
    assert (root / "r.py").read_text() == "x = 2\nif a:\n    x = 1\n"


def test_several_edits_in_one_call_apply_in_order(root: Path, box: Toolbox) -> None:
    (root / "m.py").write_text("a = 1\nb = 2\n\tc = 3\n")
    out = box.invoke("edit_file", {"path": "m.py", "edits": [
        {"old": "a = 1", "new": "a = 10", "replace_all": None},  # null, as strict schemas send
        {"old": "a = 10\nb = 2", "new": "a = 10\nb = 20"},  # sees the first edit's result
        {"old": "    c = 3", "new": "    c = 30"},
    ]})
    assert out.text.splitlines()[0] == ("edited m.py (3 edits, 3 replacements; edit 3 matched "
                                        "ignoring indentation)")
    assert landed(out) == [(1, "exact", []), (1, "exact", []), (1, "loose", ["indentation"])]
    assert (root / "m.py").read_text() == "a = 10\nb = 20\n\tc = 30\n"
    assert (out.data.diff.old_path, len(out.data.diff.hunks)) == ("m.py", 1)  # one diff
    assert out.text.count("--- m.py") == 1


def test_several_edits_are_all_or_nothing(root: Path, box: Toolbox) -> None:
    (root / "m.py").write_text("a = 1\nb = 2\n")
    out = box.call("edit_file", {"path": "m.py", "old": "a = 1", "new": "a = 5",
                                 "edits": [{"old": "b = 2", "new": "b = 6"},
                                           {"old": "c = 3", "new": "c = 7"}]})
    assert out.startswith("ERROR: edit 3 of 3: old was not found in m.py.")  # says which edit
    assert "no edit was applied; m.py is unchanged" in out
    assert (root / "m.py").read_text() == "a = 1\nb = 2\n" and box.changed == []


@pytest.mark.parametrize(("edits", "says"), [
    ([], "give old and new, or edits="),
    (["a"], "edits[0] must be an object"),
    ([{"old": "a"}], "edits[0] needs old and new, both strings"),
    ([{"old": "a", "new": "b", "all": True}], "edits[0] has no key 'all'"),
    ([{"old": "a", "new": "b", "replace_all": "maybe"}], "replace_all must be true or false"),
    ([{"old": "a", "new": "b"}] * 101, "at most 100"),
])
def test_bad_edits_are_clear_errors(root: Path, box: Toolbox, edits: list[object], says: str) -> None:
    (root / "m.py").write_text("a\n")
    out = box.invoke("edit_file", {"path": "m.py", "edits": edits})
    assert out.is_error and out.data.category == "argument" and says in out.data.message
    assert (root / "m.py").read_text() == "a\n"


def test_edits_schema_describes_its_items(box: Toolbox) -> None:
    schema = box.get("edit_file").input_schema  # type: ignore[union-attr]
    assert schema["required"] == ["path"]
    items = schema["properties"]["edits"]["items"]
    assert items["required"] == ["old", "new"] and set(items["properties"]) == {
        "old", "new", "replace_all"}


def test_the_diff_is_capped_and_says_so(root: Path, box: Toolbox) -> None:
    (root / "big.txt").write_text("".join(f"line {i}\n" for i in range(500)))
    out = box.invoke("edit_file", {"path": "big.txt", "old": "line", "new": "LINE",
                                   "replace_all": True})
    assert out.data.replacements == 500
    (hunk,) = out.data.diff.hunks
    assert (hunk.old_start, hunk.old_lines, hunk.new_lines) == (1, 500, 500)
    assert len(hunk.lines) == 77 and hunk.cut == 923 and out.data.diff.see == "big.txt"
    lines = out.text.splitlines()
    assert lines[0] == "edited big.txt (500 replacements)" and len(lines) < 100
    assert lines[-1] == "[... 923 more diff lines not shown; read_file big.txt to see the result]"


def test_edits_far_apart_in_a_50mb_file_show_only_themselves(root: Path, box: Toolbox) -> None:
    body = "".join(f"    value_{i} = compute({i})\n" for i in range(1_600_000))
    (root / "big.py").write_text(body)  # ~50 MB
    assert (root / "big.py").stat().st_size > 50_000_000
    out = box.invoke("edit_file", {"path": "big.py", "edits": [
        {"old": "value_7 = compute(7)\n", "new": "value_7 = compute(70)\n"},
        {"old": "value_1599998 = compute(1599998)", "new": "value_1599998 = 0"},
        {"old": "value_800000 = compute(800000)\n", "new": "value_800000 = compute(800000)  # mid\n"},
    ]})
    assert landed(out) == [(1, "exact", [])] * 3
    assert [h.old_start for h in out.data.diff.hunks] == [6, 799999, 1599997]
    assert len(out.text) < 2000
    assert (root / "big.py").read_text() == (
        body.replace("value_7 = compute(7)\n", "value_7 = compute(70)\n")
        .replace("value_1599998 = compute(1599998)", "value_1599998 = 0")
        .replace("value_800000 = compute(800000)\n", "value_800000 = compute(800000)  # mid\n"))


def test_loose_match_in_a_50mb_file(root: Path, box: Toolbox) -> None:
    body = "".join(f"\tvalue_{i} = compute({i})\n" for i in range(1_600_000))
    (root / "big.py").write_bytes(body.encode())
    out = edit(box, "big.py", "    value_900000 = compute(900000)\n    value_900001 = compute(900001)",
               "    value_900000 = 0\n    value_900001 = compute(900001)")
    assert landed(out) == [(1, "loose", ["indentation"])]
    assert "\tvalue_900000 = 0\n" in (root / "big.py").read_text()


def test_a_slip_that_equals_another_place_exactly_is_refused(root: Path, box: Toolbox) -> None:
    """Over-indented, old is exactly the deeper copy of the block the model meant (found by
    bench_edits in the stdlib): one exact place, two when indentation is ignored."""
    src = "async with cm:\n    pass\nif x:\n    async with cm:\n        pass\n"
    (root / "s.py").write_text(src)
    out = edit(box, "s.py", "    async with cm:\n        pass", "    async with cm:\n        pass  # x")
    assert out.text.startswith("ERROR: old appears 2x in s.py when indentation is ignored (at "
                               "lines 1-2, 4-5; exactly at line 4)")
    assert (root / "s.py").read_text() == src
    out = edit(box, "s.py", "if x:\n    async with cm:\n        pass", "if x:\n    async with cm:\n        pass  # x")
    assert landed(out) == [(1, "exact", [])]  # with its context line it is one place


def test_replace_all_refuses_rather_than_stopping_at_the_place_cap(root: Path, box: Toolbox) -> None:
    src = "\tx = 1\n" * 10_000
    (root / "many.py").write_text(src)
    out = edit(box, "many.py", "    x = 1", "    y = 2", replace_all=True)
    assert out.text.startswith("ERROR: old matches 10000 or more places in many.py when "
                               "indentation is ignored; replace_all changes at most 9999")
    assert (root / "many.py").read_text() == src
    out = edit(box, "many.py", "x = 1", "x = 2", replace_all=True)  # exact: no limit
    assert landed(out) == [(10000, "exact", [])]
    assert (root / "many.py").read_text() == "\tx = 2\n" * 10_000


SLIPS = {
    "none": lambda t: t,
    "crlf": lambda t: t.replace("\n", "\r\n"),
    "trailing": lambda t: "\n".join(line + "  " for line in t.split("\n")),
    "over-indent": lambda t: "\n".join("    " + line for line in t.split("\n")),
    "tabs": lambda t: t.replace("    ", "\t"),
    "typographic": lambda t: t.replace("'", "\u2019").replace("-", "\u2013"),
}
VOCAB = ["x = 1", "y = 2", "if a:", "return x", "pass", "", "# note", "f(x, 'a')", "g - h"]


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_never_wrong_among_near_duplicates(root: Path, box: Toolbox, seed: int) -> None:
    """Files of nine kinds of line at random depths (so the same lines recur at many
    places and depths), a real change asked for with one slip: the file ends up exactly
    as intended or untouched, never changed elsewhere. Excluded, as documented: a
    one-line old over-indented onto an identical deeper line (exact text wins)."""
    import random

    rng = random.Random(seed)
    landed = 0
    for n in range(400):
        depths = [0]
        for _ in range(rng.randint(5, 40)):
            depths.append(max(0, min(3, depths[-1] + rng.choice((-1, 0, 0, 1)))))
        lines = [("    " * d + w) if (w := rng.choice(VOCAB)) else "" for d in depths]
        k = rng.randint(1, min(4, len(lines)))
        i = rng.randrange(len(lines) - k + 1)
        block = lines[i : i + k]
        code = [j for j, line in enumerate(block) if line.strip()]
        if not code:
            continue
        j = rng.choice(code)
        changed = [line + " # E" if x == j else line for x, line in enumerate(block)]
        name = rng.choice([*SLIPS, "dedent"])
        if name == "dedent":
            cut = min(len(line) - len(line.lstrip()) for line in block if line.strip())
            slip = lambda t, cut=cut: "\n".join(  # noqa: E731
                line[cut:] if line.strip() else "" for line in t.split("\n"))
        else:
            slip = SLIPS[name]
        if name == "over-indent" and k == 1:
            continue
        text = "\n".join(lines) + "\n"
        intended = "\n".join(lines[:i] + changed + lines[i + k:]) + "\n"
        path = root / f"c{n}.py"
        path.write_text(text)
        old, new = slip("\n".join(block)), slip("\n".join(changed))
        if old.startswith("\n") or not old.strip():
            continue  # a leading newline means "the end of any line": found literally
        box.call("edit_file", {"path": path.name, "old": old, "new": new})
        result = path.read_text()
        assert result in (text, intended), (name, old, new, text)
        landed += result == intended
    assert landed > 250  # most slips land (the rest are ambiguous and refused)


def test_loose_matches_delete_and_insert_whole_lines_like_exact_ones(root: Path, box: Toolbox) -> None:
    src = "def f():\n\tx = 1\n\ty = 2\n\treturn x\n"
    (root / "d.py").write_text(src)
    assert landed(edit(box, "d.py", "    y = 2\n", "")) == [(1, "loose", ["indentation"])]
    assert (root / "d.py").read_text() == "def f():\n\tx = 1\n\treturn x\n"
    edit(box, "d.py", "    x = 1\n", "    x = 1\n    z = 3\n")
    assert (root / "d.py").read_text() == "def f():\n\tx = 1\n\tz = 3\n\treturn x\n"
    edit(box, "d.py", "    return x\n", "    return z\n")  # the last line, final newline kept
    assert (root / "d.py").read_text() == "def f():\n\tx = 1\n\tz = 3\n\treturn z\n"


def test_typography_is_kept_on_long_repetitive_lines(root: Path, box: Toolbox) -> None:
    """Long lines of one repeated phrase (where a character diff is at its slowest; the
    shared head and tail used instead are linear) keep every dash before the change."""
    row = "x \u2014 y " * 300
    (root / "long.txt").write_text("".join(f"{i} {row}\n" for i in range(30)))
    old = "".join(f"{i} {row.replace(chr(0x2014), '-')}\n" for i in range(30))
    out = edit(box, "long.txt", old, old.replace("y \n", "z \n"))
    assert out.data.path == "long.txt" and out.data.replacements == 1, out.text
    assert (root / "long.txt").read_text() == "".join(
        f"{i} {row[:-2]}z \n" for i in range(30))


def test_typography_comes_only_from_a_clear_source_line(root: Path, box: Toolbox) -> None:
    """When a replaced run changes its length, a new line takes the file's characters only
    from a nearby line it shares at least half its text with; otherwise it is the model's."""
    (root / "n.md").write_text("Intro \u2014 part one of the guide.\nEnd \u2014 bye.\n")
    edit(box, "n.md", "Intro - part one of the guide.\nEnd - bye.",
         "Intro - part one of the manual.\nA - b\nEnd - bye!")
    assert (root / "n.md").read_text() == (
        "Intro \u2014 part one of the manual.\nA - b\nEnd \u2014 bye!\n")


NUMBERED = "def f():\n    a = 1\n\n    b = 2\n    return a + b\n\n\ndef g():\n    return 2\n"


@pytest.mark.parametrize("prefix_new", [True, False])
def test_line_numbers_copied_from_read_file_land_where_they_say(root: Path, box: Toolbox,
                                                                prefix_new: bool) -> None:
    (root / "m.py").write_text(NUMBERED)
    view = box.call("read_file", {"path": "m.py"})
    old = "\n".join(view.splitlines()[1:4])  # '2\t    a = 1', '3\t', '4\t    b = 2'
    assert old.startswith("2\t    a = 1")
    new = old.replace("a = 1", "a = 10") if prefix_new else "    a = 10\n\n    b = 2"
    out = edit(box, "m.py", old, new)
    assert out.text.splitlines()[0] == (
        "edited m.py (1 replacement; matched ignoring line-number prefixes)")
    assert landed(out) == [(1, "loose", ["line-number prefixes"])]
    assert (root / "m.py").read_text() == NUMBERED.replace("a = 1\n", "a = 10\n")


def test_line_numbers_with_another_slip_say_both(root: Path, box: Toolbox) -> None:
    (root / "m.py").write_text(NUMBERED)
    out = edit(box, "m.py", "8\t  def g():\n9\t      return 2", "8\t  def g():\n9\t      return 3")
    assert landed(out) == [(1, "loose", ["line-number prefixes", "indentation"])]
    assert (root / "m.py").read_text().endswith("def g():\n    return 3\n")


@pytest.mark.parametrize("old", [
    "4\t    a = 1\n5\t\n6\t    b = 2",  # numbers of other lines (a stale view)
    "2\t    a = 1\n4\t    b = 2",  # not consecutive
    "2\t    a = 1\n    b = 2",  # not every line
    "8\tdef g():\n9\t    return 2\n10\t",  # past the end of the file
])
def test_line_numbers_that_do_not_name_the_lines_are_refused(root: Path, box: Toolbox,
                                                             old: str) -> None:
    (root / "m.py").write_text(NUMBERED)
    out = edit(box, "m.py", old, old.replace("2", "7"))
    assert out.is_error, out.text
    assert (root / "m.py").read_text() == NUMBERED


def test_a_file_whose_lines_start_with_numbers_is_matched_as_written(root: Path, box: Toolbox) -> None:
    (root / "t.tsv").write_text("1\tone\n2\ttwo\n3\tthree\n")
    out = edit(box, "t.tsv", "2\ttwo\n3\tthree", "2\tTWO\n3\tthree")
    assert landed(out) == [(1, "exact", [])]
    assert (root / "t.tsv").read_text() == "1\tone\n2\tTWO\n3\tthree\n"


def test_blank_lines_left_out_of_old_are_kept_in_the_file(root: Path, box: Toolbox) -> None:
    (root / "m.py").write_text(NUMBERED)
    out = edit(box, "m.py", "    a = 1\n    b = 2\n    return a + b",
               "    a = 1\n    b = 3\n    return a + b")
    assert landed(out) == [(1, "loose", ["blank lines"])]
    assert (root / "m.py").read_text() == NUMBERED.replace("b = 2", "b = 3")
    out = edit(box, "m.py", "    return a + b\ndef g():", "    return a - b\ndef h():")
    assert landed(out) == [(1, "loose", ["blank lines"])]
    assert (root / "m.py").read_text() == NUMBERED.replace("b = 2", "b = 3").replace(
        "a + b\n\n\ndef g", "a - b\n\n\ndef h")
    # what was left out at both ends of a blank line is kept too
    out = edit(box, "m.py", "    a = 1\n    b = 3\n", "    a = 5\n    b = 3\n")
    assert (root / "m.py").read_text().startswith("def f():\n    a = 5\n\n    b = 3\n"), out.text


def test_blank_lines_left_out_where_new_changes_around_them_or_twice_are_refused(
        root: Path, box: Toolbox) -> None:
    text = NUMBERED + "\n\ndef h():\n    a = 1\n    b = 2\n"
    (root / "m.py").write_text(text)
    out = edit(box, "m.py", "    a = 1\n    b = 2", "    a = 1\n    b = 5")  # exact at h: lands
    assert landed(out) == [(1, "exact", [])]
    (root / "n.py").write_text(NUMBERED)
    out = edit(box, "n.py", "def f():\n    a = 1\n    b = 2", "def f():\n    a = 1\n    c = 0\n    b = 2")
    assert out.is_error and "where they belong is unclear" in out.text, out.text
    out = edit(box, "n.py", "    a = 1\n    b = 2\n    x", "    a = 2\n    b = 2\n    x")
    assert out.is_error, out.text
    twice = NUMBERED + "\n\ndef k():\n    a = 1\n\n\n    b = 2\n"
    (root / "k.py").write_text(twice)
    out = edit(box, "k.py", "    a = 1\n    b = 2", "    a = 1\n    b = 4")
    assert out.is_error and "appears 2x in k.py when blank lines are ignored" in out.text, out.text
    assert (root / "k.py").read_text() == twice and (root / "n.py").read_text() == NUMBERED
    out = edit(box, "k.py", "    a = 1\n    b = 2", "    a = 1\n    b = 4", replace_all=True)
    assert landed(out) == [(2, "loose", ["blank lines"])], out.text
    assert (root / "k.py").read_text() == twice.replace("b = 2", "b = 4")


def test_old_with_a_blank_line_the_file_lacks_is_not_this_slip(root: Path, box: Toolbox) -> None:
    (root / "m.py").write_text("x = 1\ny = 2\n")
    out = edit(box, "m.py", "x = 1\n\ny = 2", "x = 1\n\ny = 3")
    assert out.is_error, out.text
