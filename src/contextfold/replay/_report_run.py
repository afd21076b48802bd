"""The report's sections about the whole run: the files that could not be replayed, and, for
several transcripts, an overview with every preset's totals."""

from __future__ import annotations

from collections.abc import Sequence
from html import escape

from contextfold.compaction.pipeline import PresetName
from contextfold.replay._report_cells import bad, preset_chip, rate, table_box
from contextfold.replay.cache import ANTHROPIC_PRICE_MODEL, OPENAI_PRICE_MODEL
from contextfold.replay.records import TranscriptReplay, preset_totals

__all__ = ["Failure", "failed_section", "overview_section"]

Failure = tuple[str | None, str]
"""A file that could not be replayed: its path (``None`` when unknown) and what happened."""


def failed_section(failed: Sequence[Failure]) -> str:
    """The files that could not be replayed, each with its error ("" when there is none)."""
    if not failed:
        return ""
    rows = "".join(
        f'<tr data-failed="{escape(path or "")}"><td>{escape(path or "—")}</td>'
        f"<td>{escape(message)}</td></tr>"
        for path, message in failed
    )
    count = f"{len(failed):,} file{'' if len(failed) == 1 else 's'}"
    return (
        f'<section class="card" id="failed"><h2>Not replayed: {count}</h2>'
        '<p class="meta">These could not be read or replayed; the figures below leave them out.'
        "</p>"
        + table_box(
            '<table data-table="failed"><thead><tr><th>file</th><th>what happened</th></tr>'
            f"</thead><tbody>{rows}</tbody></table>"
        )
        + "</section>"
    )


def overview_section(replays: Sequence[TranscriptReplay], names: Sequence[str]) -> str:
    """Every preset's totals over all transcripts, then each transcript's figures by preset."""
    presets = list(dict.fromkeys(p for r in replays for p in r.runs))
    rows = []
    for i, (replay, name) in enumerate(zip(replays, names, strict=True), 1):
        for place, run in enumerate(replay.runs.values()):
            label = (
                f'<td rowspan="{len(replay.runs)}"><a href="#t{i}">{escape(name)}</a></td>'
                if place == 0
                else ""
            )
            rows.append(
                f'<tr data-transcript-row="{i}" data-preset="{escape(run.preset)}">{label}'
                f"<td>{preset_chip(run.preset, presets.index(run.preset))}</td>"
                f'<td class="num">{run.peak_tokens:,}</td>'
                f'<td class="num {bad(run.over_window)}">{run.over_window:,}</td>'
                f'<td class="num">{run.compactions:,} / {run.mask_batches:,}</td>'
                f'<td class="num">{run.prefix_reuse:.1%}</td>'
                f'<td class="num">{rate(run.retention)}</td></tr>'
            )
    per_transcript = table_box(
        '<table data-table="overview"><thead><tr><th>transcript</th><th>preset</th>'
        '<th class="num">peak</th><th class="num">over window</th>'
        '<th class="num">compactions / masks</th><th class="num">prefix reuse</th>'
        f'<th class="num">facts kept</th></tr></thead><tbody>{"".join(rows)}</tbody></table>'
    )
    return (
        '<section class="card" id="overview"><h2>Overview</h2>'
        + _totals(replays, presets)
        + f"<h3>By transcript</h3>{per_transcript}</section>"
    )


def _totals(replays: Sequence[TranscriptReplay], presets: Sequence[PresetName]) -> str:
    totals = preset_totals(replays)
    requests = max((t.requests for t in totals.values()), default=0)  # the same for each preset
    rows = []
    for name, total in totals.items():
        facts = f"{total.facts_kept:,}/{total.facts_total:,}" if total.facts_total else "—"
        share = f" ({total.facts_kept / total.facts_total:.0%})" if total.facts_total else ""
        rows.append(
            f'<tr data-totals="{escape(name)}" data-tokens-sent="{total.tokens_sent}">'
            f"<td>{preset_chip(name, presets.index(name))}</td>"
            f'<td class="num">{total.peak_tokens:,}</td>'
            f'<td class="num {bad(total.over_window)}">{total.over_window:,}</td>'
            f'<td class="num">{total.compactions:,} / {total.mask_batches:,}</td>'
            f'<td class="num">{total.tokens_sent:,}</td>'
            f'<td class="num">{total.prefix_reuse:.1%}</td>'
            f'<td class="num">${total.cost_anthropic:,.2f}</td>'
            f'<td class="num">${total.cost_openai:,.2f}</td>'
            f'<td class="num strong">{facts}{share}</td>'
            f'<td class="num">{total.facts_recoverable:,}</td></tr>'
        )
    return (
        f"<h3>Totals per preset over {len(replays):,} transcripts ({requests:,} requests)</h3>"
        + table_box(
            '<table data-table="totals"><thead><tr><th>preset</th><th class="num">largest '
            'request</th><th class="num">over window</th><th class="num">compactions / masks'
            '</th><th class="num">tokens sent</th><th class="num">prefix reuse</th>'
            f'<th class="num" title="input cost at {escape(ANTHROPIC_PRICE_MODEL)} cache prices">'
            "cost, Anthropic</th>"
            f'<th class="num" title="input cost at {escape(OPENAI_PRICE_MODEL)} cache prices">'
            "cost, OpenAI</th>"
            '<th class="num">facts kept</th><th class="num">via read_result</th></tr></thead>'
            f"<tbody>{''.join(rows)}</tbody></table>"
        )
    )
