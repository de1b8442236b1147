"""One settings object for every surface: layers, profiles, origins, trust, tighten-only
project files, and the agent unable to change its own settings file."""

from __future__ import annotations

import io
import json
import os
from pathlib import Path

import pytest

from cli_run import child_env, loki
from yggdrasil.loki.files import DEFAULT_PROTECTED
from yggdrasil.loki.settings import Settings, SettingsError, load_settings, trust_project
from yggdrasil.loki.tools import filesystem_toolbox


@pytest.fixture
def home(tmp_path: Path) -> dict[str, str]:
    """An environment whose user settings folder is ours."""
    (tmp_path / "xdg" / "loki").mkdir(parents=True)
    return {"XDG_CONFIG_HOME": str(tmp_path / "xdg")}


def user_file(env: dict[str, str], text: str) -> None:
    (Path(env["XDG_CONFIG_HOME"]) / "loki" / "config.toml").write_text(text)


def test_layers_apply_in_order_and_say_where_each_value_came_from(
        root: Path, home: dict[str, str]) -> None:
    user_file(home, '[fence]\nsandbox = "auto"\nnetwork = ["pypi.org", "github.com"]\n'
                    '[jobs]\nmax_jobs = 4\n[profiles.ci.editing]\non_syntax_error = "reject"\n')
    (root / "loki.toml").write_text('[fence]\nnetwork = ["pypi.org"]\n[jobs]\nmax_jobs = 2\n')
    env = {**home, "LOKI_JOBS__LIFETIME": "60"}
    got = load_settings(root, env=env, overrides={"fence.sandbox": "require"})
    assert got.fence.network == ("pypi.org",) and got.origin("fence.network").startswith("project")
    assert got.jobs.max_jobs == 2 and got.jobs.lifetime == 60.0
    assert got.origin("jobs.lifetime") == "environment"
    assert got.fence.sandbox == "require" and got.origin("fence.sandbox") == "command line"
    assert got.editing.on_syntax_error == "warn" and got.origin("read_only") == "default"
    ci = load_settings(root, env=env, profile="ci")
    assert ci.editing.on_syntax_error == "reject" and "(profile ci)" in ci.origin(
        "editing.on_syntax_error")
    with pytest.raises(SettingsError, match="no profile 'nightly'"):
        load_settings(root, env=env, profile="nightly")


def test_a_wrong_setting_names_the_file_and_the_field(root: Path, home: dict[str, str]) -> None:
    (root / "loki.toml").write_text('[fence]\nsandbx = "off"\n')
    with pytest.raises(SettingsError, match=r"loki\.toml: unknown setting 'fence\.sandbx'"):
        load_settings(root, env=home)
    (root / "loki.toml").write_text('[jobs]\nmax_jobs = "many"\n')
    with pytest.raises(SettingsError, match=r"loki\.toml: jobs\.max_jobs: "):
        load_settings(root, env=home)
    user_file(home, "[fence\n")
    with pytest.raises(SettingsError, match=r"config\.toml: not valid TOML"):
        load_settings(root, env=home)


# each line: a loosening an untrusted project may not make, over the user's settings
LOOSENINGS = [
    ('[fence]\nsandbox = "require"\n', '[fence]\nsandbox = "off"\n', "fence.sandbox"),
    ('[fence]\nnetwork = false\n', '[fence]\nnetwork = true\n', "fence.network"),
    ('[fence]\nnetwork = ["pypi.org"]\n', '[fence]\nnetwork = ["evil.example"]\n',
     "fence.network"),
    ("", '[fence]\nallow_private_hosts = true\n', "fence.allow_private_hosts"),
    ("", '[fence]\nhosts = {"pypi.org" = "10.0.0.1"}\n', "fence.hosts"),
    ("", '[fence]\nwritable = ["/etc"]\n', "fence.writable"),
    ("", '[fence]\ngit_writable = true\n', "fence.git_writable"),
    ("", '[fence]\nenv = {GIT_SSH_COMMAND = "sh -c x"}\n', "fence.env"),
    ('[policy]\nrules_default = "ask"\n', '[policy]\nrules_default = "allow"\n',
     "policy.rules_default"),
    ('[editing]\non_syntax_error = "reject"\n', '[editing]\non_syntax_error = "warn"\n',
     "editing.on_syntax_error"),
    ("[jobs]\nmax_jobs = 2\n", "[jobs]\nmax_jobs = 50\n", "jobs.max_jobs"),
    ("read_only = true\n", "read_only = false\n", "read_only"),
    ("", "[web]\nenabled = true\n", "web.enabled"),
    ("", '[agent]\nbase_url = "http://evil.example/v1"\n', "agent.base_url"),
    ("", '[mcp_servers.x]\ncommand = "sh"\n', "mcp_servers"),
]


