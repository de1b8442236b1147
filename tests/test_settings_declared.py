"""Each setting declared once: the layering, the tighten check, the keywords, the flags,
the variables and the docs' table come from the fields of Settings; one construction
path; and errors that name the closest of what was meant."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from cli_run import SRC, child_env, loki
from yggdrasil.loki.agent import Loki
from yggdrasil.loki.engines.scripted import ScriptedEngine
from yggdrasil.loki.files import DEFAULT_PROTECTED, Journal, Root
from yggdrasil.loki.fleet import Task
from yggdrasil.loki.settings import (
    Settings,
    SettingsError,
    env_names,
    keyword_fields,
    load_settings,
    setting_fields,
    with_keywords,
)
from yggdrasil.loki.tools import Toolbox, filesystem_toolbox

ROOT = Path(__file__).resolve().parents[1]


def value_at(settings: Settings, dotted: str) -> object:
    value: object = settings
    for part in dotted.split("."):
        value = getattr(value, part)
    return value


def test_read_only_false_overrides_a_settings_file(root: Path) -> None:
    (root / "loki.toml").write_text("read_only = true\n")
    settings = load_settings(root)
    assert settings.read_only
    with filesystem_toolbox(root, settings=settings) as box:
        assert "write_file" not in box
    with filesystem_toolbox(root, settings=settings, read_only=False) as box:
        assert "write_file" in box and "run" in box and not box.settings.read_only
    with filesystem_toolbox(root, settings=settings.with_values({"web.enabled": True}),
                            allow_web=False) as box:
        assert "web_fetch" not in box


def test_every_keyword_sets_the_field_that_declares_it(root: Path) -> None:
    samples = {"read_only": True, "sandbox": "off", "network": ["pypi.org"],
               "allow_private_hosts": True, "hosts": {"a.test": "127.0.0.1"},
               "writable": [root], "unix_sockets": [root], "hidden": ["~/notes"],
               "git_writable": True, "env": {"X": "1"}, "protect": ["*.db"],
               "rules": [("deny", "git push")], "rules_default": "ask", "confirm": print,
               "before_call": print, "after_call": print, "max_jobs": 3, "job_lifetime": 5.0,
               "job_buffer": 4096, "on_syntax_error": "reject", "code_cache": False,
               "allow_web": True, "mcp_servers": [], "checkpoints": False,
               "rewind_tool": True, "image_width": 1024, "image_height": 1024, "pdf_pages": 5}
    assert set(samples) == set(keyword_fields())  # a new keyword gets a sample here
    samples["mcp_servers"] = [{"name": "db", "command": "uvx"}]
    default = Settings()
    for keyword, value in samples.items():
        dotted = keyword_fields()[keyword]
        made = with_keywords(None, {keyword: value})
        assert value_at(made, dotted) != value_at(default, dotted), keyword
        assert made.origin(dotted) == "keyword"
    with filesystem_toolbox(root, git_writable=True, job_lifetime=5, code_cache=False,
                            protect=["*.db"], writable=[root]) as box:
        s = box.settings
        assert s.fence.git_writable and s.jobs.lifetime == 5.0 and s.code.cache is False
        assert s.policy.protect == ("*.db",) and s.fence.writable == (str(root),)
        assert not box.root.locks_git  # type: ignore[union-attr]


def test_an_unknown_keyword_names_the_closest(root: Path) -> None:
    with pytest.raises(TypeError, match=r"unexpected keyword\(s\) sandboxx; did you mean "
                                        r"sandbox\? it takes root, settings and read_only"):
        filesystem_toolbox(root, sandboxx="off")
    with pytest.raises(ValueError, match=r"max_jobs: input should be greater than or equal to 0"):
        filesystem_toolbox(root, max_jobs=-1)


@pytest.mark.parametrize(("layer", "text", "closest"), [
    ("file", '[fence]\nsandbx = "off"\n', "fence.sandbox"),
    ("file", '[polcy]\nrules = []\n', None),
    ("file", 'red_only = true\n', "read_only"),
    ("environment", "LOKI_FENCE__SANDBX", "LOKI_FENCE__SANDBOX"),
    ("environment", "LOKI_JOBS__MAX_JOB", "LOKI_JOBS__MAX_JOBS"),
])
def test_an_unknown_setting_names_the_closest_and_the_allowed(
        root: Path, layer: str, text: str, closest: str | None) -> None:
    env = dict(os.environ)
    if layer == "file":
        (root / "loki.toml").write_text(text)
    else:
        env[text] = "1"
    with pytest.raises(SettingsError) as raised:
        load_settings(root, env=env)
    said = str(raised.value)
    if closest is not None:
        assert f"did you mean {closest}?" in said, said
    assert "fence.git_writable" in said or "LOKI_FENCE__GIT_WRITABLE" in said, said
    with pytest.raises(SettingsError, match=r"did you mean jobs\.max_jobs"):
        Settings().with_values({"jobs.max_job": 1})


def test_every_flag_is_made_from_a_declaration_and_sets_its_field(tmp_path: Path,
                                                                 root: Path) -> None:
    declared = {f.name for field in setting_fields().values() for f in field.setting.flags}
    shown = "".join(loki(tmp_path, command, "--help").stdout
                    for command in ("config", "do", "mcp", "fleet"))
    assert all(name in shown for name in declared)
    sock = root / "sockets"
    sock.mkdir()
    done = loki(tmp_path, "config", "--root", str(root), "--json", "--git-writable",
                "--allow-host", "pypi.org", "--allow-host", "*.github.com", "--env", "A=1",
                "--env", "B=2=3", "--host", "x.test=127.0.0.1", "--protect", "*.db",
                "--rule", "deny:git push", "--rule", "ask:rm -rf", "--rule-default", "ask",
                "--no-code-cache", "--max-jobs", "2", "--job-lifetime", "9.5",
                "--unix-socket", str(sock), "--sandbox", "require", "--read-only", "--web",
                "--mcp", "db=uvx server --db x.db", "--on-syntax-error", "reject")
    assert done.returncode == 0, done.stderr
    got = json.loads(done.stdout)
    values, origins = got["settings"], got["origins"]
    assert values["fence.git_writable"] is True and values["read_only"] is True
    assert values["fence.network"] == ["pypi.org", "*.github.com"]
    assert values["fence.env"] == {"A": "1", "B": "2=3"}
    assert values["fence.hosts"] == {"x.test": "127.0.0.1"}
    assert values["policy.protect"] == [*DEFAULT_PROTECTED, "*.db"]
    assert values["policy.rules"] == [["deny", "git push"], ["ask", "rm -rf"]]
    assert values["policy.rules_default"] == "ask" and values["code.cache"] is False
    assert values["jobs.max_jobs"] == 2 and values["jobs.lifetime"] == 9.5
    assert values["fence.unix_sockets"] == [str(sock)] and values["web.enabled"] is True
    assert values["mcp_servers"]["db"]["command"] == "uvx"
    assert values["editing.on_syntax_error"] == "reject"
    assert all(origins[name] == "command line" for name in (
        "fence.git_writable", "fence.network", "policy.rules", "mcp_servers", "code.cache"))
    reset = json.loads(loki(tmp_path, "config", "--root", str(root), "--json", "--no-protect",
                            "--protect", "*.db").stdout)
    assert reset["settings"]["policy.protect"] == ["*.db"]
    both = loki(tmp_path, "config", "--root", str(root), "--no-network", "--allow-host", "a")
    assert both.returncode == 2 and "contradict" in both.stderr
    bad = loki(tmp_path, "config", "--root", str(root), "--rule", "block:x")
    assert bad.returncode == 2 and "--rule 'block:x': write ACTION:COMMAND" in bad.stderr


def test_the_agent_and_mcp_flags_fill_their_groups(tmp_path: Path, root: Path) -> None:
    plan = tmp_path / "plan.jsonl"
    plan.write_text(json.dumps({"thought": "", "done": True, "answer": "ok"}) + "\n")
    done = loki(tmp_path, "do", "t", "--root", str(root), "--engine", "scripted",
                "--model", str(plan), "--max-steps", "0")
    assert done.returncode == 2 and "max_steps" in done.stderr
    done = loki(tmp_path, "do", "t", "--root", str(root), "--engine", "scripted",
                "--model", str(plan), "--max-steps", "3", "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["answer"] == "ok" and "(--model)" in done.stderr
    mcp = loki(tmp_path, "mcp", "--root", str(root), "--max-message-bytes", "0")
    assert mcp.returncode == 2 and "max_message_bytes" in mcp.stderr


def test_each_variable_is_derived_and_the_older_names_still_work(root: Path) -> None:
    names = env_names()
    assert names["LOKI_FENCE__GIT_WRITABLE"] == "fence.git_writable"
    assert names["LOKI_ENGINE"] == "agent.engine" and names["LOKI_CODE_CACHE"] == "code.cache"
    got = load_settings(root, env={"LOKI_FENCE__GIT_WRITABLE": "true", "LOKI_MODEL": "m",
                                   "LOKI_POLICY__RULES": '[["deny", "curl"]]'})
    assert got.fence.git_writable and got.agent.model == "m"
    assert got.policy.rules == (("deny", "curl"),) and got.origin("agent.model") == "environment"


def test_git_writable_is_named_in_at_most_three_files() -> None:
    naming = sorted(str(p.relative_to(SRC)) for p in Path(SRC).rglob("*.py")
                    if "git_writable" in p.read_text())
    assert len(naming) <= 3, naming


def test_the_docs_table_is_what_the_declarations_make() -> None:
    script = ROOT / "docs" / "_ext" / "settings_table.py"
    done = subprocess.run([sys.executable, str(script), "--check"], capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, ("docs/configuration.md's settings table is stale: run "
                                  f"python {script.relative_to(ROOT)}")
    page = (ROOT / "docs" / "configuration.md").read_text()
    for dotted, field in setting_fields().items():
        assert f"| `{dotted}` |" in page
        assert all(f"`{flag.name}" in page for flag in field.setting.flags), dotted


def test_the_docs_check_fails_on_a_stale_table(tmp_path: Path) -> None:
    sys.path.insert(0, str(ROOT / "docs" / "_ext"))
    try:
        import settings_table
    finally:
        sys.path.pop(0)
    page = (ROOT / "docs" / "configuration.md").read_text()
    stale = page.replace("| `fence.git_writable` |", "| `fence.git_writeable` |")
    assert settings_table.with_table(stale) == page != stale


def test_act_refuses_toolbox_options_beside_a_toolbox(root: Path) -> None:
    agent = Loki(ScriptedEngine([{"thought": "", "done": True, "answer": "ok"}]))
    with filesystem_toolbox(root) as box:
        for options in ({"read_only": True}, {"allow_web": False}, {"confirm": print}):
            with pytest.raises(ValueError, match="cannot apply to a toolbox that is given"):
                agent.act("t", toolbox=box, **options)  # type: ignore[arg-type]
            with pytest.raises(ValueError, match="cannot apply to a toolbox that is given"):
                agent.session(root, toolbox=box, **options)  # type: ignore[arg-type]
        assert agent.act("t", toolbox=box).answer == "ok"


def test_a_toolbox_is_built_from_its_inputs(root: Path) -> None:
    closed: list[str] = []

    class Resource:
        def close(self) -> None:
            closed.append("closed")

    journal = Journal(Root.at(root))
    box = Toolbox(journal=journal, notes="fenced somehow", resources=[Resource()])
    journal.after_remove("gone.txt")
    assert box.changed == ["gone.txt"] and box.status == "fenced somehow"
    box.close()
    assert closed == ["closed"]


def test_unknown_names_get_the_closest(root: Path, tmp_path: Path) -> None:
    with filesystem_toolbox(root, read_only=True) as box:
        got = box.call("reed_file", {})
        assert got.startswith("ERROR: unknown tool 'reed_file'; did you mean read_file? "
                              "available tools: list_dir, read_file"), got
        assert box.call("zzz", {}).startswith("ERROR: unknown tool 'zzz'; available tools: ")
    with pytest.raises(ValueError, match=r"unknown task field\(s\) promt; did you mean "
                                        r"prompt\? allowed: id"):
        Task.from_dict({"id": "a", "repo": "r", "promt": "p"})
    done = subprocess.run([sys.executable, "-m", "yggdrasil.loki", "cofig"],
                          env=child_env(tmp_path), capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "did you mean config?" in done.stderr
    assert done.stderr.count("\n") == 1
