"""Tool outputs on their way into the transcript: kept, cut to head and tail, or offloaded.

The engine calls :func:`prepare_tool_output` once for every tool result, before the result enters
the transcript. With the defaults (:class:`OutputLimits`; the limits keep any one output a small
share of even a 32k window, and nothing is lost since the full text stays readable by ref):

- an output within 256 lines / 10 KiB / 2,500 tokens is **kept** as it is;
- an output above 16 KiB is **offloaded**: the full text goes to the blob store and the result
  carries a preview (tool, size, head and tail of about 500 characters) and the ``ref`` that
  ``read_result`` resolves;
- anything in between is **truncated** to its head and tail with an exact omission marker, and
  the full text is stored too, so the ref recovers what was cut.

Nothing is lost: the only path that keeps less than the full output without a ref is a failing
blob store, and then the result says so and a ``ComponentDegraded`` event is emitted (the agent's
turn goes on with the cut output).

Secrets are redacted before anything is cut. A cut can drop the ``BEGIN`` line of a private key
or keep half a token, and what is left is persisted with the message while no redactor recognises
it any more. So the head and tail of a cut output, the preview of an offloaded one and the error
lines a note names all come from the redacted text, in memory too. Only an output kept whole
reaches the model as it is (the store redacts the whole message when it persists it). The full
text goes to the blob store as it is: a persistent store redacts it whole.

:func:`placeholder_for` writes the one-line stand-in that observation masking puts in place of an
old output.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Literal, TypeAlias

from contextfold.events import ComponentDegraded, Event, OutputOffloaded, OutputTruncated
from contextfold.messages import ToolResultPart
from contextfold.outputs.blob_store import BlobStore, FileBlobStore, InMemoryBlobStore, is_ref
from contextfold.outputs.blobs import BlobInfo
from contextfold.outputs.error_lines import error_lines
from contextfold.outputs.graphemes import ceil_boundary, floor_boundary
from contextfold.outputs.placeholders import (
    PLACEHOLDER_MAX_CHARS,
    ToolKind,
    exit_code,
    placeholder_for,
    tool_kind,
)
from contextfold.outputs.truncate import (
    DEFAULT_HEAD_RATIO,
    DEFAULT_MAX_BYTES,
    DEFAULT_MAX_LINES,
    DEFAULT_MAX_TOKENS,
    DEFAULT_OFFLOAD_ABOVE_BYTES,
    DEFAULT_PREVIEW_CHARS,
    OutputLimits,
    TextCounter,
    TruncatedOutput,
    count_lines,
    decode_output,
    estimate_tokens,
    truncate_head_tail,
    truncate_redacted,
)
from contextfold.redaction.redactor import redact_text

__all__ = [
    "DEFAULT_HEAD_RATIO",
    "DEFAULT_MAX_BYTES",
    "DEFAULT_MAX_LINES",
    "DEFAULT_MAX_TOKENS",
    "DEFAULT_OFFLOAD_ABOVE_BYTES",
    "DEFAULT_PREVIEW_CHARS",
    "PLACEHOLDER_MAX_CHARS",
    "PREVIEW_MAX_LINES",
    "BlobStore",
    "FileBlobStore",
    "InMemoryBlobStore",
    "OutputAction",
    "OutputLimits",
    "OutputPolicy",
    "PreparedOutput",
    "TextCounter",
    "ToolKind",
    "TruncatedOutput",
    "estimate_tokens",
    "exit_code",
    "is_ref",
    "placeholder_for",
    "prepare_tool_output",
    "tool_kind",
    "truncate_head_tail",
]

OutputAction: TypeAlias = Literal["kept", "truncated", "offloaded"]

PREVIEW_MAX_LINES = 20
"""Most lines an offload preview shows (head and tail together), whatever its character count."""
PREVIEW_REDACTION_MARGIN = 32 * 1024
"""Characters beyond what a preview shows that are redacted with it, at each end of a long
output. A secret that the edge of such a window falls inside is not recognised, so the preview
keeps at least half the margin away from the edges (else the whole output is redacted): the
longest secret, a PEM private key (1.7 KB for RSA-2048, 12.7 KB for RSA-16384), fits in that."""
_TOOL_NAME_CHARS = 64
_REASON_CHARS = 160


@dataclass(frozen=True, slots=True)
class OutputPolicy:
    """What :func:`prepare_tool_output` may do beyond cutting.

    ``offload``: send outputs above ``OutputLimits.offload_above_bytes`` to the blob store whole.
    ``store_truncated``: also store the full text of an output that is only cut, so its ref
    recovers the omitted middle. ``preview``: an offloaded output's preview shows its head and
    tail (``"head_tail"``, since errors come last) or only its head (``"head"``).
    """

    offload: bool = True
    store_truncated: bool = True
    preview: Literal["head_tail", "head"] = "head_tail"


@dataclass(frozen=True, slots=True)
class PreparedOutput:
    """A tool result ready for the transcript, and what happened to it.

    ``part`` is the result to append (``part.ref`` set when the full output is in the blob
    store); ``events`` are to be emitted as they are. ``degraded`` explains why the blob store
    could not be used, when it failed.
    """

    part: ToolResultPart
    action: OutputAction
    original_bytes: int
    kept_bytes: int
    ref: str | None = None
    events: tuple[Event, ...] = ()
    truncation: TruncatedOutput | None = None
    degraded: str | None = None


def prepare_tool_output(
    result: ToolResultPart,
    *,
    session_id: str,
    blobs: BlobStore | None = None,
    limits: OutputLimits | None = None,
    policy: OutputPolicy | None = None,
    counter: TextCounter | None = None,
) -> PreparedOutput:
    """Make ``result`` fit the window before it enters the transcript; never raises on a store
    failure.

    ``blobs`` receives full outputs (offloaded or cut); without one, outputs are only cut.
    ``counter`` counts tokens for the token limit (a cheap estimate when absent).
    """
    limits = limits or OutputLimits()
    policy = policy or OutputPolicy()
    text, data, _ = decode_output(result.content)
    size = len(data)
    events: list[Event] = []
    degraded: str | None = None

    if policy.offload and blobs is not None and size > limits.offload_above_bytes:
        info, degraded = _store(blobs, session_id, text, result.name)
        if info is not None:
            preview = _offload_text(result.name, text, info, limits, counter, policy)
            events.append(
                OutputOffloaded(
                    session_id=session_id,
                    tool_name=result.name,
                    call_id=result.call_id,
                    size_bytes=size,
                    ref=info.ref,
                )
            )
            return PreparedOutput(
                replace(result, content=preview, ref=info.ref),
                "offloaded",
                size,
                len(preview.encode("utf-8")),
                info.ref,
                tuple(events),
            )

    if limits.fits(text, counter):
        part = result if text == result.content else replace(result, content=text)
        if degraded is not None:  # inline limits above the offload size: kept whole, not stored
            events.append(_store_degraded(session_id, "kept inline, not stored", degraded))
        return PreparedOutput(part, "kept", size, size, result.ref, tuple(events), None, degraded)

    # The cut is made from the redacted text (see the module docstring); the full text goes to
    # the blob store as it is, and a persistent store redacts it whole.
    redacted = redact_text(text)
    ref: str | None = None
    note: str | None = None
    if degraded is None and policy.store_truncated and blobs is not None:
        info, degraded = _store(blobs, session_id, text, result.name)
        if info is not None:
            ref = info.ref
            note = (
                f'Full output: read_result ref="{ref}" (offset/limit, start_line/end_line '
                "or pattern)."
            )
    if degraded is not None:
        note = f"The full output could not be stored ({degraded}); only this cut remains."
        events.append(_store_degraded(session_id, "inline truncation without a ref", degraded))
    cut = truncate_redacted(redacted, limits, counter=counter, note=note)
    missing = _omitted_errors(redacted, cut.text, result)
    if missing:
        # An error line in the cut middle would be silently out of view: the note names it.
        listed = " | ".join(f'"{line}"' for line in missing)
        note = f"{note + ' ' if note else ''}Errors in the omitted part: {listed}"
        cut = truncate_redacted(redacted, limits, counter=counter, note=note)
    events.append(
        OutputTruncated(
            session_id=session_id,
            tool_name=result.name,
            call_id=result.call_id,
            original_bytes=size,
            kept_bytes=cut.kept_bytes,
            ref=ref,
        )
    )
    return PreparedOutput(
        replace(result, content=cut.text, ref=ref),
        "truncated",
        size,
        cut.kept_bytes,
        ref,
        tuple(events),
        cut,
        degraded,
    )


def _store_degraded(session_id: str, fallback: str, error: str) -> ComponentDegraded:
    """The one report of a blob store that failed for an output (it is tried once per output)."""
    return ComponentDegraded(
        session_id=session_id, component="blob_store", fallback=fallback, error=error
    )


def _store(
    blobs: BlobStore, session_id: str, text: str, tool_name: str
) -> tuple[BlobInfo | None, str | None]:
    try:
        return blobs.put_blob(session_id, text, tool_name=tool_name or None), None
    except Exception as exc:  # any store failure degrades to inline truncation, never fails
        reason = f"{type(exc).__name__}: {exc}"
        if len(reason) > _REASON_CHARS:
            reason = reason[: _REASON_CHARS - 1] + "…"
        return None, reason


@dataclass(frozen=True, slots=True)
class _RedactedEnds:
    """What a preview is cut from: the start and the end of an output, secrets redacted (both
    the whole output when it is short), and the length of the redacted output."""

    head: str
    tail: str
    chars: int


def _redacted_ends(text: str, chars: int) -> _RedactedEnds:
    """The ends of ``text`` a preview of ``chars`` characters can show, secrets redacted.

    A long output has only its two ends redacted, each with :data:`PREVIEW_REDACTION_MARGIN`
    characters beyond what the preview shows, so that an offload costs the same whatever the
    size of the output (the middle counts as it is in ``chars``).
    """
    window = chars + PREVIEW_REDACTION_MARGIN
    if len(text) > 2 * window:
        head, tail = redact_text(text[:window]), redact_text(text[-window:])
        # What redaction removed brings the shown part closer to the edges of the windows.
        if min(len(head), len(tail)) >= chars + PREVIEW_REDACTION_MARGIN // 2:
            return _RedactedEnds(head, tail, len(text) - 2 * window + len(head) + len(tail))
    whole = redact_text(text)
    return _RedactedEnds(whole, whole, len(whole))


def _preview_parts(ends: _RedactedEnds, chars: int, ratio: float, mode: str) -> tuple[str, str]:
    """Head and tail excerpts (about ``chars`` characters), cut on cluster boundaries and capped
    at :data:`PREVIEW_MAX_LINES` lines."""
    if chars <= 0:
        return "", ""
    start, end = ends.head, ends.tail
    if ends.chars <= chars:
        head, tail = start, ""
    elif mode == "head":
        head, tail = start[: floor_boundary(start, chars)], ""
    else:
        head_chars = int(chars * ratio)
        head = start[: floor_boundary(start, head_chars)]
        tail = end[ceil_boundary(end, len(end) - (chars - head_chars)) :]
    head_lines = PREVIEW_MAX_LINES if not tail else max(1, round(PREVIEW_MAX_LINES * ratio))
    head = "".join(head.splitlines(keepends=True)[:head_lines])
    if tail:
        tail = "".join(tail.splitlines(keepends=True)[-(PREVIEW_MAX_LINES - head_lines) :])
    return head, tail


def _offload_text(
    tool_name: str,
    text: str,
    info: BlobInfo,
    limits: OutputLimits,
    counter: TextCounter | None,
    policy: OutputPolicy,
) -> str:
    """The preview that replaces an offloaded output; always within ``limits``, and cut from
    the output with its secrets redacted."""
    name = tool_name or "tool"
    if len(name) > _TOOL_NAME_CHARS:
        name = name[: _TOOL_NAME_CHARS - 1] + "…"
    chars = limits.preview_chars
    ends = _redacted_ends(text, chars)
    about = (
        f"[Output of {name} stored outside the context: {info.size_bytes} bytes, "
        f"{count_lines(text)} lines. ref={info.ref}]"
    )
    message = ""
    while True:
        head, tail = _preview_parts(ends, chars, limits.head_ratio, policy.preview)
        shown = len(head) + len(tail)
        lines = [about]
        if head:
            lines.append(head.rstrip("\n"))
        if shown < ends.chars:
            lines.append(f"[… {ends.chars - shown} characters not shown …]")
        if tail:
            lines.append(tail.rstrip("\n"))
        lines.append(
            f'[Read it with read_result: ref="{info.ref}" and offset/limit (characters), '
            "start_line/end_line, or pattern (a regex search).]"
        )
        message = "\n".join(lines)
        if limits.fits(message, counter) or chars == 0:
            break
        chars //= 2
    if not limits.fits(message, counter):  # only with limits far below the defaults
        message = truncate_redacted(message, limits, counter=counter).text
    return message


OMITTED_ERRORS_MAX = 3
"""Error lines from the omitted middle of a cut output that its note names (the last ones)."""
OMITTED_ERRORS_CHARS = 400
"""Characters of omitted error lines the note may take beyond the first."""


def _omitted_errors(text: str, kept: str, result: ToolResultPart) -> list[str]:
    """Error lines of ``text`` that the cut ``kept`` no longer shows (the last few)."""
    code = exit_code(text)
    failed = result.is_error or (code is not None and code != 0)
    missing = [e for e in error_lines(text, failed=failed, exit_code=code) if e not in kept]
    chosen: list[str] = []
    room = OMITTED_ERRORS_CHARS
    for line in reversed(missing):
        if len(chosen) == OMITTED_ERRORS_MAX or (chosen and len(line) > room):
            break
        chosen.append(line)
        room -= len(line)
    return chosen[::-1]
