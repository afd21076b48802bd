"""Every error contextfold raises on purpose.

```
ContextfoldError
├── UsageError                  the caller misused the API (a bad setting, a wrong argument)
│   ├── ConfigError             a setting's value is invalid; the message names the setting
│   ├── UnknownModelError       no registry entry for a model; suggests close names
│   └── MissingDependencyError  an optional extra is not installed; names the extra
├── FormatError                 a transcript or payload could not be read; names file and line
│   └── UnknownFormatError      the content matches no supported format; lists them
├── HistoryError                a message list breaks a provider rule; names index and call id
├── RefNotFoundError            ``read_result`` got a ref this session does not hold
├── StoreError                  the session store failed
│   ├── SessionNotFoundError    no session with that id
│   ├── MessageNotFoundError    the session holds no message with that id
│   ├── ConcurrentWriteError    another writer wrote to the same session first
│   ├── SchemaVersionError      the database was written by a newer contextfold
│   └── StoreCorruptError       the file is not a contextfold database, or is damaged
└── ProviderError               a model provider failed
    ├── ContextOverflowError    the request did not fit the model's window; carries figures
    ├── RateLimitError          429, overloaded; carries ``retry_after`` when the provider said
    ├── AuthenticationError     401/403; names the environment variable to set
    └── ProviderUnavailableError  5xx, timeouts, connection failures after retries
```
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from importlib import metadata
from pathlib import Path

__all__ = [
    "AuthenticationError",
    "ConcurrentWriteError",
    "ConfigError",
    "ContextOverflowError",
    "ContextfoldError",
    "FormatError",
    "HistoryError",
    "MessageNotFoundError",
    "MissingDependencyError",
    "ProviderError",
    "ProviderUnavailableError",
    "RateLimitError",
    "RefNotFoundError",
    "SchemaVersionError",
    "SessionNotFoundError",
    "StoreCorruptError",
    "StoreError",
    "UnknownFormatError",
    "UnknownModelError",
    "UsageError",
    "install_hint",
]


class ContextfoldError(Exception):
    """Base class of every error raised by contextfold."""


# -- misuse ----------------------------------------------------------------------------------------


class UsageError(ContextfoldError):
    """The library was called in a way it does not support."""


class ConfigError(UsageError, ValueError):
    """A setting has an invalid value. ``setting`` names it (e.g. ``"thresholds.mask_at"``)."""

    def __init__(self, setting: str, message: str) -> None:
        self.setting = setting
        self.detail = message
        super().__init__(f"{setting}: {message}")

    def __reduce__(self) -> tuple[type[ConfigError], tuple[str, str]]:
        # Rebuilt from its two arguments, so it crosses a process boundary (a worker pool)
        # as itself rather than as an error about its constructor.
        return (type(self), (self.setting, self.detail))


class UnknownModelError(UsageError, LookupError):
    """A model name is not in the registry."""

    def __init__(self, model: str, suggestions: Sequence[str] = ()) -> None:
        self.model = model
        self.suggestions = tuple(suggestions)
        hint = f" Did you mean: {', '.join(self.suggestions)}?" if self.suggestions else ""
        super().__init__(
            f"unknown model {model!r}.{hint} Give the window explicitly with "
            f"--window N (CLI), ModelInfo(name=..., context_window=N) (library), "
            f'or a [models."{model}"] table in contextfold.toml.'
        )


class MissingDependencyError(UsageError, ImportError):
    """An optional extra is needed for this feature."""

    def __init__(self, package: str, extra: str) -> None:
        self.package = package
        self.extra = extra
        super().__init__(f"{package!r} is not installed; install it with: {install_hint(extra)}")


def install_hint(extra: str) -> str:
    """The ``pip install`` line that adds an extra to this installation: from the checkout it
    runs from (``pip install "/path/to/contextfold[proxy]"``), else the extra's packages by
    name (contextfold itself is not on PyPI)."""
    checkout = Path(__file__).resolve().parents[2]
    if (checkout / "pyproject.toml").is_file() and (checkout / "src" / "contextfold").is_dir():
        return f'pip install "{checkout}[{extra}]"'
    try:
        wanted = metadata.requires("contextfold") or []
    except metadata.PackageNotFoundError:
        wanted = []
    marker = re.compile(rf"""extra\s*==\s*["']{re.escape(extra)}["']""")
    packages = [r.split(";")[0].strip() for r in wanted if marker.search(r)]
    return (
        "pip install " + " ".join(f'"{p}"' for p in packages)
        if packages
        else (f'pip install "contextfold[{extra}]"')
    )


# -- input -----------------------------------------------------------------------------------------


class FormatError(ContextfoldError, ValueError):
    """Content could not be read. ``path`` and ``line`` (1-based) say where, when known."""

    def __init__(self, message: str, *, path: str | None = None, line: int | None = None) -> None:
        self.path = path
        self.line = line
        self.reason = message
        where = path or "<input>"
        if line is not None:
            where = f"{where}:{line}"
        super().__init__(f"{where}: {message}")


class UnknownFormatError(FormatError):
    """The content matches none of the supported transcript formats."""

    def __init__(self, supported: Sequence[str], *, path: str | None = None) -> None:
        self.supported = tuple(supported)
        super().__init__(
            "not a transcript format contextfold knows; supported: " + ", ".join(self.supported),
            path=path,
        )


class HistoryError(ContextfoldError, ValueError):
    """A message list breaks a provider's rules (dangling call, orphan result, ...)."""

    def __init__(self, message: str, *, index: int | None = None, call_id: str | None = None):
        self.index = index
        self.call_id = call_id
        where = []
        if index is not None:
            where.append(f"message {index}")
        if call_id is not None:
            where.append(f"call {call_id!r}")
        prefix = f"{', '.join(where)}: " if where else ""
        super().__init__(prefix + message)


class RefNotFoundError(ContextfoldError, LookupError):
    """A stored-output reference is unknown to this session."""

    def __init__(self, ref: str, session_id: str | None = None) -> None:
        self.ref = ref
        self.session_id = session_id
        super().__init__(
            f"no stored output with ref {ref!r} in this session; refs look like 'ref_0123abcd4567' "
            "and appear in the notes that replaced an output"
        )


# -- store -----------------------------------------------------------------------------------------


class StoreError(ContextfoldError):
    """The session store failed."""


class SessionNotFoundError(StoreError, LookupError):
    """No session with this id."""

    def __init__(self, session_id: str) -> None:
        self.session_id = session_id
        super().__init__(
            f"no session with id {session_id!r}; `contextfold sessions list` shows them"
        )


class MessageNotFoundError(StoreError, LookupError):
    """The session has no message with this id."""

    def __init__(self, message_id: str, session_id: str) -> None:
        self.message_id = message_id
        self.session_id = session_id
        super().__init__(f"session {session_id!r} holds no message with id {message_id!r}")


class ConcurrentWriteError(StoreError):
    """Another writer wrote to this session (messages or edits) since the caller last saw it.

    ``expected_edit`` and ``actual_edit`` are the last edit numbers when the caller named one.
    """

    def __init__(
        self,
        session_id: str,
        expected_seq: int,
        actual_seq: int,
        *,
        expected_edit: int | None = None,
        actual_edit: int | None = None,
    ) -> None:
        self.session_id = session_id
        self.expected_seq = expected_seq
        self.actual_seq = actual_seq
        self.expected_edit = expected_edit
        self.actual_edit = actual_edit
        seen = f"expected last seq {expected_seq}, found {actual_seq}"
        if expected_edit is not None and expected_edit != actual_edit:
            seen = (
                f"expected last seq {expected_seq} and last edit {expected_edit}, found "
                f"{actual_seq} and {actual_edit}"
            )
        super().__init__(
            f"session {session_id!r} was written by someone else: {seen}. Nothing was written; "
            "reload (resume) the session before writing to it again."
        )


class SchemaVersionError(StoreError):
    """The database schema is newer than this version of contextfold understands."""

    def __init__(self, location: str, found: int, supported: int) -> None:
        self.location = location
        self.found = found
        self.supported = supported
        super().__init__(
            f"{location}: schema version {found} is newer than this contextfold supports "
            f"({supported}); upgrade contextfold"
        )


class StoreCorruptError(StoreError):
    """The database is not a contextfold store or is damaged."""

    def __init__(self, location: str, detail: str) -> None:
        self.location = location
        super().__init__(f"{location}: {detail}")


# -- providers -------------------------------------------------------------------------------------


class ProviderError(ContextfoldError):
    """A model provider returned an error. ``status`` is the HTTP status when there was one."""

    def __init__(self, message: str, *, provider: str = "", status: int | None = None) -> None:
        self.provider = provider
        self.status = status
        super().__init__(message)


class ContextOverflowError(ProviderError):
    """The request was larger than the model accepts.

    ``prompt_tokens`` and ``limit`` carry the provider's figures when its message gave them;
    ``max_tokens_adjustable`` is true when lowering ``max_tokens`` alone would make it fit.
    """

    def __init__(
        self,
        message: str,
        *,
        provider: str = "",
        status: int | None = None,
        prompt_tokens: int | None = None,
        limit: int | None = None,
        max_tokens_adjustable: bool = False,
    ) -> None:
        self.prompt_tokens = prompt_tokens
        self.limit = limit
        self.max_tokens_adjustable = max_tokens_adjustable
        super().__init__(message, provider=provider, status=status)


class RateLimitError(ProviderError):
    """The provider asked us to slow down. ``retry_after`` is in seconds when known."""

    def __init__(
        self,
        message: str,
        *,
        provider: str = "",
        status: int | None = 429,
        retry_after: float | None = None,
    ) -> None:
        self.retry_after = retry_after
        super().__init__(message, provider=provider, status=status)


class AuthenticationError(ProviderError):
    """The provider refused our credentials. ``env_var`` names where the key is read from."""

    def __init__(
        self, message: str, *, provider: str = "", status: int | None = 401, env_var: str = ""
    ) -> None:
        self.env_var = env_var
        if env_var:
            message = f"{message} (set {env_var}, or pass api_key=...)"
        super().__init__(message, provider=provider, status=status)


class ProviderUnavailableError(ProviderError):
    """The provider could not be reached or kept failing after retries."""
