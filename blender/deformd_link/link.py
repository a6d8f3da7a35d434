"""link.py — one Blender mesh object linked to one deformd session, both ways.

A Link owns a deformd.Client. Its JSON-RPC calls are made from Blender's main thread, each a
short round trip; its socket thread (the client's) watches the session on the stream port and
puts "this kind of thing changed at version V" on a queue. drain() — what the bpy.app.timers
callback in __init__.py runs every 0.1 s, and what the headless tests call directly because
timers do not run under `blender -b` — does all the work on the main thread, in this order:

  1. the mesh still matches (same vertex count, Basis unchanged): otherwise the link pauses with
     a message that says what no longer matches and what to do;
  2. local changes go out: key values (weights.set), slider ranges and mute
     (targets.configure), a new shape key (a new target, made through the sculpt layer with
     targets.create_from_sculpt), and, on leaving Sculpt or Edit mode, the changed span of the
     "deformd sculpt" key as sculpt offsets;
  3. remote changes come in: when the queue says weights or target settings changed, one
     targets.list sets key values, ranges and mute, and new targets become shape keys; a changed
     sculpt layer is read again into the "deformd sculpt" key (not while the object is in Sculpt
     or Edit mode: local strokes win).

Local changes go out before remote ones are read, and each call returns only once the server
has applied it, so a value read back is never older than what this Blender sent.

Vertex identity: Blender vertex i is the session's welded vertex i (meshio.py, and
blender/README.md). Every array is read and written welded, as binary float32 (the stream
port's bulk arrays: client.positions, client.set_sculpt_offsets); mesh.topology's map is read
only to open a session's mesh.

DOES NOT draw (ui.py) or build meshes and files (meshio.py, glb.py).
"""
import base64
import queue
import re
import time
from array import array

import bpy

from . import glb, meshio
from .meshio import SCULPT_KEY

UPLOAD_CHUNK = 4 << 20
RETRY_S = 5.0         # a lost connection is tried again this often
# The listener speaks protocol version 1: its SNAPSHOT is raw arrays, while decoding version 2's
# entropy-coded one in pure Python took 3.8 s for a 32,514-vertex sphere. Version 1 has no paced
# rate: every change comes, and drain() reads once per tick whatever came in between.
WATCH_PROTOCOL = 1
LINKS = {}            # object name -> Link

DELTA, CATCHUP = 5, 1  # a stream frame type and header flag (docs/protocol.md §5, §7.3)


class LinkError(Exception):
    """A link operation failed for a reason the status line shows as it is."""


def import_deformd(extra_path=""):
    """The deformd Python package: installed, or found at the preference's folder, at
    $DEFORMD_PYTHON, or beside this add-on in a deformd checkout (blender/../python)."""
    try:
        import deformd
        return deformd
    except ImportError:
        pass
    import os
    import sys

    here = os.path.dirname(os.path.realpath(__file__))  # a symlinked add-on finds its checkout
    for p in (extra_path, os.environ.get("DEFORMD_PYTHON", ""), os.path.join(here, "..", "..", "python")):
        if p and os.path.isfile(os.path.join(p, "deformd", "__init__.py")):
            sys.path.insert(0, os.path.abspath(p))
            import deformd
            return deformd
    raise LinkError("the deformd Python package is not found: install it (python/README.md) or set its folder "
                    "in the add-on's preferences")


def describe(e):
    """An exception as the status line shows it: the server's message and code for an RpcError."""
    code = getattr(e, "code", None)
    msg = getattr(e, "message", None) or str(e) or type(e).__name__
    return f"{msg} (error {code})" if code is not None else msg


def _is_rpc_error(e):
    return type(e).__name__ == "RpcError" or isinstance(e, LinkError)


def upload_name(session):
    return re.sub(r"[^A-Za-z0-9._-]", "_", session) + ".glb"


