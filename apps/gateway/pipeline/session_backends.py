"""The backend sessions a downstream handshake-era session keeps, one per backend it has used:
opened on first use (once across all instances), reopened where the backend lost it or its
replica went down, and closed with the session."""

from __future__ import annotations

import asyncio
import time

from apps.gateway.pipeline.backends import BackendCatalog, close_session, egress_headers, open_session, session_headers
from apps.gateway.pipeline.ports import ReplicaUnreachable, SessionStore, Upstream, UpstreamReply, UpstreamUnavailable
from apps.gateway.pipeline.values import BackendInfo, BackendSession, BackendView, SessionState, VirtualHostView
from apps.gateway.protocol.errors import HttpError
from apps.kernel.identity import Principal


class SessionBackends:
    def __init__(self, *, sessions: SessionStore, upstream: Upstream, backends: BackendCatalog) -> None:
        self._sessions = sessions
        self._upstream = upstream
        self._backends = backends
        self._opening: dict[tuple[str, str], asyncio.Lock] = {}

    async def get(
        self,
        state: SessionState,
        map_key: str,
        backend: BackendView,
        info: BackendInfo,
        principal: Principal,
        *,
        lost: BackendSession | None = None,
    ) -> BackendSession:
        """The session's backend session for `map_key`, opened on first use. `lost` is one the
        backend no longer knows (it answered 404): it is replaced, wherever it is still recorded."""
        if lost is not None and state.backends.get(map_key) == lost:
            del state.backends[map_key]
        session = state.backends.get(map_key)
        if session is not None and not self._backends.replicas.is_up(session.replica):
            lost = session  # its replica is down: reopened on one that is up
            del state.backends[map_key]
            session = None
        if session is not None:
            return session
        lock = self._opening.setdefault((state.id, map_key), asyncio.Lock())
        try:
            async with lock:
                session = state.backends.get(map_key)
                if session is None:
                    session = await self._open_once(state, map_key, backend, principal, lost)
                state.backends[map_key] = session
        finally:
            self._opening.pop((state.id, map_key), None)
        return session

    async def _open_once(
        self, state: SessionState, map_key: str, backend: BackendView, principal: Principal, lost: BackendSession | None
    ) -> BackendSession:
        """Open the backend session, or wait for the instance that is opening it: whichever
        instances a session's first requests land on, the backend sees one `initialize`."""
        deadline = time.monotonic() + backend.timeout
        claimed = False
        while True:
            # Another instance may have opened it since this state was cached. Checked again once
            # claimed: the opener may have saved and released between this read and the claim.
            current = await self._sessions.load(state.id, tenant_id=state.tenant_id, key_id=state.key_id, fresh=True)
            if current is None:
                if claimed:
                    await self._sessions.release(state.id, map_key)
                raise HttpError(404, "Not Found: the session has ended", code=-32600)
            session = current.backends.get(map_key)
            if session is not None and session != lost:
                if claimed:
                    await self._sessions.release(state.id, map_key)
                return session
            if claimed:
                break
            claimed = await self._sessions.claim(state.id, map_key, seconds=backend.timeout)
            if claimed:
                continue
            if time.monotonic() > deadline:
                raise TimeoutError
            await asyncio.sleep(0.02)
        try:
            session, _ = await open_session(
                self._upstream,
                backend,
                self._backends.replicas.pick(backend, state.id),
                version=state.protocol_version,
                capabilities=state.client_capabilities,
                client_info=state.client_info,
                principal=principal,
                affinity=state.id,
            )
            state.backends[map_key] = session
            if not await self._sessions.save_backend(state.id, map_key, session):
                await close_session(self._upstream, backend, session, principal)
                raise HttpError(404, "Not Found: the session has ended", code=-32600)
        finally:
            await self._sessions.release(state.id, map_key)
        return session

    async def stream(
        self,
        state: SessionState,
        map_key: str,
        backend: BackendView,
        info: BackendInfo,
        principal: Principal,
        last_event_id: str | None,
    ) -> UpstreamReply:
        """The backend's answer to the GET of this session's backend session (re-opened once if the
        backend has lost it)."""
        lost: BackendSession | None = None
        for _ in range(2):
            session = await self.get(state, map_key, backend, info, principal, lost=lost)
            headers = [("accept", "text/event-stream"), *session_headers(session),
                       *await egress_headers(backend, principal)]
            if last_event_id:
                headers.append(("last-event-id", last_event_id))
            try:
                reply = await self._upstream.send(backend, session.replica, "GET", headers, timeout=backend.timeout)
            except ReplicaUnreachable:
                lost = session  # its replica is down: a new session where one is up
                continue
            if reply.status != 404 or not session.session_id:
                return reply
            reply.close()  # the backend lost the session: open a new one and ask again
            lost = session
        raise UpstreamUnavailable("the backend keeps losing the session")

    async def close_all(self, state: SessionState, vhost: VirtualHostView, principal: Principal | None) -> None:
        """End the session's backend sessions; one that cannot be reached ends by its own idle timeout."""
        await asyncio.gather(
            *(
                close_session(self._upstream, vhost.mounts[key], session, principal)
                for key, session in state.backends.items()
                if key in vhost.mounts
            )
        )
