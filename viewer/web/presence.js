// presence.js — who else is in the session, in the page (viewer/vw_presence.c's job in a browser):
// the participants PRESENCE frames describe (docs/protocol.md §16) with their authors' colours
// (presenceColour: the same bytes as deform-view's), join and leave notices, "follow" another
// participant's camera, and this page's own cursor and camera, sent when they change (at most
// 30 times a second; the server coalesces to 60 Hz). Drawn on a 2D canvas over the WebGL one:
// each cursor a dot with its brush circle and its author's name, each camera a small square
// where its eye is.
//
// Every record carries absolute values: an INFO replaces a participant's description, a STATE
// its cursor and camera, a CLEAR empties the list (the records after it are the whole list).
// Joins are announced only after the connection's first list, so joining a busy session does
// not announce everyone already there.
//
// DOES NOT decode records (protocol.js) or draw the mesh (render.js).

import * as P from './protocol.js';

const SEND_EVERY_MS = 1000 / 30;
const TOOL_NAMES = ['', 'deform', 'grab', 'inflate', 'smooth', 'flatten', 'pinch', 'draw', 'crease', 'layer'];

export class Presence {
  constructor(onChange) {
    this.onChange = onChange || (() => {});
    this.reset(0);
  }

  // A new connection: WELCOME's client id is this page's participant id.
  reset(self) {
    this.self = self;
    this.people = new Map(); // id -> {id, author, role, client, flags, idleMs, rgb, state}
    this.listed = false;
    this.following = 0;
    this.notices = [];
    this.sent = null;
    this.sentAt = 0;
  }

  notice(text) {
    this.notices.push({ text, at: performance.now() });
    if (this.notices.length > 8) this.notices.shift();
  }

  apply(payload) {
    const records = P.decodePresence(payload); // throws on a bad frame: nothing applied
    let before = null;
    for (const r of records) {
      if (r.kind === P.PRES.CLEAR) {
        before = new Map([...this.people].map(([id, q]) => [id, q.author]));
        this.people = new Map();
      } else if (r.kind === P.PRES.INFO) {
        const known = this.people.get(r.id);
        if (!known && this.listed && r.id !== this.self && !(before && before.has(r.id)))
          this.notice(`${r.author} joined (${r.flags & P.PRES_EDITING ? 'editing' : 'watching'})`);
        const q = known || { state: null };
        Object.assign(q, { id: r.id, author: r.author, role: r.role, client: r.client, flags: r.flags, idleMs: r.idleMs,
          activeAt: performance.now() - r.idleMs });
        q.rgb = P.presenceColour(r.author);
        if (q.flags & P.PRES_PRIVATE) q.state = null;
        this.people.set(r.id, q);
      } else if (r.kind === P.PRES.LEAVE) {
        const q = this.people.get(r.id);
        if (q && this.listed && r.id !== this.self) this.notice(`${q.author} left`);
        this.people.delete(r.id);
      } else if (r.kind === P.PRES.STATE) {
        const q = this.people.get(r.id);
        if (q && !(q.flags & P.PRES_PRIVATE)) {
          q.state = r;
          q.activeAt = performance.now();
        }
      }
    }
    if (before) {
      for (const [id, author] of before) if (!this.people.has(id) && this.listed && id !== this.self) this.notice(`${author} left`);
      this.listed = true;
    }
    if (this.following && !this.people.has(this.following)) this.following = 0;
    this.onChange();
  }

  // Everyone, in the order they joined (a Map keeps insertion order).
  list() {
    return [...this.people.values()];
  }

  // The participants sharing a camera, other than this page.
  leaders() {
    return this.list().filter((q) => q.id !== this.self && q.state && q.state.flags & P.PRES_CAMERA);
  }

  follow(id) {
    this.following = id && this.people.has(id) ? id : 0;
    this.onChange();
  }

  // The followed participant's camera {eye, target, fov}, or null.
  leader() {
    const q = this.following ? this.people.get(this.following) : null;
    return q && q.state && q.state.flags & P.PRES_CAMERA ? q.state : null;
  }

  // This page's cursor and camera: the frame to send now, or null (unchanged, or sent less than
  // 1/30 s ago). `about` goes with the first one.
  due(state, about, now = performance.now()) {
    const key = JSON.stringify(state);
    if (this.sent === key || (this.sent !== null && now - this.sentAt < SEND_EVERY_MS)) return null;
    const first = this.sent === null;
    this.sent = key;
    this.sentAt = now;
    return P.encodePresence(state, first ? about : null);
  }
}

