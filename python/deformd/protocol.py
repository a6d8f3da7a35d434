"""deformd's binary stream protocol (docs/protocol.md) in Python: the frame header, decoders of
every message a server sends (WELCOME, SNAPSHOT, WEIGHTS, DELTA, ERROR and BYE, PING and PONG,
TARGET, TARGET_META, BULK) in versions 1 and 2, and encoders of what this package sends (HELLO,
PING, BYE, BULK_GET, BULK_SET).

A port of viewer/web/protocol.js, which mirrors protocol/*.c check for check, in the same order:
a frame the C decoder refuses is refused here with the same PROTO_E* code (ProtocolError.code);
tests/python checks it on the fixtures tests/web/write_fixtures.c writes from the C codec.
Floats are rebuilt in float32 arithmetic, as C does, so a replica here holds the C one's bits.

It opens no sockets (stream.py does) and keeps no session state (replica.py does)."""
import ctypes
import math
import struct
from array import array
from typing import Any, Dict, List, NoReturn, Optional, Sequence, Tuple

from . import meshopt
from .errors import ProtocolError

MAGIC = 0x444D4644
HEADER_SIZE = 20
VERSION_1 = 1
VERSION_2 = 2
MAX_NAME = 255
MAX_TARGETS = 65535
MAX_DRIVERS = 8
MAX_SHIFT = 24
MAX_AUTHOR = 64
MAX_CAPS = 32
MAX_CAP_NAME = 32
Q_MAX = (1 << 30) - 1

HELLO, WELCOME, SNAPSHOT, WEIGHTS, DELTA, EDIT, ERROR, PING, PONG, BYE, TARGET, TARGET_META = range(1, 13)
BULK = 13  # capability "bulk" (§14): float32 arrays on request, either way
PRESENCE = 14  # capability "presence" (§16): participants, cursors, cameras (this package never asks for it)
TEXTURE = 15  # capability "texture" (§17): materials and images once per join (this package never asks for it)
MASK = 20  # capability "mask" (§14.7): an editor's own mask (this package never asks for it)
TEXWEIGHTS, TEXCLIP = 16, 17  # capability "texclip" (§18): texture PCA clips (this package never asks for it)
TYPE_NAMES = {1: "HELLO", 2: "WELCOME", 3: "SNAPSHOT", 4: "WEIGHTS", 5: "DELTA", 6: "EDIT", 7: "ERROR", 8: "PING",
              9: "PONG", 10: "BYE", 11: "TARGET", 12: "TARGET_META", 13: "BULK", 14: "PRESENCE", 15: "TEXTURE",
              16: "TEXWEIGHTS", 17: "TEXCLIP", 20: "MASK"}
LAST_TYPE = TEXCLIP  # the header check of protocol/proto_frame.c (PROTO_LAST_TYPE), and MASK
CAP_BULK = "bulk"
BULK_GET, BULK_SET = 1, 2
BULK_POSITIONS, BULK_SCULPT, BULK_TARGET = 1, 2, 3
BULK_WELDED = 1
BULK_TO_END = 0xFFFFFFFF
BULK_WHAT = {"current": BULK_POSITIONS, "positions": BULK_POSITIONS, "sculpt": BULK_SCULPT, "target": BULK_TARGET}

OPT_CODEC, OPT_MAX_RATE, OPT_TOLERANCE, OPT_SHIFT, OPT_AUTHOR, OPT_FORWARD, OPT_CAPS, OPT_UP = range(1, 9)
OPT_LAST = OPT_UP
FLAG_CATCHUP = 1
FLAG_MORE = 2
ROLE_VIEWER = 1
ROLE_EDITOR = 2
CODEC_QUANTISED = 0
CODEC_LOSSLESS = 1

E_TRUNCATED, E_MAGIC, E_VERSION, E_TOOBIG, E_TYPE, E_NONFINITE, E_INVAL, E_TRAILING, E_NOMEM = range(-5001, -5010, -1)
_E_NAMES = {
    -5001: "frame truncated: a count promises more bytes than are present",
    -5002: "bad magic: not a deformd frame", -5003: "unsupported protocol version",
    -5004: "a length or count is over the limit", -5005: "unknown or misdirected message type",
    -5006: "NaN or infinity in a float field", -5007: "a field has an invalid value",
    -5008: "bytes left over after the message", -5009: "out of memory",
}

MAX_FRAME = 64 * 1024 * 1024
MAX_VERTICES = 5000000
MAX_TRIANGLES = 20000000

_U16 = struct.Struct("<H")
_U32 = struct.Struct("<I")
_F32 = struct.Struct("<f")
_HDR = struct.Struct("<IHBBIQ")


def fail(code: int) -> NoReturn:
    raise ProtocolError(_E_NAMES.get(code, f"protocol error {code}"), code)


def f32(x: float) -> float:
    """x rounded to float32 (overflow gives ±inf, as a C float does)."""
    return ctypes.c_float(x).value


