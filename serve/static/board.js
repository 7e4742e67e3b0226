// sokoforge pages: the key kept in this browser, JSON calls with it, and drawing a frame.
"use strict";

const Soko = {
  KEY: "sokoforge.key",
  NAME: "sokoforge.name",

  key() { return localStorage.getItem(Soko.KEY); },

  keep(key, name) {
    localStorage.setItem(Soko.KEY, key);
    localStorage.setItem(Soko.NAME, name || "");
  },

  forget() {
    localStorage.removeItem(Soko.KEY);
    localStorage.removeItem(Soko.NAME);
  },

  // One JSON call of the API, with the kept key as X-API-Key (as an agent sends its own);
  // resolves to {status, data} whatever the status, rejects only on a network fault.
  async api(method, path, body) {
    const headers = {"Accept": "application/json"};
    const key = Soko.key();
    if (key) headers["X-API-Key"] = key;
    if (body !== undefined) headers["Content-Type"] = "application/json";
    const res = await fetch(path, {method, headers, cache: "no-store",
                                   body: body === undefined ? undefined : JSON.stringify(body)});
    let data = null;
    try { data = await res.json(); } catch (e) { data = null; }
    return {status: res.status, data};
  },

  // Draw a base64-raw 64x64x3 RGB image on a 64x64 canvas (CSS scales it, pixelated).
  draw(canvas, b64) {
    const raw = atob(b64);
    const ctx = canvas.getContext("2d");
    const img = ctx.createImageData(64, 64);
    for (let i = 0, j = 0; i < raw.length; i += 3, j += 4) {
      img.data[j] = raw.charCodeAt(i);
      img.data[j + 1] = raw.charCodeAt(i + 1);
      img.data[j + 2] = raw.charCodeAt(i + 2);
      img.data[j + 3] = 255;
    }
    ctx.putImageData(img, 0, 0);
  },

  detail(reply) {
    const d = reply.data || {};
    return d.detail || d.message || `HTTP ${reply.status}`;
  },
};