// The camera of camera.js looking from `pose.eye` at `pose.target` with `pose.fov` (the inverse of
// Camera.eye(): the same formula deform-view's vw_camera_look inverts).
export function applyCamera(camera, pose) {
  const d = [0, 1, 2].map((k) => pose.eye[k] - pose.target[k]);
  const dist = Math.hypot(...d);
  if (!(dist > 0)) return;
  const alongUp = camera.up === 'z' ? d[2] : d[1];
  const across = camera.up === 'z' ? -d[1] : d[2];
  camera.pitch = Math.asin(Math.max(-1, Math.min(1, alongUp / dist)));
  if (Math.abs(d[0]) + Math.abs(across) > 1e-12 * dist) camera.yaw = Math.atan2(d[0], across);
  camera.distance = dist;
  camera.center = [...pose.target];
  camera.fov = pose.fov;
}

// This page's STATE: the camera always, the cursor when `hit` ({point, normal}) is given.
export function stateOf(camera, hit, tool, radius) {
  const s = { flags: P.PRES_CAMERA, tool: 0, hit: [0, 0, 0], normal: [0, 0, 0], radius: 0, eye: camera.eye(), target: [...camera.center], fov: camera.fov };
  if (hit) Object.assign(s, { flags: P.PRES_CAMERA | P.PRES_CURSOR, tool, hit: hit.point, normal: hit.normal, radius });
  return s;
}

const css = (rgb, a = 1) => `rgba(${rgb[0]},${rgb[1]},${rgb[2]},${a})`;

// The others' cursors and cameras on the 2D overlay (its pixels are the WebGL canvas's).
export function drawPresence(ctx, presence, camera) {
  const { width, height } = ctx.canvas;
  ctx.clearRect(0, 0, width, height);
  const scale = devicePixelRatio;
  ctx.font = `${12 * scale}px system-ui, sans-serif`;
  for (const q of presence.list()) {
    if (q.id === presence.self || !q.state) continue;
    const s = q.state;
    if (s.flags & P.PRES_CURSOR) {
      const [x, y, z] = camera.project(s.hit);
      if (z > -1 && z < 1) {
        ctx.fillStyle = css(q.rgb);
        ctx.beginPath();
        ctx.arc(x, y, 4 * scale, 0, 2 * Math.PI);
        ctx.fill();
        if (s.radius > 0) {
          const e = camera.eye();
          const f = [0, 1, 2].map((k) => s.hit[k] - e[k]);
          const up = camera.up === 'z' ? [0, 0, 1] : [0, 1, 0];
          let r = [f[1] * up[2] - f[2] * up[1], f[2] * up[0] - f[0] * up[2], f[0] * up[1] - f[1] * up[0]];
          const rl = Math.hypot(...r) || 1;
          r = r.map((v) => (v / rl) * s.radius);
          const [ex, ey] = camera.project([s.hit[0] + r[0], s.hit[1] + r[1], s.hit[2] + r[2]]);
          ctx.strokeStyle = css(q.rgb);
          ctx.lineWidth = 1.5 * scale;
          ctx.beginPath();
          ctx.arc(x, y, Math.hypot(ex - x, ey - y), 0, 2 * Math.PI);
          ctx.stroke();
        }
        ctx.fillText(`${q.author} ${TOOL_NAMES[s.tool] || ''}`, x + 8 * scale, y - 8 * scale);
      }
    }
    if (s.flags & P.PRES_CAMERA && presence.following !== q.id) {
      const [x, y, z] = camera.project(s.eye);
      if (z > -1 && z < 1) {
        ctx.fillStyle = css(q.rgb);
        ctx.fillRect(x - 5 * scale, y - 5 * scale, 10 * scale, 10 * scale);
        ctx.fillText(`${q.author}'s view`, x + 8 * scale, y + 4 * scale);
      }
    }
  }
}

// Who is here, as the page lists it (an element per participant in its colour) with the newest
// notice, and the follow control's options.
export function showPeople(div, select, presence, now = performance.now()) {
  const rows = presence.list().map((q) => {
    const what = q.flags & P.PRES_EDITING ? 'editing' : 'watching';
    const idleMs = now - q.activeAt; // since its last STATE, or the last INFO's idle time on
    const idle = idleMs >= 10000 && q.id !== presence.self ? ` · idle ${Math.round(idleMs / 1000)} s` : '';
    const you = q.id === presence.self ? ' (you)' : '';
    return `<div style="color:${css(q.rgb)}">${escape(q.author)}${you} · ${what}${idle}</div>`;
  });
  const n = presence.notices[presence.notices.length - 1];
  if (n && now - n.at < 4000) rows.push(`<div class="notice">${escape(n.text)}</div>`);
  div.innerHTML = rows.join('');
  const want = ['0', ...presence.leaders().map((q) => String(q.id))].join(',');
  if (select.dataset.ids !== want) {
    select.dataset.ids = want;
    select.innerHTML = '<option value="0">follow: nobody</option>' +
      presence.leaders().map((q) => `<option value="${q.id}">follow ${escape(q.author)}</option>`).join('');
  }
  select.value = String(presence.following);
}

function escape(s) {
  return s.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}
