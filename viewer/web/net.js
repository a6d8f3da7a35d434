// net.js — the page's two WebSockets to deformd (viewer/vw_net.c's job in a browser):
//
//   /ws/stream  the binary stream protocol, version 2, one frame per message: HELLO as an editor
//               (or a viewer when read-only), then WELCOME, SNAPSHOT and live frames into the
//               replica; EDIT frames out; PING every 2 s for the latency;
//   /ws/rpc     JSON-RPC, one request per message: auth (with a token), hello (the page's author,
//               so that history.undo/redo act on the edits it made on the stream), and calls.
//
// A connection that drops is opened again after 0.25 s, doubling to 8 s, and the session joined
// afresh (a new SNAPSHOT). An editor HELLO refused with FORBIDDEN (the token grants only the
// viewer role) joins again as a viewer: the page is then read-only.
//
// DOES NOT decode frame bodies (protocol.js, replica.js) or draw.

import * as P from './protocol.js';
import { Replica } from './replica.js';

export class Net {
  constructor({ base, session, token = '', readOnly = false, author, hello = {}, onUpdate, onStatus, onWelcome, onPresence }) {
    this.base = base; // "ws://host:port"
    this.session = session;
    this.token = token;
    this.wantEditor = !readOnly;
    this.author = author;
    this.hello = hello; // version 2 options: codec, maxRate, tolerance
    this.onUpdate = onUpdate || (() => {});
    this.onStatus = onStatus || (() => {});
    this.onWelcome = onWelcome || (() => {}); // each connection's WELCOME (its client id)
    this.onPresence = onPresence || (() => {}); // PRESENCE payloads (presence.js), when granted
    this.replica = new Replica();
    this.connected = false;
    this.role = 0;
    this.clientId = 0;
    this.latencyMs = null;
    this.bytesIn = 0;
    this.rate = 0; // bytes/s received, over the last second or so
    this.backoff = 250;
    this.nextId = 1;
    this.pending = new Map();
    this.error = '';
    this.rateMark = { t: performance.now(), bytes: 0 };
    this.open();
    this.pingTimer = setInterval(() => this.ping(), 2000);
  }

  get readOnly() {
    return this.role !== P.ROLE_EDITOR;
  }

  open() {
    clearTimeout(this.retryTimer);
    const s = new WebSocket(`${this.base}/ws/stream`);
    s.binaryType = 'arraybuffer';
    this.stream = s;
    s.onopen = () => {
      this.marks = { open: performance.now() };
      s.send(P.encodeHello({ session: this.session, role: this.wantEditor ? P.ROLE_EDITOR : P.ROLE_VIEWER, token: this.token, ...this.hello }));
    };
    s.onmessage = (e) => this.onFrame(new Uint8Array(e.data));
    s.onclose = (e) => this.onClose(s, e);
    this.openRpc();
  }

  openRpc() {
    if (this.rpc && this.rpc.readyState <= 1) return;
    const r = new WebSocket(`${this.base}/ws/rpc`);
    this.rpc = r;
    this.rpcReady = new Promise((resolve) => {
      r.onopen = () => {
        if (this.token) this.send('auth', { token: this.token }).catch(() => {});
        this.send('hello', { author: this.author }).catch(() => {});
        resolve();
      };
    });
    r.onmessage = (e) => {
      const m = JSON.parse(e.data);
      const p = this.pending.get(m.id);
      if (!p) return;
      this.pending.delete(m.id);
      if (m.error) p.reject(Object.assign(new Error(m.error.message), { code: m.error.code }));
      else p.resolve(m.result);
    };
    r.onclose = () => {
      for (const p of this.pending.values()) p.reject(new Error('the JSON-RPC WebSocket closed'));
      this.pending.clear();
    };
  }

  send(method, params) {
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      this.pending.set(id, { resolve, reject });
      this.rpc.send(JSON.stringify({ jsonrpc: '2.0', id, method, params }));
    });
  }

  // A JSON-RPC call once the socket is open (again, after a drop).
  async call(method, params) {
    this.openRpc();
    await this.rpcReady;
    return this.send(method, params);
  }

  onFrame(bytes) {
    this.bytesIn += bytes.length;
    let f;
    try {
      f = P.splitFrame(bytes);
    } catch (e) {
      this.fail(`a frame that does not decode: ${e.message}`);
      return;
    }
    const h = f.header;
    if (h.type === P.T.WELCOME) {
      const w = P.decodeWelcome(f.payload);
      this.clientId = w.clientId;
      this.role = w.role;
      this.grant = w;
      if (this.role === P.ROLE_EDITOR) this.sendFrame(P.encodeAuthor(this.nextRequest(), this.author));
      this.onWelcome(w);
      return;
    }
    if (h.type === P.T.PRESENCE) { // not the session's state: a bad one is skipped, not fatal
      try {
        this.onPresence(f.payload);
      } catch (e) {
        this.error = `a PRESENCE frame was skipped: ${e.message}`;
        this.onStatus();
      }
      return;
    }
    if (h.type === P.T.ERROR || h.type === P.T.BYE) {
      const e = P.decodeError(f.payload);
      if (e.code === P.ERR.FORBIDDEN && !this.connected && this.wantEditor) {
        this.wantEditor = false; // the token only allows watching: join again, read-only
        this.backoff = 0;
        return;
      }
      this.error = e.message;
      this.onStatus();
      return;
    }
    if (h.type === P.T.PONG) {
      const p = P.decodePing(f.payload);
      this.latencyMs = performance.now() - p.t0 / 1e6;
      this.lastPong = p.seq;
      this.onStatus();
      return;
    }
    if (h.type === P.T.SNAPSHOT) this.marks = { snapshotArrived: performance.now() };
    try {
      this.replica.apply(h, f.payload);
    } catch (e) {
      this.fail(`the replica is out of step (${e.message}): joining again`);
      return;
    }
    if (h.type === P.T.SNAPSHOT) {
      this.marks.snapshotDecoded = performance.now();
      this.connected = true;
      this.backoff = 250;
      this.error = '';
      this.onStatus();
    }
    if (!(h.flags & P.FLAG_MORE)) this.onUpdate();
  }

  fail(why) {
    this.error = why;
    try {
      this.stream.close(4000, why.slice(0, 120));
    } catch (e) {
      this.stream.close();
    }
  }

  onClose(s, e) {
    if (s !== this.stream) return;
    this.connected = false;
    if (e.reason && !this.error) this.error = e.reason;
    this.onStatus();
    const wait = this.backoff;
    this.backoff = Math.min(Math.max(this.backoff * 2, 250), 8000);
    this.retryTimer = setTimeout(() => this.open(), wait);
  }

  nextRequest() {
    this.requestId = ((this.requestId || 0) + 1) >>> 0 || 1;
    return this.requestId;
  }

  sendFrame(bytes) {
    if (!this.stream || this.stream.readyState !== 1) return false;
    this.stream.send(bytes);
    return true;
  }

  // Sends a PING; returns its sequence number (0 when not connected). Its PONG (lastPong) says the
  // server has read every frame sent before it.
  ping() {
    let seq = 0;
    if (this.connected) {
      seq = this.nextRequest();
      this.sendFrame(P.encodePing(P.T.PING, { seq, t0: Math.round(performance.now() * 1e6) }));
    }
    const now = performance.now();
    const dt = (now - this.rateMark.t) / 1000;
    this.rate = (this.bytesIn - this.rateMark.bytes) / dt;
    this.rateMark = { t: now, bytes: this.bytesIn };
    this.onStatus();
    return seq;
  }
}
