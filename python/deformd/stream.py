"""The binary stream port (docs/protocol.md) over asyncio: a connection that says HELLO, reads
WELCOME, then frames; and the live Replica that watch() returns."""
import asyncio
import logging
import ssl
import threading
from typing import Any, Callable, Dict, Optional, Sequence, Tuple

from . import _conn
from . import protocol as P
from .errors import ConnectionClosed, StreamError
from .replica import ReplicaState, ReplicaView

CODECS = {"lossless": P.CODEC_LOSSLESS, "quantised": P.CODEC_QUANTISED}


class StreamConnection:
    """One stream connection: HELLO sent, WELCOME read (self.welcome), then read_frame()."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, welcome: Dict[str, Any]):
        self.reader, self.writer, self.welcome = reader, writer, welcome

    @classmethod
    async def open(cls, host: str, port: int, session: str, tls: _conn.TLS = None, token: Optional[str] = None,
                   role: int = P.ROLE_VIEWER, protocol: int = P.VERSION_2, codec: str = "lossless",
                   tolerance: float = 0.0, max_rate: float = 0.0, author: Optional[str] = None,
                   caps: Optional[Sequence[str]] = ("up",), timeout: Optional[float] = 30.0) -> "StreamConnection":
        if codec not in CODECS:
            raise ValueError(f"codec must be 'lossless' or 'quantised', not {codec!r}")
        ctx = _conn.tls_context(tls)
        try:
            reader, writer = await asyncio.wait_for(
                asyncio.open_connection(host, port, ssl=ctx, server_hostname=host if ctx else None), timeout)
        except ssl.SSLError:
            raise
        except (OSError, asyncio.TimeoutError) as e:
            raise ConnectionClosed(f"cannot connect to deformd's stream port at {host}:{port}: {e}") from e
        try:
            writer.write(P.encode_hello(session, role=role, token=token or "", protocol=protocol,
                                        codec=CODECS[codec], max_rate=max_rate, tolerance=tolerance,
                                        author=author or "", caps=list(caps) if caps is not None and protocol == 2
                                        else None))
            await writer.drain()
            h, p = await asyncio.wait_for(read_frame(reader), timeout)
            if h.type in (P.ERROR, P.BYE):
                e = P.decode_error(p)
                raise StreamError(e["code"], e["message"])
            if h.type != P.WELCOME:
                raise StreamError(P.E_TYPE, f"expected WELCOME, got type {h.type}")
            welcome = P.decode_welcome(p)
            welcome["version"] = h.session_version
        except BaseException:
            writer.close()
            raise
        return cls(reader, writer, welcome)

    async def send(self, frame: bytes) -> None:
        self.writer.write(frame)
        await self.writer.drain()

    def close(self) -> None:
        self.writer.close()


async def cancel_task(task: Optional["asyncio.Task[Any]"]) -> None:
    """Cancels a reader task and waits until it has ended (whatever it ended with)."""
    if task is None:
        return
    task.cancel()
    try:
        await task
    except BaseException:
        pass


async def read_frame(reader: asyncio.StreamReader, last_type: int = P.LAST_TYPE) -> Tuple[P.Header, bytes]:
    """One frame: the header (checked; types up to last_type) and its payload."""
    try:
        hb = await reader.readexactly(P.HEADER_SIZE)
    except asyncio.IncompleteReadError:
        raise ConnectionClosed("the stream connection closed") from None
    h = P.decode_header(hb, last_type=last_type)
    try:
        return h, await reader.readexactly(h.length)
    except asyncio.IncompleteReadError:
        raise ConnectionClosed("the stream connection closed inside a frame") from None


Callback = Callable[["AsyncReplica", P.Header], None]


class AsyncReplica(ReplicaView):
    """A live replica of a session (deformd.aio.Client.watch). It applies frames as they come,
    on the event loop; read it with positions(), weights(), targets()...; wait for a version
    with `await replica.wait_version(v)`. `on_update(replica, header)` is called after each
    whole update (on the loop: keep it short, or hand the work to a queue)."""

    def __init__(self, conn: StreamConnection, session: str, on_update: Optional[Callback] = None,
                 on_close: Optional[Callable[["AsyncReplica"], None]] = None):
        self._conn = conn
        self._on_close = on_close
        self.session = session
        self.welcome = conn.welcome
        self._state = ReplicaState()
        self._lock = threading.RLock()
        self._cond = asyncio.Condition()
        self._on_update = on_update
        self._task: Optional["asyncio.Task[None]"] = None
        self.error: Optional[BaseException] = None
        self.bye: Optional[Dict[str, Any]] = None

    async def _start(self) -> "AsyncReplica":
        h, p = await read_frame(self._conn.reader)
        if h.type in (P.ERROR, P.BYE):
            e = P.decode_error(p)
            raise StreamError(e["code"], e["message"])
        with self._lock:
            self._state.apply(h, p)
        if not self._state.ready:
            raise StreamError(P.E_TYPE, f"expected SNAPSHOT, got type {h.type}")
        self._task = asyncio.get_running_loop().create_task(self._run())
        return self

    async def _run(self) -> None:
        try:
            while True:
                h, p = await read_frame(self._conn.reader)
                if h.type == P.ERROR:
                    e = P.decode_error(p)
                    raise StreamError(e["code"], e["message"])
                if h.type == P.BYE:
                    self.bye = P.decode_error(p)
                    raise ConnectionClosed(f"BYE {self.bye['code']}: {self.bye['message']}")
                before = self._state.frames
                with self._lock:
                    self._state.apply(h, p)
                if self._state.frames != before:
                    if self._on_update is not None:
                        try:
                            self._on_update(self, h)
                        except Exception:  # the callback's error is its own: the replica goes on
                            logging.getLogger("deformd").exception("on_update of the replica of %s failed",
                                                                   self.session)
                    async with self._cond:
                        self._cond.notify_all()
        except asyncio.CancelledError:
            raise
        except BaseException as e:
            self.error = e
            async with self._cond:
                self._cond.notify_all()

    @property
    def closed(self) -> bool:
        return self._task is None or self._task.done()

    async def wait_version(self, version: int, timeout: Optional[float] = 30.0) -> int:
        """Waits until the replica has reached `version` (or later); returns the version."""
        async def until() -> int:
            async with self._cond:
                while self._state.version < version:
                    if self.error is not None:
                        raise self.error
                    await self._cond.wait()
            return self._state.version
        return await asyncio.wait_for(until(), timeout)

    async def wait_update(self, timeout: Optional[float] = 30.0) -> int:
        """Waits for the next whole update; returns the version."""
        n = self._state.frames

        async def until() -> int:
            async with self._cond:
                while self._state.frames == n:
                    if self.error is not None:
                        raise self.error
                    await self._cond.wait()
            return self._state.version
        return await asyncio.wait_for(until(), timeout)

    async def close(self) -> None:
        """Leaves the session (the replica keeps what it had)."""
        if self._on_close is not None:
            self._on_close(self)
        await cancel_task(self._task)
        self._conn.close()

    async def __aenter__(self) -> "AsyncReplica":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()


class Replica(ReplicaView):
    """The blocking client's live replica (deformd.Client.watch): the same reads as
    AsyncReplica, and wait_version(v, timeout) / wait_update(timeout) / close() that block. Frames
    are applied on the client's thread as they arrive."""

    def __init__(self, inner: AsyncReplica, run: Callable[[Any], Any]):
        self._inner = inner
        self._run = run
        self.session = inner.session
        self.welcome = inner.welcome
        self._state = inner._state
        self._lock = inner._lock

    @property
    def error(self) -> Optional[BaseException]:
        return self._inner.error

    def wait_version(self, version: int, timeout: Optional[float] = 30.0) -> int:
        """Blocks until the replica has reached `version`; returns the version reached."""
        return self._run(self._inner.wait_version(version, timeout))

    def wait_update(self, timeout: Optional[float] = 30.0) -> int:
        """Blocks until the next whole update; returns the version."""
        return self._run(self._inner.wait_update(timeout))

    def close(self) -> None:
        self._run(self._inner.close())

    def __enter__(self) -> "Replica":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