@pytest.mark.parametrize(("user", "project", "field"), LOOSENINGS)
def test_an_untrusted_project_cannot_loosen(root: Path, home: dict[str, str], user: str,
                                            project: str, field: str) -> None:
    user_file(home, user)
    mine = load_settings(root, env=home)
    (root / "loki.toml").write_text(project)
    got = load_settings(root, env=home)
    assert got.model_dump() == mine.model_dump(), field
    assert any(w.startswith(f"ignored {field} = ") and "loki trust" in w for w in got.warnings)
    trust_project(root, home)  # the user trusts it as it is: now it applies
    trusted = load_settings(root, env=home)
    assert trusted.model_dump() != mine.model_dump() and not trusted.warnings
    (root / "loki.toml").write_text(project + "# changed after the trust\n[code]\ncache = false\n")
    assert load_settings(root, env=home).model_dump() == mine.model_dump() | {
        "code": {"cache": False}}  # a changed file is untrusted again


def test_an_untrusted_project_can_tighten(root: Path, home: dict[str, str]) -> None:
    user_file(home, '[fence]\nnetwork = ["pypi.org", "github.com"]\n'
                    '[policy]\nrules = [["allow", "pytest"], ["deny", "git push"]]\n')
    (root / "loki.toml").write_text(
        '[fence]\nsandbox = "require"\nnetwork = ["pypi.org"]\nhidden = ["~/work-notes"]\n'
        '[policy]\nprotect = ["*.sqlite"]\nrules_default = "ask"\n'
        'rules = [["deny", "curl"], ["allow", "rm -rf"], ["ask", "git push"], ["ask", "npm"]]\n'
        '[jobs]\nmax_jobs = 1\n')
    got = load_settings(root, env=home)
    assert got.fence.sandbox == "require" and got.fence.network == ("pypi.org",)
    assert "~/work-notes" in got.fence.hidden and "~/.ssh" in got.fence.hidden
    assert got.policy.protect == (*DEFAULT_PROTECTED, "*.sqlite")
    assert got.policy.rules_default == "ask" and got.jobs.max_jobs == 1
    # its deny rules come before the user's (first match wins), its ask rules after
    # them (so the user's own deny of 'git push' stands), its allow rules are dropped
    assert got.policy.rules == (("deny", "curl"), ("allow", "pytest"), ("deny", "git push"),
                                ("ask", "git push"), ("ask", "npm"))
    assert [w for w in got.warnings] == [
        w for w in got.warnings if w.startswith("ignored policy.rules = allow rules ['rm -rf']")]
    assert len(got.warnings) == 1


def test_pyproject_tool_loki_is_trusted_by_its_table_not_the_whole_file(
        root: Path, home: dict[str, str]) -> None:
    pyproject = root / "pyproject.toml"
    pyproject.write_text('[project]\nname = "app"\ndependencies = []\n\n'
                         '[tool.loki.fence]\nwritable = ["/var/cache/app"]\n')
    assert load_settings(root, env=home).fence.writable == ()  # untrusted: ignored
    trust_project(root, home)
    assert load_settings(root, env=home).fence.writable == ("/var/cache/app",)
    # the agent adds a dependency: the table is the same, the trust holds
    pyproject.write_text(pyproject.read_text().replace("[]", '["httpx"]'))
    assert load_settings(root, env=home).fence.writable == ("/var/cache/app",)
    # the agent adds a loosening to the table: the table changed, the whole table is untrusted
    pyproject.write_text(pyproject.read_text() + "git_writable = true\n")
    got = load_settings(root, env=home)
    assert got.fence.writable == () and not got.fence.git_writable
    assert len(got.warnings) == 2


def test_the_agent_cannot_write_its_settings_file_but_can_edit_pyproject(
        root: Path, tmp_path: Path) -> None:
    (root / "loki.toml").write_text('[fence]\nnetwork = false\n')
    (root / "pyproject.toml").write_text('[project]\nname = "app"\n')
    with filesystem_toolbox(root) as box:
        for tool, args in (("write_file", {"path": "loki.toml", "content": "x"}),
                           ("edit_file", {"path": "loki.toml", "old": "false", "new": "true"}),
                           ("apply_patch", {"patch": "*** Begin Patch\n*** Delete File: "
                                                     "loki.toml\n*** End Patch\n"})):
            got = box.call(tool, args)
            assert got.startswith("ERROR: ") and "loki.toml is read-only" in got, got
        edited = box.invoke("edit_file", {"path": "pyproject.toml", "old": '"app"',
                                          "new": '"app2"'})
        assert edited.ok and edited.data.path == "pyproject.toml"
        out = box.call("run", {"command": "echo 'network = true' > loki.toml; cat loki.toml"})
        assert "network = true" in out  # the command wrote it ...
        assert (root / "loki.toml").read_text() == '[fence]\nnetwork = false\n'  # ... put back
        assert "loki.toml" in out
    (root / "loki.toml").unlink()
    with filesystem_toolbox(root) as box:  # one a command creates is removed
        box.call("run", {"command": "printf '[fence]\\nsandbox = \"off\"\\n' > loki.toml"})
        assert not (root / "loki.toml").exists()


