"""How big the next request is: :class:`ContextSizeEstimator`, anchored on provider usage.

The provider's own report of the last call is the truth; only what was added since is estimated,
with a per-session :class:`Calibration` learned from earlier reports. The estimator needs a
:class:`~contextfold.tokens.counter.TokenCounter` for the estimated part; any of the counters in
:mod:`contextfold.tokens.counters` will do.
"""

from __future__ import annotations

import hashlib
import operator
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from contextfold.messages import Message, Usage
from contextfold.tokens.chat_template import message_key as _message_key
from contextfold.tokens.chat_template import template_of as _template
from contextfold.tokens.counter import TokenCounter
from contextfold.tool_spec import ToolSpec

__all__ = [
    "CALIBRATION_BOUNDS",
    "CALIBRATION_DECAY",
    "CALIBRATION_PRIOR_MESSAGES",
    "CALIBRATION_PRIOR_TOKENS",
    "CALIBRATION_STEP",
    "PER_MESSAGE_BOUNDS",
    "PER_MESSAGE_STEP",
    "Calibration",
    "ContextEstimate",
    "ContextSizeEstimator",
]

CALIBRATION_BOUNDS = (0.5, 2.0)
"""The per-token scale never leaves this range: one odd report cannot derail estimates."""
CALIBRATION_STEP = (0.8, 1.5)
"""How far one report may move the scale: down to 0.8x, up to 1.5x. Lowering it is what risks an
overflow (every later estimate shrinks), so it moves down more slowly than up."""
PER_MESSAGE_BOUNDS = (0.0, 24.0)
"""Provider tokens one message's framing may cost (role markers, separators)."""
PER_MESSAGE_STEP = (2.0, 8.0)
"""How far one report may move the per-message cost: down by 2 tokens, up by 8."""
CALIBRATION_DECAY = 0.8
"""Weight kept by older observations at each report: recent turns matter most."""
CALIBRATION_PRIOR_TOKENS = 300
"""Evidence for the counter's own scale: a pseudo-observation of this many content tokens
billed 1:1, so that a few small reports cannot swing the scale."""
CALIBRATION_PRIOR_MESSAGES = 2
"""Evidence for the counter's own per-message framing, in messages (same idea)."""


@dataclass(frozen=True, slots=True)
class Calibration:
    """How the provider's token counts relate to the counter's, learned per session.

    A request the counter sizes at ``raw`` tokens over ``messages`` messages costs about
    ``scale × content + per_message × messages + overhead`` provider tokens, where ``content``
    is ``raw`` minus the counter's own framing (``counted_per_message`` a message). The three
    are kept apart because they go wrong apart: a server may render the tools or its chat
    markers very differently (a fixed overhead, learned from the first report) while counting
    text much as we do (the scale); folding both into one factor turns a large fixed difference
    into a per-token error that grows with every later message (issue 13: -44 % to -62 %).
    """

    scale: float = 1.0
    """Provider tokens per counter token of content."""
    per_message: float = 3.0
    """Provider tokens of one message's framing."""
    counted_per_message: int = 3
    """The counter's own framing of one message (its chat template)."""
    overhead: int = 0
    """Fixed provider tokens beyond the scaled estimate: hidden prompts, tool rendering, chat
    markers; negative when the provider renders less than we count (tools it leaves out)."""
    fixed_raw: int = 0
    """Counter tokens of the fixed part (system, tools, reply priming) the overhead was learned
    on. When the scale moves, the overhead moves the other way on this part, so the provider's
    count of the fixed part, which the first report measured, stays what it was."""

    def messages_tokens(self, raw: int, messages: int) -> int:
        """Provider tokens of ``messages`` messages the counter sizes at ``raw`` tokens."""
        content = raw - self.counted_per_message * messages
        return max(0, round(self.scale * content + self.per_message * messages))

    def ratio(self, raw: int, messages: int) -> float:
        """Provider tokens per counter token for such messages (the scale when there are none)."""
        if raw <= 0:
            return self.scale
        low, high = CALIBRATION_BOUNDS
        return min(high, max(low, self.messages_tokens(raw, messages) / raw))


@dataclass(frozen=True, slots=True)
class ContextEstimate:
    """The estimated size of the next request, and how it was obtained."""

    tokens: int
    """Prompt tokens the next request will take."""
    anchored: bool
    """True when built on the provider's last reported usage, False for a full estimate."""
    added_tokens: int
    """Of ``tokens``, the estimated part: what was added since the report (all when unanchored)."""
    calibration: float
    """The per-token scale applied to raw estimates (learned this session)."""
    fit: Calibration = field(default_factory=Calibration)
    """The whole calibration the estimate was made with."""