def _flat(values):
    """A bulk array (array('f') or a numpy (n, 3) array) as a flat array('f')."""
    if isinstance(values, array):
        return values
    if hasattr(values, "reshape"):
        return array("f", values.astype("<f4").reshape(-1).tobytes())
    return array("f", values)


class Link:
    def __init__(self, obj, client, session, server):
        self.obj_name = obj.name
        self.client = client
        self.session = session
        self.server = server     # connect()'s arguments: host, port, stream_port, token, package_path
        self.vertex_count = len(obj.data.vertices)
        self.status, self.error = "linked", ""
        self.paused = False
        self.events = queue.Queue()
        self.replica = None
        self.targets = {}        # name -> targets.list entry
        self.known = {}          # key name -> (value, slider_min, slider_max, mute) as last synced
        self.still = set()       # new keys that move no vertex (not targets yet)
        self.base = meshio.read_base(obj.data)
        self.sculpt_written = None  # the "deformd sculpt" key's coordinates as last written or sent
        self.version = 0
        self.last_mode = obj.mode
        self.want_targets = self.want_sculpt = False
        self.last_retry = 0.0

    def obj(self):
        return bpy.data.objects.get(self.obj_name)

    def set_status(self, text, error=""):
        self.status, self.error = text, error

    # ---- the listener ----------------------------------------------------------------------------
    def start_listener(self):
        """Watches the session on the stream port. The client's socket thread applies each frame
        to the replica and calls _on_update, which only queues (kind, version): nothing but
        drain(), on Blender's main thread, touches bpy."""
        self.seen_targets = None
        self.replica = self.client.watch(self.session, protocol=WATCH_PROTOCOL, on_update=self._on_update)
        self.seen_targets = self.replica.targets()

    def _on_update(self, replica, header):
        """On the socket thread, after each whole update. A catch-up (or paced) update is several
        frames (TARGET…, TARGET_META…, WEIGHTS, DELTA, docs/protocol.md §12.9) and only the last
        header comes here, so the targets' side is told from the replica itself: its targets'
        names, weights and settings against those of the last update."""
        seen = replica.targets()
        kind = "targets" if seen != self.seen_targets else ""
        self.seen_targets = seen
        if header.type == DELTA or header.flags & CATCHUP:
            kind = "all" if kind else "sculpt"
        if kind:
            self.events.put((kind, header.session_version))

    def close(self):
        for closer in (getattr(self.replica, "close", None), getattr(self.client, "close", None)):
            try:
                if closer:
                    closer()
            except Exception:
                pass
        self.replica = None

    # ---- the timer's work ------------------------------------------------------------------------
    def drain(self):
        """One step of the link (see the banner). Never raises: failures become the status."""
        obj = self.obj()
        if obj is None:
            self.paused = True
            self.set_status("paused", f"the linked object '{self.obj_name}' is gone (renamed or deleted)")
            return
        if self.status == "disconnected":
            if time.monotonic() - self.last_retry >= RETRY_S:
                self.reconnect()
            return
        why = self.mismatch(obj)
        if why:
            self.paused = True
            self.set_status("paused", why)
            return
        if self.paused:
            self.paused = False
            self.set_status("linked")
        try:
            self._events()
            self._push(obj)
            self._pull(obj)
        except Exception as e:
            if _is_rpc_error(e):
                self.want_targets = True  # a refused value goes back to the session's
                self.set_status("linked", describe(e))
            else:
                self.paused = True
                self.last_retry = time.monotonic()
                self.set_status("disconnected", "disconnected: " + describe(e) + " (retrying every 5 s)")

    def mismatch(self, obj):
        """Why the object no longer matches the session, or ''."""
        mesh = obj.data
        if len(mesh.vertices) != self.vertex_count:
            return (f"the mesh has {len(mesh.vertices)} vertices and the session {self.vertex_count}: the link "
                    "is paused (Blender vertex i is the session's welded vertex i); undo the change, or upload "
                    "the mesh as a new session")
        if obj.mode == "EDIT" or (obj.mode == "OBJECT" and self.last_mode == "OBJECT" and not self.paused):
            return ""
        base = meshio.read_base(mesh)
        if base != self.base:
            moved = sum(1 for i in range(0, len(base), 3) if base[i:i + 3] != self.base[i:i + 3])
            return (f"the Basis moved {moved} vertices, and the session's base cannot change: sculpt on the "
                    f"'{SCULPT_KEY}' key instead (undo the Basis edit to resume), or upload the mesh as a new session")
        return ""

    def _events(self):
        if self.replica is not None and self.replica.error is not None:
            raise ConnectionError(f"the session's stream ended: {describe(self.replica.error)}")
        while True:
            try:
                kind, version = self.events.get_nowait()
            except queue.Empty:
                return
            self.want_targets |= kind in ("targets", "all")
            self.want_sculpt |= kind in ("sculpt", "all")
            self.version = max(self.version, version)

    # ---- out -------------------------------------------------------------------------------------
    def _push(self, obj):
        mode, left = obj.mode, self.last_mode
        self.last_mode = mode
        if left in ("SCULPT", "EDIT") and mode not in ("SCULPT", "EDIT"):
            self.still.clear()
            self.push_sculpt(obj)
        self.push_keys(obj)

    def push_keys(self, obj):
        """Key values, ranges and mute changed in Blender since the last sync; new keys."""
        weights = {}
        basis = meshio.basis_key(obj.data)
        for kb in meshio.shape_keys(obj.data):
            if kb == basis or kb.name == SCULPT_KEY:
                continue
            t = self.targets.get(kb.name)
            if t is None:
                if kb.name not in self.still and obj.mode == "OBJECT":
                    self.create_target(obj, kb)
                continue
            now = (kb.value, kb.slider_min, kb.slider_max, kb.mute)
            was = self.known.get(kb.name)
            if was == now:
                continue
            self.known[kb.name] = now
            if now[1:] != was[1:]:
                self.client.targets_configure(self.session, kb.name, min=now[1], max=now[2], muted=now[3])
                self.want_targets = True
            if now[0] != was[0] and not t["drivers"]:
                weights[kb.name] = now[0]
        if weights:
            self._note(self.client.weights_set(self.session, weights=weights))

    def create_target(self, obj, kb):
        """A shape key that Blender has and the session does not becomes a target: its delta goes
        into the sculpt layer, targets.create_from_sculpt makes the target of it, and the sculpt
        that was there is put back. (deformd has no call that writes a target's deltas.)"""
        delta = meshio.key_delta(kb)
        if not any(delta):
            self.still.add(kb.name)
            self.set_status("linked", f"shape key '{kb.name}' moves no vertex: it becomes a target once it does "
                                      "(looked at again when you leave Edit or Sculpt mode)")
            return
        keep = self.read_welded("sculpt")
        self.write_sculpt(delta, 0)
        try:
            self.client.targets_create_from_sculpt(self.session, name=kb.name)
        finally:
            self.write_sculpt(keep, 0)
        if (kb.slider_min, kb.slider_max, kb.mute) != (0.0, 1.0, False):
            self.client.targets_configure(self.session, kb.name, min=kb.slider_min, max=kb.slider_max, muted=kb.mute)
        self._note(self.client.weights_set(self.session, weights={kb.name: kb.value}))
        self.want_targets = True
        self.set_status("linked", f"shape key '{kb.name}' is a new target of session '{self.session}'")

    def push_sculpt(self, obj=None):
        """The "deformd sculpt" key's change since it was last written, as sculpt offsets: the span
        from the first to the last changed vertex is sent, the unchanged vertices inside it with
        the offsets the session has. Returns how many vertices changed."""
        obj = obj or self.obj()
        kb = meshio.find_key(obj.data, SCULPT_KEY)
        if kb is None or self.sculpt_written is None:
            return 0
        co = meshio.read_key(kb)
        old = self.sculpt_written
        changed = [i for i in range(self.vertex_count) if co[3 * i:3 * i + 3] != old[3 * i:3 * i + 3]]
        if not changed:
            return 0
        first, last = changed[0], changed[-1]
        # The unchanged vertices inside the span keep what the session has now (read just before,
        # so a remote stroke there since the last pull is not undone).
        offsets = _flat(self.client.positions(self.session, what="sculpt", welded=True, first=first,
                                              count=last - first + 1))
        for i in changed:
            for k in range(3):
                offsets[3 * (i - first) + k] = co[3 * i + k] - self.base[3 * i + k]
        self.write_sculpt(offsets, first)
        self.sculpt_written = co
        self.want_sculpt = True
        self.set_status("linked", f"sent the sculpt of {len(changed)} vertices")
        return len(changed)

    # ---- in --------------------------------------------------------------------------------------
    def _pull(self, obj):
        if self.want_targets:
            self.want_targets = False
            self.pull_targets(obj)
        if self.want_sculpt and obj.mode not in ("SCULPT", "EDIT"):
            self.want_sculpt = False
            self.pull_sculpt(obj)

    def pull_targets(self, obj):
        """targets.list onto the shape keys: values, ranges, mute; a key for each new target."""
        listed = self.client.targets_list(self.session)
        for t in listed:
            name = t["name"]
            kb = meshio.find_key(obj.data, name)
            if kb is None:
                kb = meshio.set_key_from_delta(obj, name, self.base, self.read_welded("target", name))
                kb.relative_key = meshio.basis_key(obj.data)
            meshio.set_range(kb, t["min"], t["max"])
            kb.mute = bool(t["muted"])
            kb.value = t["weight"] if t["drivers"] else t["value"]
            self.known[name] = (kb.value, kb.slider_min, kb.slider_max, kb.mute)
        self.targets = {t["name"]: t for t in listed}

    def pull_sculpt(self, obj=None):
        """The session's sculpt layer into the "deformd sculpt" key (made at value 1 when
        missing): Blender's mix is then the session's shape."""
        obj = obj or self.obj()
        sculpt = self.read_welded("sculpt")
        kb = meshio.find_key(obj.data, SCULPT_KEY)
        if kb is None:
            kb = meshio.add_key(obj, SCULPT_KEY)
            kb.value = 1.0
        co = array("f", [a + b for a, b in zip(self.base, sculpt)])
        meshio.write_key(kb, co)
        obj.data.update()
        self.sculpt_written = co

    # ---- bulk arrays -----------------------------------------------------------------------------
    def _note(self, result):
        """The version a call's answer names (weights.set's {"version"}, a bulk SET's int)."""
        v = result.get("version") if isinstance(result, dict) else result
        if isinstance(v, int):
            self.version = max(self.version, v)

    def read_welded(self, what, target=None):
        """The session's current positions, sculpt offsets or a target's deltas, one float32
        triple per welded vertex (the stream port's bulk arrays)."""
        kw = {"target": target} if target is not None else {}
        return _flat(self.client.positions(self.session, what=what, welded=True, **kw))

    def write_sculpt(self, offsets, first):
        """Sets the sculpt offsets of welded vertices first … first + len/3 − 1, as one step."""
        self._note(self.client.set_sculpt_offsets(self.session, offsets, welded=True, first=first))

    # ---- connection ------------------------------------------------------------------------------
    def reconnect(self):
        """A new client and listener, then everything read again."""
        self.last_retry = time.monotonic()
        self.close()
        try:
            self.client = connect(*self.server)
            self.client.mesh_info(self.session)
            self.start_listener()
        except Exception as e:
            self.paused = True
            self.set_status("disconnected", "disconnected: " + describe(e) + " (retrying every 5 s)")
            return False
        self.paused = False
        self.want_targets = self.want_sculpt = True
        self.set_status("linked", "reconnected")
        return True