def bits_to_float(u: int) -> float:
    return _F32.unpack(_U32.pack(u & 0xFFFFFFFF))[0]


def float_to_bits(x: float) -> int:
    return _U32.unpack(array("f", [x]).tobytes())[0]


_finite = math.isfinite


def _unzigzag(z: int) -> int:
    return (z >> 1) ^ -(z & 1)


class Cursor:
    """A bounds-checked little-endian reader over bytes (proto_cur)."""
    __slots__ = ("b", "at", "end")

    def __init__(self, b: bytes, at: int = 0, end: Optional[int] = None):
        self.b = b
        self.at = at
        self.end = len(b) if end is None else end

    def need(self, n: int) -> None:
        if n > self.end - self.at:
            fail(E_TRUNCATED)

    def bytes(self, n: int) -> bytes:
        self.need(n)
        s = self.b[self.at:self.at + n]
        self.at += n
        return s

    def u8(self) -> int:
        self.need(1)
        v = self.b[self.at]
        self.at += 1
        return v

    def u16(self) -> int:
        self.need(2)
        v = _U16.unpack_from(self.b, self.at)[0]
        self.at += 2
        return v

    def u32(self) -> int:
        self.need(4)
        v = _U32.unpack_from(self.b, self.at)[0]
        self.at += 4
        return v

    def u64(self) -> int:
        self.need(8)
        v = struct.unpack_from("<Q", self.b, self.at)[0]
        self.at += 8
        return v

    def f32raw(self) -> float:
        self.need(4)
        v = _F32.unpack_from(self.b, self.at)[0]
        self.at += 4
        return v

    def f32(self) -> float:
        v = self.f32raw()
        if not _finite(v):
            fail(E_NONFINITE)
        return v

    def str(self) -> str:
        n = self.u16()
        if n > MAX_NAME:
            fail(E_TOOBIG)
        p = self.bytes(n)
        if 0 in p:
            fail(E_INVAL)
        return bytes(p).decode("utf-8", "replace")

    def varint(self) -> int:
        out = 0
        for shift in range(0, 35, 7):
            byte = self.u8()
            if shift == 28 and byte & 0x70:
                fail(E_INVAL)
            out |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return out
        fail(E_INVAL)

    def finish(self) -> None:
        if self.at != self.end:
            fail(E_TRAILING)


class Header:
    """A frame's 20-byte header."""
    __slots__ = ("magic", "version", "type", "flags", "length", "session_version")

    def __init__(self, magic: int, version: int, type: int, flags: int, length: int, session_version: int):
        self.magic, self.version, self.type, self.flags = magic, version, type, flags
        self.length, self.session_version = length, session_version

    def __repr__(self) -> str:
        return (f"Header(type={TYPE_NAMES.get(self.type, self.type)}, version={self.version}, flags={self.flags}, "
                f"length={self.length}, session_version={self.session_version})")


def decode_header(b: bytes, max_frame: int = MAX_FRAME, last_type: int = LAST_TYPE) -> Header:
    """The header (proto_header_decode): magic, version, type, then the length limit."""
    if len(b) < HEADER_SIZE:
        fail(E_TRUNCATED)
    h = Header(*_HDR.unpack_from(b, 0))
    if h.magic != MAGIC:
        fail(E_MAGIC)
    if h.version < VERSION_1 or h.version > VERSION_2:
        fail(E_VERSION)
    if h.type < HELLO or (h.type > last_type and h.type != MASK):
        fail(E_TYPE)
    if h.length > max_frame:
        fail(E_TOOBIG)
    return h


def split_frame(b: bytes) -> Tuple[Header, bytes]:
    """One whole frame: its header and a payload of exactly header.length bytes."""
    h = decode_header(b)
    if len(b) - HEADER_SIZE != h.length:
        fail(E_TRUNCATED if h.length > len(b) - HEADER_SIZE else E_TRAILING)
    return h, b[HEADER_SIZE:]


# ---- HELLO options, WELCOME, ERROR, PING ---------------------------------------------------------

def _cap_byte(ch: int) -> bool:
    return 0x61 <= ch <= 0x7A or 0x30 <= ch <= 0x39 or ch in (0x5F, 0x2E, 0x2D)


def decode_caps(v: bytes) -> List[str]:
    """The caps option's value (proto_caps_get): every name, known or not, in list order."""
    names: List[str] = []
    at = 0
    while at < len(v):
        if len(names) == MAX_CAPS:
            fail(E_TOOBIG)
        n = v[at]
        if n == 0 or n > MAX_CAP_NAME:
            fail(E_INVAL)
        if n > len(v) - at - 1:
            fail(E_TRUNCATED)
        name = v[at + 1:at + 1 + n]
        if not all(_cap_byte(c) for c in name):
            fail(E_INVAL)
        s = bytes(name).decode("ascii")
        if s in names:
            fail(E_INVAL)
        names.append(s)
        at += 1 + n
    return names