@dataclass(slots=True)
class _Anchor:
    reported: int  # prompt + completion tokens of the last call
    messages: list[Message]  # the messages the report covers, in order (immutable objects)
    fixed_raw: int  # raw estimate of system + tools at that call
    reply_pending: bool  # the reply is in `reported` but was not passed to record()
    raw: int  # raw estimate of `messages` (kept so a report never recounts the whole view)
    digest: str | None = None  # the ids fingerprint of `messages`, computed when first saved
    ids_hash: _IdsHash | None = None  # the hash `digest` was read from, once computed
    prefix: _IdsHash | None = None
    """The ids hash of the anchor before this one, when its messages begin this one's (the
    anchor grew): the digest goes on from it instead of hashing every id again each turn."""


class _IdsHash:
    """The fingerprint of message ids in order kept in a saved state for an anchor: the sha256
    of the ids joined with newlines (its first 32 hex digits). Kept as the hash itself, so that
    an anchor that grew hashes only its new ids (a concatenation's sha256 is the same however
    it is fed)."""

    __slots__ = ("_hash", "count")

    def __init__(self) -> None:
        self.count = 0
        """How many ids have been hashed."""
        self._hash = hashlib.sha256()

    def extended(self, messages: Sequence[Message]) -> _IdsHash:
        """A hash of these ids followed by those of ``messages[self.count:]`` (``self`` is left
        as it is: the anchor it belongs to may be saved again)."""
        grown = _IdsHash()
        grown._hash = self._hash.copy()
        grown.count = self.count
        rest = messages[self.count :]
        if rest:
            joined = "\n".join(m.id for m in rest)
            grown._hash.update(("\n" + joined if grown.count else joined).encode("utf-8"))
            grown.count += len(rest)
        return grown

    def digest(self) -> str:
        """The fingerprint saved in the state."""
        return self._hash.hexdigest()[:32]


def _anchor_digest(anchor: _Anchor) -> str:
    if anchor.digest is None:
        start = anchor.prefix if anchor.prefix is not None else _IdsHash()
        anchor.ids_hash = start.extended(anchor.messages)
        anchor.prefix = None  # used: the anchor holds its own hash now
        anchor.digest = anchor.ids_hash.digest()
    return anchor.digest


@dataclass(slots=True)
class _Evidence:
    """Decayed least-squares sums of growth observations: ``growth ≈ scale × content +
    per_message × messages`` (content and messages added between two reports)."""

    xx: float = 0.0
    xn: float = 0.0
    nn: float = 0.0
    xy: float = 0.0
    ny: float = 0.0

    def add(self, content: float, messages: float, growth: float) -> None:
        d = CALIBRATION_DECAY
        self.xx = self.xx * d + content * content
        self.xn = self.xn * d + content * messages
        self.nn = self.nn * d + messages * messages
        self.xy = self.xy * d + content * growth
        self.ny = self.ny * d + messages * growth

    def solve(self, counted_per_message: int) -> tuple[float, float]:
        """The (scale, per_message) that fit the observations, pulled toward the counter's own
        figures by a fixed prior (which also keeps the system solvable when every observation
        adds the same number of messages)."""
        p, m = float(CALIBRATION_PRIOR_TOKENS), float(CALIBRATION_PRIOR_MESSAGES)
        xx, nn = self.xx + p * p, self.nn + m * m
        xy, ny = self.xy + p * p, self.ny + m * m * counted_per_message
        det = xx * nn - self.xn * self.xn
        if det <= 0:
            return xy / xx, ny / nn
        return (xy * nn - self.xn * ny) / det, (xx * ny - self.xn * xy) / det

    def values(self) -> list[float]:
        return [self.xx, self.xn, self.nn, self.xy, self.ny]


def _clamp(value: float, low: float, high: float) -> float:
    return min(high, max(low, value))


def _first_overhead(reported: int, modelled: int) -> int:
    """The fixed overhead the first report shows: what it billed beyond (or below) our model of
    that request, within the scale's own bounds (half to twice the model).

    Only the first report sets it: later ones are growth, which the scale and the per-message
    cost explain; letting every report move the overhead as well let it drift to absorb their
    errors (thousands of tokens in a 6k window against a real llama.cpp server).
    """
    low, high = CALIBRATION_BOUNDS
    return round(_clamp(reported - modelled, (low - 1) * modelled, (high - 1) * modelled))


