"""The closed sets (provider, message kind, trigger, summary section, preset) and what turns
free text into them: unknown text is named in an error, or mapped to the set's catch-all."""

from __future__ import annotations

from typing import get_args

import pytest

from contextfold import ConfigError
from contextfold.compaction import (
    PRESETS,
    SECTION_NAMES,
    Compactor,
    PresetName,
    SectionName,
    preset_named,
)
from contextfold.config import SETTINGS
from contextfold.events import CompactionStarted, Trigger, event_from_dict
from contextfold.history.repair import history_rules_for, repair, validate
from contextfold.messages import MESSAGE_KINDS, Message, Meta
from contextfold.model_registry import PROVIDERS, ModelInfo, ModelRegistry, Provider, provider_named


def test_only_openais_own_api_gets_the_lenient_history_rules() -> None:
    rules = {provider: history_rules_for(provider) for provider in PROVIDERS}
    assert rules.pop("openai") == "openai"
    assert rules.pop("anthropic") == "anthropic"
    # Local servers render the history through a chat template that may refuse a view without
    # a user turn; an unknown server or a maker's name may be one of them.
    assert set(rules.values()) == {"any"}


@pytest.mark.parametrize("provider", ["ollama", "vllm", "llamacpp", "openai-compatible"])
def test_a_local_server_gets_a_user_turn_before_a_leading_assistant(provider: Provider) -> None:
    view = [Message.assistant("Where was I?")]
    assert repair(view, provider="openai")[0] == view  # the lenient rules keep it as it is
    fixed, report = repair(view, provider=history_rules_for(provider))
    assert [m.role for m in fixed] == ["user", "assistant"]
    assert [c.kind for c in report.changes] == ["inserted_user_turn"]
    validate(fixed, provider="anthropic")


def test_provider_named_reads_a_prefix_and_falls_back_to_custom() -> None:
    assert provider_named("LlamaCPP ") == "llamacpp"
    assert provider_named("vllm") == "vllm"
    assert provider_named("local") == "custom"


def test_model_info_refuses_a_provider_outside_the_set() -> None:
    with pytest.raises(ConfigError, match=r"models\.m\.provider.*unknown provider 'acme'"):
        ModelInfo("m", 1_000, provider="acme")  # type: ignore[arg-type]


def test_a_model_registered_under_an_unknown_prefix_is_custom_and_found_by_its_name() -> None:
    registry = ModelRegistry()
    registry.update_from_mapping({"local/qwen": {"context_window": 32_768}})
    info = registry.get("local/qwen")
    assert (info.provider, info.name, info.context_window) == ("custom", "qwen", 32_768)
    assert registry.get("qwen") is info
    registry.update_from_mapping({"openrouter/meta/llama-x": {"context_window": 8_192}})
    routed = registry.get("openrouter/meta/llama-x")
    assert (routed.provider, routed.name) == ("openrouter", "llama-x")


def test_a_stored_message_kind_outside_the_set_is_refused() -> None:
    for kind in MESSAGE_KINDS:
        assert Meta.from_dict(Meta(kind=kind).to_dict()).kind == kind
    with pytest.raises(ValueError, match="unknown message kind 'gossip'"):
        Meta.from_dict({"kind": "gossip"})
    with pytest.raises(ValueError, match=r"unknown message kind \['note'\]"):
        Meta.from_dict({"kind": ["note"]})


def test_every_trigger_round_trips_through_an_event() -> None:
    for trigger in get_args(Trigger):
        event = CompactionStarted(
            trigger=trigger, zone="compact", before_tokens=10, target_tokens=5
        )
        restored = event_from_dict(event.to_dict())
        assert isinstance(restored, CompactionStarted) and restored.trigger == trigger


def test_section_names_are_the_literal_in_reading_order() -> None:
    assert get_args(SectionName) == SECTION_NAMES
    assert SECTION_NAMES[:2] == ("Session Intent", "Current Task")


def test_preset_named_checks_the_spelling_and_lists_the_presets() -> None:
    for name in PRESETS:
        assert preset_named(name) == name
        assert Compactor.preset(name).name == name
    with pytest.raises(ConfigError, match=r"unknown preset 'mask_first'; choose one of \["):
        preset_named("mask_first")
    with pytest.raises(ConfigError, match="unknown preset"):
        Compactor.preset("sliding")  # type: ignore[arg-type]


def test_the_preset_setting_offers_exactly_the_presets() -> None:
    # config.py stays free of the compaction package (it is read before anything is built), so
    # its list of choices is written out: this keeps the two from drifting apart.
    assert SETTINGS["preset"].choices == get_args(PresetName) == tuple(PRESETS)
