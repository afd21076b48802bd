"""Reading server-sent events off an upstream response, however its bytes are split."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx

__all__ = ["SSEDecoder", "sse_events"]


class SSEDecoder:
    """Turns the bytes of an event stream, in chunks of any size, into ``(event, data)``."""

    def __init__(self) -> None:
        self._buffer = b""
        self._event: str | None = None
        self._data: list[str] = []

    def feed(self, chunk: bytes) -> list[tuple[str | None, str]]:
        """The events completed by ``chunk``."""
        self._buffer += chunk
        events: list[tuple[str | None, str]] = []
        while True:
            end = self._buffer.find(b"\n")
            if end < 0:
                return events
            line = self._buffer[:end].rstrip(b"\r").decode("utf-8", errors="replace")
            self._buffer = self._buffer[end + 1 :]
            if not line:
                if self._data:
                    events.append((self._event, "\n".join(self._data)))
                self._event, self._data = None, []
                continue
            if line.startswith(":"):
                continue  # a comment: keep-alive
            name, _, value = line.partition(":")
            value = value.removeprefix(" ")
            if name == "event":
                self._event = value
            elif name == "data":
                self._data.append(value)

    def close(self) -> list[tuple[str | None, str]]:
        """An event the stream ended without a blank line after."""
        events = self.feed(b"\n\n") if self._buffer or self._data else []
        return events


async def sse_events(response: httpx.Response) -> AsyncIterator[tuple[str | None, str]]:
    """``(event name, data)`` for each event of ``response``'s body, as they arrive."""
    decoder = SSEDecoder()
    async for chunk in response.aiter_bytes():
        for event in decoder.feed(chunk):
            yield event
    for event in decoder.close():
        yield event