@dataclass
class ContextSizeEstimator:
    """Tells the engine how big the next request is, from the provider's own token reports.

    Call it once per turn::

        size = estimator.estimate(view, system=system_text, tools=tools)   # before the call
        ...                                                               # the model answers
        estimator.record(response_usage, view, system=system_text, tools=tools, reply=reply)

    With a report on file, and the view still starting with the messages it covered,
    ``estimate`` returns *reported prompt + completion tokens + the calibrated estimate of what
    was added since* (and of any change in system text or tools). When the view changed other
    than by appending (a compaction edit, a masked message), the anchor no longer matches and
    the whole request is estimated instead, until the next report rebases it.

    The :class:`Calibration` is learned from the reports. The first one sets the fixed
    overhead (what the provider adds or leaves out beyond our count of that request); each
    later one adds an observation of growth (reported growth against the content and messages
    added), from which a decayed least-squares fit gives the per-token scale and the
    per-message framing. One report moves each only so far (:data:`CALIBRATION_STEP`,
    :data:`PER_MESSAGE_STEP`).
    """

    counter: TokenCounter
    _anchor: _Anchor | None = field(default=None, init=False, repr=False)
    _fit: Calibration | None = field(default=None, init=False, repr=False)
    _evidence: _Evidence = field(default_factory=_Evidence, init=False, repr=False)
    _reports: int = field(default=0, init=False, repr=False)
    _fixed_memo: tuple[str, tuple[ToolSpec, ...], int] | None = field(
        default=None, init=False, repr=False
    )
    _view_memo: tuple[list[Message], int] | None = field(
        default=None, init=False, repr=False, compare=False
    )
    """The last whole view counted and its raw tokens (see :meth:`_raw_view`)."""

    @property
    def fit(self) -> Calibration:
        """The calibration learned so far (the counter's own figures before any report)."""
        if self._fit is None:
            pm = _template(self.counter).per_message
            self._fit = Calibration(per_message=float(pm), counted_per_message=pm)
        return self._fit

    @property
    def calibration(self) -> float:
        """Provider tokens per counter token of content; 1.0 before the reports say otherwise."""
        return self.fit.scale

    @property
    def anchored(self) -> bool:
        """True when a usage report is on file (it may still not match a changed view)."""
        return self._anchor is not None

    def estimate(
        self,
        messages: Sequence[Message],
        *,
        system: str = "",
        tools: Iterable[ToolSpec] = (),
        all_visible: bool = False,
    ) -> ContextEstimate:
        """Prompt tokens of the request ``system + tools + messages`` (hidden messages skipped).

        ``all_visible=True`` states that no message is hidden from the agent (an engine view),
        which saves a pass over the messages every turn.
        """
        visible = messages if all_visible else _visible(messages)
        fixed = self._fixed_raw(system, tools)
        fit = self.fit
        added = self._added_since_anchor(visible)
        if added is None or self._anchor is None:
            tokens = self._full(fit, fixed, self._raw_view(visible), len(visible))
            return ContextEstimate(tokens, False, tokens, fit.scale, fit)
        added_tokens = fit.messages_tokens(self._raw_messages(added), len(added)) + round(
            fit.scale * (fixed - self._anchor.fixed_raw)
        )
        return ContextEstimate(
            self._anchor.reported + added_tokens, True, added_tokens, fit.scale, fit
        )

    def full_estimate(
        self, messages: Sequence[Message], *, system: str = "", tools: Iterable[ToolSpec] = ()
    ) -> int:
        """Prompt tokens of the request, estimated whole with the calibration (no anchor)."""
        visible = _visible(messages)
        return self._full(
            self.fit, self._fixed_raw(system, tools), self._raw_view(visible), len(visible)
        )

    def record(
        self,
        usage: Usage,
        messages: Sequence[Message],
        *,
        system: str = "",
        tools: Iterable[ToolSpec] = (),
        reply: Message | None = None,
    ) -> None:
        """Anchor on the usage reported for the request ``system + tools + messages``.

        ``reply`` is the assistant message the call produced, if it will be appended to the
        view as is; without it, the next assistant message after ``messages`` is assumed to be
        the reply. A report with no prompt tokens (a provider that does not report) is ignored.
        """
        if usage.input_tokens <= 0 or usage.estimated:
            return  # an estimated report is our own count: nothing to learn from it
        visible = _visible(messages)
        fixed = self._fixed_raw(system, tools)
        added = self._added_since_anchor(visible)
        fit = self.fit
        anchor = self._anchor
        if added is not None and anchor is not None:
            raw = anchor.raw + self._raw_messages(visible[len(anchor.messages) :])
            content = self._raw_messages(added) - fit.counted_per_message * len(added)
            content += fixed - anchor.fixed_raw
            growth = usage.input_tokens - anchor.reported
            if growth > 0 and (content > 0 or added):
                fit = self._learn(fit, content, len(added), growth)
        else:
            raw = self._raw_messages(visible)
        if self._reports == 0:
            modelled = self._full(replace(fit, overhead=0), fixed, raw, len(visible))
            fit = replace(
                fit,
                overhead=_first_overhead(usage.input_tokens, modelled),
                fixed_raw=fixed + self._per_request(),
            )
        self._fit = fit
        self._reports += 1
        covered = list(visible)
        if reply is not None:
            covered.append(reply)
            raw += self._raw_messages([reply])
        # The view still begins with the old anchor's messages (same ids, `added` says so):
        # its ids hash, when the state was saved with it, is where this one's goes on from.
        grown = anchor.ids_hash if added is not None and anchor is not None else None
        self._anchor = _Anchor(usage.total_tokens, covered, fixed, reply is None, raw, prefix=grown)

    def state(self) -> dict[str, Any]:
        """This estimator's learned state as JSON values, for :meth:`restore` in another process.

        The anchor is saved as the number of messages it covers and a digest of their ids (the
        state is saved every turn, so it must not grow with the view) and rebuilt from the
        resumed view.
        """
        anchor = self._anchor
        fit = self.fit
        return {
            "fit": {
                "scale": fit.scale,
                "per_message": fit.per_message,
                "overhead": fit.overhead,
                "fixed_raw": fit.fixed_raw,
                "evidence": self._evidence.values(),
                "reports": self._reports,
            },
            "anchor": None
            if anchor is None
            else {
                "reported": anchor.reported,
                "count": len(anchor.messages),
                "ids_digest": _anchor_digest(anchor),
                "fixed_raw": anchor.fixed_raw,
                "reply_pending": anchor.reply_pending,
            },
        }

    def restore(self, state: Mapping[str, Any], messages: Sequence[Message]) -> None:
        """Continue from :meth:`state` over ``messages`` (the resumed view).

        The anchor is kept only when the view still starts with the messages it covered;
        otherwise the next estimate is a full one, as it would have been without a restart.
        """
        self._restore_fit(state)
        self._anchor = None
        anchor = state.get("anchor")
        if not anchor:
            return
        visible = _visible(messages)
        ids_hash: _IdsHash | None = None
        if "ids" in anchor:  # the format before ids_digest
            ids = list(anchor["ids"])
            count = len(ids)
            if len(visible) < count or any(m.id != i for m, i in zip(visible, ids, strict=False)):
                return
        else:
            count = int(anchor["count"])
            if len(visible) < count:
                return
            ids_hash = _IdsHash().extended(visible[:count])
            if ids_hash.digest() != anchor["ids_digest"]:
                return
        covered = list(visible[:count])
        self._anchor = _Anchor(
            int(anchor["reported"]),
            covered,
            int(anchor["fixed_raw"]),
            bool(anchor["reply_pending"]),
            self._raw_messages(covered),
            prefix=ids_hash,
        )

    def _restore_fit(self, state: Mapping[str, Any]) -> None:
        base = replace(self.fit, scale=1.0, overhead=0)
        base = replace(base, per_message=float(base.counted_per_message))
        self._evidence = _Evidence()
        self._reports = 0
        saved = state.get("fit")
        if isinstance(saved, Mapping):
            self._fit = replace(
                base,
                scale=float(saved.get("scale", 1.0)),
                per_message=float(saved.get("per_message", base.per_message)),
                overhead=int(saved.get("overhead", 0)),
                fixed_raw=int(saved.get("fixed_raw", 0)),
            )
            self._evidence = _Evidence(*(float(v) for v in saved.get("evidence", ())[:5]))
            self._reports = int(saved.get("reports", 0))
            return
        # The format before the fit: one factor, reported / estimated.
        reported, estimated = state.get("evidence", (0.0, 0.0))
        low, high = CALIBRATION_BOUNDS
        scale = _clamp(float(reported) / float(estimated), low, high) if estimated else 1.0
        self._fit = replace(base, scale=scale)
        self._reports = 1 if estimated else 0

    def rebase(
        self,
        messages: Sequence[Message],
        tokens: int,
        *,
        system: str = "",
        tools: Iterable[ToolSpec] = (),
    ) -> None:
        """Take ``tokens`` as the size of the request ``system + tools + messages``.

        After a compaction the engine knows the new size as the old (anchored) size minus what
        the edits freed; rebasing keeps estimates on the provider's scale instead of falling
        back to a full estimate on the counter's. The next report replaces it.
        """
        visible = _visible(messages)
        # A copy: the caller's list keeps growing, the anchor must not. The view was mostly
        # estimated whole just before (a compaction's new view): its count is remembered.
        self._anchor = _Anchor(
            max(0, tokens),
            list(visible),
            self._fixed_raw(system, tools),
            False,
            self._raw_view(visible),
        )

    def invalidate(self) -> None:
        """Forget the anchor (after a compaction): estimate in full until the next report."""
        self._anchor = None

    def reset(self) -> None:
        """Forget the anchor and the calibration (a new session)."""
        self._anchor = None
        self._fit = None
        self._evidence = _Evidence()
        self._reports = 0

    # -- internals -------------------------------------------------------------------------------

    def _full(self, fit: Calibration, fixed: int, raw: int, messages: int) -> int:
        """The whole request, estimated: scaled fixed part, messages, and the overhead."""
        scaled_fixed = round(fit.scale * (fixed + self._per_request()))
        return max(0, scaled_fixed + fit.messages_tokens(raw, messages) + fit.overhead)

    def _learn(self, fit: Calibration, content: int, messages: int, growth: int) -> Calibration:
        """``fit`` moved toward one more growth observation, each figure within its step."""
        self._evidence.add(content, messages, growth)
        scale, per_message = self._evidence.solve(fit.counted_per_message)
        down, up = CALIBRATION_STEP
        scale = _clamp(scale, fit.scale * down, fit.scale * up)
        scale = _clamp(scale, *CALIBRATION_BOUNDS)
        less, more = PER_MESSAGE_STEP
        per_message = _clamp(per_message, fit.per_message - less, fit.per_message + more)
        per_message = _clamp(per_message, *PER_MESSAGE_BOUNDS)
        overhead = fit.overhead - round((scale - fit.scale) * fit.fixed_raw)
        return replace(fit, scale=scale, per_message=per_message, overhead=overhead)

    def _added_since_anchor(self, visible: Sequence[Message]) -> list[Message] | None:
        """Messages after the anchored prefix, or None when the view no longer starts with it."""
        anchor = self._anchor
        if anchor is None or len(visible) < len(anchor.messages):
            return None
        count = len(anchor.messages)
        covered = anchor.messages
        # A view that only grew holds the very same (immutable) message objects: compare
        # identities at C speed, and contents only where an object was replaced.
        if not all(map(operator.is_, visible[:count], covered)):
            for index in range(count - 1, -1, -1):  # newest first: edits hit recent messages
                current, anchored = visible[index], covered[index]
                if current is not anchored and _message_key(current) != _message_key(anchored):
                    return None
        added = list(visible[count:])
        if anchor.reply_pending and added and added[0].role == "assistant":
            added = added[1:]  # the reply's tokens are in the report's completion count
        return added

    def _raw_messages(self, messages: Iterable[Message]) -> int:
        return self.counter.count_messages(messages)

    def _raw_view(self, messages: Sequence[Message]) -> int:
        """:meth:`_raw_messages` of a whole view, which without an anchor is counted on every
        turn: a view that only grew since the last one begins with the very same (immutable)
        message objects, whose count is known, so only the messages after them are counted.
        Each message's count is the counter's alone, so the sum is the same either way."""
        memo = self._view_memo
        if memo is not None:
            held, total = memo
            known = len(held)
            if known <= len(messages) and all(map(operator.is_, messages[:known], held)):
                total += self._raw_messages(messages[known:])
                self._view_memo = (list(messages), total)
                return total
        total = self._raw_messages(messages)
        self._view_memo = (list(messages), total)
        return total

    def _fixed_raw(self, system: str, tools: Iterable[ToolSpec]) -> int:
        # Asked twice a turn with the same prompt and tools: remember the last answer.
        listed = tuple(tools)
        memo = self._fixed_memo
        if memo is not None and memo[0] == system and memo[1] == listed:
            return memo[2]
        total = self.counter.count_tools(listed)
        if system:
            total += self.counter.count_text(system) + _template(self.counter).per_message
        self._fixed_memo = (system, listed, total)
        return total

    def _per_request(self) -> int:
        return _template(self.counter).per_request


_IS_VISIBLE = operator.attrgetter("meta.agent_visible")


def _visible(messages: Sequence[Message]) -> Sequence[Message]:
    """The agent-visible messages; ``messages`` itself when all are (the engine's view always
    is), which checks at C speed instead of copying the view every turn."""
    if all(map(_IS_VISIBLE, messages)):
        return messages
    return [m for m in messages if m.meta.agent_visible]