def encode_caps(names: Sequence[str]) -> bytes:
    if len(names) > MAX_CAPS:
        fail(E_INVAL)
    out = bytearray()
    for s in names:
        b = s.encode()
        if not b or len(b) > MAX_CAP_NAME or not all(_cap_byte(c) for c in b) or list(names).count(s) > 1:
            fail(E_INVAL)
        out.append(len(b))
        out += b
    return bytes(out)


def _get_opts(c: Cursor) -> Dict[str, Any]:
    o: Dict[str, Any] = {"codec": 0, "shift": 0, "max_rate": 0.0, "tolerance": 0.0, "caps": None, "up": None}
    n_all = c.u16()
    e = Cursor(c.b, c.at, c.at + n_all)
    c.bytes(n_all)
    seen = 0
    while e.at < e.end:
        tag = e.u8()
        n = e.u16()
        v = e.bytes(n)
        if tag < OPT_CODEC or tag > OPT_LAST:
            continue  # a later version's option
        if seen & (1 << tag):
            fail(E_INVAL)
        seen |= 1 << tag
        if tag == OPT_AUTHOR:
            if n == 0 or n > MAX_AUTHOR or 0 in v:
                fail(E_INVAL)
            continue
        if tag == OPT_CAPS:
            o["caps"] = decode_caps(v)
            continue
        want = 1 if tag in (OPT_CODEC, OPT_SHIFT, OPT_FORWARD, OPT_UP) else 4
        if n != want:
            fail(E_INVAL)
        if tag == OPT_UP:
            if v[0] not in (0x79, 0x7A):
                fail(E_INVAL)
            o["up"] = chr(v[0])
        elif tag == OPT_FORWARD:
            if v[0] > 1:
                fail(E_INVAL)
        elif tag == OPT_CODEC:
            o["codec"] = v[0]
            if v[0] > CODEC_LOSSLESS:
                fail(E_INVAL)
        elif tag == OPT_SHIFT:
            o["shift"] = v[0]
            if v[0] > MAX_SHIFT:
                fail(E_INVAL)
        else:
            f = _F32.unpack(v)[0]
            if not _finite(f):
                fail(E_NONFINITE)
            if f < 0:
                fail(E_INVAL)
            o["max_rate" if tag == OPT_MAX_RATE else "tolerance"] = f
    return o


def decode_welcome(p: bytes) -> Dict[str, Any]:
    """WELCOME: client_id, role, session, and (version 2) codec, shift, max_rate, tolerance, caps
    (the capabilities granted; None when the server answered no caps option), up."""
    c = Cursor(p)
    m: Dict[str, Any] = {"client_id": c.u32(), "role": c.u8()}
    c.u8()
    m["session"] = c.str()
    m.update(protocol=VERSION_1, codec=0, shift=0, max_rate=0.0, tolerance=0.0, caps=None, up=None)
    if c.at == c.end:
        return m
    m.update(_get_opts(c))
    m["protocol"] = VERSION_2
    c.finish()
    return m


def decode_error(p: bytes) -> Dict[str, Any]:
    """ERROR and BYE: code, request_id, message."""
    c = Cursor(p)
    m: Dict[str, Any] = {"code": c.u16(), "request_id": c.u32()}
    n = c.u16()
    if n > 1024:
        fail(E_TOOBIG)
    m["message"] = bytes(c.bytes(n)).decode("utf-8", "replace")
    c.finish()
    return m


def decode_ping(p: bytes) -> Dict[str, int]:
    c = Cursor(p)
    m = {"seq": c.u32(), "t0": c.u64(), "t1": c.u64()}
    c.finish()
    return m


# ---- weights and offsets (version 1 bodies) -------------------------------------------------------

def _weights_body(c: Cursor) -> Dict[str, Any]:
    mode = c.u8()
    if mode > 3:
        fail(E_INVAL)
    count = c.u32()
    if count > MAX_TARGETS:
        fail(E_TOOBIG)
    entries: List[Tuple[int, float]] = []
    if mode in (2, 3):
        first = c.u16()
        scale = c.f32raw()
        if not _finite(scale):
            fail(E_NONFINITE)
        if scale < 0 or first + count > MAX_TARGETS:
            fail(E_INVAL)
        if not _finite(f32(scale * 32768)):
            fail(E_NONFINITE)
        q = c.bytes((2 if mode == 2 else 1) * count)
        vals = struct.unpack(f"<{count}{'h' if mode == 2 else 'b'}", q)
        entries = [(first + i, f32(qi * scale)) for i, qi in enumerate(vals)]
        return {"mode": mode, "first": first, "scale": scale, "entries": entries}
    each = 4 if mode == 0 else 6
    b = c.bytes(each * count)
    for i in range(count):
        v = _F32.unpack_from(b, each * i + (0 if mode == 0 else 2))[0]
        if not _finite(v):
            fail(E_NONFINITE)
        entries.append((i if mode == 0 else _U16.unpack_from(b, each * i)[0], v))
    return {"mode": mode, "entries": entries}


