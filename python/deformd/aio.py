"""deformd.aio — the asyncio client. `deformd.Client` (blocking) runs one of these on a thread of
its own, so both have the same methods and behave the same way.

    async with deformd.aio.Client(port=7451) as c:
        fit, w = await asyncio.gather(c.blend_fit("demo", shape="sculpt"), c.weights_get("demo"))

Requests carry increasing integer ids and answers are matched by id, so calls issued together
(gather, tasks) are pipelined on one connection and each gets its own answer in whatever order
the server sends them (docs/json-api.md §2)."""
import asyncio
import base64
import json
import os
import ssl
from array import array
from typing import Any, Awaitable, Dict, Optional, Tuple, Union

from . import _conn
from ._methods import Methods
from .errors import ConnectionClosed, RpcError
from . import _arrays
from . import protocol as P
from .errors import DeformdError
from .stream import AsyncReplica, BulkLink, Callback, StreamConnection, cancel_task

_LINE_LIMIT = 1 << 30  # an export chunk of 16 MiB is about 22 MB of base64: far below


class Client(Methods[Awaitable[Any]]):
    """An asyncio JSON-RPC connection to deformd (docs/json-api.md).

    host, port: the JSON-RPC port (default: $DEFORMD_RPC as HOST:PORT, else localhost:7451). token: an access token, sent with `auth` first
    (default $DEFORMD_TOKEN). tls: None (plain), True (verify with the system's CAs), a CA file,
    or an ssl.SSLContext. author: sent with `hello` (default $DEFORMD_AUTHOR, else $USER; "" for
    none); on a connection with a token the token's user is the author. timeout: seconds to wait
    for an answer (None: forever). stream_port: the binary stream port (default 7450) that
    watch() and the bulk arrays use (default: $DEFORMD_STREAM, else 7450 on the same host).
    bulk=False never asks for the bulk arrays (positions() and set_sculpt_offsets() then take the
    way they take with a server that has none).

    The connection opens on the first call (or `await client.open()`, or `async with`)."""

    def __init__(self, host: Optional[str] = None, port: Optional[int] = None, token: Optional[str] = None,
                 tls: _conn.TLS = None, author: Optional[str] = None, timeout: Optional[float] = 30.0,
                 stream_port: Optional[int] = None, stream_host: Optional[str] = None, bulk: bool = True):
        self.host, self.port = _conn.address(host, port, "DEFORMD_RPC", _conn.RPC_PORT)
        self.stream_host, self.stream_port = _conn.address(stream_host if stream_host is not None else host, stream_port,
                                                           "DEFORMD_STREAM", _conn.STREAM_PORT)
        if stream_host is None and host is None and not os.environ.get("DEFORMD_STREAM"):
            self.stream_host = self.host  # the stream port of the server the RPC address names
        self.token = _conn.default_token(token)
        self.tls = tls
        self.author = _conn.default_author(author)
        self.timeout = timeout
        self.role: Optional[str] = None
        self.connection_id: Optional[int] = None
        self._reader: Optional[asyncio.StreamReader] = None
        self._writer: Optional[asyncio.StreamWriter] = None
        self._task: Optional["asyncio.Task[None]"] = None
        self._pending: Dict[int, "asyncio.Future[Any]"] = {}
        self._next_id = 0
        self._opening: Optional["asyncio.Future[None]"] = None
        self._closed_reason: Optional[BaseException] = None
        self._bulk: Dict[Tuple[str, int], BulkLink] = {}
        self.use_bulk = bulk
        self._replicas: "set[AsyncReplica]" = set()
        self.bulk_fallbacks = 0  # calls answered without the bulk capability (tests read it)

    # ---- connection ------------------------------------------------------------------------------
    async def open(self) -> "Client":
        """Connects, then `auth` (with a token) and `hello` (with an author). Idempotent."""
        if self._writer is not None and self._closed_reason is None:
            return self
        if self._opening is not None:
            await asyncio.shield(self._opening)
            return self
        loop = asyncio.get_running_loop()
        if self._writer is not None:  # the connection failed: a new one (replicas and bulk links stay)
            await self._close_rpc()
        self._opening = loop.create_future()
        try:
            ctx = _conn.tls_context(self.tls)
            try:
                self._reader, self._writer = await asyncio.wait_for(
                    asyncio.open_connection(self.host, self.port, ssl=ctx, server_hostname=self.host if ctx else None,
                                            limit=_LINE_LIMIT), self.timeout)
            except ssl.SSLError:
                raise  # a certificate that does not verify says so itself
            except (OSError, asyncio.TimeoutError) as e:
                raise ConnectionClosed(f"cannot connect to deformd at {self.host}:{self.port}: {e}") from e
            self._closed_reason = None
            self._task = loop.create_task(self._read_loop())
            if self.token is not None:
                r = await self._rpc("auth", {"token": self.token})
                self.role = r.get("role") if isinstance(r, dict) else None
            if self.author is not None:
                r = await self._rpc("hello", {"author": self.author})
                self.connection_id = r.get("connection")
                self.author = r.get("author", self.author)
            self._opening.set_result(None)
        except BaseException as e:
            self._opening.set_exception(e)
            self._opening.exception()  # retrieved: a second opener re-raises it
            await self._close_rpc()
            raise
        finally:
            self._opening = None
        return self

    async def close(self) -> None:
        """Closes the connection; calls still waiting raise ConnectionClosed."""
        links, self._bulk = self._bulk, {}
        for link in links.values():
            await link.close()
        replicas, self._replicas = list(self._replicas), set()
        for r in replicas:  # replicas end with their client
            await r.close()
        await self._close_rpc()

    async def _close_rpc(self) -> None:
        w, self._writer = self._writer, None
        if w is not None:
            w.close()
            try:
                await w.wait_closed()
            except Exception:
                pass
        await cancel_task(self._task)
        self._task = None
        self._fail_all(ConnectionClosed("the client closed the connection"))

    async def __aenter__(self) -> "Client":
        return await self.open()

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()

    def _fail_all(self, e: BaseException) -> None:
        self._closed_reason = e
        pending, self._pending = self._pending, {}
        for f in pending.values():
            if not f.done():
                f.set_exception(e)

    async def _read_loop(self) -> None:
        assert self._reader is not None
        try:
            while True:
                line = await self._reader.readline()
                if not line:
                    raise ConnectionClosed(f"deformd closed the connection ({self.host}:{self.port})")
                if not line.strip():
                    continue
                msg = json.loads(line)
                fut = self._pending.pop(msg.get("id"), None) if isinstance(msg.get("id"), int) else None
                if fut is None:
                    if msg.get("id") is None and "error" in msg:  # an error about the connection itself
                        err = msg["error"]
                        raise RpcError(err.get("code", 0), err.get("message", ""), err.get("data"))
                    continue  # an answer whose caller gave up (timeout)
                if fut.done():
                    continue
                if "error" in msg:
                    err = msg["error"]
                    fut.set_exception(RpcError(err.get("code", 0), err.get("message", ""), err.get("data"),
                                               getattr(fut, "_method", None)))
                else:
                    fut.set_result(msg.get("result"))
        except asyncio.CancelledError:
            raise
        except BaseException as e:
            if not isinstance(e, (ConnectionClosed, RpcError)):
                e = ConnectionClosed(f"the connection to deformd failed: {e}")
            self._fail_all(e)

    # ---- calls -----------------------------------------------------------------------------------
    async def _rpc(self, method: str, params: Optional[Dict[str, Any]]) -> Any:
        if self._opening is not None and method not in ("auth", "hello"):
            await asyncio.shield(self._opening)  # calls wait for auth and hello
        if self._writer is None or self._closed_reason is not None:
            await self.open()  # the first call, or the first after the connection failed
        assert self._writer is not None
        self._next_id += 1
        rid = self._next_id
        req: Dict[str, Any] = {"jsonrpc": "2.0", "id": rid, "method": method}
        if params is not None:
            req["params"] = params
        fut: "asyncio.Future[Any]" = asyncio.get_running_loop().create_future()
        fut._method = method  # type: ignore[attr-defined]
        self._pending[rid] = fut
        self._writer.write(json.dumps(req, separators=(",", ":"), allow_nan=False).encode() + b"\n")
        try:
            await self._writer.drain()
            return await asyncio.wait_for(asyncio.shield(fut), self.timeout)
        except asyncio.TimeoutError:
            raise TimeoutError(f"{method}: no answer within {self.timeout} s") from None
        finally:
            self._pending.pop(rid, None)

    async def call(self, method: str, **params: Any) -> Any:
        """Any method by name with its params: the result, or RpcError(code, message, data)."""
        return await self._rpc(method, params if params else None)

    # ---- files -----------------------------------------------------------------------------------
    async def upload(self, source: Union[str, bytes, "os.PathLike[str]"], name: Optional[str] = None,
                     chunk: int = 8 << 20) -> Any:
        """Sends a local file (a path) or bytes into the server's meshes/ as `name` (default: the
        file's name) in `mesh.upload` chunks; returns the last answer."""
        if isinstance(source, (bytes, bytearray, memoryview)):
            data = bytes(source)
            if name is None:
                raise ValueError("upload of bytes needs a name")
        else:
            with open(source, "rb") as fh:
                data = fh.read()
            name = name or os.path.basename(os.fspath(source))
        off = 0
        while True:
            piece = data[off:off + chunk]
            final = off + len(piece) >= len(data)
            r = await self.mesh_upload(name, base64.b64encode(piece).decode(), offset=off, final=final)
            off += len(piece)
            if final:
                return r

    async def download(self, session: str, format: str = "glb", version: Optional[int] = None,
                       chunk: int = 4 << 20) -> bytes:
        """The session's current shape (or `version`) as an OBJ or GLB file's bytes, through
        `session.export` chunks of one version."""
        first = await self.session_export(session, format=format, version=version, offset=0, max_bytes=chunk)
        out = bytearray(base64.b64decode(first["data"]))
        total, ver = first["total"], first["version"]
        while len(out) < total:
            r = await self.session_export(session, format=format, version=ver, offset=len(out), max_bytes=chunk)
            out += base64.b64decode(r["data"])
        return bytes(out)

    # ---- the stream port -------------------------------------------------------------------------
    async def watch(self, session: str, codec: str = "lossless", tolerance: float = 0.0, max_rate: float = 0.0,
                    protocol: int = 2, on_update: Optional[Callback] = None) -> AsyncReplica:
        """Joins `session` on the stream port as a viewer and returns a live replica once the
        SNAPSHOT is in. codec: "lossless" (exact floats, the reference) or "quantised" (the
        session's grid, or the coarser one `tolerance` allows); max_rate: at most this many
        updates a second (0: every change); protocol 1 for the first version."""
        conn = await StreamConnection.open(self.stream_host, self.stream_port, session, tls=self.tls, token=self.token,
                                           protocol=protocol, codec=codec, tolerance=tolerance, max_rate=max_rate,
                                           timeout=self.timeout)
        r = AsyncReplica(conn, session, on_update, lambda x: self._replicas.discard(x))
        try:
            await r._start()
            self._replicas.add(r)
            return r
        except BaseException:
            conn.close()
            raise

    # ---- bulk arrays -----------------------------------------------------------------------------
    async def _bulk_link(self, session: str, role: int) -> BulkLink:
        key = (session, role)
        link = self._bulk.get(key)
        if link is not None and link.error is None:
            return link
        if link is not None:
            await link.close()
        link = await BulkLink.open(self.stream_host, self.stream_port, session, role, self.tls, self.token,
                                   self.author, self.timeout)
        self._bulk[key] = link
        return link

    async def _target_index(self, session: str, target: Union[int, str, None]) -> int:
        if target is None:
            raise ValueError('what="target" needs target= (a name or an index)')
        if isinstance(target, int):
            return target
        for t in await self.targets_list(session):
            if t["name"] == target:
                return int(t["index"])
        raise RpcError(-32002, f"unknown target '{target}' in session '{session}'")

    async def positions_array(self, session: str, what: str = "current", target: Union[int, str, None] = None,
                              welded: bool = False, first: int = 0, count: Optional[int] = None) -> Tuple[int, array]:
        """(version, flat array('f')) of positions(); see there."""
        code = P.BULK_WHAT.get(what)
        if code is None:
            raise ValueError(f'what must be "current", "sculpt" or "target", not {what!r}')
        tindex = await self._target_index(session, target) if code == P.BULK_TARGET else 0
        link = await self._bulk_link(session, P.ROLE_VIEWER) if self.use_bulk else None
        if link is not None and link.granted:
            h, m = await link.request(lambda rid: P.encode_bulk_get(rid, code, tindex, welded, first,
                                                                    P.BULK_TO_END if count is None else count),
                                      self.timeout)
            return h.session_version, m["values"]
        # A server without the capability: a lossless replica, joined once for this answer.
        self.bulk_fallbacks += 1
        if welded:
            raise DeformdError("welded vertices need a server that grants the \"bulk\" capability")
        r = await self.watch(session)
        try:
            with r._lock:
                st = r._state
                if code == P.BULK_POSITIONS:
                    a = st.evaluate()
                elif code == P.BULK_SCULPT:
                    a = st.offsets_f32()
                else:
                    if tindex >= len(st._need().targets):
                        raise RpcError(-32002, f"no target {tindex} in session '{session}'")
                    a = st.target_deltas(tindex)
                n = st._need().vertex_count
                version = st.version
        finally:
            await r.close()
        end = n if count is None else first + count
        if first < 0 or first > n or end > n or end < first:
            raise RpcError(-32006, f"vertices {first}..{end} out of range (the mesh has {n} vertices)")
        return version, a[3 * first:3 * end]

    async def positions(self, session: str, what: str = "current", target: Union[int, str, None] = None,
                        welded: bool = False, first: int = 0, count: Optional[int] = None) -> Any:
        """Vertex data as float32, 3 per vertex: what="current" the evaluated shape (base +
        sculpt + Σ w·Δ, docs/protocol.md §8.2), "sculpt" the sculpt offsets, "target" the deltas
        of `target` (a name or an index). welded: one per topology (welded) vertex, in
        mesh.info's `topology_vertices` order, instead of one per render vertex. first, count: a
        range of vertices (count None: to the last).

        Returns numpy float32 (n, 3) when numpy is installed, else a flat array('f') of 3n.
        Uses the stream port's bulk arrays (one binary answer, capability "bulk"); against a
        server without them it joins the session once and computes the answer locally."""
        return _arrays.vec3((await self.positions_array(session, what, target, welded, first, count))[1])

    async def set_sculpt_offsets(self, session: str, offsets: Any, welded: bool = False, first: int = 0) -> int:
        """Sets the sculpt offsets (absolute, mesh units) of vertices first … first + n − 1 from
        `offsets` (numpy (n, 3), or a flat sequence of 3n floats, or n triples): one undoable
        step by this client's author, as sculpt.set. welded: the offsets are per topology
        vertex and apply to each of its render vertices. Returns the session's version after
        it. Needs the editor role; NaN, infinities and offsets beyond the largest are refused."""
        values = _arrays.flat_f32(offsets)
        if len(values) % 3:
            raise ValueError(f"offsets must hold 3 floats per vertex, not {len(values)}")
        link = await self._bulk_link(session, P.ROLE_EDITOR) if self.use_bulk else None
        if link is not None and link.granted:
            h, _ = await link.request(lambda rid: P.encode_bulk_set(rid, values, welded, first), self.timeout)
            return h.session_version
        self.bulk_fallbacks += 1
        if welded:
            raise DeformdError("welded vertices need a server that grants the \"bulk\" capability")
        obj = {str(first + i): [values[3 * i], values[3 * i + 1], values[3 * i + 2]] for i in range(len(values) // 3)}
        return int((await self.sculpt_set(session, obj))["version"])
