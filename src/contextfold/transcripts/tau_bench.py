"""tau-bench result files: a JSON list of runs, one transcript each.

Each run is ``{"task_id", "trial", "reward", "info", "traj"}`` where ``traj`` is the OpenAI chat
messages of the dialogue (policy system prompt, simulated user, agent, tool calls and results).
The runs record neither the model nor token usage; ``reward`` and ``info`` (the task and the
grading) go to ``Transcript.metadata``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from contextfold.transcripts._files import SourceFile, read_source, with_ids
from contextfold.transcripts.transcript import Transcript, flag_invalid_arguments
from contextfold.wire.chat_completions import from_openai
from contextfold.wire.values import MessageError, as_id, child

__all__ = ["FORMAT", "load_tau_bench", "looks_like_tau_bench", "tau_bench_from_source"]

FORMAT = "tau-bench"


def looks_like_tau_bench(document: Any) -> bool:
    """True when a parsed JSON document is a list of tau-bench runs."""
    return (
        isinstance(document, list)
        and bool(document)
        and all(isinstance(run, Mapping) and isinstance(run.get("traj"), list) for run in document)
    )


def load_tau_bench(path: str | os.PathLike[str]) -> list[Transcript]:
    """One transcript per run in a tau-bench result file."""
    return tau_bench_from_source(read_source(path))


def tau_bench_from_source(source: SourceFile) -> list[Transcript]:
    """One transcript per run of an already parsed tau-bench result file."""
    if source.shape != "json" or not looks_like_tau_bench(source.document):
        raise source.error("not a tau-bench result file (expected a list of runs with 'traj')")
    return [_run(run, position, source) for position, run in enumerate(source.document)]


def _run(run: Mapping[str, Any], position: int, source: SourceFile) -> Transcript:
    prefix = f"{source.stem}:{position}"
    try:
        messages = with_ids(from_openai(run["traj"], path=source.path), prefix)
    except MessageError as exc:
        raise source.error_at(
            f"run {position}: {exc.reason}", (position, "traj", exc.index)
        ) from None
    messages, warnings = flag_invalid_arguments(messages)
    metadata: dict[str, Any] = {"run": position}
    for key in ("task_id", "trial", "reward"):
        if run.get(key) is not None:
            metadata[key] = run[key]
    info = child(run, "info")
    instruction = child(info, "task").get("instruction")
    if isinstance(instruction, str):
        metadata["instruction"] = instruction
    if info:
        metadata["info"] = dict(info)
    task_id, trial = as_id(run.get("task_id")), as_id(run.get("trial"))
    title = f"task {task_id}" if task_id is not None else None
    if title and trial is not None:
        title += f" (trial {trial})"
    return Transcript(
        messages=messages,
        format=FORMAT,
        path=source.path,
        session_id=prefix,
        title=title,
        metadata=metadata,
        warnings=warnings,
    )
