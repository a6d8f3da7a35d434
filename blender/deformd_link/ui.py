"""ui.py — the add-on's preferences, operators and the panel (View3D > Sidebar > deformd).

Operators are thin: each finds or makes a Link (link.py) and reports what failed in words.
The panel shows one status line per linked object (linked / paused / disconnected, and the
last message), and the buttons: Upload as session, Link to session, Open session, Push
sculpt, Pull sculpt, Reconnect, Unlink.

DOES NOT sync anything itself: link.Link.drain() does, from the timer in __init__.py.
"""
import bpy
from bpy.props import IntProperty, StringProperty

from . import link

PACKAGE = __package__


class DeformdPreferences(bpy.types.AddonPreferences):
    bl_idname = PACKAGE

    host: StringProperty(name="Host", default="localhost", description="deformd's JSON-RPC host")
    port: IntProperty(name="Port", default=7451, min=1, max=65535, description="deformd's JSON-RPC port")
    stream_port: IntProperty(name="Stream port", default=7450, min=1, max=65535,
                             description="deformd's binary stream port (the link watches the session on it)")
    token: StringProperty(name="Token", default="", subtype="PASSWORD",
                          description="an access token, when the server has tokens (else $DEFORMD_TOKEN)")
    package_path: StringProperty(name="deformd package folder", default="", subtype="DIR_PATH",
                                 description="the folder that holds the deformd Python package, when Blender's "
                                             "Python cannot import it (a checkout's python/ folder)")

    def draw(self, context):
        col = self.layout.column()
        col.prop(self, "host")
        col.prop(self, "port")
        col.prop(self, "stream_port")
        col.prop(self, "token")
        col.prop(self, "package_path")


def prefs(context):
    addon = context.preferences.addons.get(PACKAGE)
    if addon is not None:
        p = addon.preferences
        return p.host, p.port, p.stream_port, p.token, p.package_path
    return "localhost", 7451, 7450, "", ""


class _ServerOperator:
    """An operator that connects and makes a link: execute() runs make(context, client, server)
    and reports what it returns, or the failure (closing the client it opened)."""
    host: StringProperty(name="Host", default="", description="empty: the add-on's preference")
    port: IntProperty(name="Port", default=0, min=0, max=65535, description="0: the add-on's preference")
    stream_port: IntProperty(name="Stream port", default=0, min=0, max=65535,
                             description="0: the add-on's preference")
    session: StringProperty(name="Session", default="", description="empty: the scene's deformd session name")

    def execute(self, context):
        client = None
        try:
            if context.mode != "OBJECT":
                raise link.LinkError("switch to Object mode first")
            host, port, stream_port, token, path = prefs(context)
            server = (self.host or host, self.port or port, self.stream_port or stream_port, token, path)
            client = link.connect(*server)
            message = self.make(context, client, server)
        except Exception as e:
            if client is not None:
                client.close()
            self.report({"ERROR"}, link.describe(e))
            return {"CANCELLED"}
        self.report({"INFO"}, message)
        return {"FINISHED"}


def _active_mesh(context):
    obj = context.active_object
    if obj is None or obj.type != "MESH":
        raise link.LinkError("select a mesh object first")
    return obj


class DEFORMD_OT_upload(_ServerOperator, bpy.types.Operator):
    """Upload the active mesh with its shape keys as a new deformd session and link it"""
    bl_idname = "deformd.upload"
    bl_label = "Upload as session"

    def make(self, context, client, server):
        obj = _active_mesh(context)
        l = link.upload(obj, client, self.session or context.scene.deformd_session or obj.name, server)
        return f"'{obj.name}' is session '{l.session}' ({l.vertex_count} welded vertices)"


class DEFORMD_OT_attach(_ServerOperator, bpy.types.Operator):
    """Link the active mesh to an existing session made from it (same vertices, same order)"""
    bl_idname = "deformd.attach"
    bl_label = "Link to session"

    def make(self, context, client, server):
        obj = _active_mesh(context)
        session = self.session or obj.get("deformd_session") or context.scene.deformd_session or obj.name
        l = link.attach(obj, client, session, server)
        return f"'{obj.name}' is linked to session '{l.session}'"


class DEFORMD_OT_open(_ServerOperator, bpy.types.Operator):
    """Open a session's mesh as a new object (one vertex per welded vertex) and link it"""
    bl_idname = "deformd.open"
    bl_label = "Open session"

    def make(self, context, client, server):
        session = self.session or context.scene.deformd_session
        if not session:
            raise link.LinkError("name the session to open (the Session field)")
        l = link.open_session(context, client, session, server)
        obj = l.obj()
        for o in context.selected_objects:
            o.select_set(False)
        obj.select_set(True)
        context.view_layer.objects.active = obj
        return f"session '{l.session}' is the new object '{obj.name}' ({l.vertex_count} vertices)"


