"""Where contextfold keeps user files.

``CONTEXTFOLD_HOME`` (if set) holds everything: ``$CONTEXTFOLD_HOME/config`` and
``$CONTEXTFOLD_HOME/data``; tests point it at a temporary folder so they never touch the real
home. Otherwise the platform's user config and data folders are used (via platformdirs).
"""

from __future__ import annotations

import os
from pathlib import Path

import platformdirs

__all__ = ["config_dir", "data_dir", "default_store_path"]

_APP = "contextfold"


def _home() -> Path | None:
    value = os.environ.get("CONTEXTFOLD_HOME")
    return Path(value).expanduser() if value else None


def config_dir() -> Path:
    """The user's contextfold config folder (global AGENTS.md, config.toml); not created."""
    home = _home()
    return home / "config" if home else platformdirs.user_config_path(_APP)


def data_dir() -> Path:
    """The user's contextfold data folder (the default session database); not created."""
    home = _home()
    return home / "data" if home else platformdirs.user_data_path(_APP)


def default_store_path() -> Path:
    """The default SQLite session database."""
    return data_dir() / "sessions.db"