def decode_weights(p: bytes) -> Dict[str, Any]:
    """WEIGHTS: {"mode", "entries": [(target, value), ...]} in the order they apply."""
    c = Cursor(p)
    w = _weights_body(c)
    c.finish()
    return w


class Offsets:
    """Sculpt offsets of some vertices: `indices` and `q` (3 per vertex, in session quanta)."""
    __slots__ = ("shift", "indices", "q")

    def __init__(self, shift: int, indices: Sequence[int], q: Sequence[int]):
        self.shift, self.indices, self.q = shift, indices, q


def _offsets_body(c: Cursor, vertex_limit: int) -> Offsets:
    count = c.u32()
    n = c.u32()
    if count > vertex_limit:
        fail(E_TOOBIG)
    e = Cursor(c.bytes(n))
    indices = array("I", bytes(4 * count))
    q = array("i", bytes(12 * count))
    index = 0
    for i in range(count):
        gap = e.varint()
        index = gap if i == 0 else index + 1 + gap
        if index >= vertex_limit:
            fail(E_INVAL)
        indices[i] = index
        for k in range(3):
            v = _unzigzag(e.varint())
            if v > Q_MAX or v < -Q_MAX:
                fail(E_INVAL)
            q[3 * i + k] = v
    if e.at != e.end:
        fail(E_TRAILING)
    return Offsets(0, indices, q)


def decode_delta(p: bytes, max_vertices: int = MAX_VERTICES) -> Offsets:
    c = Cursor(p)
    o = _offsets_body(c, max_vertices)
    c.finish()
    return o


# ---- targets (version 1) and TARGET_META ----------------------------------------------------------

class Target:
    """A morph target: name, default_weight, min, max, flags (1: muted), drivers, indices
    (ascending) and deltas (3 per index, float32)."""
    __slots__ = ("name", "default_weight", "min", "max", "flags", "drivers", "indices", "deltas", "step")

    def __init__(self) -> None:
        self.step = 0.0


def _get_meta(c: Cursor, t: Any) -> None:
    t.min = c.f32()
    t.max = c.f32()
    if t.min > t.max:
        fail(E_INVAL)
    t.flags = c.u8()
    if t.flags & ~1:
        fail(E_INVAL)
    nd = c.u16()
    if nd > MAX_DRIVERS:
        fail(E_INVAL)
    d = c.bytes(2 * nd)
    t.drivers = list(struct.unpack(f"<{nd}H", d))


def _check_drivers(drivers: Sequence[int], self_index: int, limit: int) -> None:
    for d in drivers:
        if d >= limit or d == self_index:
            fail(E_INVAL)


def _get_target1(c: Cursor, vertex_count: int) -> Target:
    t = Target()
    t.name = c.str()
    t.default_weight = c.f32()
    _get_meta(c, t)
    count = c.u32()
    if count > vertex_count:
        fail(E_INVAL)
    ib = c.bytes(4 * count)
    db = c.bytes(12 * count)
    t.indices = array("I", bytes(ib))
    t.deltas = array("f", bytes(db))
    return t


def _check_target1(t: Target, vertex_limit: int) -> None:
    prev = -1
    for v in t.indices:
        if v >= vertex_limit or v <= prev:
            fail(E_INVAL)
        prev = v
    for x in t.deltas:
        if not _finite(x):
            fail(E_NONFINITE)


class TargetMeta:
    __slots__ = ("index", "min", "max", "flags", "drivers")


def decode_target_meta(p: bytes) -> TargetMeta:
    c = Cursor(p)
    index = c.u32()
    if index >= MAX_TARGETS:
        fail(E_INVAL)
    m = TargetMeta()
    _get_meta(c, m)
    _check_drivers(m.drivers, index, MAX_TARGETS)
    c.finish()
    m.index = index
    return m


def decode_target_add(p: bytes, max_vertices: int = MAX_VERTICES) -> Tuple[int, float, Target]:
    """TARGET (version 1): (index, weight, target)."""
    c = Cursor(p)
    index = c.u32()
    weight = c.f32()
    if index >= MAX_TARGETS:
        fail(E_INVAL)
    t = _get_target1(c, max_vertices)
    _check_drivers(t.drivers, index, index)
    _check_target1(t, max_vertices)
    c.finish()
    return index, weight, t


class Snapshot:
    """A decoded SNAPSHOT: vertex_count, triangle_count, target_count, offset_quantum, positions
    (array('f'), 3 per vertex), triangles (array('I')), uvs (array('f') or None), targets,
    weights (array('f')), offsets (Offsets), protocol, and for version 2 the traversal `trav`
    later frames need and `grid`."""

    def __init__(self) -> None:
        self.trav: Optional["Trav"] = None
        self.grid: Optional[Dict[str, Any]] = None
        self.uvs: Optional[array] = None


