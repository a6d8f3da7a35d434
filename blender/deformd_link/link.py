"""link.py — one Blender mesh object linked to one deformd session, both ways.

A Link owns a JSON-RPC client (calls made from Blender's main thread, each a short round trip)
and a listener thread that watches the session on the stream port and puts "something changed
at version V" events on a queue. drain() — what the bpy.app.timers callback in __init__.py
calls every 0.1 s, and what the headless tests call directly because timers do not run under
`blender -b` — does all the work on the main thread, in this order:

  1. the mesh still matches (same vertex count, Basis unchanged): otherwise the link pauses with
     a message that says what no longer matches and what to do;
  2. local changes go out: key values (weights.set), slider ranges and mute (targets.configure),
     a new shape key (a new target, through the sculpt layer: targets.create_from_sculpt), and
     after a sculpt-mode or edit-mode session on the "deformd sculpt" key, the changed span of
     sculpt offsets (binary, welded);
  3. remote changes come in: when the queue says weights or target settings changed, one
     targets.list sets key values, ranges and mute; new targets become shape keys (their deltas
     read as binary float32, welded); a changed sculpt layer is read again into the
     "deformd sculpt" key (not while the object is in sculpt or edit mode: local strokes win).

Local changes go out before remote ones are read, and the calls that send them return only
when the server has applied them, so a value read back is never older than what this Blender
sent. Vertex identity: Blender vertex i is the session's welded vertex i (meshio.py); every bulk
array here is welded.

DOES NOT draw (ui.py) or build meshes and files (meshio.py, glb.py).
"""
import base64
import queue
import re
import threading
import time
from array import array

import bpy

from . import glb, meshio
from .meshio import SCULPT_KEY

UPLOAD_CHUNK = 4 << 20
LINKS = {}  # object name -> Link


def import_deformd(extra_path=""):
    """The deformd Python package: installed, or found at the preference's folder, at
    $DEFORMD_PYTHON, or beside this add-on in a deformd checkout (blender/../python)."""
    try:
        import deformd  # noqa: F401
        return deformd
    except ImportError:
        pass
    import os
    import sys

    here = os.path.dirname(os.path.abspath(__file__))
    for p in (extra_path, os.environ.get("DEFORMD_PYTHON", ""), os.path.join(here, "..", "..", "python")):
        if p and os.path.isfile(os.path.join(p, "deformd", "__init__.py")):
            sys.path.insert(0, os.path.abspath(p))
            import deformd
            return deformd
    raise LinkError("the deformd Python package is not found: install it (python/README.md) or set its folder "
                    "in the add-on's preferences")


class LinkError(Exception):
    """A link operation failed for a reason the status line shows as it is."""


def upload_name(session):
    return re.sub(r"[^A-Za-z0-9._-]", "_", session) + ".glb"


def _describe(e):
    code = getattr(e, "code", None)
    msg = getattr(e, "message", None) or str(e)
    return f"{msg} (error {code})" if code is not None else msg