def read_weld_map(client, session):
    """mesh.topology in ranges: (welded, rep) as array('I')."""
    welded = array("I")
    while True:
        r = client.mesh_topology(session, first=len(welded))
        welded.extend(r["welded"])
        if r["count"] == 0 or len(welded) >= r["vertices"]:
            break
    rep = array("I", bytes(4 * r["topology_vertices"]))
    seen = bytearray(r["topology_vertices"])
    for i, v in enumerate(welded):
        if not seen[v]:
            seen[v] = 1
            rep[v] = i
    return welded, rep


# ---- making a link ---------------------------------------------------------------------------------
def connect(host, port, stream_port, token="", package_path=""):
    deformd = import_deformd(package_path)
    try:
        return deformd.Client(host=host, port=port, token=token or None, stream_port=stream_port)
    except Exception as e:
        raise ConnectionError(f"cannot connect to deformd at {host}:{port}: {describe(e)}") from e


def check_uploadable(obj):
    mesh = obj.data
    if obj.type != "MESH":
        raise LinkError(f"'{obj.name}' is not a mesh")
    if not mesh.polygons:
        raise LinkError(f"'{obj.name}' has no faces")
    if mesh.shape_keys and not mesh.shape_keys.use_relative:
        raise LinkError("absolute shape keys are not supported: tick Relative in the Shape Keys panel")
    loose = meshio.loose_vertices(mesh)
    if loose:
        raise LinkError(f"{loose} vertices belong to no face, and deformd drops those (every later vertex would "
                        "shift): delete them (Mesh > Clean Up > Delete Loose) and upload again")


