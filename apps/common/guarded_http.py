"""httpx clients that connect only to addresses the SSRF guard allows (`apps.common.netguard`):
for OAuth token endpoints, JWKS documents and backend probes.

The guard sits in the network backend, where httpcore opens each new connection: the host is
resolved, every address checked, and the connection made to a checked address (TLS still names
the host), so DNS rebinding cannot slip past it, and neither can a redirect (every hop opens its
connection here). Environment proxies are ignored (`trust_env=False`): through a proxy the guard
would see the proxy's address instead of the target's."""

from __future__ import annotations

import logging
import typing

import anyio
import httpcore
import httpx

from apps.common.netguard import AddressRefused, resolve_checked, resolve_checked_sync

log = logging.getLogger(__name__)


class AddressNotAllowedError(httpcore.ConnectError):
    """httpcore's ConnectError (httpx raises it as httpx.ConnectError) for a refused address."""

    def __init__(self, refusal: AddressRefused) -> None:
        super().__init__(f"the address is not allowed: {refusal}")
        self.refusal = refusal


def address_refusal(exc: BaseException) -> AddressRefused | None:
    """The guard's refusal behind an httpx error, if that is what it was."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, AddressNotAllowedError):
            return seen.refusal
        seen = seen.__cause__ or seen.__context__
    return None


def _refused(host: str, port: int, exc: AddressRefused) -> AddressNotAllowedError:
    log.warning("refused to connect to %s:%s: %s", host, port, exc)
    return AddressNotAllowedError(exc)


class _GuardedAsyncBackend(httpcore.AsyncNetworkBackend):
    def __init__(self, *, allow_private: bool) -> None:
        self._allow_private = allow_private
        self._inner = httpcore.AnyIOBackend()

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: typing.Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        try:
            with anyio.fail_after(timeout):
                addresses = await resolve_checked(host, port, allow_private=self._allow_private)
        except AddressRefused as exc:
            raise _refused(host, port, exc) from None
        except (OSError, TimeoutError) as exc:
            raise httpcore.ConnectError(f"{host}: {exc}") from None
        failure: httpcore.ConnectError | None = None
        for address in addresses:
            try:
                return await self._inner.connect_tcp(address, port, timeout, local_address, socket_options)
            except httpcore.ConnectError as exc:
                failure = exc
        assert failure is not None
        raise failure

    async def connect_unix_socket(self, *args: typing.Any, **kwargs: typing.Any) -> httpcore.AsyncNetworkStream:
        raise httpcore.ConnectError("unix sockets are not reachable through the guarded client")

    async def sleep(self, seconds: float) -> None:
        await self._inner.sleep(seconds)


class _GuardedSyncBackend(httpcore.NetworkBackend):
    def __init__(self, *, allow_private: bool) -> None:
        self._allow_private = allow_private
        self._inner = httpcore.SyncBackend()

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: typing.Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.NetworkStream:
        try:
            addresses = resolve_checked_sync(host, port, allow_private=self._allow_private)
        except AddressRefused as exc:
            raise _refused(host, port, exc) from None
        except OSError as exc:
            raise httpcore.ConnectError(f"{host}: {exc}") from None
        failure: httpcore.ConnectError | None = None
        for address in addresses:
            try:
                return self._inner.connect_tcp(address, port, timeout, local_address, socket_options)
            except httpcore.ConnectError as exc:
                failure = exc
        assert failure is not None
        raise failure

    def connect_unix_socket(self, *args: typing.Any, **kwargs: typing.Any) -> httpcore.NetworkStream:
        raise httpcore.ConnectError("unix sockets are not reachable through the guarded client")

    def sleep(self, seconds: float) -> None:
        self._inner.sleep(seconds)


class _GuardedAsyncTransport(httpx.AsyncHTTPTransport):
    def __init__(self, *, allow_private: bool) -> None:
        super().__init__(trust_env=False)
        # httpx takes no network backend, so its connection pool is replaced by one that has ours.
        self._pool = httpcore.AsyncConnectionPool(
            ssl_context=httpx.create_ssl_context(trust_env=False),
            network_backend=_GuardedAsyncBackend(allow_private=allow_private),
        )


class _GuardedSyncTransport(httpx.HTTPTransport):
    def __init__(self, *, allow_private: bool) -> None:
        super().__init__(trust_env=False)
        self._pool = httpcore.ConnectionPool(
            ssl_context=httpx.create_ssl_context(trust_env=False),
            network_backend=_GuardedSyncBackend(allow_private=allow_private),
        )


def guarded_async_client(*, allow_private: bool, timeout: float) -> httpx.AsyncClient:
    """An httpx.AsyncClient that connects only where the guard allows; redirects are not followed."""
    return httpx.AsyncClient(
        transport=_GuardedAsyncTransport(allow_private=allow_private), timeout=timeout, trust_env=False,
        follow_redirects=False,
    )


def guarded_client(*, allow_private: bool, timeout: float) -> httpx.Client:
    """An httpx.Client that connects only where the guard allows; redirects are not followed."""
    return httpx.Client(
        transport=_GuardedSyncTransport(allow_private=allow_private), timeout=timeout, trust_env=False,
        follow_redirects=False,
    )
