"""Settings from layers: defaults < user file < project file < environment < command line.

Each layer is a flat mapping of dotted fields (``fence.sandbox``) to values, read from a
TOML table (``[fence] sandbox = "require"``; ``[profiles.ci.fence]`` for a profile), from
``LOKI_<GROUP>__<FIELD>`` variables, or given by flags and keywords. Lists of globs and
folders add to what the layers below set, rules of a higher layer come first, tables
(``env``, ``hosts``, ``mcp_servers``) merge by key; anything else is replaced.

A project's file (``loki.toml`` in the root, or ``[tool.loki]`` in its ``pyproject.toml``)
is written by whoever wrote the repository, so unless the user trusts it (``loki trust``:
its path and a hash of its table in the user's configuration folder) it may only tighten:
:func:`tightens` judges each field, and what would loosen is ignored with a warning.
"""

from __future__ import annotations

import json
import os
import tomllib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from ..files import SETTINGS_FILE
from ._model import Group, Settings, SettingsError, explain, field_names, put
from ._tighten import tightens, untrusted_rules

APPEND = frozenset({"policy.protect", "fence.hidden", "fence.writable", "fence.unix_sockets"})  # a layer adds to these
PREPEND = frozenset({"policy.rules"})  # a higher layer's rules are matched first
MERGE = frozenset({"fence.env", "fence.hosts", "mcp_servers", "diagnostics.servers"})  # tables merge by key
PROJECT_FILE = SETTINGS_FILE  # the one file no tool or command of the agent may change
TRUST_FILE = "trusted.json"
_LEGACY_ENV = {"LOKI_ENGINE": "agent.engine", "LOKI_MODEL": "agent.model",
               "LOKI_BASE_URL": "agent.base_url", "LOKI_CODE_CACHE": "code.cache"}


@dataclass(frozen=True)
class Layer:
    """One source of settings: its dotted values, where they came from, and whether it may
    loosen what the layers below set."""

    label: str
    values: dict[str, Any]
    trusted: bool = True


def config_dir(env: Mapping[str, str]) -> Path:
    """The user's configuration folder: ``$XDG_CONFIG_HOME/loki`` or ``~/.config/loki``."""
    base = env.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return Path(base) / "loki"


def user_file(env: Mapping[str, str]) -> Path:
    """The user's file: ``$LOKI_CONFIG``, or ``config.toml`` in :func:`config_dir`."""
    return Path(env["LOKI_CONFIG"]) if env.get("LOKI_CONFIG") else config_dir(env) / "config.toml"


def project_tables(root: Path) -> Iterator[tuple[Path, dict[str, Any]]]:
    """The project's settings tables: ``loki.toml`` and ``[tool.loki]`` of
    ``pyproject.toml`` in ``root`` (both, when both exist; loki.toml is read last)."""
    pyproject = root / "pyproject.toml"
    if pyproject.is_file():
        table = read_toml(pyproject).get("tool", {}).get("loki")
        if isinstance(table, dict):
            yield pyproject, table
    own = root / PROJECT_FILE
    if own.is_file():
        yield own, read_toml(own)


def read_toml(path: Path) -> dict[str, Any]:
    """A TOML file's table; SettingsError names the file and what is wrong."""
    try:
        with open(path, "rb") as fh:
            return tomllib.load(fh)
    except tomllib.TOMLDecodeError as exc:
        raise SettingsError(f"{path}: not valid TOML: {exc}") from None
    except OSError as exc:
        raise SettingsError(f"{path}: cannot read it: {exc.strerror}") from None


def table_hash(table: Mapping[str, Any]) -> str:
    """What trust is keyed by: the table's content, not the file's bytes, so an edit
    elsewhere in pyproject.toml (a dependency) keeps the trust and one to the table ends it."""
    import hashlib
    canonical = json.dumps(table, sort_keys=True, default=str, ensure_ascii=True)
    return hashlib.sha256(canonical.encode()).hexdigest()


def trusted(env: Mapping[str, str]) -> dict[str, str]:
    """The user's trusted project tables: path -> hash."""
    path = config_dir(env) / TRUST_FILE
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return {str(k): str(v) for k, v in data.items()} if isinstance(data, dict) else {}


def trust(root: str | os.PathLike[str], env: Mapping[str, str] | None = None, *,
          revoke: bool = False) -> list[Path]:
    """Trust (or stop trusting) the project files of ``root`` as they are now; the files."""
    env = os.environ if env is None else env
    known = trusted(env)
    files = []
    for path, table in project_tables(Path(root).resolve()):
        files.append(path)
        if revoke:
            known.pop(str(path), None)
        else:
            known[str(path)] = table_hash(table)
    folder = config_dir(env)
    folder.mkdir(parents=True, exist_ok=True)
    tmp = folder / f".{TRUST_FILE}.{os.getpid()}"
    tmp.write_text(json.dumps(known, indent=2, sort_keys=True) + "\n")
    os.replace(tmp, folder / TRUST_FILE)
    return files


