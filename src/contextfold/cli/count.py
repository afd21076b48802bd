"""``contextfold count``: how many tokens transcripts take, by role and kind, against a window."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator
from typing import Annotated

import typer
from rich.padding import Padding
from rich.table import Table

from contextfold.cli import _render
from contextfold.cli._render import JsonFlag
from contextfold.cli._tally import (
    DEFAULT_MODEL,
    KINDS,
    ROLES,
    TranscriptCount,
    choose_model,
    count_transcript,
)
from contextfold.cli._transcripts import TranscriptPaths, read_transcripts
from contextfold.config import Settings, load_settings
from contextfold.errors import FormatError
from contextfold.model_registry import ModelRegistry, default_registry
from contextfold.transcripts.transcript import Transcript

__all__ = ["count"]


def count(
    paths: TranscriptPaths,
    model: Annotated[
        str | None,
        typer.Option(
            "--model",
            "-m",
            metavar="MODEL",
            help="Count for this model (its tokenizer and window), e.g. claude-sonnet-4-5.",
        ),
    ] = None,
    window: Annotated[
        int | None,
        typer.Option(
            "--window",
            "-w",
            min=1,
            metavar="TOKENS",
            help="Context window in tokens (overrides the model's).",
        ),
    ] = None,
    detail: Annotated[
        bool | None,
        typer.Option(
            "--detail/--summary",
            metavar="",
            help="Full breakdown per transcript, or one row each. "
            "Default: the breakdown for a single transcript, rows for several.",
            show_default=False,
        ),
    ] = None,
    as_json: JsonFlag = False,
) -> None:
    """Count the tokens of agent transcripts, by role and by kind, against a model's window.

    Reads Claude Code and Codex sessions, mini-swe-agent trajectories, tau-bench results, plain
    OpenAI or Anthropic message lists and contextfold exports; the format is recognised from the
    content. The model is --model, else the one the transcript recorded (when known), else the
    `model` setting, else gpt-4o. Where the transcript recorded real usage, the last reported
    prompt size is shown next to our count of the same prompt. "framing" is what a chat template
    adds around each message (role markers, separators).

    A file that cannot be read is reported (file and line) and the others are still counted; the
    exit status is then 1.

    Examples:

        contextfold count examples/coding_session.json

        contextfold count ~/.claude/projects/ --model claude-sonnet-4-5 --json
    """
    settings = load_settings()
    registry = _registry(settings)
    # An unknown --model is a usage error: report it before reading any file.
    if model:
        registry.get(model)
    results: list[TranscriptCount] = []
    errors: list[FormatError] = []
    for item in read_transcripts(paths, "counting"):
        if isinstance(item, FormatError):
            errors.append(item)
            _render.print_error(str(item))
            continue
        transcript, label = item
        results.append(_count_tree(transcript, label, registry, settings, model, window))
    if as_json:
        _render.print_json(
            {
                "transcripts": [r.to_json() for r in results],
                "total_tokens": sum(r.total for r in results),
                "errors": [{"path": e.path, "line": e.line, "message": e.reason} for e in errors],
            }
        )
    elif results:
        show_detail = detail if detail is not None else len(results) == 1
        if show_detail:
            _print_details(results)
        else:
            _print_rows(results)
    if errors:
        # Repeated at the end: on a long run the error lines have scrolled away.
        _render.print_error(f"{_render.plural(len(errors), 'file')} could not be read")
        raise typer.Exit(1)


# --------------------------------------------------------------------------------------------------
# Reading and counting
# --------------------------------------------------------------------------------------------------


def _registry(settings: Settings) -> ModelRegistry:
    """The built-in models with the ``[models."name"]`` overrides of the config files."""
    if not settings.models:
        return default_registry()
    registry = default_registry().copy()
    registry.update_from_mapping(settings.models)
    return registry


def _count_tree(
    transcript: Transcript,
    label: str,
    registry: ModelRegistry,
    settings: Settings,
    option: str | None,
    window: int | None,
) -> TranscriptCount:
    subagents = [
        _count_tree(sub, _subagent_label(sub, n), registry, settings, option, window)
        for n, sub in enumerate(transcript.subagents, 1)
    ]
    choice = choose_model(
        registry,
        option=option,
        recorded=transcript.model,
        setting=settings.get("model"),
        setting_source=settings.source("model"),
        window=window,
    )
    return count_transcript(transcript, choice, label, subagents)


def _subagent_label(transcript: Transcript, number: int) -> str:
    name = transcript.title or transcript.session_id or f"#{number}"
    return f"↳ subagent {name}"


def _flatten(results: Iterable[TranscriptCount]) -> Iterator[TranscriptCount]:
    for result in results:
        yield result
        yield from _flatten(result.subagents)


# --------------------------------------------------------------------------------------------------
# Human output
# --------------------------------------------------------------------------------------------------


def _model_line(result: TranscriptCount) -> str:
    info = result.model.info
    how = "exact" if result.exact else "estimate"
    return (
        f"model {info.name} ({result.model.source}) · window {info.context_window:,} · "
        f"counter {result.counter} ({how})"
    )


def _print_details(results: list[TranscriptCount]) -> None:
    out = _render.console()
    for result in _flatten(results):
        t = result.transcript
        facts = [t.format, _render.plural(len(t.messages), "message")]
        if result.hidden_messages:
            facts.append(f"{result.hidden_messages:,} hidden from the model, not counted")
        if t.compactions:
            facts.append(_render.plural(len(t.compactions), "compaction") + " recorded")
        out.print(f"[bold]{_render.escape(result.label)}[/bold]")
        out.print("  " + " · ".join(facts))
        out.print("  " + _render.escape(_model_line(result)))
        out.print(Padding(_breakdown(result), (0, 0, 0, 2), expand=False))
        out.print("  " + _window_line(result))
        if result.recorded is not None:
            out.print("  " + _recorded_line(result))
        out.print()
    if len(results) > 1:
        total = sum(r.total for r in results)
        out.print(f"[bold]total[/bold] {total:,} tokens in {len(results)} transcripts")


def _breakdown(result: TranscriptCount) -> Table:
    table = _render.table("", "tokens", "share", numeric=("tokens", "share"))
    table.columns[0].style = ""
    total = result.total
    table.add_row("[bold]by role[/bold]", "", "")
    for role in ROLES:
        table.add_row(f"  {role}", _render.format_int(result.by_role[role]), _share(result, role))
    definitions = result.by_kind["tool definitions"]
    if definitions:
        table.add_row(
            "  tool definitions",
            _render.format_int(definitions),
            _render.format_share(definitions, total),
        )
    table.add_row("[bold]by kind[/bold]", "", "")
    for kind in KINDS:
        tokens = result.by_kind[kind]
        table.add_row(f"  {kind}", _render.format_int(tokens), _render.format_share(tokens, total))
    table.add_row("[bold]total[/bold]", f"[bold]{total:,}[/bold]", "100.0%" if total else "—")
    return table


def _share(result: TranscriptCount, role: str) -> str:
    return _render.format_share(result.by_role[role], result.total)


def _window_line(result: TranscriptCount) -> str:
    window = result.model.info.context_window
    return (
        f"{result.total:,} tokens = [bold]{_render.format_share(result.total, window)}[/bold] "
        f"of the {window:,}-token window"
    )


def _recorded_line(result: TranscriptCount) -> str:
    recorded = result.recorded
    assert recorded is not None
    difference = 100 * (recorded.our_tokens - recorded.prompt_tokens) / recorded.prompt_tokens
    line = (
        f"recorded usage: last reported prompt {recorded.prompt_tokens:,} tokens "
        f"(call at message {recorded.message_index}); our count of that prompt "
        f"{recorded.our_tokens:,} ({difference:+.1f}%)"
    )
    t = result.transcript
    if not t.tools and not any(m.role == "system" for m in t.messages):
        # Claude Code and Codex logs leave these out, and they are often thousands of tokens.
        line += "\n  (the transcript holds no system prompt or tool definitions; the report does)"
    return line


def _print_rows(results: list[TranscriptCount]) -> None:
    out = _render.console()
    columns = ("transcript", "msgs", *ROLES, "total", "window", "recorded")
    table = _render.table(*columns, numeric=columns[1:])
    table.columns[0].overflow = "fold"
    for result in _flatten(results):
        recorded = result.recorded
        table.add_row(
            _render.escape(result.label),
            _render.format_int(len(result.transcript.messages)),
            *(_render.format_int(result.by_role[role]) for role in ROLES),
            _render.format_int(result.total),
            _render.format_share(result.total, result.model.info.context_window),
            _render.format_int(recorded.prompt_tokens if recorded else None),
        )
    total = sum(r.total for r in results)
    label = f"total ({_render.plural(len(results), 'transcript')})"
    table.add_row(f"[bold]{label}[/bold]", *[""] * 5, f"{total:,}")
    out.print(table)
    # One line per model/counter in use, rather than a column repeating it on every row.
    groups = Counter(_model_line(r) for r in _flatten(results))
    for line, n in groups.items():
        out.print(_render.escape(f"{line}: {_render.plural(n, 'transcript')}"))
    if all(r.model.source == "default" for r in results):
        out.print(f"(no model given or recorded: counted for {DEFAULT_MODEL}; use --model)")