def decode_snapshot(p: bytes, max_vertices: int = MAX_VERTICES, max_triangles: int = MAX_TRIANGLES) -> Snapshot:
    """SNAPSHOT, version 1."""
    c = Cursor(p)
    s = Snapshot()
    s.vertex_count = c.u32()
    s.triangle_count = c.u32()
    s.target_count = c.u32()
    s.offset_quantum = c.f32()
    flags = c.u32()
    if s.vertex_count > max_vertices or s.triangle_count > max_triangles or s.target_count > MAX_TARGETS:
        fail(E_TOOBIG)
    if not s.offset_quantum > 0 or flags & ~1:
        fail(E_INVAL)
    V = s.vertex_count
    s.positions = array("f", bytes(c.bytes(12 * V)))
    for x in s.positions:
        if not _finite(x):
            fail(E_NONFINITE)
    s.triangles = array("I", bytes(c.bytes(12 * s.triangle_count)))
    if s.triangles and max(s.triangles) >= V:
        fail(E_INVAL)
    if flags & 1:
        s.uvs = array("f", bytes(c.bytes(8 * V)))
        for x in s.uvs:
            if not _finite(x):
                fail(E_NONFINITE)
    s.targets = []
    for t in range(s.target_count):
        tg = _get_target1(c, V)
        _check_drivers(tg.drivers, t, s.target_count)
        _check_target1(tg, V)
        s.targets.append(tg)
    s.weights = array("f", bytes(c.bytes(4 * s.target_count)))
    for w in s.weights:
        if not _finite(w):
            fail(E_NONFINITE)
    s.offsets = _offsets_body(c, V)
    c.finish()
    s.protocol = VERSION_1
    return s


# ---- version 2: the traversal, value streams, rank lists -----------------------------------------

NO_VERTEX = 0xFFFFFFFF
_TRAV_FIFO = 16
_GRID_MAX = 1 << 24
_M32 = 0xFFFFFFFF


class Trav:
    """proto_trav: vertex ranks and parallelogram predictors from the triangle list
    (docs/protocol.md §12.3)."""

    def __init__(self, tri: Sequence[int], triangle_count: int, vertex_count: int):
        for i in range(3 * triangle_count):
            if tri[i] >= vertex_count:
                fail(E_INVAL)
        nv = vertex_count
        self.vertex_count = nv
        order = [0] * nv
        rank = [NO_VERTEX] * nv
        pred = [0] * (3 * nv)
        fifo = [0] * _TRAV_FIFO
        nfifo = head = k = 0
        prev = NO_VERTEX
        for i in range(triangle_count):
            o = 3 * i
            t0, t1, t2 = tri[o], tri[o + 1], tri[o + 2]
            for v, a, b in ((t0, t1, t2), (t1, t2, t0), (t2, t0, t1)):
                if rank[v] != NO_VERTEX:
                    continue
                seen_a = rank[a] != NO_VERTEX
                seen_b = rank[b] != NO_VERTEX
                if seen_a and seen_b:
                    c = a
                    f = 0
                    while f < nfifo and c == a:
                        u = 3 * fifo[(head + _TRAV_FIFO - 1 - f) % _TRAV_FIFO]
                        for e in range(3):
                            if tri[u + e] == b and tri[u + (e + 1) % 3] == a:
                                c = tri[u + (e + 2) % 3]
                                break
                        f += 1
                    pred[3 * v], pred[3 * v + 1], pred[3 * v + 2] = a, b, c
                elif seen_a:
                    pred[3 * v] = pred[3 * v + 1] = pred[3 * v + 2] = a
                elif seen_b:
                    pred[3 * v] = pred[3 * v + 1] = pred[3 * v + 2] = b
                else:
                    pred[3 * v] = pred[3 * v + 1] = pred[3 * v + 2] = prev
                rank[v] = k
                order[k] = v
                k += 1
                prev = v
            fifo[head] = i
            head = (head + 1) % _TRAV_FIFO
            if nfifo < _TRAV_FIFO:
                nfifo += 1
        for v in range(nv):
            if rank[v] != NO_VERTEX:
                continue
            pred[3 * v] = pred[3 * v + 1] = pred[3 * v + 2] = prev
            rank[v] = k
            order[k] = v
            k += 1
            prev = v
        self.order = order
        self.rank = rank
        self.pred = pred

    def stream_get(self, c: Cursor, lst: Optional[Sequence[int]], count: int, lanes: int) -> List[int]:
        """A value stream (proto__stream_get): count entries of `lanes` u32, entry i being vertex
        lst[i], or the vertex of rank i when lst is None."""
        n_bytes = c.u32()
        if n_bytes < 1:
            fail(E_INVAL)
        b = c.bytes(n_bytes)
        mode = b[0]
        n = count * lanes
        if mode == 1:
            if count == 0 or n_bytes - 1 < (n * 4) // 64 + 1:
                fail(E_TRUNCATED)
            raw = bytearray(4 * n)
            if meshopt.decode_vertex_buffer(raw, count, 4 * lanes, bytes(b[1:])) != 0:
                fail(E_INVAL)
            val = list(struct.unpack(f"<{n}I", raw))
        elif mode == 0:
            e = Cursor(b, 1, n_bytes)
            val = [e.varint() for _ in range(n)]
            if e.at != e.end:
                fail(E_TRAILING)
        else:
            fail(E_INVAL)
        slot: Optional[Dict[int, int]] = None
        if lst is not None:
            slot = {}
            for i in range(count):
                slot[lst[i]] = i
        pred = self.pred
        rank = self.rank
        order = self.order
        for i in range(count):
            o = lanes * i
            for ln in range(lanes):
                z = val[o + ln]
                val[o + ln] = ((z >> 1) ^ -(z & 1)) & _M32
            v = lst[i] if lst is not None else order[i]
            s0 = -1
            a = pred[3 * v]
            if a != NO_VERTEX:
                b_ = pred[3 * v + 1]
                cc = pred[3 * v + 2]
                if slot is not None:
                    if a in slot and b_ in slot and cc in slot:
                        s0, s1, s2 = slot[a], slot[b_], slot[cc]
                else:
                    s0, s1, s2 = rank[a], rank[b_], rank[cc]
            for ln in range(lanes):
                if s0 >= 0:
                    p = (val[lanes * s0 + ln] + val[lanes * s1 + ln] - val[lanes * s2 + ln]) & _M32
                else:
                    p = val[o - lanes + ln] if i else 0
                val[o + ln] = (val[o + ln] + p) & _M32
        return val

    def ranks_get(self, c: Cursor) -> List[int]:
        """A vertex set as runs of ranks (proto__ranks_get): the vertices in ascending rank."""
        count = c.u32()
        n = c.u32()
        if count > self.vertex_count:
            fail(E_TOOBIG)
        e = Cursor(c.bytes(n))
        runs = e.varint()
        if runs > count or (runs == 0) != (count == 0):
            fail(E_INVAL)
        out: List[int] = []
        end = 0
        for _ in range(runs):
            gap = e.varint()
            more = e.varint()
            first = end + gap
            m = more + 1
            if first + m > self.vertex_count or len(out) + m > count:
                fail(E_INVAL)
            out.extend(self.order[first:first + m])
            end = first + m
        if len(out) != count:
            fail(E_INVAL)
        if e.at != e.end:
            fail(E_TRAILING)
        return out