class _LinkOperator:
    """An operator on the active object's link: execute() runs act(context, link) and reports
    the message it returns, or the failure."""

    def execute(self, context):
        obj = context.active_object
        try:
            l = link.LINKS.get(obj.name) if obj else None
            if l is None:
                raise link.LinkError("the active object is not linked to a session")
            message = self.act(context, l)
        except Exception as e:
            self.report({"ERROR"}, link.describe(e))
            return {"CANCELLED"}
        if message:
            self.report({"INFO"}, message)
        return {"FINISHED"}


class DEFORMD_OT_push_sculpt(_LinkOperator, bpy.types.Operator):
    """Send the 'deformd sculpt' key's changes to the session as sculpt offsets (leaving Sculpt or Edit mode does it too)"""
    bl_idname = "deformd.push_sculpt"
    bl_label = "Push sculpt"

    def act(self, context, l):
        if context.active_object.mode != "OBJECT":
            raise link.LinkError("switch to Object mode first: the key's data is written when you leave the mode")
        return f"sent the sculpt of {l.push_sculpt()} vertices"


class DEFORMD_OT_pull_sculpt(_LinkOperator, bpy.types.Operator):
    """Read the session's sculpt layer into the 'deformd sculpt' key, replacing unsent local changes"""
    bl_idname = "deformd.pull_sculpt"
    bl_label = "Pull sculpt"

    def act(self, context, l):
        l.pull_sculpt(context.active_object)
        return ""


class DEFORMD_OT_reconnect(_LinkOperator, bpy.types.Operator):
    """Connect again and read the session's state"""
    bl_idname = "deformd.reconnect"
    bl_label = "Reconnect"

    def act(self, context, l):
        if not l.reconnect():
            raise link.LinkError(l.error)
        return f"session '{l.session}' reconnected"


class DEFORMD_OT_unlink(bpy.types.Operator):
    """Stop syncing the active object (the session stays on the server)"""
    bl_idname = "deformd.unlink"
    bl_label = "Unlink"

    def execute(self, context):
        obj = context.active_object
        l = link.LINKS.pop(obj.name, None) if obj else None
        if l:
            l.close()
        return {"FINISHED"}


class VIEW3D_PT_deformd(bpy.types.Panel):
    bl_space_type = "VIEW_3D"
    bl_region_type = "UI"
    bl_category = "deformd"
    bl_label = "deformd live link"

    def draw(self, context):
        layout = self.layout
        host, port = prefs(context)[:2]
        layout.label(text=f"Server {host}:{port}")
        layout.prop(context.scene, "deformd_session")
        obj = context.active_object
        l = link.LINKS.get(obj.name) if obj else None
        if l is None:
            layout.label(text="not linked", icon="UNLINKED")
            row = layout.row()
            row.operator("deformd.upload")
            row.operator("deformd.attach")
            layout.operator("deformd.open")
            return
        icon = {"linked": "LINKED", "paused": "PAUSE", "disconnected": "ERROR"}.get(l.status, "INFO")
        layout.label(text=f"{l.status}: session '{l.session}', {l.vertex_count} vertices", icon=icon)
        if l.error:
            col = layout.column(align=True)
            for line in _wrap(l.error, 48):
                col.label(text=line)
        row = layout.row()
        row.operator("deformd.push_sculpt")
        row.operator("deformd.pull_sculpt")
        row = layout.row()
        row.operator("deformd.reconnect")
        row.operator("deformd.unlink")


def _wrap(text, width):
    line, out = "", []
    for word in text.split():
        if line and len(line) + 1 + len(word) > width:
            out.append(line)
            line = word
        else:
            line = f"{line} {word}" if line else word
    return out + ([line] if line else [])


def redraw():
    wm = getattr(bpy.context, "window_manager", None)
    for window in (wm.windows if wm else []):
        for area in window.screen.areas:
            if area.type == "VIEW_3D":
                area.tag_redraw()


CLASSES = (DeformdPreferences, DEFORMD_OT_upload, DEFORMD_OT_attach, DEFORMD_OT_open, DEFORMD_OT_push_sculpt,
           DEFORMD_OT_pull_sculpt, DEFORMD_OT_reconnect, DEFORMD_OT_unlink, VIEW3D_PT_deformd)


def register():
    for c in CLASSES:
        bpy.utils.register_class(c)
    bpy.types.Scene.deformd_session = StringProperty(
        name="Session", default="", description="the session to upload as or link to (empty: the object's name)")


def unregister():
    del bpy.types.Scene.deformd_session
    for c in reversed(CLASSES):
        bpy.utils.unregister_class(c)
