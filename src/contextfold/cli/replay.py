"""``contextfold replay``: real transcripts through the engine, several presets side by side."""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Annotated, Any

import typer

from contextfold.cli import _render
from contextfold.cli._render import JsonFlag
from contextfold.cli._replay_table import print_table
from contextfold.cli._transcripts import TranscriptPaths, check_paths_exist, read_transcripts
from contextfold.compaction import PRESETS, PresetName
from contextfold.errors import ContextfoldError, FormatError
from contextfold.model_registry import default_registry
from contextfold.replay import (
    DEFAULT_PRESETS,
    TranscriptReplay,
    replay_transcript,
    write_report,
)
from contextfold.replay.cache import ANTHROPIC_PRICE_MODEL, OPENAI_PRICE_MODEL
from contextfold.replay.records import preset_totals
from contextfold.replay.report import Failure

__all__ = ["replay"]


def replay(
    paths: TranscriptPaths,
    model: Annotated[
        str | None,
        typer.Option(
            "--model",
            "-m",
            metavar="MODEL",
            help="Replay for this model (tokenizer, window, reply reserve). "
            "Default: the transcript's, else gpt-4o. A model the registry does not know needs "
            "--window (its tokens are then estimated). A long-context variant ends in [1m], "
            "e.g. claude-opus-4-6[1m].",
        ),
    ] = None,
    window: Annotated[
        int | None,
        typer.Option(
            "--window",
            "-w",
            min=1024,
            metavar="TOKENS",
            help="Context window in tokens; below the recorded one it forces compaction.",
        ),
    ] = None,
    wide: Annotated[
        bool,
        typer.Option(
            "--wide",
            metavar="",
            help="Show every column (requests, summary reads, both costs); the default table "
            "fits 100 columns.",
        ),
    ] = False,
    presets: Annotated[
        list[str] | None,
        typer.Option(
            "--preset",
            "-p",
            metavar="PRESET",
            help=f"Compaction preset to compare (repeatable; one of {', '.join(PRESETS)}). "
            f"Default: {', '.join(DEFAULT_PRESETS)}.",
            show_default=False,
        ),
    ] = None,
    report: Annotated[
        Path | None,
        typer.Option(
            "--report",
            "-r",
            metavar="FILE",
            help="Write a self-contained HTML report to this file.",
        ),
    ] = None,
    as_json: JsonFlag = False,
) -> None:
    """Replay agent transcripts through contextfold and compare compaction presets.

    Each transcript's user messages and tool results go through a fresh contextfold session; at
    every recorded assistant turn the engine prepares the request it would send, and the recorded
    reply is appended. For each preset: the largest request, requests over the window,
    compactions and mask batches, tokens sent, the share a prompt cache could reuse, the input
    cost at Anthropic and OpenAI cache prices (--wide), and how many of the session's facts
    (files modified, error lines, task, user constraints) the final view still holds. Where the
    original agent compacted (Claude Code), its compaction and retention are shown too, with a
    note when the replay's window is far larger than the context it compacted at.

    A request is over the window only when even a compacted one cannot fit it (the system
    prompt, tools, reply reserve and latest message need more): a warning then names the
    transcript, and the exit status stays 0, since these are figures of the replay, not errors.
    A file that cannot be read is reported and skipped; the exit status is then 1.

    Examples:

        contextfold replay session.jsonl --window 64000 --report report.html

        contextfold replay trajectories/ -p mask-first -p window --json
    """
    check_paths_exist(paths)
    chosen = _presets(presets or DEFAULT_PRESETS)
    registry = default_registry()
    if model and window is None:
        registry.get(model)  # an unknown --model is reported before any file is read
    if report is not None:
        _check_report_path(report)  # before the work, so that none of it is lost
    replays: list[TranscriptReplay] = []
    errors: list[Failure] = []
    for item in read_transcripts(paths, "replaying"):
        if isinstance(item, FormatError):
            errors.append((item.path, str(item)))
            _render.print_error(str(item))
            continue
        transcript, label = item
        try:
            replays.append(
                replay_transcript(
                    transcript, chosen, label=label, model=model, window=window, registry=registry
                )
            )
        except ContextfoldError as exc:
            errors.append((transcript.path, f"{label}: {exc}"))
            _render.print_error(f"{label}: {exc}")
    written, report_error = None, None
    if report is not None:
        written, report_error = _write_report(replays, errors, report)
    if as_json:
        report_errors = [(str(report), report_error)] if report_error else []
        _render.print_json(_json(replays, [*errors, *report_errors], written))
    else:
        print_table(replays, wide=wide)
        if written is not None:
            _render.console().print(f"report written to {_render.escape(str(written))}")
    for replay_result in replays:
        _warn_over_window(replay_result)
    if model and registry.find(model) is None:
        _render.print_error(
            f"{model!r} is not in the model registry: its tokens were estimated by "
            "contextfold's heuristic counter, not counted with its own tokenizer",
            warning=True,
        )
    if report_error:
        _render.print_error(report_error)
    if errors:
        # Repeated at the end: on a long run the error lines have scrolled away.
        _render.print_error(f"{_render.plural(len(errors), 'file')} could not be replayed")
    if errors or report_error:
        raise typer.Exit(1)


