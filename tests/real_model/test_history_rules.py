"""Which history rules a local server needs, asked of a real llama.cpp server.

A local server renders the history through the model's chat template. Qwen3's template (served
by llama.cpp, vLLM and Ollama) refuses a conversation without a user turn: "No user query found
in messages". A view whose opening user turn was compacted away is such a conversation under the
lenient (OpenAI) rules; the strict rules, which :func:`history_rules_for` gives every local
server, put a user turn before it.
"""

from __future__ import annotations

import pytest

from contextfold import Message, ProviderError, ToolCallPart, ToolResultPart
from contextfold.history.repair import history_rules_for, repair
from contextfold.model_registry import Provider
from contextfold.providers import ChatRequest, OpenAIChat, RetryPolicy
from tests.real_model.conftest import LlamaServerFactory

USER_QUERY_GUARD_TEMPLATE = (
    # Qwen3's guard, as its template writes it (the newest user turn that is not a tool
    # response is "the query"; none is an error), around plain chatml turns.
    "{%- set ns = namespace(multi_step_tool=true) -%}"
    "{%- for message in messages[::-1] -%}"
    "{%- if ns.multi_step_tool and message.role == 'user' -%}"
    "{%- set ns.multi_step_tool = false -%}"
    "{%- endif -%}"
    "{%- endfor -%}"
    "{%- if ns.multi_step_tool -%}"
    "{{- raise_exception('No user query found in messages.') -}}"
    "{%- endif -%}"
    "{%- for message in messages -%}"
    "<|im_start|>{{ message.role }}\n"
    "{{ message.content if message.content is string else '' }}<|im_end|>\n"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}<|im_start|>assistant\n{%- endif -%}"
)

REPLY_TOKENS = 4

# What a view looks like once compaction dropped the turn that asked: the model's call and
# its result, and no user turn before them.
VIEW_WITHOUT_USER_TURN = (
    Message.assistant(
        "Reading the file.", tool_calls=(ToolCallPart("call_1", "read_file", '{"path": "a.py"}'),)
    ),
    Message.tool(ToolResultPart("call_1", "read_file", "print('hello')")),
)


def _model(url: str) -> OpenAIChat:
    return OpenAIChat(
        "gemma-3-270m", base_url=url, provider="llamacpp", retry=RetryPolicy(sleep=lambda _: None)
    )


def _request(view: list[Message]) -> ChatRequest:
    return ChatRequest(messages=tuple(view), system="Be brief.", max_tokens=REPLY_TOKENS)


def test_the_lenient_rules_leave_a_view_the_template_refuses(
    llama_server: LlamaServerFactory,
) -> None:
    server = llama_server(template=USER_QUERY_GUARD_TEMPLATE)
    view, report = repair(list(VIEW_WITHOUT_USER_TURN), provider="openai")
    assert not report.changes  # valid for OpenAI: nothing to repair
    with pytest.raises(ProviderError, match="No user query found") as caught:
        _model(server.base_url).complete(_request(view))
    assert caught.value.status == 400


@pytest.mark.parametrize("provider", ["llamacpp", "vllm", "ollama"])
def test_a_local_servers_rules_give_a_view_the_template_takes(
    llama_server: LlamaServerFactory, provider: Provider
) -> None:
    server = llama_server(template=USER_QUERY_GUARD_TEMPLATE)
    view, report = repair(list(VIEW_WITHOUT_USER_TURN), provider=history_rules_for(provider))
    assert [c.kind for c in report.changes] == ["inserted_user_turn"]
    response = _model(server.base_url).complete(_request(view))
    assert response.usage is not None and response.usage.input_tokens > 0