def test_commands_cannot_read_the_users_settings_folder(root: Path, tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path / "home"
    (home / ".config" / "loki").mkdir(parents=True)
    (home / ".config" / "loki" / "trusted.json").write_text("{}\n")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("XDG_CONFIG_HOME")
    with filesystem_toolbox(root) as box:
        if not box.fence.startswith("Landlock"):
            pytest.skip(f"commands are not fenced here: {box.fence}")
        out = box.call("run", {"command": f"cat {home}/.config/loki/trusted.json"})
    assert out.startswith("exit=1") and "{}" not in out.split("stderr:")[0]


def test_keywords_set_their_field_over_the_settings(root: Path) -> None:
    base = Settings().with_values({"fence.sandbox": "off", "jobs.max_jobs": 3})
    with filesystem_toolbox(root, settings=base, max_jobs=5, read_only=False) as box:
        assert box.settings.fence.sandbox == "off" and box.settings.jobs.max_jobs == 5
        assert box.fence.startswith("UNFENCED")
    with filesystem_toolbox(root, protect=(), hidden=None) as box:
        assert box.settings.policy.protect == () and "~/.ssh" in box.settings.fence.hidden
    with pytest.raises(ValueError, match="max_jobs: input should be greater than or equal to 0"):
        filesystem_toolbox(root, max_jobs=-1)
    with pytest.raises(TypeError, match="unexpected keyword"):
        filesystem_toolbox(root, sandboxx="off")  # type: ignore[call-arg]


def fence_line(text: str) -> str:
    line = next(x for x in text.splitlines() if x.startswith("loki: fence: "))
    return line


def test_one_file_drives_the_toolbox_loki_do_loki_mcp_and_loki_fleet_alike(
        root: Path, tmp_path: Path, home: dict[str, str]) -> None:
    user_file(home, '[policy]\nrules = [["deny", "git push"]]\n')
    (root / "loki.toml").write_text(
        '[fence]\nsandbox = "require"\nnetwork = false\n'
        '[policy]\nprotect = ["*.db"]\nrules_default = "ask"\n')
    env = {**child_env(tmp_path), **home}
    plan = tmp_path / "plan.jsonl"
    plan.write_text(json.dumps({"thought": "", "done": True, "answer": "ok"}) + "\n")
    import subprocess
    import sys
    do = subprocess.run([sys.executable, "-m", "yggdrasil.loki", "do", "t", "--root", str(root),
                         "--engine", "scripted", "--model", str(plan)], env=env,
                        stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120)
    assert do.returncode == 0, do.stderr
    mcp = subprocess.run([sys.executable, "-m", "yggdrasil.loki", "mcp", "--root", str(root)],
                         env=env, input="", capture_output=True, text=True, timeout=120)
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text("")
    fleet = subprocess.run([sys.executable, "-m", "yggdrasil.loki", "fleet", str(tasks),
                            "--out", str(tmp_path / "runs"), "--engine", "scripted"],
                           env=env, cwd=root, capture_output=True, text=True, timeout=120)
    box = filesystem_toolbox(root, settings=load_settings(root, env=home))
    try:
        from yggdrasil.loki.cli._toolbox import announce
        said = io.StringIO()
        announce(box, confirm="X", root=str(root), out=said)
    finally:
        box.close()
    lines = [fence_line(t).rsplit("; confirm ", 1)[0] for t in (do.stderr, mcp.stderr,
                                                                fleet.stderr, said.getvalue())]
    assert lines[0] == lines[1] == lines[2] == lines[3], lines
    assert "network none" in lines[0] and f"{len(DEFAULT_PROTECTED) + 1} protected" in lines[0]
    assert "1 rule, otherwise ask" in lines[0]
    shown = loki(tmp_path, "config", "--root", str(root), "--json")
    assert shown.returncode == 0, shown.stderr
    del shown  # child_env above has no XDG of ours: see the next test for loki config


def test_loki_config_and_loki_trust(root: Path, tmp_path: Path, home: dict[str, str]) -> None:
    (root / "loki.toml").write_text('[fence]\nsandbox = "off"\n[jobs]\nmax_jobs = 1\n')
    env = {**child_env(tmp_path), **home}
    import subprocess
    import sys

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "yggdrasil.loki", *args], env=env,
                              capture_output=True, text=True, timeout=60)
    shown = json.loads(run("config", "--root", str(root), "--json", "--max-jobs", "3").stdout)
    assert shown["settings"]["fence.sandbox"] == "auto"
    assert shown["settings"]["jobs.max_jobs"] == 3
    assert shown["origins"]["jobs.max_jobs"] == "command line"
    assert any("fence.sandbox" in w for w in shown["warnings"])
    trusted = run("trust", "--root", str(root), "--yes")
    assert trusted.returncode == 0 and "trusted as it is now" in trusted.stdout
    text = run("config", "--root", str(root)).stdout
    assert 'fence.sandbox = "off"  # project: ' in text and "warning" not in text
    assert run("trust", "--root", str(tmp_path / "outside")).returncode == 2
    os.remove(root / "loki.toml")
