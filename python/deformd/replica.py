"""A session as a viewer holds it (server/client/client_replica.c, viewer/web/replica.js in
Python): the SNAPSHOT's mesh and targets, the weights, the sculpt offsets in session quanta and
the version. Frames apply as docs/protocol.md says: WEIGHTS and DELTA carry absolute values; a
frame with MORE does not advance the version; TARGET appends; TARGET_META replaces a target's
settings. positions() is the reference formula of docs/protocol.md §8.2 (double accumulation,
one rounding), so it equals `deformctl watch --dump` bit for bit.

Opens no socket: deformd.Client.watch() and deformd.aio.Client.watch() feed it."""
from array import array
from typing import Any, Dict, List, Optional

from . import _arrays
from . import protocol as P
from .errors import ProtocolError


class ReplicaError(ProtocolError):
    """A frame that does not fit the replica (a vertex or target it does not have)."""


class ReplicaState:
    """The state machine: apply(header, payload) frame by frame."""

    def __init__(self) -> None:
        self.snapshot: Optional[P.Snapshot] = None
        self.q: array = array("i")
        self.version = 0
        self.frames = 0

    @property
    def ready(self) -> bool:
        return self.snapshot is not None

    def apply(self, h: P.Header, p: bytes) -> int:
        """Applies one frame; returns its type."""
        if h.type == P.SNAPSHOT:
            s = P.decode_snapshot2(p) if h.version == P.VERSION_2 else P.decode_snapshot(p)
            self.snapshot = s
            self.q = array("i", bytes(12 * s.vertex_count))
            self._set_offsets(s.offsets)
            self.version = h.session_version
            return h.type
        if h.type not in (P.WEIGHTS, P.DELTA, P.TARGET, P.TARGET_META):
            return h.type
        s = self.snapshot
        if s is None:
            raise ReplicaError(f"a state frame (type {h.type}) before the snapshot")
        if h.type == P.WEIGHTS:
            w = P.decode_weights(p)
            for t, _ in w["entries"]:
                if t >= len(s.targets):
                    raise ReplicaError(f"WEIGHTS: target {t} of {len(s.targets)}")
            for t, v in w["entries"]:
                s.weights[t] = v
        elif h.type == P.DELTA:
            o = P.decode_delta2(p, self._trav()) if h.version == P.VERSION_2 else P.decode_delta(p)
            for v in o.indices:
                if v >= s.vertex_count:
                    raise ReplicaError(f"DELTA: vertex {v} of {s.vertex_count}")
            self._set_offsets(o)
        elif h.type == P.TARGET:
            index, weight, t = (P.decode_target_add2(p, self._trav()) if h.version == P.VERSION_2
                                else P.decode_target_add(p))
            if index != len(s.targets):
                raise ReplicaError(f"TARGET {index}: this replica has {len(s.targets)}")
            for v in t.indices:
                if v >= s.vertex_count:
                    raise ReplicaError(f"TARGET: vertex {v} of {s.vertex_count}")
            s.targets.append(t)
            s.weights.append(weight)
        else:
            m = P.decode_target_meta(p)
            if m.index >= len(s.targets) or any(d >= len(s.targets) for d in m.drivers):
                raise ReplicaError(f"TARGET_META: target {m.index} of {len(s.targets)}")
            t = s.targets[m.index]
            t.min, t.max, t.flags, t.drivers = m.min, m.max, m.flags, m.drivers
        if not h.flags & P.FLAG_MORE:
            self.version = h.session_version
            self.frames += 1
        return h.type

    def _trav(self) -> P.Trav:
        assert self.snapshot is not None
        if self.snapshot.trav is None:
            raise ReplicaError("a version 2 frame on a version 1 session")
        return self.snapshot.trav

    def _set_offsets(self, o: P.Offsets) -> None:
        q = self.q
        for i, v in enumerate(o.indices):
            q[3 * v] = o.q[3 * i]
            q[3 * v + 1] = o.q[3 * i + 1]
            q[3 * v + 2] = o.q[3 * i + 2]

    # ---- reading ---------------------------------------------------------------------------------
    def _need(self) -> P.Snapshot:
        if self.snapshot is None:
            raise ReplicaError("the replica has no snapshot yet")
        return self.snapshot

    def offsets_f32(self) -> array:
        """Every vertex's sculpt offset in mesh units, float32, 3 per vertex (§8.1)."""
        s = self._need()
        qf = s.offset_quantum
        if _arrays.numpy is not None:
            np = _arrays.numpy
            a = np.frombuffer(self.q.tobytes(), dtype="<i4").astype(np.float32) * np.float32(qf)
            return array("f", a.astype("<f4").tobytes())
        return array("f", [P.dequantise(x, qf) for x in self.q])

    def evaluate(self) -> array:
        """base + sculpt + Σ w·Δ, accumulated in double, rounded once (§8.2): 3 per vertex."""
        s = self._need()
        off = self.offsets_f32()
        if _arrays.numpy is not None:
            np = _arrays.numpy
            acc = np.frombuffer(s.positions.tobytes(), dtype="<f4").astype(np.float64)
            acc += np.frombuffer(off.tobytes(), dtype="<f4").astype(np.float64)
            acc = acc.reshape(-1, 3)
            for t, w in zip(s.targets, s.weights):
                if w == 0 or not len(t.indices):
                    continue
                idx = np.frombuffer(t.indices.tobytes(), dtype="<u4").astype(np.int64)
                d = np.frombuffer(t.deltas.tobytes(), dtype="<f4").astype(np.float64).reshape(-1, 3)
                acc[idx] += float(w) * d  # indices within a target are unique
            return array("f", acc.reshape(-1).astype("<f4").tobytes())
        acc = [b + o for b, o in zip(s.positions, off)]
        for t, w in zip(s.targets, s.weights):
            if w == 0:
                continue
            w = float(w)
            dl = t.deltas
            for k, v in enumerate(t.indices):
                o = 3 * v
                acc[o] += w * dl[3 * k]
                acc[o + 1] += w * dl[3 * k + 1]
                acc[o + 2] += w * dl[3 * k + 2]
        return array("f", acc)

    def target_deltas(self, index: int) -> array:
        """Target `index`'s delta of every vertex (0 where it moves none), 3 per vertex."""
        s = self._need()
        t = s.targets[index]
        out = array("f", bytes(12 * s.vertex_count))
        for k, v in enumerate(t.indices):
            out[3 * v:3 * v + 3] = t.deltas[3 * k:3 * k + 3]
        return out

    def weights_by_name(self) -> Dict[str, float]:
        s = self._need()
        return {t.name: float(w) for t, w in zip(s.targets, s.weights)}

    def target_names(self) -> List[str]:
        return [t.name for t in self._need().targets]


