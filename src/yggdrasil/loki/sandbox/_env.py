"""The environment a command gets: the caller's, minus anything that looks like a secret.

A variable is withheld when its name says it holds a credential (KEY, TOKEN, SECRET,
PASSWORD, ... anywhere in the name; PASS, PWD, PW as a whole word: ``DB_PASS``,
``MYSQL_PWD``), when it belongs to a vendor whose variables are mostly credentials
(AWS_*, OPENAI_*, ANTHROPIC_*, ...), or when its value looks like one (a URL with a
password in it, even an empty user as in ``redis://:pw@host``; a ``?password=`` or
``&token=`` query parameter; a ``Bearer``/``Basic`` credential; a well-known token
prefix). Variables the caller passes explicitly are kept whatever their name: that is
how a user hands a command one secret on purpose.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

SECRET_WORDS = ("KEY", "TOKEN", "SECRET", "PASSWORD", "PASSWD", "PASSPHRASE", "CREDENTIAL",
                "AUTH", "COOKIE", "PRIVATE", "SIGNATURE", "CERT_PASS", "PGPASS")
SECRET_PREFIXES = ("AWS_", "OPENAI_", "ANTHROPIC_", "AZURE_", "GOOGLE_", "GCLOUD_", "GCP_",
                   "GITHUB_", "GH_", "GITLAB_", "HF_", "HUGGINGFACE", "COHERE_", "MISTRAL_",
                   "GROQ_", "DEEPSEEK_", "TOGETHER_", "REPLICATE_", "DATABRICKS_", "SNOWFLAKE_",
                   "SLACK_", "STRIPE_", "TWILIO_", "SENDGRID_", "NPM_", "PYPI_", "TWINE_",
                   "DOCKER_", "VAULT_", "CLOUDFLARE_", "DIGITALOCEAN_", "HEROKU_", "SENTRY_", "KRB5")
# Short words that say "secret" only as a whole word of the name (DB_PASS, not PASSTHROUGH).
SECRET_NAME_PARTS = frozenset({"PASS", "PWD", "PW", "PASSWD", "PASSWORDS", "CREDS", "APIKEY"})
# Names that match a word above but hold nothing secret and that tools rely on.
KEEP = frozenset({"PATH", "HOME", "LANG", "LANGUAGE", "TERM", "USER", "LOGNAME", "SHELL", "TZ",
                  "PWD", "COLUMNS", "LINES", "KEYTIMEOUT", "NO_COLOR", "FORCE_COLOR"})
_SECRET_VALUE = re.compile(
    r"://[^/\s:@]*:[^\s@]+@"  # scheme://user:password@host, scheme://:password@host
    r"|[?&;](?:password|passwd|pass|pwd|token|access_token|auth_token|api[_-]?key|secret"
    r"|client_secret|sig|signature)=[^&\s]"  # a credential in a query string
    r"|\b(?:Bearer|Basic|Token)\s+[\w.~+/=-]{8,}"  # an Authorization header's value
    r"|^(?:sk-|sk_live_|rk_live_|ghp_|gho_|ghs_|ghu_|github_pat_|glpat-|xox[abpr]-|AKIA|ASIA"
    r"|hf_|AIza|ya29\.|eyJ[\w-]{10,}\.)",
    re.IGNORECASE,
)
_NAME_PARTS = re.compile(r"[^A-Z0-9]+")


def is_secret(name: str, value: str) -> bool:
    upper = name.upper()
    if upper in KEEP or upper.startswith("LC_"):
        return False
    if upper.startswith(SECRET_PREFIXES) or any(word in upper for word in SECRET_WORDS):
        return True
    if SECRET_NAME_PARTS.intersection(_NAME_PARTS.split(upper)):
        return True
    return bool(_SECRET_VALUE.search(value))


def scrubbed(base: Mapping[str, str], explicit: Mapping[str, str] | None = None
             ) -> tuple[dict[str, str], list[str]]:
    """``base`` without its secrets, then ``explicit`` on top; also the withheld names."""
    env: dict[str, str] = {}
    withheld: list[str] = []
    for name, value in base.items():
        if is_secret(name, value):
            withheld.append(name)
        else:
            env[name] = value
    for name, value in (explicit or {}).items():
        env[str(name)] = str(value)
    return env, sorted(n for n in withheld if n not in env)
