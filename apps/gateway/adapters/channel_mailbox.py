"""The `Mailbox` port on the channel layer (channels-redis): a session's messages reach the event
stream that holds it, on this instance without leaving the process, on another through Redis.

Each open stream joins the channel-layer group of its session; a poster that holds no stream of
the session sends to the group. A stream that died with its instance stays in the group until the
layer's group expiry, and what is sent to it expires unread (the layer's message expiry).

A stream opened with `replace=True` ends the session's other streams, here and on every instance:
a poster that still held the old stream would otherwise deliver to it alone, and the client,
listening on the new one, would wait for an answer that never comes."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
from collections.abc import Sequence

from channels.layers import BaseChannelLayer
from redis.exceptions import RedisError

from apps.gateway.pipeline.metrics import Counters
from apps.gateway.pipeline.ports import StoreUnavailable
from apps.gateway.pipeline.standalone import LocalInbox, LocalMailbox

log = logging.getLogger(__name__)

_MESSAGE_TYPE = "mcp.session.messages"
_REPLACED_TYPE = "mcp.session.replaced"


def _group(session_id: str) -> str:
    # Group names are limited to 100 characters of a small alphabet: a digest always fits.
    return "mcp-session." + hashlib.blake2b(session_id.encode(), digest_size=16).hexdigest()


class ChannelInbox(LocalInbox):
    """A stream's inbox in this process, also in its session's channel-layer group."""

    def __init__(self, mailbox: ChannelMailbox, session_id: str, channel: str) -> None:
        super().__init__(mailbox.local, session_id)
        self._channels = mailbox
        self.channel = channel
        self.reader: asyncio.Task[None] | None = None

    def close(self) -> None:
        super().close()
        self._channels.leave(self)


class ChannelMailbox:
    def __init__(self, layer: BaseChannelLayer, counters: Counters, *, refresh_seconds: float = 3600.0) -> None:
        self._layer = layer
        self._counters = counters
        self._refresh = refresh_seconds
        #: The streams open in this process, which a message for them reaches without the layer.
        self.local = LocalMailbox()
        self._tasks: set[asyncio.Task[None]] = set()

    async def post(self, session_id: str, messages: Sequence[bytes]) -> None:
        if self.local.deliver(session_id, messages):
            self._counters.increment("session_messages", route="local")
            return
        try:
            await self._layer.group_send(_group(session_id), {"type": _MESSAGE_TYPE, "messages": list(messages)})
        except (RedisError, OSError) as exc:
            raise StoreUnavailable(type(exc).__name__) from None
        self._counters.increment("session_messages", route="relayed")

    async def open(self, session_id: str, *, replace: bool = False) -> ChannelInbox:
        if replace:
            self.local.replace(session_id)
        try:
            channel = await self._layer.new_channel()
            if replace:  # before joining, so that only the others hear it
                await self._layer.group_send(_group(session_id), {"type": _REPLACED_TYPE})
            await self._layer.group_add(_group(session_id), channel)
        except (RedisError, OSError) as exc:
            raise StoreUnavailable(type(exc).__name__) from None
        inbox = ChannelInbox(self, session_id, channel)
        inbox.reader = asyncio.ensure_future(self._read(session_id, inbox))
        self.local.hold(inbox)
        return inbox

    async def _read(self, session_id: str, inbox: ChannelInbox) -> None:
        group = _group(session_id)
        while True:
            try:
                received = await asyncio.wait_for(self._layer.receive(inbox.channel), self._refresh)
            except TimeoutError:
                received = None
            except (RedisError, OSError) as exc:
                log.warning("relay for session stream interrupted, retrying: %s", exc)
                await asyncio.sleep(1.0)
                continue
            if received is None:
                # Group membership expires (a day by default); a long-lived stream renews it.
                with contextlib.suppress(RedisError, OSError):
                    await self._layer.group_add(group, inbox.channel)
                continue
            if received.get("type") == _MESSAGE_TYPE:
                for message in received.get("messages", ()):
                    inbox.queue.put_nowait(message)
            elif received.get("type") == _REPLACED_TYPE:
                inbox.end()
                return

    def leave(self, inbox: ChannelInbox) -> None:
        """Stop reading the inbox's channel and take it out of the session's group."""
        if inbox.reader is not None:
            inbox.reader.cancel()
        task = asyncio.ensure_future(self._leave(inbox.session_id, inbox.channel))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _leave(self, session_id: str, channel: str) -> None:
        with contextlib.suppress(RedisError, OSError):
            await self._layer.group_discard(_group(session_id), channel)
