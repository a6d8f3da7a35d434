"""One typed method per JSON-RPC call of docs/json-api.md §4, shared by the blocking client
(deformd.Client: each returns the result) and the asyncio one (deformd.aio.Client: each returns an
awaitable of it). A method named `a.b` is `a_b` here; a parameter left at None is not sent, so the
server's default applies. The results are the JSON the server answers, as Python values."""
import base64
from typing import Any, Dict, Generic, Iterable, List, Mapping, Optional, Sequence, TypeVar, Union

R = TypeVar("R")

Vec3 = Sequence[float]
JSON = Any


def _params(**kw: Any) -> Dict[str, Any]:
    return {k: v for k, v in kw.items() if v is not None}


def _offsets_obj(offsets: Mapping[Union[int, str], Vec3]) -> Dict[str, List[float]]:
    out: Dict[str, List[float]] = {}
    for k, v in offsets.items():
        if isinstance(k, bool) or not isinstance(k, (int, str)):
            raise TypeError(f"sculpt offsets are keyed by vertex index, not {k!r}")
        xyz = [float(c) for c in v]
        if len(xyz) != 3:
            raise ValueError(f"offset of vertex {k} must have 3 components, not {len(xyz)}")
        out[str(k)] = xyz
    return out


class Methods(Generic[R]):
    """The typed calls. Subclasses provide `_rpc(method, params)`."""

    def _rpc(self, method: str, params: Optional[Dict[str, Any]]) -> R:  # pragma: no cover
        raise NotImplementedError

    # ---- access and authors ---------------------------------------------------------------------
    def auth(self, token: str) -> R:
        """`auth`: presents an access token; the result names the role (and session, user)."""
        return self._rpc("auth", {"token": token})

    def hello(self, author: str) -> R:
        """`hello`: names the author of this connection's changes: `{"author", "connection"}`."""
        return self._rpc("hello", {"author": author})

    def token_create(self, role: str, user: str, session: Optional[str] = None) -> R:
        """`token.create`: a new token (`viewer`, `editor`, `owner`, `admin`) for `user`, on one
        session or all: `{"token", "id", "role", "session"?, "user"}`; the token is shown once."""
        return self._rpc("token.create", _params(role=role, user=user, session=session))

    def token_list(self, session: Optional[str] = None) -> R:
        """`token.list`: the tokens this connection could have made (never the tokens)."""
        return self._rpc("token.list", _params(session=session))

    def token_revoke(self, id: int) -> R:
        """`token.revoke`: the token with that id stops working at once."""
        return self._rpc("token.revoke", {"id": id})

    # ---- history ---------------------------------------------------------------------------------
    def history_undo(self, session: str) -> R:
        """`history.undo`: undoes this author's newest step."""
        return self._rpc("history.undo", {"session": session})

    def history_redo(self, session: str) -> R:
        """`history.redo`: redoes the step this author undid last."""
        return self._rpc("history.redo", {"session": session})

    def history_list(self, session: str, before_version: Optional[int] = None, limit: Optional[int] = None) -> R:
        """`history.list`: `{"version", "steps"}`, newest first."""
        return self._rpc("history.list", _params(session=session, before_version=before_version, limit=limit))

    def history_revert(self, session: str, version: int) -> R:
        """`history.revert`: the state of `version` again, as one new step (needs a store)."""
        return self._rpc("history.revert", {"session": session, "version": version})

    def history_compact(self, session: str, keep_versions: int) -> R:
        """`history.compact`: folds operations older than the newest `keep_versions`."""
        return self._rpc("history.compact", {"session": session, "keep_versions": keep_versions})

    # ---- sessions and files ----------------------------------------------------------------------
    def session_create(self, session: str, mesh: str, up: Optional[str] = None, node: Optional[str] = None) -> R:
        """`session.create`: opens `mesh` (a file in the mesh folders, or "demo") as `session`;
        answers the session summary once the import has finished."""
        return self._rpc("session.create", _params(session=session, mesh=mesh, up=up, node=node))

    def session_list(self) -> R:
        """`session.list`: every session's summary."""
        return self._rpc("session.list", None)

    def session_close(self, session: str) -> R:
        """`session.close`: closes the session and deletes it from the store."""
        return self._rpc("session.close", {"session": session})

    def session_export(self, session: str, path: Optional[str] = None, version: Optional[int] = None,
                       format: Optional[str] = None, offset: Optional[int] = None,
                       max_bytes: Optional[int] = None) -> R:
        """`session.export`: with `path`, writes exports/PATH on the server; without, one chunk of
        a download (`{"data" (base64), "offset", "total", "format", "version"}`). `download()`
        fetches a whole file."""
        return self._rpc("session.export", _params(session=session, path=path, version=version, format=format,
                                                   offset=offset, max_bytes=max_bytes))

    def mesh_upload(self, name: str, data: str, offset: int = 0, final: bool = False) -> R:
        """`mesh.upload`: one chunk (`data` is base64) of a file for the server's meshes/.
        `upload()` sends a whole file."""
        return self._rpc("mesh.upload", {"name": name, "data": data, "offset": offset, "final": final})

    def mesh_info(self, session: str) -> R:
        """`mesh.info`: vertex counts (render `vertices`, welded `topology_vertices`), targets,
        bbox, up axis."""
        return self._rpc("mesh.info", {"session": session})

    def mesh_topology(self, session: str, first: Optional[int] = None, count: Optional[int] = None) -> R:
        """`mesh.topology`: the welded (topology) vertex of each render vertex, `first` … `first +
        count − 1` (at most 1,048,576 a call): `{"welded", "first", "count", "vertices",
        "topology_vertices"}`."""
        return self._rpc("mesh.topology", _params(session=session, first=first, count=count))

    # ---- targets and weights ---------------------------------------------------------------------
    def targets_list(self, session: str) -> R:
        """`targets.list`: every target with its weight, value, range, mute flag and drivers."""
        return self._rpc("targets.list", {"session": session})

    def targets_configure(self, session: str, target: str, min: Optional[float] = None, max: Optional[float] = None,
                          muted: Optional[bool] = None, drivers: Optional[Sequence[str]] = None) -> R:
        """`targets.configure`: changes a target's range, mute flag or drivers (partial)."""
        return self._rpc("targets.configure", _params(session=session, target=target, min=min, max=max, muted=muted,
                                                      drivers=None if drivers is None else list(drivers)))

    def targets_create_from_sculpt(self, session: str, name: str) -> R:
        """`targets.create_from_sculpt`: the sculpt layer becomes target `name` (at weight 1):
        `{"version", "index", "name", "vertices"}`."""
        return self._rpc("targets.create_from_sculpt", {"session": session, "name": name})

    def weights_set(self, session: str, weights: Mapping[str, float]) -> R:
        """`weights.set`: sets the named targets' values (absolute, partial): `{"version"}`."""
        return self._rpc("weights.set", {"session": session, "weights": {str(k): float(v) for k, v in weights.items()}})

    def weights_get(self, session: str) -> R:
        """`weights.get`: `{"version", "weights": {name: weight}}` in target index order."""
        return self._rpc("weights.get", {"session": session})

    # ---- sculpt, gestures, brushes ---------------------------------------------------------------
    def sculpt_set(self, session: str, offsets: Mapping[Union[int, str], Vec3]) -> R:
        """`sculpt.set`: absolute sculpt offsets of some render vertices, `{index: [x, y, z]}`
        (int or decimal-string keys). For whole arrays use `set_sculpt_offsets()`."""
        return self._rpc("sculpt.set", {"session": session, "offsets": _offsets_obj(offsets)})

    def sculpt_get(self, session: str) -> R:
        """`sculpt.get`: `{"version", "offsets": {"index": [x, y, z]}}` of every sculpted vertex."""
        return self._rpc("sculpt.get", {"session": session})

    # ---- masks (docs/json-api.md "Masks": the caller's own mask, held under its brushes) ------
    def mask_stroke(self, session: str, samples: Sequence[Mapping[str, Any]], radius: float,
                    tool: Optional[str] = None, strength: Optional[float] = None,
                    falloff: Optional[str] = None) -> R:
        """`mask.stroke`: paints (`tool` "paint"), erases ("erase") or smooths ("smooth") the
        caller's mask along `samples` (`[{"center": [x, y, z]}, ...]`); one undoable step."""
        return self._rpc("mask.stroke", _params(session=session, samples=[dict(x) for x in samples], radius=radius,
                                                tool=tool, strength=strength, falloff=falloff))

    def mask_clear(self, session: str) -> R:
        """`mask.clear`: every value of the caller's mask to 0 (one undoable step)."""
        return self._rpc("mask.clear", {"session": session})

    def mask_invert(self, session: str) -> R:
        """`mask.invert`: every value m of the caller's mask to 1 − m (one undoable step)."""
        return self._rpc("mask.invert", {"session": session})

    def mask_auto(self, session: str, mode: str, vertex: Optional[int] = None, angle: Optional[float] = None,
                  rings: Optional[int] = None, combine: Optional[str] = None) -> R:
        """`mask.auto`: a mask by `mode` "topology" (holds what is not connected to `vertex`),
        "normal" (holds what turns more than `angle` degrees from `vertex`'s normal) or
        "boundary" (the open edges' vertices and `rings` − 1 rings around them); `combine`
        "replace" (the default) or "add" (the larger value per vertex)."""
        return self._rpc("mask.auto", _params(session=session, mode=mode, vertex=vertex, angle=angle, rings=rings,
                                              combine=combine))

    def mask_get(self, session: str) -> R:
        """`mask.get`: the caller's mask, `{"version", "vertices", "values"}`."""
        return self._rpc("mask.get", {"session": session})

    # ---- live face input (docs/json-api.md "Live face input"; docs/operations.md §13) -----------
    def face_list(self) -> R:
        """`face.list` (admin): each face input (VMC, Live Link Face) with its port, session and
        counters."""
        return self._rpc("face.list", {})

    def face_map_get(self, session: str) -> R:
        """`face.map_get`: the mapping from tracker names (ARKit, VRM presets) to the session's
        targets."""
        return self._rpc("face.map_get", {"session": session})

    def face_map_set(self, session: str, mapping: Any) -> R:
        """`face.map_set` (owner): replaces the session's mapping while live; answers it as set."""
        return self._rpc("face.map_set", {"session": session, "mapping": mapping})

    # ---- presence (docs/json-api.md "Presence": who is here, never stored) -------------------
    def presence_list(self, session: str) -> R:
        """`presence.list`: the session's participants (author, role, client, idle time, cursor,
        camera)."""
        return self._rpc("presence.list", {"session": session})

    def presence_set(self, session: str, cursor: Optional[Mapping[str, Any]] = None,
                     camera: Optional[Mapping[str, Any]] = None, private: Optional[bool] = None) -> R:
        """`presence.set`: this connection's cursor (`{"hit", "normal", "radius", "tool"}`) and
        camera (`{"eye", "target", "fov"}`) as other participants see them; `private` shares
        neither."""
        return self._rpc("presence.set", _params(session=session, cursor=None if cursor is None else dict(cursor),
                                                 camera=None if camera is None else dict(camera), private=private))

    def deform_begin(self, session: str, pick: Optional[int] = None, handle: Optional[Sequence[int]] = None,
                     mode: Optional[str] = None, border: Optional[str] = None, iterations: Optional[int] = None,
                     gesture: Optional[int] = None, handle_radius: Optional[float] = None,
                     roi: Optional[Sequence[int]] = None, roi_radius: Optional[float] = None,
                     anchors: Optional[Sequence[int]] = None, soft: Optional[Sequence[Mapping[str, Any]]] = None,
                     detached: Optional[bool] = None, multires: Optional[bool] = None,
                     proxy_vertices: Optional[int] = None, measure_exact: Optional[bool] = None) -> R:
        """`deform.begin`: starts a gesture (`laplacian`, `biharmonic`, `arap`) on a handle.
        `multires` picks the multiresolution path (default: by size) and `proxy_vertices` its
        proxy's size; with `measure_exact`, `deform_end` answers `exact_distance`, how far the
        gesture's shape lies from the exact solve of the same drags."""
        return self._rpc("deform.begin", _params(
            session=session, pick=pick, handle=None if handle is None else list(handle), mode=mode, border=border,
            iterations=iterations, gesture=gesture, handle_radius=handle_radius,
            roi=None if roi is None else list(roi), roi_radius=roi_radius,
            anchors=None if anchors is None else list(anchors), soft=None if soft is None else [dict(s) for s in soft],
            detached=detached, multires=multires, proxy_vertices=proxy_vertices, measure_exact=measure_exact))

    def deform_drag(self, session: str, gesture: int, translate: Optional[Vec3] = None,
                    rotate: Optional[Sequence[float]] = None, pivot: Optional[Vec3] = None) -> R:
        """`deform.drag`: moves the gesture's handle (absolute, from where it was at begin)."""
        return self._rpc("deform.drag", _params(session=session, gesture=gesture,
                                                translate=None if translate is None else list(translate),
                                                rotate=None if rotate is None else list(rotate),
                                                pivot=None if pivot is None else list(pivot)))

    def deform_end(self, session: str, gesture: int) -> R:
        """`deform.end`: ends the gesture once its pending drag has been applied (and, for one
        begun with `measure_exact`, once its drags have been replayed through the exact solve)."""
        return self._rpc("deform.end", {"session": session, "gesture": gesture})

    def deform_reset(self, session: str, vertices: Optional[Sequence[int]] = None) -> R:
        """`deform.reset`: zero sculpt offsets of `vertices` (None: every vertex)."""
        return self._rpc("deform.reset", _params(session=session, vertices=None if vertices is None else list(vertices)))

    def brush_stroke(self, session: str, brush: str, samples: Sequence[Mapping[str, Any]],
                     radius: Optional[float] = None, strength: Optional[float] = None, falloff: Optional[str] = None,
                     spacing: Optional[float] = None, autosmooth: Optional[float] = None,
                     front_faces_only: Optional[bool] = None, view: Optional[Vec3] = None,
                     height: Optional[float] = None, mirror_x: Optional[bool] = None,
                     continue_: Optional[bool] = None, mirror: Optional[str] = None) -> R:
        """`brush.stroke`: a stroke along `samples` (`[{"center": [x, y, z], ...}]`);
        `continue_` is the method's `continue`; `mirror` the symmetry plane, "x", "y" or "z"."""
        p = _params(session=session, brush=brush, samples=[dict(s) for s in samples], radius=radius,
                    strength=strength, falloff=falloff, spacing=spacing, autosmooth=autosmooth,
                    front_faces_only=front_faces_only, view=None if view is None else list(view), height=height,
                    mirror_x=mirror_x, mirror=mirror)
        if continue_ is not None:
            p["continue"] = continue_
        return self._rpc("brush.stroke", p)

    # ---- blend solves ----------------------------------------------------------------------------
    def blend_solve(self, session: str, pins: Sequence[Mapping[str, Any]], regularization: Optional[float] = None,
                    keep_close_to_current: Optional[bool] = None, targets: Optional[Sequence[str]] = None) -> R:
        """`blend.solve`: target weights that put `pins` (`[{"vertex", "position"}]`) there."""
        return self._rpc("blend.solve", _params(session=session, pins=[dict(p) for p in pins],
                                                regularization=regularization,
                                                keep_close_to_current=keep_close_to_current,
                                                targets=None if targets is None else list(targets)))

    def blend_fit(self, session: str, shape: str, regularization: Optional[float] = None,
                  keep_close_to_current: Optional[bool] = None, targets: Optional[Sequence[str]] = None,
                  apply: Optional[bool] = None) -> R:
        """`blend.fit`: target weights that best fit `shape` ("sculpt" or a mesh file)."""
        return self._rpc("blend.fit", _params(session=session, shape=shape, regularization=regularization,
                                              keep_close_to_current=keep_close_to_current,
                                              targets=None if targets is None else list(targets), apply=apply))

    # ---- animation -------------------------------------------------------------------------------
    def anim_list(self, session: str) -> R:
        """`anim.list`: `{"clips", "player"}`."""
        return self._rpc("anim.list", {"session": session})

    def anim_compress(self, session: str, clip: str, max_error: Optional[float] = None,
                      components: Optional[int] = None, regions: Optional[Sequence[Sequence[int]]] = None,
                      name: Optional[str] = None, weight_bits: Optional[int] = None) -> R:
        """`anim.compress`: a clip as PCA targets; the compression report."""
        return self._rpc("anim.compress", _params(session=session, clip=clip, max_error=max_error,
                                                  components=components,
                                                  regions=None if regions is None else [list(r) for r in regions],
                                                  name=name, weight_bits=weight_bits))

    def texclip_upload(self, session: str, name: str, clip: str, frames: Sequence[bytes], fps: Optional[float] = None,
                       max_error: Optional[float] = None, components: Optional[int] = None,
                       windows: Optional[Sequence[Mapping[str, Any]]] = None) -> R:
        """`texclip.upload`: an image sequence (PNG or JPEG files' bytes, in order) as an animated texture
        clip following `clip`'s clock; the compression report."""
        return self._rpc("texclip.upload", _params(session=session, name=name, clip=clip,
                                                   frames=[base64.b64encode(bytes(f)).decode("ascii") for f in frames],
                                                   fps=fps, max_error=max_error, components=components,
                                                   windows=None if windows is None else [dict(w) for w in windows]))

    def texclip_list(self, session: str) -> R:
        """`texclip.list`: `{"texclips": [report, ...]}`."""
        return self._rpc("texclip.list", {"session": session})

    def anim_play(self, session: str, clip: str, speed: Optional[float] = None, loop: Optional[bool] = None,
                  frame: Optional[float] = None) -> R:
        """`anim.play`: plays a weights clip or a compressed one; the player state."""
        return self._rpc("anim.play", _params(session=session, clip=clip, speed=speed, loop=loop, frame=frame))

    def anim_pause(self, session: str) -> R:
        """`anim.pause`."""
        return self._rpc("anim.pause", {"session": session})

    def anim_stop(self, session: str) -> R:
        """`anim.stop`."""
        return self._rpc("anim.stop", {"session": session})

    def anim_seek(self, session: str, frame: Optional[float] = None, time: Optional[float] = None) -> R:
        """`anim.seek`: to a `frame` or a `time` in seconds."""
        return self._rpc("anim.seek", _params(session=session, frame=frame, time=time))

    def anim_speed(self, session: str, speed: float) -> R:
        """`anim.speed`."""
        return self._rpc("anim.speed", {"session": session, "speed": speed})

    def anim_loop(self, session: str, loop: bool) -> R:
        """`anim.loop`."""
        return self._rpc("anim.loop", {"session": session, "loop": loop})

    def anim_blend(self, session: str, clip: str, duration: Optional[float] = None) -> R:
        """`anim.blend`: crossfades into `clip` over `duration` seconds."""
        return self._rpc("anim.blend", _params(session=session, clip=clip, duration=duration))

    def anim_record_start(self, session: str, clip: str, fps: Optional[float] = None,
                          max_frames: Optional[int] = None) -> R:
        """`anim.record_start`: samples the session's shape into a new clip."""
        return self._rpc("anim.record_start", _params(session=session, clip=clip, fps=fps, max_frames=max_frames))

    def anim_record_stop(self, session: str) -> R:
        """`anim.record_stop`: `{"clip", "frames", "fps"}`."""
        return self._rpc("anim.record_stop", {"session": session})

    # ---- state -----------------------------------------------------------------------------------
    def state_get(self, session: str) -> R:
        """`state.get`: version, counts, `offset_quantum`, viewers, up axis."""
        return self._rpc("state.get", {"session": session})

    def server_stats(self) -> R:
        """`server.stats`: server-wide counters (admin)."""
        return self._rpc("server.stats", None)


def method_names() -> Iterable[str]:
    """The JSON-RPC method names the typed methods call (for tests and tooling)."""
    return sorted(n.replace("_", ".", 1) for n in vars(Methods) if not n.startswith("_") and n != "method_names")
