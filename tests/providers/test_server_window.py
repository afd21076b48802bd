"""The context size a local OpenAI-compatible server really holds, read from the server
(llama.cpp's ``/props``, vLLM's ``/v1/models``), and the warnings when the planned window is
larger or cannot be confirmed."""

from __future__ import annotations

import socket
import warnings

import pytest

from contextfold.providers import (
    ContextWindowWarning,
    OllamaContextWarning,
    OpenAIChat,
    check_ollama_context,
    model_from_name,
    probe_server_window,
    served_window,
)
from tests.providers.conftest import LocalServer, Reply


def llamacpp_props(n_ctx: int, *, top_level: bool = False) -> Reply:
    """``GET /props`` as llama.cpp's server answers it (newer builds also put n_ctx on top)."""
    body: dict[str, object] = {
        "default_generation_settings": {"n_ctx": n_ctx, "params": {"n_predict": -1}},
        "total_slots": 1,
        "model_path": "/models/gemma-3-270m.gguf",
        "chat_template": "{{ messages }}",
        "build_info": "b1-test",
    }
    if top_level:
        body = {"n_ctx": n_ctx, "model_path": "/models/m.gguf"}
    return Reply(json=body)


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


# -- reading the window ----------------------------------------------------------------------------


@pytest.mark.parametrize("top_level", [False, True])
def test_llamacpp_props_give_the_window(server: LocalServer, top_level: bool) -> None:
    server.routes["/props"] = llamacpp_props(2048, top_level=top_level)
    found = probe_server_window(f"{server.url}/v1")
    assert (found.window, found.error) == (2048, None)
    assert "/props" in found.source
    assert server.requests[0].method == "GET"


def test_vllm_models_give_max_model_len(server: LocalServer) -> None:
    server.routes["/props"] = Reply(404, {"detail": "Not Found"})
    server.routes["/v1/models"] = Reply(
        json={
            "object": "list",
            "data": [
                {"id": "other", "object": "model", "max_model_len": 131072},
                {"id": "Qwen/Qwen3-8B", "object": "model", "max_model_len": 32768},
            ],
        }
    )
    found = probe_server_window(f"{server.url}/v1", model="Qwen/Qwen3-8B")
    assert found.window == 32768
    assert "max_model_len" in found.source


def test_a_server_that_says_nothing_gives_no_window_and_why(server: LocalServer) -> None:
    server.routes["/props"] = Reply(404, {"error": "not found"})
    server.routes["/v1/models"] = Reply(json={"data": [{"id": "m", "object": "model"}]})
    found = probe_server_window(f"{server.url}/v1", model="m")
    assert found.window is None
    assert found.error is not None and "404" in found.error


# -- warnings when building a model ----------------------------------------------------------------


def test_llamacpp_model_planned_larger_than_the_server_warns(server: LocalServer) -> None:
    server.routes["/props"] = llamacpp_props(2048)

    with pytest.warns(ContextWindowWarning) as caught:
        model = model_from_name("llamacpp/gemma", base_url=f"{server.url}/v1", context_window=4096)

    [warning] = caught
    text = str(warning.message)
    assert "2048" in text and "4096" in text and "llamacpp/gemma" in text
    assert "--window 2048" in text  # how to fix it
    assert "\n" not in text
    assert isinstance(model, OpenAIChat)
    assert model.server_window is not None and model.server_window.server.window == 2048
    assert model.server_window.exceeds


def test_a_plan_within_the_server_window_is_quiet(server: LocalServer) -> None:
    server.routes["/props"] = llamacpp_props(8192)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        model_from_name("llamacpp/gemma", base_url=f"{server.url}/v1", context_window=8192)


def test_an_unconfirmed_window_warns_with_what_is_assumed_and_how_to_set_it() -> None:
    url = f"http://127.0.0.1:{closed_port()}/v1"
    with pytest.warns(ContextWindowWarning) as caught:
        model_from_name("vllm/Qwen/Qwen3-8B", base_url=url, context_window=32768)
    [warning] = caught
    text = str(warning.message)
    assert "could not confirm" in text and "32768" in text and "vllm/Qwen/Qwen3-8B" in text
    assert "--window" in text and "context_window" in text


def test_a_custom_openai_base_url_is_probed_official_openai_is_not(server: LocalServer) -> None:
    server.routes["/props"] = llamacpp_props(1024)
    with pytest.warns(ContextWindowWarning, match="1024"):
        model_from_name("openai/gpt-4.1-mini", base_url=f"{server.url}/v1", context_window=8192)
    probes = len(server.requests)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        model_from_name("openai/gpt-4.1-mini", context_window=1_047_576)
        model_from_name("anthropic/claude-haiku-4-5", context_window=200_000)
    assert len(server.requests) == probes


def test_served_window_reads_a_llamacpp_server(server: LocalServer) -> None:
    server.routes["/props"] = llamacpp_props(3072)
    found = served_window("llamacpp/any", base_url=f"{server.url}/v1")
    assert found is not None and found.window == 3072
    assert served_window("anthropic/claude-haiku-4-5") is None  # hosted: the registry knows


# -- an ollama/ model pointed at a server that is not Ollama ---------------------------------------


def test_ollama_model_at_a_llamacpp_server_says_so_and_reads_props(server: LocalServer) -> None:
    server.routes["/props"] = llamacpp_props(2048)
    server.routes["/api/show"] = Reply(
        404, {"error": {"message": "File Not Found", "type": "not_found_error", "code": 404}}
    )

    with pytest.warns(OllamaContextWarning) as caught:
        info = check_ollama_context("gemma", 4096, base_url=f"{server.url}/v1")

    [warning] = caught
    text = str(warning.message)
    assert "/api/show" in text and "404" in text  # what failed
    assert "2048" in text and "4096" in text  # what the server holds vs the plan
    assert issubclass(OllamaContextWarning, ContextWindowWarning)
    assert (info.window, info.truncates) == (2048, True)


def test_ollama_model_at_nothing_warns_that_the_window_is_unconfirmed() -> None:
    url = f"http://127.0.0.1:{closed_port()}/v1"
    with pytest.warns(OllamaContextWarning, match="could not confirm") as caught:
        info = check_ollama_context("qwen3:8b", 8192, base_url=url, timeout=0.5)
    assert "8192" in str(caught[0].message)
    assert (info.window, info.source) == (None, "unknown")