def _presets(names: Iterable[str]) -> list[PresetName]:
    """The presets named, each once, in order; an unknown one is the option's error."""
    chosen: list[PresetName] = []
    for name in dict.fromkeys(names):
        preset = next((p for p in PRESETS if p == name), None)
        if preset is None:
            raise typer.BadParameter(
                f"unknown preset {name!r}; choose from {', '.join(PRESETS)}",
                param_hint="--preset",
            )
        chosen.append(preset)
    return chosen


def _check_report_path(report: Path) -> None:
    """Refuse a ``--report`` path that cannot be written (a folder, a missing or read-only
    folder), as a usage error naming it."""
    parent = report.parent
    if report.is_dir():
        problem = "is a folder; give the name of the HTML file to write"
    elif not parent.exists():
        problem = f"cannot be written: the folder {parent} does not exist"
    elif not parent.is_dir():
        problem = f"cannot be written: {parent} is a file, not a folder"
    elif not os.access(report if report.exists() else parent, os.W_OK):
        where = "the file" if report.exists() else f"the folder {parent}"
        problem = f"cannot be written: {where} is read-only for you"
    else:
        return
    raise typer.BadParameter(f"{report} {problem}", param_hint="--report")


def _write_report(
    replays: Sequence[TranscriptReplay], errors: Sequence[Failure], report: Path
) -> tuple[Path | None, str | None]:
    """(the report written, or the error that stopped it): the path was checked before the work,
    but a disk can still fill up, and the results are shown all the same. The files that could
    not be replayed are listed in it."""
    try:
        return write_report(replays, report, failed=errors), None
    except OSError as exc:
        return None, f"the report could not be written to {report}: {exc.strerror or exc}"


def _json(
    replays: Sequence[TranscriptReplay],
    errors: Sequence[Failure],
    report: Path | None,
) -> dict[str, Any]:
    return {
        "prices": {"anthropic": ANTHROPIC_PRICE_MODEL, "openai": OPENAI_PRICE_MODEL},
        "transcripts": [r.to_json() for r in replays],
        "totals": {name: t.to_json() for name, t in preset_totals(replays).items()},
        "errors": [{"path": path, "message": message} for path, message in errors],
        "report": str(report) if report is not None else None,
    }


def _warn_over_window(replay: TranscriptReplay) -> None:
    """A warning line for a transcript some of whose requests did not fit, even compacted."""
    over = {preset: run.over_window for preset, run in replay.runs.items() if run.over_window}
    if not over:
        return
    runs = list(replay.runs.values())
    requests = max(len(run.turns) for run in runs)
    needed = max(t.tokens for run in runs for t in run.turns if not t.fits)
    if len(set(over.values())) == 1 and len(over) == len(runs):
        counted = f"{next(iter(over.values())):,} of {requests:,} requests (every preset)"
    else:
        counted = (
            f"requests out of {requests:,} ({', '.join(f'{p} {n:,}' for p, n in over.items())})"
        )
    _render.print_error(
        f"{replay.label}: {counted} did not fit the window of {runs[0].context_window:,} "
        f"tokens ({runs[0].effective_window:,} after the reply reserve), even compacted; the "
        f"largest needed {needed:,}. Give a larger --window.",
        warning=True,
    )