def _s32(u: int) -> int:
    return u - (1 << 32) if u & 0x80000000 else u


def _offsets2(c: Cursor, t: Trav) -> Offsets:
    shift = c.u8()
    if shift > MAX_SHIFT:
        fail(E_INVAL)
    indices = t.ranks_get(c)
    raw = t.stream_get(c, indices, len(indices), 3)
    lim = Q_MAX + ((1 << (shift - 1)) if shift else 0)
    mul = 1 << shift
    q = array("i", bytes(4 * len(raw)))
    for i, u in enumerate(raw):
        v = _s32(u) * mul
        if v > lim or v < -lim:
            fail(E_INVAL)
        q[i] = v  # within ±(2^30 - 1 + 2^23): an int32
    return Offsets(shift, array("I", indices), q)


def _target2(c: Cursor, t: Trav) -> Target:
    tg = Target()
    tg.name = c.str()
    tg.default_weight = c.f32()
    _get_meta(c, tg)
    step = c.f32()
    if step < 0:
        fail(E_INVAL)
    lst = t.ranks_get(c)
    k = len(lst)
    val = t.stream_get(c, lst, k, 3)
    order = sorted(range(k), key=lst.__getitem__)
    indices = array("I", bytes(4 * k))
    deltas = array("f", bytes(12 * k))
    for i, at in enumerate(order):
        indices[i] = lst[at]
        for a in range(3):
            u = val[3 * at + a]
            if step > 0:
                d = _s32(u)
                if d >= _GRID_MAX or d <= -_GRID_MAX:
                    fail(E_INVAL)
                x = f32(d * step)
            else:
                x = bits_to_float(u)
            if not _finite(x):
                fail(E_NONFINITE)
            deltas[3 * i + a] = x
    tg.indices = indices
    tg.deltas = deltas
    tg.step = step
    return tg


