"""deformd.Client — the blocking client. It drives a deformd.aio.Client on an event loop of its
own (one thread per Client), so calls from several threads pipeline on one connection and each
answer reaches its caller, matched by id."""
import asyncio
import concurrent.futures
import os
import threading
from typing import Any, Coroutine, Dict, Optional, TypeVar, Union

from . import _conn, aio
from ._methods import Methods
from .stream import Callback, Replica

T = TypeVar("T")


class Client(Methods[Any]):
    """A blocking JSON-RPC connection to deformd (docs/json-api.md).

        with deformd.Client(port=7451, author="ana") as c:
            c.weights_set("demo", weights={"smile_L": 0.8})

    host, port: the JSON-RPC port (default: $DEFORMD_RPC as HOST:PORT, else localhost:7451). token: an access token, sent with `auth`
    (default $DEFORMD_TOKEN). tls: None (plain), True (verify with the system's CAs), a CA file
    path, or an ssl.SSLContext. author: sent with `hello` (default $DEFORMD_AUTHOR, else $USER;
    "" for none). timeout: seconds each call waits for its answer (None: forever); the attribute
    can be changed later. stream_port, stream_host: the binary stream port, for watch() and the
    bulk arrays (default: $DEFORMD_STREAM, else 7450 on the same host). bulk=False: never
    the bulk arrays (the slow way a server without them is answered). The constructor connects (and raises if it cannot)."""

    def __init__(self, host: Optional[str] = None, port: Optional[int] = None, token: Optional[str] = None,
                 tls: _conn.TLS = None, author: Optional[str] = None, timeout: Optional[float] = 30.0,
                 stream_port: Optional[int] = None, stream_host: Optional[str] = None, bulk: bool = True):
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="deformd-client", daemon=True)
        self._thread.start()
        self._aio = aio.Client(host, port, token=token, tls=tls, author=author, timeout=timeout,
                               stream_port=stream_port, stream_host=stream_host, bulk=bulk)
        try:
            self._run(self._aio.open())
        except BaseException:
            self._stop_loop()
            raise

    # ---- plumbing --------------------------------------------------------------------------------
    def _submit(self, coro: "Coroutine[Any, Any, T]") -> "concurrent.futures.Future[T]":
        if self._loop.is_closed():
            coro.close()
            raise RuntimeError("the client is closed")
        return asyncio.run_coroutine_threadsafe(coro, self._loop)

    def _run(self, coro: "Coroutine[Any, Any, T]") -> T:
        return self._submit(coro).result()

    def _rpc(self, method: str, params: Optional[Dict[str, Any]]) -> Any:
        return self._run(self._aio._rpc(method, params))

    def _stop_loop(self) -> None:
        if not self._loop.is_closed():
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join()
            self._loop.close()

    @property
    def timeout(self) -> Optional[float]:
        """Seconds each call waits for its answer (None: forever)."""
        return self._aio.timeout

    @timeout.setter
    def timeout(self, value: Optional[float]) -> None:
        self._aio.timeout = value

    @property
    def author(self) -> Optional[str]:
        """The author the server names this connection's changes by."""
        return self._aio.author

    @property
    def role(self) -> Optional[str]:
        """The token's role after `auth` (None without a token)."""
        return self._aio.role

    @property
    def host(self) -> str:
        return self._aio.host

    @property
    def port(self) -> int:
        return self._aio.port

    @property
    def stream_port(self) -> int:
        return self._aio.stream_port

    # ---- calls -----------------------------------------------------------------------------------
    def call(self, method: str, **params: Any) -> Any:
        """Any method by name with its params; returns the result or raises
        deformd.RpcError(code, message, data)."""
        return self._rpc(method, params if params else None)

    def submit(self, method: str, **params: Any) -> "concurrent.futures.Future[Any]":
        """Sends a call without waiting: a concurrent.futures.Future of its result. Calls submitted
        together are pipelined; each future gets its own answer whatever order they come in."""
        return self._submit(self._aio._rpc(method, params if params else None))

    def upload(self, source: Union[str, bytes, "os.PathLike[str]"], name: Optional[str] = None,
               chunk: int = 8 << 20) -> Any:
        """Sends a local file (a path) or bytes into the server's meshes/ as `name` (default: the
        file's name) in `mesh.upload` chunks; returns the last answer."""
        return self._run(self._aio.upload(source, name, chunk))

    def download(self, session: str, format: str = "glb", version: Optional[int] = None,
                 chunk: int = 4 << 20) -> bytes:
        """The session's shape (or `version`) as the bytes of an OBJ or GLB file."""
        return self._run(self._aio.download(session, format, version, chunk))

    def positions(self, session: str, what: str = "current", target: Union[int, str, None] = None,
                  welded: bool = False, first: int = 0, count: Optional[int] = None) -> Any:
        """Vertex data as float32, 3 per vertex: what="current" the evaluated shape, "sculpt" the
        sculpt offsets, "target" the deltas of `target` (name or index); welded: per topology
        vertex; first, count: a range. numpy float32 (n, 3) when numpy is installed, else a flat
        array('f'). See deformd.aio.Client.positions."""
        return self._run(self._aio.positions(session, what, target, welded, first, count))

    def set_sculpt_offsets(self, session: str, offsets: Any, welded: bool = False, first: int = 0) -> int:
        """Sets the sculpt offsets of vertices first … first + n − 1 (numpy (n, 3) or 3n floats)
        as one undoable step; returns the version after it. See deformd.aio.Client."""
        return self._run(self._aio.set_sculpt_offsets(session, offsets, welded, first))

    def watch(self, session: str, codec: str = "lossless", tolerance: float = 0.0, max_rate: float = 0.0,
              protocol: int = 2, on_update: Optional[Callback] = None) -> Replica:
        """Joins `session` on the stream port and returns a live Replica once its SNAPSHOT is in
        (see deformd.aio.Client.watch). `on_update(replica, header)` runs on the client's thread
        after each whole update: keep it short, or put the work on a queue."""
        return Replica(self._run(self._aio.watch(session, codec, tolerance, max_rate, protocol, on_update)), self._run)

    def close(self) -> None:
        """Closes the connection and stops the client's thread."""
        if not self._loop.is_closed():
            try:
                self._run(self._aio.close())
            finally:
                self._stop_loop()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __del__(self) -> None:
        # A client dropped unclosed closes itself, except on its own thread (a callback that
        # dropped the last reference), where waiting for the loop would wait for itself.
        if getattr(self, "_thread", None) is None or threading.current_thread() is self._thread:
            return
        try:
            self.close()
        except Exception:
            pass
