"""deformd live link — a Blender add-on that links a mesh object to a deformd session.

Upload a mesh with its shape keys as a new session, or link it to a session made from it
before; from then on shape keys and targets, key values and weights, and the session's sculpt
layer (the "deformd sculpt" key) follow each other both ways while Blender runs. See
blender/README.md (first five minutes, vertex identity, what is and is not synced).

Files: link.py (the link and its listener thread), meshio.py (Blender meshes and keys as
arrays), glb.py (the file an upload sends), ui.py (preferences, operators, the panel).
This file registers them and runs the timer that drains every link.

DOES NOT need numpy, and talks to deformd only through the deformd Python package.
"""
bl_info = {
    "name": "deformd live link",
    "author": "deformd",
    "version": (0, 1, 0),
    "blender": (3, 4, 0),
    "location": "View3D > Sidebar > deformd",
    "description": "Shape keys, weights and sculpt live between Blender and a deformd session",
    "category": "Animation",
}

import bpy

from . import link, ui

TICK_S = 0.1


def drain_all():
    """What the timer runs: one drain() of every link. The headless tests call it directly
    (bpy.app.timers do not run under `blender -b`)."""
    for l in list(link.LINKS.values()):
        l.drain()
    ui.redraw()


def _tick():
    drain_all()
    return TICK_S


def close_all(*_args):
    """Ends every link. Runs before another .blend file loads: links go by object name, and the
    next file's object of that name is another mesh (Link to session links it again)."""
    for l in list(link.LINKS.values()):
        l.close()
    link.LINKS.clear()


close_all = bpy.app.handlers.persistent(close_all)


def register():
    ui.register()
    if not bpy.app.timers.is_registered(_tick):
        bpy.app.timers.register(_tick, first_interval=TICK_S, persistent=True)
    if close_all not in bpy.app.handlers.load_pre:
        bpy.app.handlers.load_pre.append(close_all)


def unregister():
    if bpy.app.timers.is_registered(_tick):
        bpy.app.timers.unregister(_tick)
    if close_all in bpy.app.handlers.load_pre:
        bpy.app.handlers.load_pre.remove(close_all)
    close_all()
    ui.unregister()
