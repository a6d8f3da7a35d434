// panels.js — what the page does over JSON-RPC beyond the stream (docs/json-api.md):
//   sessions   the picker: session.list (the sessions this token may see); choosing one opens it
//   upload     a mesh file dropped onto the page: mesh.upload in 1 MiB chunks, then session.create
//              on it, then the page opens the new session; where the server has no data
//              directory or the token is not an administrator's, the page says so (the server's
//              reason)
//   download   the current shape as OBJ (baked) or GLB (base, sculpt and targets): session.export
//              in chunks, saved through a link
//   target     the sculpt turned into a target: targets.create_from_sculpt
//   history    history.list (steps with authors, newest first), each with a revert (history.revert
//              to the state after it); undo and redo are main.js's buttons
//
// DOES NOT touch the stream connection (net.js) or the canvas (main.js).

const CHUNK = 1 << 20; // raw bytes per mesh.upload request (1.33 MiB of base64)

function base64(bytes) {
  let s = '';
  for (let i = 0; i < bytes.length; i += 0x8000) s += String.fromCharCode.apply(null, bytes.subarray(i, i + 0x8000));
  return btoa(s);
}

function unbase64(text) {
  const s = atob(text);
  const out = new Uint8Array(s.length);
  for (let i = 0; i < s.length; i++) out[i] = s.charCodeAt(i);
  return out;
}

// What an error of an upload means to the person who dropped the file (both refusals are
// −32009, SRV_EACCES: the server's message says which).
export function uploadRefusal(e) {
  const m = (e && e.message) || String(e);
  if (/--data none|data directory|keeps no files/i.test(m))
    return `this server has no data directory (deformd --data none), so it cannot take uploads (${m})`;
  if (e && e.code === -32009)
    return `this token may not upload meshes or open sessions: that needs an administrator's token (${m})`;
  return m;
}

export class Panels {
  constructor({ net, session, $, say, params }) {
    this.net = net;
    this.session = session;
    this.$ = $;
    this.say = say; // (text) a line in the status bar
    this.params = params;
    this.lastUpload = null;
    this.historyShown = false;
    this.historyAt = -1;
    $('sessions').addEventListener('focus', () => this.listSessions());
    $('sessions').addEventListener('change', (e) => this.open(e.target.value));
    $('download-obj').addEventListener('click', () => this.download('obj'));
    $('download-glb').addEventListener('click', () => this.download('glb'));
    $('make-target').addEventListener('click', () => this.makeTarget($('target-name').value.trim()));
    $('history-button').addEventListener('click', () => this.toggleHistory());
    addEventListener('dragover', (e) => {
      e.preventDefault();
      document.body.classList.add('dropping');
    });
    addEventListener('dragleave', () => document.body.classList.remove('dropping'));
    addEventListener('drop', (e) => {
      e.preventDefault();
      document.body.classList.remove('dropping');
      const f = e.dataTransfer && e.dataTransfer.files[0];
      if (f) this.upload(f);
    });
  }

  // ---- sessions ---------------------------------------------------------------------------------

  async listSessions() {
    const sel = this.$('sessions');
    let list;
    try {
      list = await this.net.call('session.list', {});
    } catch (e) {
      this.say(`session.list: ${e.message}`);
      return [];
    }
    const names = list.filter((s) => !s.damaged).map((s) => s.session).sort();
    if (!names.includes(this.session)) names.unshift(this.session);
    sel.textContent = '';
    for (const n of names) {
      const o = document.createElement('option');
      o.value = n;
      o.textContent = n;
      o.selected = n === this.session;
      sel.appendChild(o);
    }
    return names;
  }

  open(name) {
    if (!name || name === this.session) return;
    const q = new URLSearchParams(this.params);
    q.set('session', name);
    location.search = q.toString();
  }

  // ---- upload -----------------------------------------------------------------------------------

  // A file (from a drop, or a script): uploads it under its own name and opens a session called
  // after it (a number added while the name is taken). Resolves to the session's name, or null
  // with the reason shown and kept (lastUpload).
  async upload(file) {
    const name = file.name.replace(/[^A-Za-z0-9._-]/g, '_') || 'upload.obj';
    const bytes = new Uint8Array(await file.arrayBuffer());
    this.lastUpload = { name, state: 'uploading', bytes: bytes.length };
    try {
      for (let off = 0; off === 0 || off < bytes.length; off += CHUNK) {
        const end = Math.min(bytes.length, off + CHUNK);
        this.say(`uploading ${name}: ${Math.round((100 * end) / Math.max(1, bytes.length))} %`);
        await this.net.call('mesh.upload', { name, data: base64(bytes.subarray(off, end)), offset: off, final: end === bytes.length });
        if (end === bytes.length) break;
      }
      const stem = name.replace(/\.[^.]*$/, '') || 'upload';
      const names = new Set((await this.net.call('session.list', {})).map((s) => s.session));
      let session = stem;
      for (let k = 2; names.has(session); k++) session = `${stem}-${k}`;
      this.say(`opening ${name} as session ${session}…`);
      await this.net.call('session.create', { session, mesh: name });
      this.lastUpload = { name, state: 'opened', session };
      this.open(session);
      return session;
    } catch (e) {
      const why = uploadRefusal(e);
      this.lastUpload = { name, state: 'refused', reason: why };
      this.say(`cannot open ${name}: ${why}`);
      return null;
    }
  }

