"""Command rules on tricky lines: the parser finds every command a line would run.

The unit tests ask ``CommandRules.verdict`` directly; the toolbox tests show that a denied
command never runs (its marker file is not made), an asked one runs only when confirmed,
and what the model reads back.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from yggdrasil.loki.shell import CommandRules, parse_rules
from yggdrasil.loki.tools import filesystem_toolbox

RULES = CommandRules(parse_rules([("allow", "git status"), ("deny", "git push"),
                                  ("ask", "rm -rf"), ("allow", "pytest"), ("deny", "curl")]))

DENIED = [
    "git push",
    "git push origin main --force",
    "'git' \"push\"",
    "g\"it\" pu\\sh",
    "\\git push",
    "/usr/bin/git push",
    "./git push",
    "git -C repo push",
    "git -c user.name=x push",
    "git --no-pager push",
    "git --git-dir=.git push",
    "env VAR=1 git push",
    "env -i PATH=/bin git push",
    "env -u HOME git push",
    "env -S 'git push'",
    "VAR=1 git push",
    "sudo git push",
    "sudo -u bob -E git push",
    "sudo -- git push",
    "doas -u root git push",
    "command git push",
    "builtin command git push",
    "exec git push",
    "nohup git push &",
    "setsid git push",
    "nice -n 10 git push",
    "timeout -s KILL 30 git push",
    "stdbuf -o0 git push",
    "xargs git push < remotes",
    "echo origin | xargs -n1 -I{} git push {}",
    "find . -name x -exec git push \\;",
    "eval git push",
    "eval 'git push'",
    "eval \"$(echo ok); git push\"",
    "echo $(git push)",
    "echo \"$(git push)\"",
    "echo `git push`",
    "X=$(git push) true",
    "cat <(git push)",
    "ls > $(git push)",
    "ls; git push",
    "ls && git push",
    "false || git push",
    "ls | git push",
    "ls\ngit push",
    "ls\n\ngit push\nls",
    "(git push)",
    "(cd sub && git push)",
    "{ git push; }",
    "if true; then git push; fi",
    "for r in a b; do git push $r; done",
    "while true; do git push; done",
    "f() { git push; }; f",
    "bash -c 'git push'",
    "sh -c \"git push\"",
    "bash -lc 'cd x && git push'",
    "bash -e -c 'git push'",
    "zsh -c 'eval \"git push\"'",
    "bash -c \"bash -c 'git push'\"",
    "watch -n 5 'git push'",
    "git $SUBCOMMAND",
    "git push 2>&1 | tee log",
    "curl https://example.com",
    "/usr/bin/curl -s x",
]

ASKED = [
    "rm -rf build",
    "rm -fr build",
    "rm -r -f build",
    "rm -rfv build",
    "sudo rm -rf /",
    "$GIT push",  # the program is only known when it runs
    "$(which git) push",
    "case x in a) ls;; esac",  # syntax bashlex lacks: unparseable
    "[[ -f x ]] && ls",
    "echo $((1 + 2))",
    "echo 'unterminated",
    "cat <<EOF\n$(git push)\nEOF\n",
    "eval \"$ARGS\"",
    "bash -c \"$SCRIPT\"",
]

ALLOWED = [
    "git status",
    "git status -s",
    "git log --grep push",  # push is the value of --grep, not git's subcommand
    "git stash push",  # another subcommand
    "echo git push",
    "echo 'git push'",
    "printf '%s' \"git push\"",
    "rm -r build",
    "rm -f x",
    "pytest -x tests",
    "command -v git",
    "ls -la",
    "bash script.sh",  # a script file: rules cannot look inside
    "",
]


@pytest.mark.parametrize("line", DENIED)
def test_denied_lines(line: str) -> None:
    verdict = RULES.verdict(line)
    assert verdict.action == "deny", (line, verdict)
    assert verdict.rule is not None and verdict.rule.words[0] in ("git", "curl")


@pytest.mark.parametrize("line", ASKED)
def test_asked_lines(line: str) -> None:
    assert RULES.verdict(line).action == "ask", line


@pytest.mark.parametrize("line", ALLOWED)
def test_allowed_lines(line: str) -> None:
    assert RULES.verdict(line).action == "allow", (line, RULES.verdict(line))


def test_first_match_wins_and_the_default_is_configurable() -> None:
    first = CommandRules(parse_rules([("allow", "git push"), ("deny", "git")]))
    assert first.verdict("git push").action == "allow"
    assert first.verdict("git pull").action == "deny"
    strict = CommandRules(parse_rules([("allow", "pytest"), ("allow", "ls")]), "deny")
    assert strict.verdict("pytest -q && ls").action == "allow"
    assert strict.verdict("pytest; make").action == "deny"
    # a wrapper is judged by what it runs, not by the default
    assert strict.verdict("env CI=1 timeout 60 pytest").action == "allow"
    assert strict.verdict("bash -c 'ls'").action == "allow"
    assert strict.verdict("bash run.sh").action == "deny"
    # the strictest command of the line decides
    assert CommandRules(parse_rules([("ask", "make")])).verdict("make; git push").action == "ask"
    assert RULES.verdict("rm -rf x; git push").action == "deny"


def test_allow_rules_match_only_exact_leading_words() -> None:
    rules = CommandRules(parse_rules([("allow", "git status")]), "deny")
    assert rules.verdict("git status --short").action == "allow"
    for line in ("git -c core.pager=evil status", "git $CMD", "git push status", "git"):
        assert rules.verdict(line).action == "deny", line


def test_bad_rules_are_refused_when_made() -> None:
    with pytest.raises(ValueError, match="must be one of allow, ask, deny"):
        parse_rules([("block", "git push")])
    with pytest.raises(ValueError, match="names no command"):
        parse_rules([("deny", "  ")])
    with pytest.raises(ValueError, match=r"\(action, command words\)"):
        parse_rules(["deny git push"])  # type: ignore[list-item]
    with pytest.raises(ValueError, match="default rule action"):
        CommandRules((), "never")  # type: ignore[arg-type]


def test_hostile_lines_are_asked_about_not_crashed_on() -> None:
    for line in ("echo " + "$(" * 500 + "x" + ")" * 500,  # deeper than the parser goes
                 "echo " + "x" * 70_000,  # longer than it reads
                 "bash -c " + "\"bash -c " * 12 + "'ls'" + "\"" * 12,
                 "\x00\x01 ls"):
        assert RULES.verdict(line).action in ("ask", "allow"), line
    assert RULES.verdict("echo " + "$(" * 500 + "x" + ")" * 500).action == "ask"


# -- through the toolbox -----------------------------------------------------------------


def test_a_denied_command_never_runs(root: Path) -> None:
    box = filesystem_toolbox(root, rules=[("deny", "git push")])
    out = box.call("run", {"command": "touch ran; git -C . push origin"})
    assert out == ("ERROR: the command 'git -C . push origin' is refused by the rule "
                   "('deny', 'git push') (the user's rules: filesystem_toolbox(rules=...) or "
                   "loki --rule)")
    assert not (root / "ran").exists()
    assert "Command rules (first match wins" in box.status and "deny 'git push'" in box.status


def test_ask_runs_only_when_confirmed(root: Path) -> None:
    asked: list[str] = []
    answers = iter([False, True])
    box = filesystem_toolbox(root, rules=[("ask", "rm -rf")],
                             confirm=lambda action: asked.append(action) or next(answers))
    (root / "build").mkdir()
    out = box.call("run", {"command": "rm -rf build"})
    assert out == "REFUSED: user declined to run rm -rf build" and (root / "build").is_dir()
    assert box.call("run", {"command": "rm -rf build"}).startswith("exit=0")
    assert not (root / "build").exists() and asked == ["run rm -rf build"] * 2


def test_ask_without_confirm_is_refused(root: Path) -> None:
    box = filesystem_toolbox(root, rules=[("ask", "make")])
    out = box.call("run", {"command": "make all"})
    # nobody declined: nobody could be asked, and the model is told so, not "user declined"
    assert out == ("REFUSED: run make all needs the user's confirmation (the rule ('ask', "
                   "'make') asks first), and nobody can be asked here (no confirm); a rule "
                   "that allows it would let it run")
    out = box.call("run", {"command": "case x in x) make;; esac"})
    assert out.startswith("REFUSED:") and "cannot read it" in out


def test_run_python_counts_as_python(root: Path) -> None:
    box = filesystem_toolbox(root, rules=[("allow", "ls")], rules_default="deny")
    out = box.call("run_python", {"code": "open('ran', 'w')"})
    assert out.startswith("ERROR: the command 'python' matches no rule") and "allow: ls" in out
    assert not (root / "ran").exists()
    asked: list[str] = []
    box = filesystem_toolbox(root, rules=[("ask", "python")],
                             confirm=lambda a: asked.append(a) or True)
    assert box.call("run_python", {"code": "print(6 * 7)"}).startswith("exit=0\nstdout:\n42")
    assert asked == ["run python code:\nprint(6 * 7)"]


def test_no_rules_means_no_parsing(root: Path) -> None:
    box = filesystem_toolbox(root)
    assert box.call("run", {"command": "case x in x) echo fine;; esac"}).startswith("exit=0")
    assert "Command rules" not in box.status


def test_background_commands_obey_the_rules(root: Path) -> None:
    box = filesystem_toolbox(root, rules=[("deny", "git push"), ("deny", "python")])
    out = box.call("run", {"command": "sleep 1; git push origin main", "background": True})
    assert out.startswith("ERROR: ") and "git push" in out
    out = box.call("run_python", {"code": "print(1)", "background": True})
    assert out.startswith("ERROR: ") and "python" in out
    assert box.call("jobs", {}).startswith("no jobs;")
    box.close()
