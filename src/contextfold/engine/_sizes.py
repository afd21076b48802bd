"""The raw token counts a session needs every turn, kept so that a steady turn costs O(new).

Counting a message is cached by the counter, but finding it in that cache hashes the message's
parts, and the view has hundreds or thousands of messages: doing that for the whole view two
or three times a turn made ``prepare()`` grow with the view. :class:`ViewSizes` keeps one count
per view message (appended as messages arrive, recounted only when an edit replaces the view)
and remembers the counts of the system text, tools and instructions, which change rarely.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

from contextfold.engine._recent import GrowingView
from contextfold.messages import Message
from contextfold.tokens.counter import TokenCounter
from contextfold.tool_spec import ToolSpec

__all__ = ["CompactionCounter", "ViewSizes"]

_MADE_MEMO_MAX = 1_024
"""Messages outside the view whose counts :class:`CompactionCounter` remembers (held alive)."""

_TEXT_MEMO_MAX = 8_192
"""Texts whose counts :class:`CompactionCounter` remembers (keys are small: hash and length)."""


class ViewSizes:
    """Raw counter tokens of a session's view, message by message, and of its fixed part."""

    def __init__(self, counter: TokenCounter, view: Sequence[Message] = ()) -> None:
        self.counter = counter
        self.messages: list[int] = []
        """Raw tokens of each view message, aligned with the session's view."""
        self.total = 0
        self.outputs = 0
        """Raw tokens of the tool-result messages among them (what masking can work on)."""
        self.largest_reply = 0
        """Raw tokens of the largest assistant message among them (0 when there is none): a
        host sizing its reply reserve reads it every request, and the view is long."""
        self.by_id: dict[int, tuple[Message, int]] = {}
        """The same counts by message object (``id``), for :class:`CompactionCounter`."""
        self.generation = 0
        """Changes each time the view is replaced rather than appended to."""
        self.growing = GrowingView()
        """The view's units and running totals, caught up when asked (the cost schedule's)."""
        self._fixed_key: tuple[str, tuple[ToolSpec, ...]] | None = None
        self._fixed = (0, 0)
        self._text_key: str | None = None
        self._text = 0
        self.reset(view)

    def reset(self, view: Sequence[Message]) -> None:
        """Recount for a new view (after an edit or a restart)."""
        count = self.counter.count_message
        known = self.by_id
        self.generation += 1
        # An edit keeps most of the view's (immutable) messages as the same objects: their
        # counts are the ones held, without finding each in the counter's cache again.
        self.messages = [
            hit[1] if (hit := known.get(id(m))) is not None and hit[0] is m else count(m)
            for m in view
        ]
        self.total = sum(self.messages)
        self.outputs = largest = 0
        for message, tokens in zip(view, self.messages, strict=True):
            if message.role == "tool":
                self.outputs += tokens
            elif message.role == "assistant" and tokens > largest:
                largest = tokens
        self.largest_reply = largest
        # Replaced whole (never cleared in place): a worker thread may be reading the old one.
        self.by_id = {id(m): (m, n) for m, n in zip(view, self.messages, strict=True)}

    def append(self, message: Message) -> None:
        """Count a message appended to the view."""
        tokens = self.counter.count_message(message)
        self.messages.append(tokens)
        self.total += tokens
        self.by_id[id(message)] = (message, tokens)
        if message.role == "tool":
            self.outputs += tokens
        elif message.role == "assistant" and tokens > self.largest_reply:
            self.largest_reply = tokens

    def fixed(self, system: str, tools: Sequence[ToolSpec]) -> tuple[int, int]:
        """Raw tokens of a request with no messages (system text and tools), and of the tools.

        Remembered for the last system text and tool list: both are the same turn after turn,
        and counting tool schemas means serializing them.
        """
        key = (system, tuple(tools))
        if key != self._fixed_key:
            counter = self.counter
            request = counter.count_request([], system=system, tools=tools)
            self._fixed = (request, counter.count_tools(tools))
            self._fixed_key = key
        return self._fixed

    def text(self, text: str) -> int:
        """Raw tokens of ``text`` (the instructions section), remembered for the last text."""
        if text != self._text_key:
            self._text = self.counter.count_text(text) if text else 0
            self._text_key = text
        return self._text


class CompactionCounter:
    """The counter handed to compaction: the view's messages are counted already.

    Strategies count the view several times per run, and a masking plan counts the text of
    every old output; through the engine's counter each of those costs a hash of the message
    or a tokenizer pass. This one answers view messages by object identity (messages are
    immutable) and remembers text counts by the text's hash and length, so a run costs about
    one pass over the view. It may be used from the background worker at the same time: the
    dict operations it relies on are atomic.
    """

    def __init__(self, counter: TokenCounter, sizes: ViewSizes) -> None:
        self.counter = counter
        self.sizes = sizes
        self._texts: dict[tuple[int, int], int] = {}
        self._made: dict[int, tuple[Message, int]] = {}
        """Counts of messages outside the view, by object: those a compaction made (a masked
        copy is counted when its edit is weighed, and again when a summary replaces it)."""

    def count_text(self, text: str) -> int:
        """Tokens of ``text``, remembered."""
        return self._remembered(text, self.counter.count_text)

    def count_summary(self, text: str) -> int:
        """:meth:`count_text` of a rendered summary, remembered with the texts. A new summary
        repeats most items of the one before (and those of the summary message just counted):
        the engine counter counts its items one by one when it can, to the same total."""
        return self._remembered(
            text, getattr(self.counter, "count_summary", self.counter.count_text)
        )

    def _remembered(self, text: str, count: Callable[[str], int]) -> int:
        # Keyed without holding the text (old outputs can be large): two texts of one length
        # with the same 64-bit hash would share a count, an estimate's error at worst.
        key = (hash(text), len(text))
        tokens = self._texts.get(key)
        if tokens is None:
            if len(self._texts) >= _TEXT_MEMO_MAX:
                self._texts = {}
            tokens = self._texts[key] = count(text)
        return tokens

    def count_message(self, message: Message) -> int:
        """Tokens of one message: the remembered count for a view message, else the engine
        counter's, with the texts this counter remembers not counted again (a message a
        compaction rewrote holds the texts its plan counted: a placeholder, trimmed
        arguments)."""
        known = self.sizes.by_id.get(id(message))
        if known is not None and known[0] is message:
            return known[1]
        made = self._made.get(id(message))
        if made is not None and made[0] is message:
            return made[1]
        count_with = getattr(self.counter, "count_message_with", None)
        if count_with is None:
            tokens: int = self.counter.count_message(message)
        else:
            tokens = count_with(message, self.count_text)
        if len(self._made) >= _MADE_MEMO_MAX:
            self._made = {}
        self._made[id(message)] = (message, tokens)
        return tokens

    def count_messages(self, messages: Iterable[Message]) -> int:
        """Tokens of the agent-visible messages among ``messages``."""
        return sum(self.count_message(m) for m in messages if m.meta.agent_visible)

    # The rest of the one TokenCounter protocol: compaction rarely asks, so these pass through.
    @property
    def name(self) -> str:
        """The engine counter's label."""
        return self.counter.name

    def count_tools(self, tools: Iterable[ToolSpec]) -> int:
        """Tokens the tool definitions add, as the engine's counter says."""
        return self.counter.count_tools(tools)

    def count_request(
        self, messages: Iterable[Message], *, system: str = "", tools: Iterable[ToolSpec] = ()
    ) -> int:
        """Prompt tokens of a whole request, with view messages answered from memory."""
        listed = list(messages)
        return self.counter.count_request([], system=system, tools=tools) + self.count_messages(
            listed
        )