  // ---- download ---------------------------------------------------------------------------------

  // The current shape from session.export, chunk after chunk of one file (the first answer's
  // version), saved as SESSION.obj / .glb. Resolves to the bytes.
  async fetchExport(format) {
    const parts = [];
    let offset = 0, total = 1, version;
    while (offset < total) {
      const p = { session: this.session, format, offset, max_bytes: 4 << 20 };
      if (version !== undefined) p.version = version;
      const r = await this.net.call('session.export', p);
      const b = unbase64(r.data);
      parts.push(b);
      total = r.total;
      version = r.version;
      offset += b.length;
      if (!b.length) break;
    }
    const out = new Uint8Array(offset);
    let at = 0;
    for (const b of parts) {
      out.set(b, at);
      at += b.length;
    }
    return { bytes: out, version };
  }

  async download(format) {
    try {
      this.say(`exporting ${format.toUpperCase()}…`);
      const { bytes, version } = await this.fetchExport(format);
      const url = URL.createObjectURL(new Blob([bytes], { type: format === 'obj' ? 'text/plain' : 'model/gltf-binary' }));
      const a = document.createElement('a');
      a.href = url;
      a.download = `${this.session}-v${version}.${format}`;
      document.body.appendChild(a);
      a.click();
      a.remove();
      setTimeout(() => URL.revokeObjectURL(url), 60000);
      this.say(`saved ${a.download} (${bytes.length} bytes)`);
      return bytes.length;
    } catch (e) {
      this.say(`export: ${e.message}`);
      return null;
    }
  }

  // ---- a target from the sculpt -----------------------------------------------------------------

  async makeTarget(name) {
    if (!name) name = `sculpt_${new Date().toISOString().slice(11, 19).replace(/:/g, '')}`;
    try {
      const r = await this.net.call('targets.create_from_sculpt', { session: this.session, name });
      this.say(`target ${r.name}: ${r.vertices} vertices`);
      this.$('target-name').value = '';
      return r;
    } catch (e) {
      this.say(`targets.create_from_sculpt: ${e.message}`);
      return null;
    }
  }

  // ---- history ----------------------------------------------------------------------------------

  toggleHistory() {
    this.historyShown = !this.historyShown;
    this.$('history').hidden = !this.historyShown;
    this.historyAt = -1;
    if (this.historyShown) this.refreshHistory();
  }

  // Called with the session's version on every change: the list follows while it is shown.
  changed(version) {
    if (this.historyShown && version !== this.historyAt && !this.historyBusy) this.refreshHistory(version);
  }

  async refreshHistory(version) {
    this.historyBusy = true;
    try {
      const r = await this.net.call('history.list', { session: this.session, limit: 50 });
      this.historyAt = version === undefined ? r.version : version;
      this.showHistory(r.steps);
      return r.steps;
    } catch (e) {
      this.$('history-list').textContent = `history.list: ${e.message}`;
      return null;
    } finally {
      this.historyBusy = false;
    }
  }

  showHistory(steps) {
    const box = this.$('history-list');
    box.textContent = '';
    if (!steps.length) box.textContent = 'no steps yet';
    for (const s of steps) {
      const row = document.createElement('div');
      row.className = `step${s.undone ? ' undone' : ''}`;
      const when = new Date(s.time * 1000).toLocaleTimeString();
      row.innerHTML = `<span class="who"></span><span class="what"></span><button class="edit" title="bring the session back to the state after this step (history.revert)">revert</button>`;
      row.querySelector('.who').textContent = `${s.step} · ${s.author} · ${when}`;
      row.querySelector('.what').textContent = s.summary || s.kind;
      row.querySelector('button').addEventListener('click', () => this.revert(s.version));
      box.appendChild(row);
    }
  }

  async revert(version) {
    try {
      const r = await this.net.call('history.revert', { session: this.session, version });
      this.say(`reverted to version ${version}`);
      return r;
    } catch (e) {
      this.say(`history.revert: ${e.message}`);
      return null;
    }
  }
}
