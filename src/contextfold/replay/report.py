"""The replay report: one self-contained HTML file (inline CSS and SVG, nothing fetched).

Per transcript: the context size of every request per preset against the effective window, with
the engine's edits marked on the curves and the original agent's recorded compactions as vertical
lines; a table per preset (peak, requests over the window, compactions, tokens sent, prefix-cache
reuse, input cost at Anthropic and OpenAI cache prices); the budget by component at each preset's
peak request; retention of the session's facts per preset, beside the original agent's
post-compaction view; the loss report of each compaction (what left the view and where it can
still be read); and the summaries each preset wrote beside the original agent's.

Elements carry ids and ``data-*`` attributes (``data-transcript``, ``data-table``,
``data-retention``, ``data-loss``, ``data-chart``, ``data-edit``, ``data-original-compaction``) so
that tests and scripts can find them.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from html import escape
from pathlib import Path

from contextfold.private_files import open_private
from contextfold.replay._report_cells import bad, preset_chip, table_box
from contextfold.replay._report_loss import loss_section
from contextfold.replay._report_run import Failure, failed_section, overview_section
from contextfold.replay._report_style import REPORT_CSS
from contextfold.replay._svg import (
    BUDGET_PARTS,
    EDIT_LABELS,
    BudgetRow,
    budget_bars,
    context_chart,
    identical_series,
    marker_legend,
    preset_colour,
)
from contextfold.replay.cache import ANTHROPIC_PRICE_MODEL, OPENAI_PRICE_MODEL
from contextfold.replay.probes import PROBE_KINDS, Retention
from contextfold.replay.records import ReplayRun, TranscriptReplay, agent_name

__all__ = ["Failure", "agent_name", "render_report", "short_labels", "write_report"]

_KIND_LABELS = {
    "files_modified": "files modified",
    "errors": "error lines",
    "task": "task",
    "constraints": "user constraints",
}


def write_report(
    replays: Sequence[TranscriptReplay],
    path: str | Path,
    *,
    title: str = "contextfold replay",
    note: str = "",
    failed: Sequence[Failure] = (),
) -> Path:
    """Write :func:`render_report` to ``path`` (UTF-8, created 0600 like every file contextfold
    writes: it quotes the sessions) and return the path."""
    out = Path(path)
    with open_private(out, append=False) as file:
        file.write(render_report(replays, title=title, note=note, failed=failed))
    return out


def render_report(
    replays: Sequence[TranscriptReplay],
    *,
    title: str = "contextfold replay",
    note: str = "",
    failed: Sequence[Failure] = (),
) -> str:
    """The whole report as one HTML document; ``failed`` lists the files that could not be
    replayed, (path, what happened) each."""
    presets = list(dict.fromkeys(p for r in replays for p in r.runs))
    body = [
        f'<header><h1>{escape(title)}</h1><p class="meta">{len(replays)} transcript(s) · '
        f"presets {escape(', '.join(presets))} · generated {time.strftime('%Y-%m-%d %H:%M')}"
        f"</p>{f'<p class=meta>{escape(note)}</p>' if note else ''}</header>",
        failed_section(failed),
    ]
    names = short_labels([r.label for r in replays])
    if len(replays) > 1:
        body.append(overview_section(replays, names))
    body += [
        _transcript_section(i, r, name)
        for i, (r, name) in enumerate(zip(replays, names, strict=True), 1)
    ]
    body.append(_footer())
    return (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{escape(title)}</title><style>{REPORT_CSS}</style></head><body><main>"
        + "".join(body)
        + "</main></body></html>"
    )


# --------------------------------------------------------------------------------------------------
# Sections
# --------------------------------------------------------------------------------------------------


def _transcript_section(number: int, replay: TranscriptReplay, name: str) -> str:
    runs = list(replay.runs.values())
    first = runs[0] if runs else None
    agent = agent_name(replay.format)
    facts = [replay.format, f"{replay.messages:,} messages"]
    if first is not None:
        facts += [
            f"{len(first.turns):,} requests",
            f"model {first.model}",
            f"window {first.context_window:,} (effective {first.effective_window:,})",
        ]
    facts.append(f"whole transcript {replay.full_tokens:,} tokens")
    recorded = [t.recorded_prompt_tokens for t in first.turns] if first else []
    notes = []
    if replay.original.compactions:
        where = ", ".join(
            f"before request {c.turn} ({c.trigger or 'recorded'}"
            + (f", {c.pre_tokens:,} tokens" if c.pre_tokens else "")
            + ")"
            for c in replay.original.compactions
        )
        notes.append(f"{agent} compacted {where}.")
    window_note = replay.window_note()
    if window_note:
        notes.append(window_note)
    notes += _identical_notes(runs)
    if replay.unrecorded_prompt_tokens:
        notes.append(
            f"The recorded prompts hold about {replay.unrecorded_prompt_tokens:,} tokens this "
            "transcript does not (the agent's system prompt and tool definitions): the grey line "
            "includes them, the replay cannot."
        )
    chart = context_chart(
        runs, recorded=recorded, original=replay.original.compactions, agent=agent
    )
    return (
        f'<section class="card transcript" id="t{number}" data-transcript="{escape(replay.label)}">'
        f"<h2>{escape(name)}</h2>"
        f'<p class="meta" title="{escape(replay.label)}">{escape(" · ".join(facts))}</p>'
        + "".join(f'<p class="note">{escape(n)}</p>' for n in notes)
        + f"<figure>{chart}<figcaption>{_legend(runs, recorded, agent, replay)}"
        f"{marker_legend()}</figcaption></figure>"
        + f"<h3>Per preset</h3>{table_box(_preset_table(replay, agent))}"
        + f"<h3>Budget at the peak request</h3>{_budget(runs)}"
        + f"<h3>Retention of the session's facts</h3>{_retention_table(replay, agent)}"
        + loss_section(replay)
        + _summaries(replay, agent)
        + "</section>"
    )


def _identical_notes(runs: Sequence[ReplayRun]) -> list[str]:
    """A line for each preset whose requests others repeated exactly (their curves coincide)."""
    repeated: dict[str, list[str]] = {}
    for preset, first in identical_series(runs).items():
        repeated.setdefault(first, []).append(preset)
    return [
        f"{' and '.join(same)} made exactly the same requests as {first}: "
        f"{'their curves are' if len(same) > 1 else 'its curve is'} drawn a few pixels lower "
        "so that each shows."
        for first, same in repeated.items()
    ]


def _legend(
    runs: Sequence[ReplayRun], recorded: Sequence[int | None], agent: str, replay: TranscriptReplay
) -> str:
    items = [
        f'<span class="key"><i style="background:{preset_colour(r.preset, i)}"></i>'
        f"{escape(r.preset)}</span>"
        for i, r in enumerate(runs)
    ]
    items.append('<span class="key"><i class="dash red"></i>effective window</span>')
    if any(v is not None for v in recorded):
        items.append(
            f'<span class="key"><i class="dash grey"></i>recorded prompt ({escape(agent)})</span>'
        )
    if replay.original.compactions:
        items.append(f'<span class="key"><i class="dash dark"></i>{escape(agent)} compacted</span>')
    return f'<div class="keys">{"".join(items)}</div>'


def _preset_table(replay: TranscriptReplay, agent: str) -> str:
    rows = []
    for index, run in enumerate(replay.runs.values()):
        edits = ", ".join(
            f"{n} {EDIT_LABELS[k].split(' (')[0]}" for k, n in run.edit_counts().items()
        )
        rows.append(
            f'<tr data-preset="{escape(run.preset)}" data-over-window="{run.over_window}" '
            f'data-prefix-reuse="{run.prefix_reuse:.4f}">'
            f"<td>{preset_chip(run.preset, index)}</td>"
            f'<td class="num">{run.peak_tokens:,}</td>'
            f'<td class="num {bad(run.over_window)}">{run.over_window}</td>'
            f'<td class="num" title="{escape(edits)}">{run.compactions} / {run.mask_batches}</td>'
            f'<td class="num">{run.tokens_sent:,}</td>'
            f'<td class="num">{run.summary_input_tokens:,}</td>'
            f'<td class="num">{run.prefix_reuse:.1%}</td>'
            f'<td class="num">${run.cost_anthropic:,.2f}</td>'
            f'<td class="num">${run.cost_openai:,.2f}</td></tr>'
        )
    original = replay.original
    if original.recorded_calls:
        share = original.cache_read_share
        rows.append(
            f'<tr class="original" data-preset="original"><td>{escape(agent)} (recorded)</td>'
            f'<td class="num">—</td><td class="num">—</td>'
            f'<td class="num">{len(original.compactions)} / —</td>'
            f'<td class="num">{original.recorded_prompt_tokens:,}</td>'
            '<td class="num">—</td>'
            f'<td class="num" title="share of prompt tokens the provider read from its cache">'
            f"{'—' if share is None else f'{share:.1%}'}</td>"
            '<td class="num">—</td><td class="num">—</td></tr>'
        )
    return (
        '<table data-table="presets"><thead><tr><th>preset</th><th class="num">peak</th>'
        '<th class="num">over window</th><th class="num">compactions / masks</th>'
        '<th class="num">tokens sent</th><th class="num" title="tokens the summaries read: '
        'a model-written summary is a call reading them">summarizer input</th>'
        '<th class="num">prefix reuse</th>'
        f'<th class="num" title="input cost at {escape(ANTHROPIC_PRICE_MODEL)} cache prices">'
        "cost, Anthropic</th>"
        f'<th class="num" title="input cost at {escape(OPENAI_PRICE_MODEL)} cache prices">'
        "cost, OpenAI</th></tr></thead>"
        f"<tbody>{''.join(rows)}</tbody></table>"
    )


def _budget(runs: Sequence[ReplayRun]) -> str:
    rows = [
        BudgetRow(r.preset, preset_colour(r.preset, i), r.peak_budget)
        for i, r in enumerate(runs)
        if r.peak_budget
    ]
    if not rows:
        return '<p class="meta">no requests</p>'
    keys = "".join(
        f'<span class="key"><i style="background:{c}"></i>{escape(n.replace("_", " "))}</span>'
        for n, c in BUDGET_PARTS
    )
    cells = "".join(
        f'<tr data-budget-row="{escape(r.preset)}"><td>{escape(r.preset)}</td>'
        f'<td class="num">{r.peak_turn}</td>'
        + "".join(
            f'<td class="num">{r.peak_budget.get(k, 0):,}</td>'
            for k in ("system", "tools", "conversation", "reserved_output")
        )
        + "</tr>"
        for r in runs
        if r.peak_budget
    )
    return (
        f'<div class="grid"><div>{budget_bars(rows)}<div class="keys">{keys}</div></div>'
        + table_box(
            '<table data-table="budget"><thead><tr><th>preset</th><th class="num">request</th>'
            '<th class="num">system</th><th class="num">tools</th>'
            '<th class="num">conversation</th><th class="num">reply reserve</th></tr></thead>'
            f"<tbody>{cells}</tbody></table>"
        )
        + "</div>"
    )


def _retention_table(replay: TranscriptReplay, agent: str) -> str:
    header = "".join(f'<th class="num">{_KIND_LABELS[k]}</th>' for k in PROBE_KINDS)
    rows = [
        _retention_row(preset_chip(run.preset, index), run.preset, run.retention)
        for index, run in enumerate(replay.runs.values())
    ]
    if replay.original.retention is not None:
        label = f"{escape(agent)} (after its compaction)"
        rows.append(_retention_row(label, "original", replay.original.retention))
    lost = "".join(
        f"<details><summary>{escape(run.preset)}: {run.retention.count('lost')} lost</summary>"
        f"<ul>{''.join(f'<li>{escape(t)}</li>' for t in run.retention.lost())}</ul></details>"
        for run in replay.runs.values()
        if run.retention is not None and run.retention.count("lost")
    )
    if replay.original.retention is not None and replay.original.retention.count("lost"):
        facts = replay.original.retention.lost()
        lost += (
            f"<details><summary>{escape(agent)}: {len(facts)} lost</summary>"
            f"<ul>{''.join(f'<li>{escape(t)}</li>' for t in facts)}</ul></details>"
        )
    return (
        table_box(
            '<table data-table="retention"><thead><tr><th>view</th>'
            f'{header}<th class="num">kept</th><th class="num">via read_result</th>'
            f'<th class="num">lost</th></tr></thead><tbody>{"".join(rows)}</tbody></table>'
        )
        + '<p class="meta">kept = verbatim in the view or in its summary (out of all facts of the '
        "whole session); via read_result = only in a stored output a ref in the view points to."
        f"</p>{lost}"
    )


def _retention_row(label: str, key: str, retention: Retention | None) -> str:
    if retention is None:
        return f"<tr><td>{label}</td><td colspan=7>—</td></tr>"
    cells = []
    for kind in PROBE_KINDS:
        total = retention.total(kind)
        kept = retention.kept(kind)
        detail = (
            f"{retention.count('verbatim', kind)} verbatim, {retention.count('summary', kind)} in "
            f"summary, {retention.count('recoverable', kind)} via read_result, "
            f"{retention.count('lost', kind)} lost"
        )
        cells.append(
            f'<td class="num" data-kind="{kind}" data-kept="{kept}" data-total="{total}" '
            f'title="{detail}">{kept}/{total}</td>'
            if total
            else '<td class="num">—</td>'
        )
    rate = retention.rate()
    return (
        f'<tr data-retention="{escape(key)}" data-kept="{retention.kept()}" '
        f'data-total="{retention.total()}" data-lost="{retention.count("lost")}">'
        f"<td>{label}</td>{''.join(cells)}"
        f'<td class="num strong">{retention.kept()}/{retention.total()}'
        f"{'' if rate is None else f' ({rate:.0%})'}</td>"
        f'<td class="num">{retention.count("recoverable")}</td>'
        f'<td class="num {bad(retention.count("lost"))}">{retention.count("lost")}</td></tr>'
    )


SUMMARY_PREVIEW_CHARS = 12_000
"""Longest summary text shown in the report (the rest is cut with a marker)."""


def _summaries(replay: TranscriptReplay, agent: str) -> str:
    cards = []
    for run in replay.runs.values():
        if not run.summaries:
            continue
        turn, text = run.summaries[-1]
        cards.append(
            _summary_card(
                f"{run.preset}: summary before request {turn} "
                f"({len(run.summaries)} written, latest shown)",
                text,
                run.preset,
            )
        )
    for compaction in replay.original.compactions:
        cards.append(
            _summary_card(
                f"{agent}: summary before request {compaction.turn} "
                f"({compaction.trigger or 'recorded'})",
                compaction.summary_text,
                "original",
            )
        )
    if not cards:
        return (
            '<h3>Summaries</h3><p class="meta">No preset wrote a summary at this window, and the '
            "transcript recorded none.</p>"
        )
    return f'<h3>Summaries</h3><div class="summaries" data-summaries>{"".join(cards)}</div>'


def _summary_card(title: str, text: str, key: str) -> str:
    if len(text) > SUMMARY_PREVIEW_CHARS:
        text = text[:SUMMARY_PREVIEW_CHARS] + f"\n… ({len(text) - SUMMARY_PREVIEW_CHARS:,} more)"
    return (
        f'<article class="summary" data-summary="{escape(key)}"><h4>{escape(title)}</h4>'
        f"<pre>{escape(text)}</pre></article>"
    )


def _footer() -> str:
    return (
        '<footer class="card"><h3>How these figures are made</h3><ul>'
        "<li>Each transcript's user messages and tool results are fed to a fresh contextfold "
        "session in order; at every recorded assistant turn the engine prepares the request it "
        "would send, and the recorded reply is appended. Token figures are contextfold's count of "
        "exactly that request; the grey line is what the original provider reported.</li>"
        "<li>Prefix reuse: the share of each request (tools, system prompt, then message by "
        "message as rendered for the provider) identical to the start of the previous request.</li>"
        "<li>Input cost: the reused prefix at the cache-read price and the rest at the "
        f"cache-write price of {escape(ANTHROPIC_PRICE_MODEL)} (Anthropic) and "
        f"{escape(OPENAI_PRICE_MODEL)} "
        "(OpenAI, no write surcharge); requests below the model's minimum cacheable prefix at the "
        "input price.</li>"
        "<li>Summarizer input: the tokens every summary read (what it summarized and the "
        "summary it extended). The default summarizer is extractive and costs nothing; a "
        "model-written summary would be a call of its own reading that much.</li>"
        "<li>Retention: files modified, distinct error lines, the task and the user's constraints, "
        "read from the whole transcript, looked up by exact wording in the final view.</li></ul>"
        "</footer>"
    )


# --------------------------------------------------------------------------------------------------
# Small pieces
# --------------------------------------------------------------------------------------------------


def short_labels(labels: Sequence[str]) -> list[str]:
    """Each label (a path) cut to its file name, with as many of its folders as it takes to tell
    it from the others."""
    parts = [label.replace("\\", "/").split("/") for label in labels]
    depth = 1
    while True:
        cut = ["/".join(p[-depth:]) for p in parts]
        clashes = len(set(cut)) < len(set(labels))
        if not clashes or depth >= max((len(p) for p in parts), default=1):
            return cut
        depth += 1