class BulkLink:
    """A stream connection used for BULK requests only (capability "bulk", docs/protocol.md §15):
    it joins the session quantised at the lowest rate and throws its SNAPSHOT and updates away
    unread; BULK answers and ERRORs are matched to requests by request_id."""

    def __init__(self, conn: StreamConnection):
        self.conn = conn
        self.granted = P.CAP_BULK in (conn.welcome.get("caps") or [])
        self._pending: Dict[int, "asyncio.Future[Tuple[P.Header, Dict[str, Any]]]"] = {}
        self._next = 0
        self._task = asyncio.get_running_loop().create_task(self._run())
        self.error: Optional[BaseException] = None

    @classmethod
    async def open(cls, host: str, port: int, session: str, role: int, tls: _conn.TLS, token: Optional[str],
                   author: Optional[str], timeout: Optional[float]) -> "BulkLink":
        conn = await StreamConnection.open(host, port, session, tls=tls, token=token, role=role, codec="quantised",
                                           tolerance=0.0, max_rate=0.1, author=author, caps=[P.CAP_BULK, "up"],
                                           timeout=timeout)
        return cls(conn)

    async def _run(self) -> None:
        try:
            while True:
                h, p = await read_frame(self.conn.reader, P.BULK)
                if h.type == P.BULK:
                    m = P.decode_bulk(p)
                    f = self._pending.pop(m["request_id"], None)
                    if f is not None and not f.done():
                        f.set_result((h, m))
                elif h.type in (P.ERROR, P.BYE):
                    e = P.decode_error(p)
                    f = self._pending.pop(e["request_id"], None) if h.type == P.ERROR else None
                    if f is not None:
                        if not f.done():
                            f.set_exception(StreamError(e["code"], e["message"]))
                    elif h.type == P.BYE or e["request_id"] == 0:
                        raise StreamError(e["code"], e["message"])
        except asyncio.CancelledError:
            raise
        except BaseException as e:
            self.error = e if isinstance(e, (StreamError, ConnectionClosed)) else ConnectionClosed(str(e))
            pending, self._pending = self._pending, {}
            for f in pending.values():
                if not f.done():
                    f.set_exception(self.error)

    async def request(self, make: Callable[[int], bytes], timeout: Optional[float]) -> Tuple[P.Header, Dict[str, Any]]:
        if self.error is not None:
            raise self.error
        self._next = (self._next % 0xFFFFFFFF) + 1
        rid = self._next
        f: "asyncio.Future[Tuple[P.Header, Dict[str, Any]]]" = asyncio.get_running_loop().create_future()
        self._pending[rid] = f
        try:
            await self.conn.send(make(rid))
            return await asyncio.wait_for(f, timeout)
        finally:
            self._pending.pop(rid, None)

    async def close(self) -> None:
        await cancel_task(self._task)
        self.conn.close()