def _doc_vec3() -> str:
    return "numpy float32 (n, 3) when numpy is installed, else a flat array('f') of 3n floats"


class ReplicaView:
    """What both clients' replicas share: read access to a ReplicaState under a lock."""

    _state: ReplicaState
    _lock: Any
    session: str
    welcome: Dict[str, Any]

    @property
    def version(self) -> int:
        """The session version the replica has reached (whole updates only)."""
        return self._state.version

    @property
    def frames(self) -> int:
        """Updates applied since the snapshot (a multi-frame update counts once)."""
        return self._state.frames

    @property
    def vertex_count(self) -> int:
        with self._lock:
            return self._state._need().vertex_count

    @property
    def triangles(self) -> array:
        """The render triangles, 3 vertex indices each (array('I'))."""
        with self._lock:
            return self._state._need().triangles

    @property
    def uvs(self) -> Optional[array]:
        with self._lock:
            return self._state._need().uvs

    @property
    def offset_quantum(self) -> float:
        with self._lock:
            return self._state._need().offset_quantum

    @property
    def up(self) -> str:
        """The session's up axis, 'y' or 'z' (granted by the "up" capability)."""
        return self.welcome.get("up") or "y"

    def weights(self) -> Dict[str, float]:
        """{target name: weight} in target index order."""
        with self._lock:
            return self._state.weights_by_name()

    def targets(self) -> List[Dict[str, Any]]:
        """The targets: name, weight, min, max, muted, drivers (names), vertices."""
        with self._lock:
            s = self._state._need()
            names = [t.name for t in s.targets]
            return [{"index": i, "name": t.name, "weight": float(s.weights[i]), "min": t.min, "max": t.max,
                     "muted": bool(t.flags & 1), "drivers": [names[d] for d in t.drivers], "vertices": len(t.indices)}
                    for i, t in enumerate(s.targets)]

    def positions(self, use_numpy: Optional[bool] = None) -> Any:
        """The evaluated shape (base + sculpt + Σ w·Δ, §8.2): """ + _doc_vec3()
        with self._lock:
            a = self._state.evaluate()
        return _arrays.vec3(a, use_numpy)

    def base_positions(self, use_numpy: Optional[bool] = None) -> Any:
        """The base mesh (no sculpt, no targets)."""
        with self._lock:
            a = array("f", self._state._need().positions)
        return _arrays.vec3(a, use_numpy)

    def sculpt_offsets(self, use_numpy: Optional[bool] = None) -> Any:
        """Every vertex's sculpt offset in mesh units, float32."""
        with self._lock:
            a = self._state.offsets_f32()
        return _arrays.vec3(a, use_numpy)

    def target_deltas(self, target: Any, use_numpy: Optional[bool] = None) -> Any:
        """A target's (by index or name) delta of every vertex."""
        with self._lock:
            st = self._state
            idx = target if isinstance(target, int) else st.target_names().index(target)
            a = st.target_deltas(idx)
        return _arrays.vec3(a, use_numpy)

    def write_obj(self, path: str) -> None:
        """Writes the evaluated shape as OBJ `v` and `f` lines (positions printed as %.9g, which
        reads back as the same float32)."""
        with self._lock:
            a = self._state.evaluate()
            tri = self._state._need().triangles
        with open(path, "w") as fh:
            for i in range(0, len(a), 3):
                fh.write("v %.9g %.9g %.9g\n" % (a[i], a[i + 1], a[i + 2]))
            for i in range(0, len(tri), 3):
                fh.write("f %d %d %d\n" % (tri[i] + 1, tri[i + 1] + 1, tri[i + 2] + 1))