def file_layers(path: Path, table: dict[str, Any], kind: str, profile: str | None,
                is_trusted: bool) -> list[Layer]:
    """A file's base table, then its ``[profiles.<profile>]`` table, as layers."""
    table = dict(table)
    profiles = table.pop("profiles", {})
    if not isinstance(profiles, dict):
        raise SettingsError(f"{path}: 'profiles' must be a table of tables ([profiles.ci])")
    layers = [Layer(f"{kind}: {path}", flatten(table, path), is_trusted)]
    if profile and isinstance(profiles.get(profile), dict):
        layers.append(Layer(f"{kind}: {path} (profile {profile})",
                            flatten(profiles[profile], path), is_trusted))
    return layers


def flatten(table: Mapping[str, Any], where: Path | str) -> dict[str, Any]:
    """``{"fence": {"sandbox": "off"}}`` -> ``{"fence.sandbox": "off"}``; an unknown key
    is a SettingsError that lists the known ones."""
    known = field_names()
    flat: dict[str, Any] = {}
    for key, value in table.items():
        group = Settings.model_fields.get(key)
        kind = group.annotation if group else None
        if isinstance(kind, type) and issubclass(kind, Group) and isinstance(value, dict):
            for sub, inner in value.items():
                flat[f"{key}.{sub}"] = inner
        else:
            flat[key] = value
    for name in flat:
        if name not in known:
            raise SettingsError(f"{where}: unknown setting {name!r}; the settings are: "
                                f"{', '.join(known)}")
    return flat


def env_layer(env: Mapping[str, str]) -> Layer:
    """``LOKI_FENCE__SANDBOX=require``, ``LOKI_READ_ONLY=1``, and the older
    ``LOKI_ENGINE``/``LOKI_MODEL``/``LOKI_BASE_URL``/``LOKI_CODE_CACHE``."""
    names = {name.upper().replace(".", "__"): name for name in field_names()}
    values = {}
    for var, text in env.items():
        if not var.startswith("LOKI_"):
            continue
        dotted = _LEGACY_ENV.get(var) or names.get(var[len("LOKI_"):])
        if dotted and text != "":
            values[dotted] = _env_value(text)
    return Layer("environment", values)


def _env_value(text: str) -> Any:
    """JSON when it reads as JSON (lists, tables, numbers, true/false), else the text."""
    try:
        return json.loads(text)
    except ValueError:
        return text


def combine(layers: list[Layer], base: Settings | None = None) -> Settings:
    """The settings the layers make, each applied over the ones below it."""
    current = base or Settings()
    values: dict[str, Any] = {}
    origins: dict[str, str] = {}
    warnings: list[str] = []
    for layer in layers:
        for dotted, value in layer.values.items():
            candidate = _merged(values, dotted, value, layer)
            made = _validate(candidate, layer.label)
            if not layer.trusted:
                if dotted == "policy.rules":
                    kept, dropped = untrusted_rules(value)
                    if dropped:
                        warnings.append(_ignored(layer, dotted, f"allow rules {dropped}"))
                    candidate = _merged(values, dotted, kept, layer, append_rules=True)
                    made = _validate(candidate, layer.label)
                elif not tightens(dotted, _get(current, dotted), _get(made, dotted)):
                    warnings.append(_ignored(layer, dotted, repr(value)))
                    continue
            values, current = candidate, made
            origins[dotted] = layer.label
    current._origins = origins
    current._warnings = tuple(warnings)
    return current


def _ignored(layer: Layer, dotted: str, what: str) -> str:
    return (f"ignored {dotted} = {what} from {layer.label.split(': ', 1)[-1]}: an untrusted "
            "project may only tighten the settings (`loki trust` to trust it as it is now)")


def _merged(values: dict[str, Any], dotted: str, value: Any, layer: Layer, *,
            append_rules: bool = False) -> dict[str, Any]:
    merged = dict(values)
    old = values.get(dotted)
    if dotted in APPEND and old is not None:
        merged[dotted] = [*old, *_as_list(value, dotted, layer)]
    elif dotted in PREPEND and old is not None:
        new = _as_list(value, dotted, layer)
        if append_rules:  # an untrusted project's deny rules first, its ask rules last
            denies = [r for r in new if _action(r) == "deny"]
            merged[dotted] = [*denies, *old, *(r for r in new if _action(r) != "deny")]
        else:
            merged[dotted] = [*new, *old]
    elif dotted in MERGE and isinstance(old, dict) and isinstance(value, dict):
        merged[dotted] = {**old, **value}
    else:
        merged[dotted] = value
    return merged


def _action(rule: Any) -> Any:
    return rule[0] if isinstance(rule, (list, tuple)) and rule else None


def _as_list(value: Any, dotted: str, layer: Layer) -> list[Any]:
    if isinstance(value, str) or not isinstance(value, (list, tuple)):
        raise SettingsError(f"{layer.label.split(': ', 1)[-1]}: {dotted} must be a list, "
                            f"got {value!r}")
    return list(value)


def _validate(values: dict[str, Any], label: str) -> Settings:
    data: dict[str, Any] = {}
    for dotted, value in values.items():
        put(data, dotted, value)
    for name in ("fence.hidden", "policy.protect"):  # the layers add to the defaults
        if name in values:
            put(data, name, [*_get(Settings(), name), *values[name]])
    try:
        return Settings.model_validate(data)
    except ValidationError as exc:
        raise SettingsError(explain(exc, label.split(": ", 1)[-1])) from None


def _get(settings: Settings, dotted: str) -> Any:
    value: Any = settings
    for part in dotted.split("."):
        value = getattr(value, part)
    return value
