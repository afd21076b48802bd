"""``contextfold config show``: every setting's value and where it came from."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from contextfold import ConfigError, UsageError
from contextfold.budget import Thresholds
from contextfold.cli import app
from contextfold.cli.config_cmd import setting_defaults
from contextfold.compaction.pipeline import PRESETS
from contextfold.config import SETTINGS
from contextfold.engine import ContextPolicy
from contextfold.outputs.intake import OutputLimits
from contextfold.paths import config_dir, default_store_path

runner = CliRunner()


def rows(*args: str) -> dict[str, dict[str, Any]]:
    result = runner.invoke(app, ["config", "show", "--json", *args])
    assert result.exit_code == 0, result.output
    return {row["key"]: row for row in json.loads(result.stdout)["settings"]}


def test_defaults_come_from_the_owning_classes() -> None:
    shown = rows()
    assert set(shown) == set(SETTINGS)
    assert shown["thresholds.mask_at"]["value"] == Thresholds().mask_at
    assert shown["thresholds.compact_target"]["value"] == Thresholds().compact_target
    assert shown["outputs.max_lines"]["value"] == OutputLimits().max_lines
    assert shown["outputs.offload_above_bytes"]["value"] == OutputLimits().offload_above_bytes
    assert shown["store"]["value"] == str(default_store_path())
    assert shown["tools.description_budget"]["value"] == ContextPolicy().tool_budget_share
    assert shown["preset"]["value"] in PRESETS
    assert shown["summarizer"]["value"] in SETTINGS["summarizer"].choices
    assert all(shown[key]["source"] == "default" for key in setting_defaults())
    assert shown["model"]["source"] == "not set"


def test_every_source_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    user_file = config_dir() / "config.toml"
    user_file.parent.mkdir(parents=True, exist_ok=True)
    user_file.write_text('model = "openai/gpt-4o"\n[outputs]\nmax_lines = 100\n', encoding="utf-8")
    project = tmp_path / "contextfold.toml"
    project.write_text("[thresholds]\nmask_at = 0.5\n[outputs]\nmax_lines = 120\n", "utf-8")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("CONTEXTFOLD_WINDOW", "32000")
    shown = rows("--set", "preset=window")
    assert (shown["model"]["value"], shown["model"]["source"]) == ("openai/gpt-4o", str(user_file))
    assert (shown["outputs.max_lines"]["value"], shown["outputs.max_lines"]["source"]) == (
        120,
        str(project),  # the project file wins over the user file
    )
    assert shown["thresholds.mask_at"]["source"] == str(project)
    assert shown["thresholds.mask_at"]["default"] == Thresholds().mask_at
    assert (shown["window"]["value"], shown["window"]["source"]) == (
        32_000,
        "env CONTEXTFOLD_WINDOW",
    )
    assert (shown["preset"]["value"], shown["preset"]["source"]) == ("window", "argument preset")
    assert shown["thresholds.compact_at"]["source"] == "default"

    table = runner.invoke(app, ["config", "show"]).stdout
    (line,) = [row for row in table.splitlines() if row.startswith("thresholds.mask_at ")]
    assert line.split() == ["thresholds.mask_at", "0.5", str(project)]
    assert f"config files read: {user_file}, {project}" in table


def test_api_key_is_never_printed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "contextfold.toml").write_text('api_key = "sk-file-secret"\n', "utf-8")
    result = runner.invoke(app, ["config", "show"])
    assert "sk-file-secret" not in result.stdout
    shown = rows()
    assert shown["api_key"]["value"] == "(set, hidden)"


def test_bad_assignments_are_usage_errors() -> None:
    result = runner.invoke(app, ["config", "show", "--set", "preset"])
    assert isinstance(result.exception, UsageError)
    result = runner.invoke(app, ["config", "show", "--set", "thresholds.mask_att=0.5"])
    assert isinstance(result.exception, ConfigError)
    assert "thresholds.mask_at" in str(result.exception)  # did you mean