def glb_of(obj):
    """The bytes an upload sends and its render vertex count: the mesh's render layout, the
    base, one target per shape key (but the Basis and the "deformd sculpt" key) with its value
    as the default weight."""
    mesh = obj.data
    source, uvs, tris = meshio.render_layout(mesh)
    targets, weights = [], []
    basis = meshio.basis_key(mesh)
    for kb in meshio.shape_keys(mesh):
        if kb == basis or kb.name == SCULPT_KEY:
            continue
        targets.append((kb.name, meshio.gather(meshio.key_delta(kb), source)))
        weights.append(kb.value)
    base = meshio.gather(meshio.read_base(mesh), source)
    return glb.write(obj.name, base, tris, uvs, targets, weights), source


def upload(obj, client, session, server):
    """Uploads obj as a new session `session` (Z up, as Blender is) and links them. A
    "deformd sculpt" key the object has is sent as the session's sculpt layer."""
    check_uploadable(obj)
    data, source = glb_of(obj)
    name = upload_name(session)
    try:
        for offset in range(0, len(data), UPLOAD_CHUNK):
            client.mesh_upload(name, base64.b64encode(data[offset:offset + UPLOAD_CHUNK]).decode(), offset=offset,
                               final=offset + UPLOAD_CHUNK >= len(data))
        client.session_create(session, name, up="z")
    except Exception as e:
        raise LinkError(f"upload of '{obj.name}' as session '{session}' failed: {describe(e)}") from e
    try:
        return _upload_checked(obj, client, session, server, source)
    except Exception:
        try:  # a session that is not the mesh is no use to anyone: it goes
            client.session_close(session)
        except Exception:
            pass
        raise


