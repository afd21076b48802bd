"""The environment a tool's command runs in: this process's, without its credentials.

What a command prints goes to a model provider and into the session store, so ``env``, a debug
print or a failing connection must not carry a key along. A variable is taken out when its name
matches one of :data:`CREDENTIAL_ENV_PATTERNS`, or when its value holds a password (a URL with
``user:password@``, a connection string with ``Password=`` or ``AccountKey=``). Everything else
passes unchanged: ``PATH``, ``HOME``, ``LANG``, proxies and URLs without a password. Names the
user allows (the ``tools.env_allow`` setting) pass whatever they look like.
"""

from __future__ import annotations

import fnmatch
import os
import re
from collections.abc import Collection, Mapping

__all__ = ["CREDENTIAL_ENV_PATTERNS", "is_credential", "without_credentials"]

CREDENTIAL_ENV_PATTERNS: tuple[str, ...] = (
    # API keys and other keys: OPENAI_API_KEY, STRIPE_KEY, SSH_PRIVATE_KEY, MINIO_ACCESS_KEY.
    "*API_KEY*",
    "*APIKEY*",
    "*_KEY",
    "*PRIVATE_KEY*",
    "*ACCESS_KEY*",
    # Tokens: GITHUB_TOKEN, HF_TOKEN, SLACK_BOT_TOKEN, NPM_CONFIG__AUTHTOKEN.
    "TOKEN",
    "*_TOKEN",
    "*_TOKEN_*",
    "*AUTHTOKEN*",
    # Secrets and passwords: CLIENT_SECRETS, DJANGO_SECRET_KEY, PGPASSWORD, MYSQL_PWD, SMTP_PASS.
    "*SECRET*",
    "*PASSWORD*",
    "*PASSWD*",
    "*PASSPHRASE*",
    "*_PASS",
    "*_PWD",
    # Credential files and blobs: GOOGLE_APPLICATION_CREDENTIALS, COMPOSER_AUTH, NPM_CONFIG__AUTH.
    "*CREDENTIAL*",
    "*_AUTH",
    # Cloud accounts and databases as a whole: the AWS variables, DATABASE_URL (with or without
    # a password in it: the database is the user's, not the agent's).
    "AWS_*",
    "*DATABASE_URL",
)
"""Names of variables that commands never see (shell-style patterns, matched ignoring case).

``*`` matches any run of characters, so ``*_KEY`` takes ``STRIPE_KEY`` but not ``KEYTIMEOUT``,
and ``*_PWD`` takes ``MYSQL_PWD`` but not ``PWD`` or ``OLDPWD``. The providers' key variables
(``OPENAI_API_KEY``, ``ANTHROPIC_API_KEY``, ``OPENROUTER_API_KEY``...) all match ``*API_KEY*``."""

_CREDENTIAL_NAME = re.compile(
    "|".join(fnmatch.translate(pattern) for pattern in CREDENTIAL_ENV_PATTERNS), re.IGNORECASE
)
# scheme://user:password@host (the user may be empty: redis://:password@host).
_URL_PASSWORD = re.compile(r"://[^/\s:@]*:[^/\s@]+@")
# Password=..., AccountKey=... in a connection string or a URL's query.
_KEYED_PASSWORD = re.compile(
    r"(?:^|[;&?\s])(?:password|passwd|pwd|accountkey|sharedaccesskey|sharedaccesssignature)=",
    re.IGNORECASE,
)


def is_credential(name: str, value: str) -> bool:
    """True when the variable ``name=value`` looks like a credential: by its name
    (:data:`CREDENTIAL_ENV_PATTERNS`) or by a password in its value."""
    if _CREDENTIAL_NAME.match(name):
        return True
    return bool(_URL_PASSWORD.search(value) or _KEYED_PASSWORD.search(value))


def without_credentials(
    environ: Mapping[str, str] | None = None, *, allow: Collection[str] = ()
) -> dict[str, str]:
    """``environ`` (default: this process's) without the variables that look like credentials
    (:func:`is_credential`); names in ``allow`` are kept whatever they look like."""
    source = os.environ if environ is None else environ
    return {
        name: value
        for name, value in source.items()
        if name in allow or not is_credential(name, value)
    }