class Link:
    def __init__(self, obj, client, session, host, port, token):
        self.obj_name = obj.name
        self.client = client
        self.session = session
        self.host, self.port, self.token = host, port, token
        self.vertex_count = len(obj.data.vertices)
        self.status = "linked"
        self.error = ""
        self.paused = False
        self.events = queue.Queue()
        self.listener = None
        self.stop = threading.Event()
        self.targets = {}        # name -> targets.list entry
        self.known = {}          # key name -> (value, slider_min, slider_max, mute) as last synced
        self.still = set()       # new keys that move no vertex (not targets yet)
        self.base = meshio.read_base(obj.data)
        self.sculpt_written = None  # the "deformd sculpt" key's coordinates as last written or sent
        self.sculpt = None       # the session's sculpt offsets (welded) as last read
        self.version = -1
        self.last_mode = obj.mode
        self.want_targets = True
        self.want_sculpt = True
        self.last_retry = 0.0

    # ---- the object ------------------------------------------------------------------------------
    def obj(self):
        return bpy.data.objects.get(self.obj_name)

    def set_status(self, text, error=""):
        self.status, self.error = text, error

    # ---- the listener thread ---------------------------------------------------------------------
    def start_listener(self):
        self.stop.clear()
        self.listener = threading.Thread(target=self._listen, name=f"deformd-watch-{self.session}", daemon=True)
        self.listener.start()

    def _listen(self):
        """The socket thread: watches the session and queues what changed; never touches bpy."""
        try:
            replica = self.client.watch(self.session)
        except Exception as e:  # the link's status says why; drain() sees the event
            self.events.put(("lost", _describe(e)))
            return
        try:
            for kind, version in _changes(replica, self.stop):
                self.events.put((kind, version))
            self.events.put(("lost", "the server ended the session's stream"))
        except Exception as e:
            if not self.stop.is_set():
                self.events.put(("lost", _describe(e)))
        finally:
            close = getattr(replica, "close", None)
            if close:
                close()

    def close(self):
        self.stop.set()
        try:
            self.client.close()
        except Exception:
            pass

    # ---- the timer's work ------------------------------------------------------------------------
    def drain(self):
        """One step of the link (see the file's banner). Never raises: failures become the status."""
        obj = self.obj()
        if obj is None:
            self.set_status("paused", f"the linked object '{self.obj_name}' is gone")
            self.paused = True
            return
        if self.paused and self.error.startswith("disconnected"):
            if time.monotonic() - self.last_retry > 5.0:
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
            if _is_connection_error(e):
                self.paused = True
                self.set_status("disconnected", "disconnected: " + _describe(e))
            else:
                self.set_status("linked", _describe(e))

    def mismatch(self, obj):
        """Why the object no longer matches the session, or ''."""
        mesh = obj.data
        if len(mesh.vertices) != self.vertex_count:
            return (f"the mesh has {len(mesh.vertices)} vertices, the session {self.vertex_count}: "
                    "the link is paused (vertex i is the session's welded vertex i); undo the change or upload again")
        if obj.mode == "OBJECT" and self.last_mode == "OBJECT" and not self.paused:
            return ""
        if obj.mode != "EDIT":
            base = meshio.read_base(mesh)
            if base != self.base:
                moved = sum(1 for i in range(0, len(base), 3) if base[i:i + 3] != self.base[i:i + 3])
                return (f"the Basis moved {moved} vertices: the session's base cannot change; sculpt on the "
                        f"'{SCULPT_KEY}' key instead (undo the Basis edit to resume) or upload again")
        return ""

    def _events(self):
        while True:
            try:
                kind, arg = self.events.get_nowait()
            except queue.Empty:
                return
            if kind == "lost":
                raise ConnectionError(arg)
            if kind in ("weights", "meta", "target"):
                self.want_targets = True
            if kind == "sculpt":
                self.want_sculpt = True
            if isinstance(arg, int):
                self.version = max(self.version, arg)

    # ---- out -------------------------------------------------------------------------------------
    def _push(self, obj):
        mode, left = obj.mode, self.last_mode
        self.last_mode = mode
        if left in ("SCULPT", "EDIT") and mode not in ("SCULPT", "EDIT"):
            self.still.clear()
            self.push_sculpt(obj)
        self.push_keys(obj)

    def push_keys(self, obj):
        """Key values, ranges and mute that changed in Blender since the last sync; new keys."""
        weights = {}
        for kb in meshio.shape_keys(obj.data):
            if kb == obj.data.shape_keys.reference_key or kb.name == SCULPT_KEY:
                continue
            now = (kb.value, kb.slider_min, kb.slider_max, kb.mute)
            t = self.targets.get(kb.name)
            if t is None:
                if kb.name not in self.still:
                    self.create_target(obj, kb)
                continue
            was = self.known.get(kb.name)
            if was == now:
                continue
            self.known[kb.name] = now
            if was is None:
                continue
            if (now[1], now[2], now[3]) != (was[1], was[2], was[3]):
                self.client.targets_configure(self.session, kb.name, min=now[1], max=now[2], muted=now[3])
                self.want_targets = True
            if now[0] != was[0] and not t.get("drivers"):
                weights[kb.name] = now[0]
        if weights:
            self.client.weights_set(self.session, weights=weights)

    def create_target(self, obj, kb):
        """A shape key Blender has and the session does not becomes a target: its delta goes into
        the sculpt layer, targets.create_from_sculpt makes the target of it, and the sculpt that
        was there is put back. (deformd has no call that writes a target directly.)"""
        delta = meshio.key_delta(kb)
        if not any(delta):
            self.set_status("linked", f"shape key '{kb.name}' moves no vertex: it becomes a target once it does "
                                      "(looked at again when you leave Edit or Sculpt mode)")
            self.still.add(kb.name)
            return
        keep = self.read_sculpt()
        self.client.set_sculpt_offsets(self.session, delta, welded=True)
        try:
            self.client.targets_create_from_sculpt(self.session, name=kb.name)
        finally:
            self.client.set_sculpt_offsets(self.session, keep, welded=True)
        self.client.targets_configure(self.session, kb.name, min=kb.slider_min, max=kb.slider_max, muted=kb.mute)
        self.client.weights_set(self.session, weights={kb.name: kb.value})
        self.want_targets = True

    def push_sculpt(self, obj=None):
        """The "deformd sculpt" key's change since it was last written, as sculpt offsets: only the
        span from the first to the last changed vertex is sent, with the offsets the session
        already has for the unchanged vertices inside it."""
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
        offsets = array("f", self.sculpt[3 * first:3 * last + 3])
        base = self.base
        for i in changed:
            for k in range(3):
                offsets[3 * (i - first) + k] = co[3 * i + k] - base[3 * i + k]
        self.client.set_sculpt_offsets(self.session, offsets, welded=True, first=first)
        self.want_sculpt = True
        self.sculpt_written = co
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
                delta = self.read_target(name)
                kb = meshio.set_key_from_delta(obj, name, self.base, delta)
                kb.relative_key = obj.data.shape_keys.reference_key
            meshio.set_range(kb, t["min"], t["max"])
            kb.mute = bool(t["muted"])
            kb.value = t["weight"] if t.get("drivers") else t["value"]
            self.known[name] = (kb.value, kb.slider_min, kb.slider_max, kb.mute)
        self.targets = {t["name"]: t for t in listed}

    def read_sculpt(self):
        return _flat(self.client.positions(self.session, what="sculpt", welded=True))

    def read_target(self, name):
        return _flat(self.client.positions(self.session, what="target", target=name, welded=True))

    def pull_sculpt(self, obj):
        """The session's sculpt layer into the "deformd sculpt" key (made when missing), base +
        offsets, value 1: Blender's mix is then the session's shape."""
        sculpt = self.read_sculpt()
        kb = meshio.find_key(obj.data, SCULPT_KEY)
        if kb is None and not any(sculpt):
            self.sculpt = sculpt
            self.sculpt_written = None
            return
        if kb is None:
            kb = meshio.add_key(obj, SCULPT_KEY)
            kb.value = 1.0
        co = array("f", [a + b for a, b in zip(self.base, sculpt)])
        meshio.write_key(kb, co)
        obj.data.update()
        self.sculpt = sculpt
        self.sculpt_written = co

    # ---- connection ------------------------------------------------------------------------------
    def reconnect(self):
        """A new client and listener, then everything read again."""
        self.last_retry = time.monotonic()
        self.close()
        try:
            deformd = import_deformd()
            self.client = deformd.Client(host=self.host, port=self.port, token=self.token or None)
            self.client.mesh_info(self.session)
        except Exception as e:
            self.paused = True
            self.set_status("disconnected", "disconnected: " + _describe(e))
            return False
        self.paused = False
        self.want_targets = self.want_sculpt = True
        self.start_listener()
        self.set_status("linked", "")
        return True


