"""The report's "Loss report" section: for each compaction of each preset, what left the view
and where it can still be read (:mod:`contextfold.retention.loss`).

A row per compaction or mask batch that took anything out of view: the request it came before,
its trigger, how many messages it took out (their breakdown in the cell's title), and how many
facts a summary, a pin, the artifact ledger or a ref still holds, and how many nothing holds;
the lost ones are listed under the table. Rows carry ``data-loss`` (the preset),
``data-turn``, ``data-messages`` and ``data-lost`` for tests and scripts.
"""

from __future__ import annotations

from collections.abc import Sequence
from html import escape

from contextfold.replay._report_cells import bad, preset_chip, table_box
from contextfold.replay.records import LossMark, ReplayRun, TranscriptReplay
from contextfold.retention.loss import messages_line

__all__ = ["LOSS_LISTED_ITEMS", "loss_section"]

LOSS_LISTED_ITEMS = 30
"""Lost facts listed per preset under the table (the rest are counted)."""

_EXPLAINED = (
    "For every compaction and mask batch, the facts of the retention table (the task, the "
    "user's constraints, the files modified, the error lines) that left the view, by where the "
    "model can still read them: quoted in a summary, in a pin, in the artifact ledger sent with "
    "every request, recoverable through a ref that read_result reads back, or nowhere (lost)."
)


def loss_section(replay: TranscriptReplay) -> str:
    """The section's HTML: its heading, one table of every preset's reports, the lost facts."""
    runs = list(replay.runs.values())
    rows = [
        _row(run, index, mark)
        for index, run in enumerate(runs)
        for mark in run.losses
        if mark.out_of_view or mark.messages_out
    ]
    heading = "<h3>Loss report</h3>"
    if not rows:
        reported = any(run.losses for run in runs)
        why = (
            "No compaction took anything out of view."
            if reported
            else "No preset compacted at this window."
        )
        return f'{heading}<p class="meta" data-loss-empty>{why}</p>'
    table = (
        '<table data-table="loss"><thead><tr><th>preset</th><th class="num">request</th>'
        '<th>trigger</th><th class="num">messages out</th><th class="num">facts out</th>'
        '<th class="num">in summary</th>'
        '<th class="num">pinned</th><th class="num">in ledger</th>'
        '<th class="num">recoverable</th><th class="num">lost</th></tr></thead>'
        f"<tbody>{''.join(rows)}</tbody></table>"
    )
    return (
        heading
        + f'<p class="meta">{escape(_EXPLAINED)}</p>'
        + table_box(table)
        + "".join(_lost_list(run) for run in runs)
    )


def _row(run: ReplayRun, index: int, mark: LossMark) -> str:
    counts = (mark.in_summary, mark.pinned, mark.in_ledger, mark.behind_ref)
    moved = messages_line(dict(mark.messages))
    return (
        f'<tr data-loss="{escape(run.preset)}" data-turn="{mark.turn}" '
        f'data-messages="{mark.messages_out}" data-out="{mark.out_of_view}" '
        f'data-lost="{mark.lost}">'
        f'<td>{preset_chip(run.preset, index)}</td><td class="num">{mark.turn}</td>'
        f"<td>{escape(mark.trigger)}</td>"
        f'<td class="num" title="{escape(moved)}">{mark.messages_out}</td>'
        f'<td class="num">{mark.out_of_view}</td>'
        + "".join(f'<td class="num">{n}</td>' for n in counts)
        + f'<td class="num {bad(mark.lost)}">{mark.lost}</td></tr>'
    )


def _lost_list(run: ReplayRun) -> str:
    marks: Sequence[LossMark] = [m for m in run.losses if m.lost]
    if not marks:
        return ""
    total = sum(m.lost for m in marks)
    items = [
        f"<li>before request {m.turn}: {escape(text)}</li>" for m in marks for text in m.lost_items
    ]
    more = total - min(len(items), LOSS_LISTED_ITEMS)
    tail = f"<li>… and {more:,} more</li>" if more > 0 else ""
    return (
        f'<details data-lost-facts="{escape(run.preset)}"><summary>{escape(run.preset)}: '
        f"{total:,} lost</summary><ul>{''.join(items[:LOSS_LISTED_ITEMS])}{tail}</ul></details>"
    )
