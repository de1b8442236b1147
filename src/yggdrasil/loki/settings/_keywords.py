"""The keywords of ``filesystem_toolbox`` (and ``Fleet``), as ways to fill :class:`Settings`.

Each keyword sets the one field whose declaration names it (``Setting(keyword=...)``:
``sandbox`` -> ``fence.sandbox``, ``job_lifetime`` -> ``jobs.lifetime``); a keyword that is
given replaces the field, whatever the settings said (``protect=()`` turns protection
off, ``hidden=None`` means the default list).
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import cache
from typing import Any, TypedDict

from ..results import did_you_mean
from ._model import Settings, setting_fields


@cache
def keyword_fields() -> dict[str, str]:
    """keyword -> dotted field, from the fields' declarations."""
    return {spec.setting.keyword: dotted for dotted, spec in setting_fields().items()
            if spec.setting.keyword}


def _keywords_type() -> Any:
    """A TypedDict of the keywords and their fields' types (for ``typing.get_type_hints``
    and editors); the keywords are checked when given, by the model."""
    fields = setting_fields()
    return TypedDict("ToolboxKeywords",  # type: ignore[operator]
                     {k: fields[d].info.annotation for k, d in keyword_fields().items()},
                     total=False)


ToolboxKeywords = _keywords_type()
KEYWORD_FIELDS = keyword_fields()


def with_keywords(settings: Settings | None, keywords: Mapping[str, Any], *,
                  function: str = "filesystem_toolbox") -> Settings:
    """``settings`` (default: the defaults) with each given keyword's field replaced;
    TypeError for a keyword that is not one (naming the closest), SettingsError (a
    ValueError) for a value its field does not take."""
    known = keyword_fields()
    unknown = [k for k in keywords if k not in known]
    if unknown:
        hint = did_you_mean(unknown[0], known)
        raise TypeError(f"{function}() got unexpected keyword(s) {', '.join(sorted(unknown))}"
                        f"{hint}{' ' if hint else '; '}it takes root, settings and "
                        f"{', '.join(known)}")
    base = settings if settings is not None else Settings()
    if not keywords:
        return base
    shown = {field: keyword for keyword, field in known.items()}
    return base.with_values({known[k]: v for k, v in keywords.items()},
                            name=lambda field: shown.get(field, field))