def _attribute(c: Cursor, t: Trav, lanes: int, origin: Sequence[float], step: Sequence[float], lossless: bool,
               qmax: int) -> array:
    nv = t.vertex_count
    val = t.stream_get(c, None, nv, lanes)
    out = array("f", bytes(4 * lanes * nv))
    order = t.order
    if lossless:
        fl = array("f", struct.pack(f"<{len(val)}I", *val)) if val else array("f")
        for i in range(nv):
            v = order[i]
            for ln in range(lanes):
                x = fl[lanes * i + ln]
                if not _finite(x):
                    fail(E_NONFINITE)
                out[lanes * v + ln] = x
        return out
    for i in range(nv):
        v = order[i]
        for ln in range(lanes):
            u = val[lanes * i + ln]
            if u > qmax:
                fail(E_INVAL)
            x = f32(origin[ln] + f32(u * step[ln]))
            if not _finite(x):
                fail(E_NONFINITE)
            out[lanes * v + ln] = x
    return out


def _head2(c: Cursor, s: Snapshot, max_vertices: int, max_triangles: int) -> None:
    s.vertex_count = c.u32()
    s.triangle_count = c.u32()
    s.target_count = c.u32()
    s.offset_quantum = c.f32()
    flags = c.u8()
    shift = c.u8()
    reserved = c.u16()
    origin = [c.f32(), c.f32(), c.f32()]
    uv_origin = [c.f32(), c.f32()]
    uv_step = [c.f32(), c.f32()]
    if s.vertex_count > max_vertices or s.triangle_count > max_triangles or s.target_count > MAX_TARGETS:
        fail(E_TOOBIG)
    lossless = (flags & 2) != 0
    s.has_uvs = (flags & 1) != 0
    if not s.offset_quantum > 0 or flags & ~3 or reserved or shift > MAX_SHIFT or lossless != (shift == 0):
        fail(E_INVAL)
    step = f32(s.offset_quantum * (1 << shift)) if shift else 0.0
    if shift and not _finite(step):
        fail(E_NONFINITE)
    uv_grid = s.has_uvs and not lossless
    for i in range(3):
        if lossless and origin[i] != 0:
            fail(E_INVAL)
    for i in range(2):
        if (not uv_step[i] > 0) if uv_grid else (uv_step[i] != 0 or uv_origin[i] != 0):
            fail(E_INVAL)
    s.grid = {"quantum": s.offset_quantum, "shift": shift, "step": step, "origin": origin, "uv_origin": uv_origin,
              "uv_step": uv_step}


def decode_snapshot2(p: bytes, max_vertices: int = MAX_VERTICES, max_triangles: int = MAX_TRIANGLES) -> Snapshot:
    """SNAPSHOT, version 2 (docs/protocol.md §12.6), with its traversal (s.trav)."""
    c = Cursor(p)
    s = Snapshot()
    _head2(c, s, max_vertices, max_triangles)
    ilen = c.u32()
    ib = c.bytes(ilen)
    ni = 3 * s.triangle_count
    if (ilen < s.triangle_count + 17) if ni else ilen != 0:
        fail(E_TRUNCATED)
    tris = [0] * ni
    if ni and meshopt.decode_index_buffer(tris, ni, bytes(ib)) != 0:
        fail(E_INVAL)
    t = Trav(tris, s.triangle_count, s.vertex_count)
    s.triangles = array("I", tris)
    g = s.grid
    assert g is not None
    lossless = g["shift"] == 0
    s.positions = _attribute(c, t, 3, g["origin"], [g["step"]] * 3, lossless, _GRID_MAX - 1)
    s.uvs = _attribute(c, t, 2, g["uv_origin"], g["uv_step"], lossless, 65535) if s.has_uvs else None
    s.targets = []
    for i in range(s.target_count):
        tg = _target2(c, t)
        _check_drivers(tg.drivers, i, s.target_count)
        s.targets.append(tg)
    s.weights = array("f", bytes(c.bytes(4 * s.target_count)))
    for w in s.weights:
        if not _finite(w):
            fail(E_NONFINITE)
    s.offsets = _offsets2(c, t)
    c.finish()
    s.trav = t
    s.protocol = VERSION_2
    return s


def decode_delta2(p: bytes, trav: Trav) -> Offsets:
    c = Cursor(p)
    o = _offsets2(c, trav)
    c.finish()
    return o


def decode_target_add2(p: bytes, trav: Trav) -> Tuple[int, float, Target]:
    c = Cursor(p)
    index = c.u32()
    weight = c.f32()
    if index >= MAX_TARGETS:
        fail(E_INVAL)
    t = _target2(c, trav)
    _check_drivers(t.drivers, index, index)
    c.finish()
    return index, weight, t


# ---- writing ---------------------------------------------------------------------------------------

def frame(type: int, body: bytes, flags: int = 0, session_version: int = 0, version: int = VERSION_1) -> bytes:
    """A whole frame: the header, then `body`."""
    return _HDR.pack(MAGIC, version, type, flags, len(body), session_version) + body


def _str(b: bytes) -> bytes:
    return _U16.pack(len(b)) + b


