"""Command rules where programs start: every way of getting a denied program past the line.

With ``rules=[("deny", "git push"), ("deny", "curl")]``, a bare repository inside the root
as ``origin`` and a sink on 127.0.0.1 for curl, each line below tried to get a push or a
request through; the shell's expansions, code fed to shells by other routes, arguments
made at run time, other names of the same program, scripts, make and python all decide
what runs only after the line was read. Each case checks the effect itself: nothing
landed in the bare repository, nothing reached the sink. ``ask`` is tested with a confirm
that accepts and one that declines.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from net_servers import Sink
from yggdrasil.loki.files import Root
from yggdrasil.loki.sandbox import _isolation, isolation_status
from yggdrasil.loki.shell import CommandRules, Shell, parse_rules
from yggdrasil.loki.tools import Toolbox, filesystem_toolbox

pytestmark = pytest.mark.skipif(not isolation_status().exec_guard,
                                reason="exec-time rules need seccomp user notification")

RULES = [("deny", "git push"), ("deny", "curl")]
PUSH = "origin HEAD:main"
URL = "http://127.0.0.1:{port}/x"

# (name, command line run in the work tree); {url} is the sink's address
CASES = [
    ("brace expansion", f"{{git,push}} {PUSH}"),
    ("glob in the program", f"/usr/bin/gi[t] push {PUSH}"),
    ("glob in the subcommand", f"touch push && git pu?h {PUSH}"),
    ("mixed quoting", f"\"g\"'i't push {PUSH}"),
    ("an alias made earlier in the line", f"shopt -s expand_aliases; alias p='git pu''sh'\np {PUSH}"),
    ("a here-string", f"bash <<< 'git pu''sh {PUSH}'"),
    ("a here-document", f"bash <<END\ngit pu''sh {PUSH}\nEND"),
    ("a pipe into sh", f"echo 'git pu''sh {PUSH}' | sh"),
    (". /dev/stdin", f"echo 'git pu''sh {PUSH}' | . /dev/stdin"),
    ("source <(...)", f"source <(echo 'git pu''sh {PUSH}')"),
    ("trap on EXIT", f"trap 'gi''t pu''sh {PUSH}' EXIT"),
    ("bash -o pipefail -c", f"bash -o pipefail -c 'git push {PUSH}'"),
    ("bash --rcfile x -c", f"bash --rcfile x -c 'git push {PUSH}'"),
    ("env -vS", f"env -vS 'git push {PUSH}'"),
    ("env --split-string=", f"env --split-string='git push {PUSH}'"),
    ("flock FILE -c", f"flock \"$TMPDIR/lock\" -c 'git push {PUSH}'"),
    ("xargs supplies the subcommand", f"echo push {PUSH} | xargs git"),
    ("xargs -I{}", f"echo push | xargs -I{{}} git {{}} {PUSH}"),
    ("git-core helper", f"/usr/lib/git-core/git-push {PUSH}"),
    ("git send-pack", "git send-pack ../origin.git HEAD:main"),
    ("setpriv", f"setpriv --reset-env git push {PUSH}"),
    ("prlimit", f"prlimit --nofile=512 git push {PUSH}"),
    ("a link to git", f"ln -s /usr/bin/git \"$TMPDIR/g\" && \"$TMPDIR/g\" push {PUSH}"),
    ("the dynamic loader", f"/lib64/ld-linux-x86-64.so.2 /usr/bin/git push {PUSH}"),
    ("the loader, --argv0 and a library path",
     f"ln -s /usr/bin/git \"$TMPDIR/x\" && /lib64/ld-linux-x86-64.so.2 --library-path "
     f"\"$TMPDIR\" --argv0 git-push x {PUSH}"),
    ("a copy of the loader under another name",
     "cp /lib64/ld-linux-x86-64.so.2 ./L && ./L /usr/bin/curl -s {url}; rm -f L"),
    ("a copy of the loader, --argv0",
     "cp /lib64/ld-linux-x86-64.so.2 ./L2 && ./L2 --argv0 x /usr/bin/curl -s {url}; rm -f L2"),
    ("a script whose #! names curl",
     "printf '#!/usr/bin/curl -sK\\nurl = \"{url}\"\\n' > k && chmod +x k && ./k; rm -f k"),
    ("a script whose #! names a script whose #! names curl",
     "printf '#!/usr/bin/curl -sK\\nurl = \"{url}\"\\n' > k && printf '#!%s/k\\n' \"$PWD\" > k2 "
     "&& chmod +x k k2 && ./k2; rm -f k k2"),
    ("a script whose #! names a copy of the loader",
     "cp /lib64/ld-linux-x86-64.so.2 ./L3 && printf '#!%s/L3 /usr/bin/curl\\n' \"$PWD\" > k "
     "&& chmod +x k && ./k -s {url}; rm -f k L3"),
    ("fexecve (execveat of a descriptor)",
     "python3 -c 'import os; fd = os.open(\"/usr/bin/git\", os.O_RDONLY); "
     "os.execve(fd, [\"git\", \"push\", \"origin\", \"HEAD:main\"], os.environ)'"),
    ("a copy of git", f"cp /usr/bin/git \"$TMPDIR/x\" && \"$TMPDIR/x\" push {PUSH}"),
    ("a copy of curl", "cp /usr/bin/curl ./c && ./c -s {url}; rm -f c"),
    ("python subprocess",
     "python3 -c 'import subprocess; subprocess.run([\"git\", \"push\", \"origin\", "
     "\"HEAD:main\"])'"),
    ("a Makefile recipe", f"printf 'all:\\n\\tgit push {PUSH}\\n' > Makefile && make"),
    ("a shell script", f"printf 'git push {PUSH}\\n' > s.sh && chmod +x s.sh && ./s.sh"),
    ("bash script.sh", f"printf 'git push {PUSH}\\n' > s.sh && bash s.sh"),
    ("git alias on the command line", f"git -c alias.p=push p {PUSH}"),
    ("curl by brace expansion", "{curl,-s,{url}}"),
    ("curl through xargs", "echo {url} | xargs curl -s"),
    ("curl from python", "python3 -c 'import os; os.system(\"cu\" \"rl -s {url}\")'"),
]
# (name, background command, what job_input sends)
JOB_CASES = [
    ("bash /dev/stdin", "bash /dev/stdin", f"{{git,push}} {PUSH}"),
    ("sh /proc/self/fd/0", "sh /proc/self/fd/0", f"echo push {PUSH} | xargs git"),
    ("bash -c 'source /dev/stdin'", "bash -c 'source /dev/stdin'", f"\"g\"'i't push {PUSH}"),
    ("xargs git", "xargs git", f"push {PUSH}"),
]


class Work:
    """A work tree in the root whose origin is a bare repository in the root."""

    def __init__(self, root: Path) -> None:
        self.root, self.origin, self.tree = root, root / "origin.git", root / "w"
        git = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-c", "init.defaultBranch=main"]
        subprocess.run([*git, "init", "-q", "--bare", str(self.origin)], check=True)
        subprocess.run([*git, "init", "-q", str(self.tree)], check=True)
        subprocess.run([*git, "-C", str(self.tree), "commit", "-q", "--allow-empty", "-m", "x"],
                       check=True)
        subprocess.run(["git", "-C", str(self.tree), "remote", "add", "origin", "../origin.git"],
                       check=True)
        self.sink = Sink("127.0.0.1")

    def landed(self) -> list[str]:
        """What reached the bare repository or the sink (then cleared for the next case)."""
        refs = subprocess.run(["git", "-C", str(self.origin), "for-each-ref",
                               "--format=%(refname)"], capture_output=True, text=True,
                              check=True).stdout.split()
        for ref in refs:
            subprocess.run(["git", "-C", str(self.origin), "update-ref", "-d", ref], check=True)
        hits, self.sink.hits[:] = list(self.sink.hits), []
        return refs + hits


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Work, Toolbox]]:
    root = tmp_path_factory.mktemp("exec-rules")
    found = Work(root)
    box = filesystem_toolbox(root, allow_shell=True, rules=RULES)
    yield found, box
    box.close()
    found.sink.close()


def _line(command: str, work: Work) -> str:
    return f"cd w && {command.replace('{url}', URL.format(port=work.sink.port))}"


@pytest.mark.parametrize("command", [c for _, c in CASES], ids=[n for n, _ in CASES])
def test_a_denied_program_never_runs(work: tuple[Work, Toolbox], command: str) -> None:
    found, box = work
    out = box.call("run", {"command": _line(command, found)})
    assert found.landed() == [], out
    assert "refused" in out.lower(), out


@pytest.mark.parametrize(("start", "text"), [(s, t) for _, s, t in JOB_CASES],
                         ids=[n for n, _, _ in JOB_CASES])
def test_a_shell_fed_through_job_input_is_checked_too(work: tuple[Work, Toolbox], start: str,
                                                       text: str) -> None:
    found, box = work
    started = box.call("run", {"command": f"cd w && {start}", "background": True})
    job = int(started.split()[2].rstrip(":"))
    out = box.call("job_input", {"job": job, "text": text, "eof": True})
    out += box.call("job_output", {"job": job, "wait": 20})
    assert found.landed() == [], out
    assert "loki rules: refused" in out, out


def test_the_observation_names_the_program_and_the_rule(work: tuple[Work, Toolbox]) -> None:
    found, box = work
    out = box.call("run", {"command": _line(f"echo push {PUSH} | xargs git", found)})
    assert "loki rules: refused 'git push origin HEAD:main' (rule deny 'git push')" in out
    assert "Operation not permitted" in out


def test_allowed_programs_run_and_rules_are_checked_at_exec(work: tuple[Work, Toolbox]) -> None:
    _, box = work
    out = box.call("run", {"command": "cd w && git status --short && git log --oneline | wc -l"})
    assert out.startswith("exit=0"), out
    assert "checked on the command line and again when each program starts" in box.status


def test_the_line_parser_still_refuses_early(work: tuple[Work, Toolbox]) -> None:
    found, box = work
    out = box.call("run", {"command": f"cd w && git push {PUSH}"})
    assert out.startswith("ERROR:") and "refused by the rule" in out, out
    assert found.landed() == []


# -- ask at exec time --------------------------------------------------------------------


def _asking(root: Path, answer: bool) -> tuple[Work, Toolbox, list[str]]:
    asked: list[str] = []

    def confirm(action: str) -> bool:
        asked.append(action)
        return answer

    found = Work(root)
    box = filesystem_toolbox(root, allow_shell=True, rules=[("ask", "git push")],
                             confirm=confirm)
    return found, box, asked


def test_an_accepted_ask_lets_the_program_go_on(tmp_path: Path) -> None:
    found, box, asked = _asking(tmp_path, True)
    try:
        out = box.call("run", {"command": f"cd w && echo push {PUSH} | xargs git"})
        assert out.startswith("exit=0"), out
        assert asked == [f"run git push {PUSH}"]  # asked once: git's own helpers are covered
        assert found.landed() == ["refs/heads/main"]
    finally:
        box.close()
        found.sink.close()


def test_a_declined_ask_fails_the_exec(tmp_path: Path) -> None:
    found, box, asked = _asking(tmp_path, False)
    try:
        out = box.call("run", {"command": f"cd w && echo push {PUSH} | xargs git"})
        assert asked == [f"run git push {PUSH}"]
        assert "Operation not permitted" in out
        assert (f"loki rules: refused 'git push {PUSH}' (rule ask 'git push'; the user "
                "declined)") in out
        assert found.landed() == []
    finally:
        box.close()
        found.sink.close()


def test_a_confirmed_line_is_not_asked_again_when_it_starts(tmp_path: Path) -> None:
    found, box, asked = _asking(tmp_path, True)
    try:
        out = box.call("run", {"command": f"cd w && git push {PUSH}"})
        assert out.startswith("exit=0"), out
        assert asked == [f"run cd w && git push {PUSH}"]
        assert found.landed() == ["refs/heads/main"]
    finally:
        box.close()
        found.sink.close()


def test_without_confirm_an_ask_at_exec_is_refused(tmp_path: Path) -> None:
    found = Work(tmp_path)
    box = filesystem_toolbox(tmp_path, allow_shell=True, rules=[("ask", "git push")])
    try:
        out = box.call("run", {"command": f"cd w && echo push {PUSH} | xargs git"})
        assert "nobody can be asked here: no confirm" in out, out
        assert found.landed() == []
    finally:
        box.close()
        found.sink.close()


def test_no_rules_no_exec_supervision(tmp_path: Path) -> None:
    """Unfenced, a command without rules carries no filter at all, one with rules the
    exec guard's; fenced, a command without rules has only its connects stopped (the
    socket check), never its execs."""
    line = "grep Seccomp_filters /proc/self/status"
    counts = {}
    for rules in ((), RULES):
        with filesystem_toolbox(tmp_path, allow_shell=True, sandbox="off", rules=rules) as box:
            counts[bool(rules)] = box.call("run", {"command": line})
    assert "Seccomp_filters:\t0" in counts[False], counts
    assert "Seccomp_filters:\t1" in counts[True], counts
    for rules, calls in (((), "connect"), (RULES, "execve,execveat,connect")):
        shell = Shell(Root.at(tmp_path), rules=CommandRules(parse_rules(rules)))
        session = shell._session(["true"], print, tmp_path, shell.fence())
        assert session is not None and session.calls == calls
        shell.close()


def test_a_slow_confirm_pauses_only_that_program(tmp_path: Path) -> None:
    """While the user is asked about git push, the rest of the command goes on: the answer
    comes only once the shell has written a file meanwhile. (Its loop uses builtins only:
    an exec of the same command waits while the user is asked; it is not what this tests.)"""
    def confirm(action: str) -> bool:
        (tmp_path / "asked").touch()
        deadline = time.monotonic() + 30
        while not (tmp_path / "meanwhile.txt").exists() and time.monotonic() < deadline:
            time.sleep(0.01)
        return False

    found = Work(tmp_path)
    box = filesystem_toolbox(tmp_path, allow_shell=True, rules=[("ask", "git push")],
                             confirm=confirm)
    try:
        out = box.call("run", {"command": f"(cd w && echo push {PUSH} | xargs git; echo after) & "
                                          "while [ ! -e asked ]; do :; done; "
                                          "echo yes > meanwhile.txt; wait"})
        assert "after" in out and "the user declined" in out, out
        assert (tmp_path / "meanwhile.txt").read_text() == "yes\n"
        assert found.landed() == []
    finally:
        box.close()
        found.sink.close()


def test_without_user_notification_rules_are_on_the_line_only(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real = isolation_status()
    monkeypatch.setattr(_isolation, "_cached", _isolation.IsolationStatus(
        real.namespaces, real.namespace_reason, real.setid_filter, real.setid_reason,
        False, "the kernel is older than 5.9"))
    with filesystem_toolbox(tmp_path, allow_shell=True, rules=RULES) as box:
        assert "checked on the command line only" in box.status, box.status
        assert "NOT check" in box.status and "older than 5.9" in box.status
        out = box.call("run", {"command": "grep Seccomp_filters /proc/self/status"})
        assert "Seccomp_filters:\t1" in out, out  # no supervisor
    with filesystem_toolbox(tmp_path, allow_shell=True, rules=RULES, sandbox="require") as box:
        out = box.call("run", {"command": "true"})
        assert out.startswith("ERROR") and "cannot be checked when they start" in out, out
    with filesystem_toolbox(tmp_path, allow_shell=True, sandbox="require") as box:
        assert box.call("run", {"command": "true"}).startswith("exit=0")  # no rules: runs


def test_an_ask_shows_everything_it_approves_or_is_refused(tmp_path: Path) -> None:
    asked: list[str] = []

    def confirm(action: str) -> bool:
        asked.append(action)
        return True

    box = filesystem_toolbox(tmp_path, allow_shell=True, rules=[("ask", "touch")],
                             confirm=confirm)
    try:
        long = "./" + "a" * 400  # past the old 300-character cut: the victim was hidden
        (tmp_path / "s.sh").write_text(f"touch {long} victim\n")
        box.call("run", {"command": "sh s.sh"})
        [question] = asked
        assert question.replace("\n    ", "") == f"run touch {long} victim"
        assert all(len(line) <= 100 for line in question.split("\n"))
        assert (tmp_path / "victim").exists()
        asked.clear()
        (tmp_path / "s.sh").write_text("touch 'x\x1b[2Jy' ./v2\n")  # escapes stay escaped
        box.call("run", {"command": "sh s.sh"})
        assert asked == ["run touch 'x\\x1b[2Jy' ./v2"]
        asked.clear()
        huge = "./" + "b" * 5_000  # too long to show whole: refused, not asked
        (tmp_path / "s.sh").write_text(f"touch {huge} victim2\n")
        out = box.call("run", {"command": "sh s.sh"})
        assert asked == [] and not (tmp_path / "victim2").exists()
        assert "too long to be shown whole in a question" in out, out
    finally:
        box.close()