def _upload_checked(obj, client, session, server, source):
    link = Link(obj, client, session, server)
    info = client.mesh_info(session)
    n = len(obj.data.vertices)
    if info["topology_vertices"] != n or info["vertices"] != len(source):
        raise LinkError(f"session '{session}' has {info['topology_vertices']} welded vertices where '{obj.name}' "
                        f"has {n} (and {info['vertices']} render vertices of the {len(source)} sent): deformd welds "
                        "vertices that share a position into one; merge them (Mesh > Clean Up > Merge by "
                        "Distance) and upload again")
    basis = meshio.basis_key(obj.data)
    for kb in meshio.shape_keys(obj.data):
        if kb != basis and kb.name != SCULPT_KEY and ((kb.slider_min, kb.slider_max) != (0.0, 1.0) or kb.mute):
            client.targets_configure(session, kb.name, min=kb.slider_min, max=kb.slider_max, muted=kb.mute)
    link.start_listener()
    try:
        verify(link, obj)
    except Exception:
        link.replica.close()  # the caller closes the session, then the client
        raise
    kb = meshio.find_key(obj.data, SCULPT_KEY)
    if kb is not None:
        link.sculpt_written = array("f", link.base)
        link.push_sculpt(obj)
    return _start(link, obj)


def attach(obj, client, session, server):
    """Links obj to an existing session whose welded vertices are obj's vertices, in order."""
    link = Link(obj, client, session, server)
    info = client.mesh_info(session)
    n = len(obj.data.vertices)
    if info["topology_vertices"] != n:
        raise LinkError(f"session '{session}' has {info['topology_vertices']} welded vertices and '{obj.name}' "
                        f"has {n}: they are not the same mesh")
    link.start_listener()
    try:
        verify(link, obj)
    except Exception:
        link.close()
        raise
    return _start(link, obj)


