from __future__ import annotations

from pathlib import Path

import pytest

from contextfold.config import load_settings
from contextfold.errors import ConfigError


def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def test_precedence_user_file_project_file_env_arguments(tmp_path: Path) -> None:
    user = _write(
        tmp_path / "user" / "config.toml",
        'model = "openai/gpt-4o"\nwindow = 1000\npreset = "window"\n',
    )
    project = tmp_path / "proj" / "sub"
    project.mkdir(parents=True)
    _write(tmp_path / "proj" / "contextfold.toml", "window = 2000\n[thresholds]\nmask_at = 0.5\n")
    settings = load_settings(
        {"preset": "summarize", "model": None},
        cwd=project,
        environ={"CONTEXTFOLD_WINDOW": "3000", "CONTEXTFOLD_THRESHOLDS__COMPACT_AT": "0.7"},
        user_file=user,
    )
    assert settings.get("model") == "openai/gpt-4o"
    assert settings.source("model") == str(user)
    assert settings.get("window") == 3000
    assert settings.source("window") == "env CONTEXTFOLD_WINDOW"
    assert settings.get("preset") == "summarize"
    assert settings.source("preset") == "argument preset"
    assert settings.section("thresholds") == {"mask_at": 0.5, "compact_at": 0.7}
    assert settings.source("approval") == "default"


def test_database_url_env_sets_the_store(tmp_path: Path) -> None:
    settings = load_settings(cwd=tmp_path, environ={"CONTEXTFOLD_DATABASE_URL": "postgresql://x/y"})
    assert settings.get("store") == "postgresql://x/y"


def test_per_model_tables(tmp_path: Path) -> None:
    _write(tmp_path / "contextfold.toml", '[models."local/qwen"]\ncontext_window = 32768\n')
    settings = load_settings(cwd=tmp_path, environ={})
    assert settings.models == {"local/qwen": {"context_window": 32768}}


def test_bad_values_name_the_setting_and_source(tmp_path: Path) -> None:
    with pytest.raises(
        ConfigError, match=r"window: expected int, got 'big' \(from env CONTEXTFOLD_WINDOW\)"
    ):
        load_settings(cwd=tmp_path, environ={"CONTEXTFOLD_WINDOW": "big"})
    with pytest.raises(ConfigError, match="approval: must be one of ask, auto, read-only"):
        load_settings({"approval": "sometimes"}, cwd=tmp_path, environ={})
    _write(tmp_path / "contextfold.toml", "[thresholds]\nmask_att = 0.5\n")
    with pytest.raises(ConfigError, match=r"did you mean thresholds\.mask_at"):
        load_settings(cwd=tmp_path, environ={})


def test_invalid_toml_names_the_file(tmp_path: Path) -> None:
    path = _write(tmp_path / "contextfold.toml", "window = \n")
    with pytest.raises(ConfigError, match=str(path)):
        load_settings(cwd=tmp_path, environ={})


def test_api_keys_come_from_the_providers_variables(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "k-1")
    settings = load_settings(cwd=tmp_path, environ={})
    assert settings.api_key("anthropic") == "k-1"
    assert settings.api_key("openai") is None or isinstance(settings.api_key("openai"), str)
    assert load_settings({"api_key": "k-2"}, cwd=tmp_path, environ={}).api_key("anthropic") == "k-2"


def test_booleans_and_underscored_ints(tmp_path: Path) -> None:
    settings = load_settings(
        cwd=tmp_path, environ={"CONTEXTFOLD_REDACT": "off", "CONTEXTFOLD_WINDOW": "128_000"}
    )
    assert settings.get("redact") is False
    assert settings.get("window") == 128000
