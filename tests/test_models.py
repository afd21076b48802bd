from __future__ import annotations

import datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from contextfold import ConfigError, UnknownModelError, Usage
from contextfold.model_registry import ModelInfo, ModelRegistry, default_registry, model_for_window


@pytest.fixture
def registry() -> ModelRegistry:
    return default_registry().copy()


@pytest.mark.parametrize(
    ("written", "key"),
    [
        ("gpt-4o", "openai/gpt-4o"),
        ("openai/gpt-4o", "openai/gpt-4o"),
        ("GPT-4o", "openai/gpt-4o"),
        ("gpt-4o-2024-08-06", "openai/gpt-4o"),
        ("gpt-4.1-mini-2025-04-14", "openai/gpt-4.1-mini"),
        ("o4-mini", "openai/o4-mini"),
        ("gpt-5", "openai/gpt-5"),
        ("claude-sonnet-4-5-20250929", "anthropic/claude-sonnet-4-5"),
        ("anthropic/claude-opus-4-6", "anthropic/claude-opus-4-6"),
        ("claude-3-5-sonnet-latest", "anthropic/claude-3-5-sonnet"),
        ("openrouter/anthropic/claude-3.7-sonnet", "anthropic/claude-3-7-sonnet"),
        ("claude-opus-4.1:thinking", "anthropic/claude-opus-4-1"),
        ("gemini-3-pro-preview", "google/gemini-3-pro"),
        ("deepseek/deepseek-chat", "deepseek/deepseek-chat"),
        ("deepseek-r1", "deepseek/deepseek-reasoner"),
        ("llama3.1:70b", "meta/llama-3.1"),
        ("qwen2.5-coder:32b", "qwen/qwen2.5"),
        ("qwen3-coder-480b-a35b-instruct", "qwen/qwen3-coder"),
    ],
)
def test_lookup_accepts_the_ways_people_write_names(
    registry: ModelRegistry, written: str, key: str
) -> None:
    assert registry.get(written).key == key


def test_model_in_the_shared_data_is_known(registry: ModelRegistry) -> None:
    opus = registry.get("claude-opus-4-6")
    assert opus.context_window >= 200_000
    assert opus.min_cacheable_tokens == 4_096
    assert opus.tokenizer == "anthropic"


def test_every_builtin_model_is_sane(registry: ModelRegistry) -> None:
    assert len(registry) >= 30
    for info in registry:
        assert info.max_output_tokens <= info.context_window, info.name
        if info.provider == "openai" and info.tokenizer == "o200k_base":
            assert info.min_cacheable_tokens == 1_024
        if info.input_price is not None and info.cache_read_price is not None:
            assert info.cache_read_price < info.input_price, info.name


def test_unknown_model_suggests_close_names_and_the_way_out(registry: ModelRegistry) -> None:
    with pytest.raises(UnknownModelError) as caught:
        registry.get("claude-sonet-4-5")
    assert "claude-sonnet-4-5" in caught.value.suggestions
    assert "--window" in str(caught.value)
    assert "claude-sonet-4-5" not in registry


def test_register_overrides_and_adds(registry: ModelRegistry) -> None:
    registry.register(ModelInfo("my-local", 32_768, provider="ollama", aliases=("mine",)))
    assert registry.get("mine").context_window == 32_768
    assert registry.get("ollama/my-local").name == "my-local"


def test_overrides_from_a_parsed_toml_table(registry: ModelRegistry) -> None:
    registry.update_from_mapping(
        {
            "models": {
                "gpt-4o": {"context_window": 64_000},
                "vllm/my-model": {"context_window": 16_384, "max_output_tokens": 2_048},
            }
        }
    )
    gpt = registry.get("gpt-4o")
    assert gpt.context_window == 64_000
    assert gpt.input_price == 2.50  # the fields not overridden are kept
    assert registry.get("my-model").provider == "vllm"
    assert default_registry().get("gpt-4o").context_window == 128_000  # the copy only


@pytest.mark.parametrize(
    ("table", "setting"),
    [
        ({"new-model": {"max_output_tokens": 10}}, "models.new-model.context_window"),
        ({"gpt-4o": {"context_windw": 10}}, "models.gpt-4o.context_windw"),
        ({"gpt-4o": {"context_window": -5}}, "models.gpt-4o.context_window"),
        ({"gpt-4o": {"input_price": -1.0}}, "models.gpt-4o.input_price"),
        ({"gpt-4o": 12}, "models.gpt-4o"),
    ],
)
def test_bad_overrides_name_the_setting(
    registry: ModelRegistry, table: dict[str, object], setting: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        registry.update_from_mapping({"models": table})
    assert caught.value.setting == setting


def test_model_for_window_reserves_a_sane_output() -> None:
    small = model_for_window(8_192)
    assert small.context_window == 8_192
    assert small.max_output_tokens == 2_048
    assert model_for_window(200_000).max_output_tokens == 4_096
    assert model_for_window(50_000, max_output_tokens=1_000).max_output_tokens == 1_000


def test_cost_uses_cache_prices(registry: ModelRegistry) -> None:
    sonnet = registry.get("claude-sonnet-4-5")
    usage = Usage(input_tokens=1_000_000, output_tokens=100_000, cache_read_tokens=800_000)
    # 200K fresh at $3, 800K cached at $0.30, 100K out at $15
    assert sonnet.cost(usage) == pytest.approx(0.6 + 0.24 + 1.5)
    assert registry.get("llama-3.3").cost(usage) is None


@given(
    st.sampled_from(sorted(m.name for m in default_registry())),
    st.dates(datetime.date(2023, 1, 1), datetime.date(2030, 12, 31)),
    st.sampled_from(["-%Y%m%d", "-%Y-%m-%d", "@%Y%m%d"]),
)
def test_any_dated_name_finds_its_model(name: str, date: datetime.date, style: str) -> None:
    assert default_registry().get(name + date.strftime(style)).name == name