def _flat(values):
    """A bulk array from the client (array('f') or a numpy (n, 3) array) as a flat array('f')."""
    if isinstance(values, array):
        return values
    return array("f", values.reshape(-1).tobytes()) if hasattr(values, "reshape") else array("f", values)


def _is_connection_error(e):
    return isinstance(e, (ConnectionError, OSError, TimeoutError, EOFError))


def _changes(replica, stop):
    """(kind, version) for each update the replica receives, until stop is set or the stream ends.
    kind is "weights", "meta", "target" or "sculpt"."""
    for update in replica.updates(stop=stop):
        yield update


# ---- making a link ---------------------------------------------------------------------------------
def connect(host, port, token="", package_path=""):
    deformd = import_deformd(package_path)
    try:
        return deformd.Client(host=host, port=port, token=token or None)
    except Exception as e:
        raise LinkError(f"cannot connect to deformd at {host}:{port}: {_describe(e)}") from e


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
        raise LinkError(f"{loose} vertices belong to no face, and deformd drops those (vertex order would "
                        "shift): delete them (Mesh > Clean Up > Delete Loose) and upload again")


def glb_of(obj):
    """The bytes an upload sends: the mesh's render layout, the base, one target per shape key
    (but the Basis and the "deformd sculpt" key) with its value as the default weight."""
    mesh = obj.data
    source, uvs, tris = meshio.render_layout(mesh)
    base = meshio.read_base(mesh)
    targets, weights = [], []
    basis = meshio.basis_key(mesh)
    for kb in meshio.shape_keys(mesh):
        if kb == basis or kb.name == SCULPT_KEY:
            continue
        targets.append((kb.name, meshio.gather(meshio.key_delta(kb), source)))
        weights.append(kb.value)
    return glb.write(obj.name, meshio.gather(base, source), tris, uvs, targets, weights), len(source)