def open_session(context, client, session, server):
    """A new mesh object of the session's mesh, on its welded vertices (vertex i is welded vertex
    i, at its base position), its triangles and UVs from the SNAPSHOT, a shape key per target,
    the sculpt as the "deformd sculpt" key; then linked."""
    welded, rep = read_weld_map(client, session)
    replica = client.watch(session, protocol=WATCH_PROTOCOL)
    try:
        base = _flat(replica.base_positions(use_numpy=False))
        tris, uvs = replica.triangles, replica.uvs
    finally:
        replica.close()
    corners, corner_uv = array("i"), array("f")
    for t in range(0, len(tris), 3):
        a, b, c = welded[tris[t]], welded[tris[t + 1]], welded[tris[t + 2]]
        if a == b or b == c or a == c:
            continue  # collapsed by the weld, as deformd's topology drops it
        corners.extend((a, b, c))
        if uvs is not None:
            for k in range(3):
                r = tris[t + k]
                corner_uv.extend((uvs[2 * r], uvs[2 * r + 1]))
    obj = meshio.new_mesh_object(context, session, meshio.gather(base, rep, first_identity=False), corners,
                                 corner_uv if uvs is not None else None)
    link = Link(obj, client, session, server)
    link.start_listener()
    return _start(link, obj)


def _start(link, obj):
    old = LINKS.pop(obj.name, None)
    if old:
        old.close()
    LINKS[obj.name] = link
    obj["deformd_session"] = link.session
    link.pull_targets(obj)
    link.pull_sculpt(obj)
    return link


def verify(link, obj):
    """The session's welded vertices are at obj's Basis positions, in obj's order: the current
    shape is compared with base + sculpt + Σ w·Δ computed from the session's own arrays, within
    1e-5 of the bounding box diagonal (float32 sums in another order differ by far less; a
    vertex of another mesh or order, by far more)."""
    current = link.read_welded("current")
    mix = array("d", (a + b for a, b in zip(link.base, link.read_welded("sculpt"))))
    for t in link.client.targets_list(link.session):
        if t["weight"]:
            d = link.read_welded("target", t["name"])
            w = t["weight"]
            for i in range(len(mix)):
                mix[i] += w * d[i]
    lo = [min(current[k::3]) for k in range(3)]
    hi = [max(current[k::3]) for k in range(3)]
    tol = 1e-5 * max(1e-9, sum((h - l) ** 2 for h, l in zip(hi, lo)) ** 0.5)
    for i in range(len(mix)):
        if abs(mix[i] - current[i]) > tol:
            v = i // 3
            raise LinkError(f"welded vertex {v} of session '{link.session}' is not where '{obj.name}' has vertex {v}: "
                            "they are not the same mesh, or not in the same order")
