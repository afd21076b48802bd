"""Read any supported transcript file, recognising its format from the content.

File names are never trusted (a Codex rollout and a Claude Code session are both ``.jsonl``):
:func:`detect_format` looks at the parsed records. :func:`load_transcripts` returns every
transcript a file holds (a tau-bench file holds many), :func:`load_transcript` the only one, and
:func:`iter_transcripts` walks files and directories, yielding a :class:`FormatError` in place of
each file it cannot read so that a caller can report it and go on.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from pathlib import Path

from contextfold.errors import FormatError, UnknownFormatError
from contextfold.transcripts import claude_code, codex, generic, mini_swe_agent, tau_bench
from contextfold.transcripts._files import SourceFile, read_source
from contextfold.transcripts.mini_swe_agent import ActionMode
from contextfold.transcripts.transcript import Transcript

__all__ = [
    "SUPPORTED_FORMATS",
    "detect_format",
    "iter_transcripts",
    "load_transcript",
    "load_transcripts",
]

SUPPORTED_FORMATS: tuple[str, ...] = (
    claude_code.FORMAT,
    codex.FORMAT,
    mini_swe_agent.FORMAT,
    tau_bench.FORMAT,
    generic.OPENAI_FORMAT,
    generic.ANTHROPIC_FORMAT,
    generic.CONTEXTFOLD_FORMAT,
)
"""Every format name :func:`detect_format` can return."""

_TRANSCRIPT_SUFFIXES = (".json", ".jsonl")

PathLike = str | os.PathLike[str]


def detect_format(path: PathLike) -> str:
    """The name of the transcript format of ``path`` (one of :data:`SUPPORTED_FORMATS`).

    Raises :class:`FormatError` for malformed JSON and :class:`UnknownFormatError` for content
    that matches no supported format.
    """
    return _detect(_as_lines_if_single_record(read_source(path)))


def load_transcripts(path: PathLike, *, actions: ActionMode = "tools") -> list[Transcript]:
    """Every transcript in ``path``, whatever its supported format.

    ``actions`` applies to mini-swe-agent trajectories whose actions are bash blocks in text
    (see :mod:`contextfold.transcripts.mini_swe_agent`).
    """
    source = _as_lines_if_single_record(read_source(path))
    name = _detect(source)
    if name == tau_bench.FORMAT:
        return tau_bench.tau_bench_from_source(source)
    if name == mini_swe_agent.FORMAT:
        return [mini_swe_agent.mini_swe_agent_from_source(source, actions=actions)]
    if name == claude_code.FORMAT:
        return [claude_code.claude_code_from_source(source)]
    if name == codex.FORMAT:
        return [codex.codex_from_source(source)]
    if name == generic.CONTEXTFOLD_FORMAT:
        return [generic.contextfold_from_source(source)]
    return [generic.chat_from_source(source)]


def load_transcript(path: PathLike, *, actions: ActionMode = "tools") -> Transcript:
    """The one transcript in ``path``; a file holding several (tau-bench) raises
    :class:`FormatError` pointing to :func:`load_transcripts`."""
    transcripts = load_transcripts(path, actions=actions)
    if len(transcripts) != 1:
        raise FormatError(
            f"the file holds {len(transcripts)} transcripts; read them with load_transcripts()",
            path=os.fspath(path),
        )
    return transcripts[0]


def iter_transcripts(
    paths: PathLike | Iterable[PathLike],
    *,
    recursive: bool = True,
    actions: ActionMode = "tools",
) -> Iterator[Transcript | FormatError]:
    """Transcripts from files and directories, in sorted path order.

    Directories are searched for ``.json`` and ``.jsonl`` files (hidden folders skipped, and
    subfolders too unless ``recursive`` is false). Claude Code subagent files are skipped when
    their main session file is there, since they come inside its transcript. A file that cannot
    be read yields its :class:`FormatError` (an :class:`UnknownFormatError` when it is not a
    transcript) and the walk goes on.
    """
    items = [paths] if isinstance(paths, str | os.PathLike) else list(paths)
    for item in items:
        root = Path(item)
        if not root.exists():
            yield FormatError("no such file or directory", path=str(root))
            continue
        files = [root] if root.is_file() else _transcript_files(root, recursive)
        for file in files:
            try:
                yield from load_transcripts(file, actions=actions)
            except FormatError as exc:
                yield exc


def _transcript_files(folder: Path, recursive: bool) -> list[Path]:
    found: list[Path] = []
    for current, dirs, files in os.walk(folder):
        dirs[:] = sorted(d for d in dirs if not d.startswith(".")) if recursive else []
        here = Path(current)
        found.extend(
            here / name
            for name in sorted(files)
            if name.endswith(_TRANSCRIPT_SUFFIXES) and not _is_claude_subagent(here / name)
        )
    return found


def _is_claude_subagent(path: Path) -> bool:
    """``<session>/subagents/agent-*.jsonl`` next to ``<session>.jsonl``."""
    folder = path.parent
    return folder.name == "subagents" and folder.parent.with_suffix(".jsonl").is_file()


def _as_lines_if_single_record(source: SourceFile) -> SourceFile:
    """A one-line JSON Lines file parses as a JSON object; read it as one record again when it
    is a record of a line-based format."""
    as_lines = source.as_lines()
    if as_lines is source:
        return source
    line_based = (
        claude_code.looks_like_claude_code,
        codex.looks_like_codex,
        generic.looks_like_contextfold,
    )
    return as_lines if any(check(as_lines) for check in line_based) else source


def _detect(source: SourceFile) -> str:
    if source.shape == "jsonl":
        if claude_code.looks_like_claude_code(source):
            return claude_code.FORMAT
        if codex.looks_like_codex(source):
            return codex.FORMAT
        if generic.looks_like_contextfold(source):
            return generic.CONTEXTFOLD_FORMAT
    else:
        document = source.document
        if mini_swe_agent.looks_like_mini_swe_agent(document):
            return mini_swe_agent.FORMAT
        if tau_bench.looks_like_tau_bench(document):
            return tau_bench.FORMAT
        if generic.looks_like_anthropic_messages(document):
            return generic.ANTHROPIC_FORMAT
        if generic.looks_like_openai_messages(document):
            return generic.OPENAI_FORMAT
    raise UnknownFormatError(SUPPORTED_FORMATS, path=source.path)