def upload(obj, client, session, host, port, token=""):
    """Uploads obj as a new session `session` (Z up, as Blender is) and links them."""
    check_uploadable(obj)
    data, render_count = glb_of(obj)
    name = upload_name(session)
    try:
        for offset in range(0, max(len(data), 1), UPLOAD_CHUNK):
            chunk = data[offset:offset + UPLOAD_CHUNK]
            client.mesh_upload(name, base64.b64encode(chunk).decode(), offset=offset,
                               final=offset + UPLOAD_CHUNK >= len(data))
        client.session_create(session, name, up="z")
    except Exception as e:
        raise LinkError(f"upload of '{obj.name}' as session '{session}' failed: {_describe(e)}") from e
    link = Link(obj, client, session, host, port, token)
    verify(link, obj, render_count)
    for kb in meshio.shape_keys(obj.data):
        if kb != meshio.basis_key(obj.data) and kb.name != SCULPT_KEY and (
                (kb.slider_min, kb.slider_max) != (0.0, 1.0) or kb.mute):
            client.targets_configure(session, kb.name, min=kb.slider_min, max=kb.slider_max, muted=kb.mute)
    return _start(link, obj)


def attach(obj, client, session, host, port, token=""):
    """Links obj to an existing session whose welded vertices are obj's vertices."""
    link = Link(obj, client, session, host, port, token)
    verify(link, obj, None)
    return _start(link, obj)


def _start(link, obj):
    old = LINKS.pop(obj.name, None)
    if old:
        old.close()
    LINKS[obj.name] = link
    obj["deformd_session"] = link.session
    obj["deformd_server"] = f"{link.host}:{link.port}"
    link.pull_targets(obj)
    link.pull_sculpt(obj)
    link.want_targets = link.want_sculpt = False
    link.start_listener()
    return link


def verify(link, obj, render_count):
    """The session's welded vertices are obj's vertices, in obj's order: the counts, then each
    welded base position against the Basis (base = current − sculpt − Σ w·Δ is not read; the
    current shape is compared with Blender's mix at the session's weights instead)."""
    info = link.client.mesh_info(link.session)
    n = len(obj.data.vertices)
    if info["topology_vertices"] != n:
        raise LinkError(
            f"session '{link.session}' has {info['topology_vertices']} welded vertices and '{obj.name}' has {n}: "
            "vertices that share a position are welded into one by deformd; merge them "
            "(Mesh > Clean Up > Merge by Distance) and upload again" if render_count else
            f"session '{link.session}' has {info['topology_vertices']} welded vertices and '{obj.name}' has {n}: "
            "they are not the same mesh")
    if render_count is not None and info["vertices"] != render_count:
        raise LinkError(f"deformd kept {info['vertices']} of the {render_count} render vertices uploaded")
    current = _flat(link.client.positions(link.session, what="current", welded=True))
    sculpt = _flat(link.client.positions(link.session, what="sculpt", welded=True))
    mix = array("d", (a + b for a, b in zip(link.base, sculpt)))
    for t in link.client.targets_list(link.session):
        w = t["weight"]
        if w:
            d = _flat(link.client.positions(link.session, what="target", target=t["name"], welded=True))
            for i in range(len(mix)):
                mix[i] += w * d[i]
    lo = [min(current[k::3]) for k in range(3)]
    hi = [max(current[k::3]) for k in range(3)]
    tol = 1e-5 * max(1e-9, sum((h - l) ** 2 for h, l in zip(hi, lo)) ** 0.5)
    for i in range(len(mix)):
        if abs(mix[i] - current[i]) > tol:
            v = i // 3
            raise LinkError(f"welded vertex {v} of session '{link.session}' is not at '{obj.name}' vertex {v}'s "
                            "position: they are not the same mesh, or not in the same order")