def encode_hello(session: str, role: int = ROLE_VIEWER, token: str = "", protocol: int = VERSION_2, codec: int = 0,
                 max_rate: float = 0.0, tolerance: float = 0.0, author: str = "",
                 caps: Optional[Sequence[str]] = None) -> bytes:
    """HELLO (proto_encode_hello2): version 1, or 2 with options; `caps` None sends no caps
    option, [] an empty one."""
    s, k, a = session.encode(), token.encode(), author.encode()
    if len(s) > MAX_NAME or 0 in s or len(k) > MAX_NAME or 0 in k or len(a) > MAX_AUTHOR or 0 in a:
        fail(E_INVAL)
    if protocol not in (VERSION_1, VERSION_2):
        fail(E_INVAL)
    if protocol == VERSION_2 and (codec > CODEC_LOSSLESS or not (_finite(max_rate) and max_rate >= 0)
                                  or not (_finite(tolerance) and tolerance >= 0)):
        fail(E_INVAL)
    cv = encode_caps(caps) if caps is not None else None
    body = struct.pack("<HBB", protocol, role, 0) + _str(s) + _str(k)
    if protocol == VERSION_2:
        opts = struct.pack("<BHB", OPT_CODEC, 1, codec) + struct.pack("<BHf", OPT_MAX_RATE, 4, max_rate)
        opts += struct.pack("<BHf", OPT_TOLERANCE, 4, tolerance)
        if a:
            opts += bytes([OPT_AUTHOR]) + _str(a)
        if cv is not None:
            opts += bytes([OPT_CAPS]) + _str(cv)
        body += _U16.pack(len(opts)) + opts
    return frame(HELLO, body, version=protocol)


def encode_ping(type: int, seq: int, t0: int = 0, t1: int = 0) -> bytes:
    if type not in (PING, PONG):
        fail(E_INVAL)
    return frame(type, struct.pack("<IQQ", seq, t0, t1))


def encode_bye(code: int, message: str) -> bytes:
    m = message.encode()[:1024]
    return frame(BYE, struct.pack("<HI", code, 0) + _str(m))


_BULK_REQ = struct.Struct("<IBBBBIII")
_BULK_ANS = struct.Struct("<IBBBBIIII")


def encode_bulk_get(request_id: int, what: int, target: int = 0, welded: bool = False, first: int = 0,
                    count: int = BULK_TO_END) -> bytes:
    """BULK GET (docs/protocol.md §15): the current positions, the sculpt offsets or a target's
    deltas of vertices first … first + count − 1 (BULK_TO_END: to the last), render or welded."""
    if what not in (BULK_POSITIONS, BULK_SCULPT, BULK_TARGET):
        fail(E_INVAL)
    return frame(BULK, _BULK_REQ.pack(request_id, BULK_GET, what, BULK_WELDED if welded else 0, 0,
                                      target if what == BULK_TARGET else 0, first, count))


def encode_bulk_set(request_id: int, values: array, welded: bool = False, first: int = 0) -> bytes:
    """BULK SET: sculpt offsets (absolute, mesh units) of vertices first … first + n − 1 from a
    flat float32 array of 3n values."""
    if len(values) % 3:
        fail(E_INVAL)
    for x in values:
        if not _finite(x):
            fail(E_NONFINITE)
    data = values.tobytes() if values.itemsize == 4 and struct.pack("=I", 1) == struct.pack("<I", 1) else \
        struct.pack(f"<{len(values)}f", *values)
    return frame(BULK, _BULK_REQ.pack(request_id, BULK_SET, BULK_SCULPT, BULK_WELDED if welded else 0, 0, 0, first,
                                      len(values) // 3) + data)


def decode_bulk(p: bytes) -> Dict[str, Any]:
    """A BULK answer: request_id, op, what, welded, target, first, count, total, and for GET the
    values (array('f'), 3 per vertex)."""
    c = Cursor(p)
    c.need(_BULK_ANS.size)
    rid, op, what, flags, reserved, target, first, count, total = _BULK_ANS.unpack_from(p, 0)
    c.at = _BULK_ANS.size
    ok_what = what == BULK_SCULPT if op == BULK_SET else op == BULK_GET and what in (BULK_POSITIONS, BULK_SCULPT,
                                                                                       BULK_TARGET)
    if not ok_what or flags & ~1 or reserved or (what != BULK_TARGET and target != 0) or first > total \
            or count > total - first:
        fail(E_INVAL)
    m: Dict[str, Any] = {"request_id": rid, "op": op, "what": what, "welded": bool(flags & 1), "target": target,
                         "first": first, "count": count, "total": total, "values": None}
    if op == BULK_GET:
        b = c.bytes(12 * count)
        v = array("f")
        v.frombytes(bytes(b))
        if struct.pack("=I", 1) != struct.pack("<I", 1):
            v.byteswap()
        m["values"] = v
    c.finish()
    return m


def dequantise(q: int, quantum: float) -> float:
    """An offset in mesh units from session quanta: (float)q · quantum in float32 (§8.1)."""
    return f32(f32(q) * quantum)
