// wirevault console: one page over the /api/v1 endpoints of the same
// server. No framework, no build, no outside requests (the CSP is 'self').
// Every figure from the server goes into the page as text (textContent),
// never as HTML.
"use strict";

const $ = (id) => document.getElementById(id);
const LIVE_SECONDS = 300;

// ---------------------------------------------------------------- units

/** 1234567 -> "1.23 M" (SI, 3 significant digits). */
function si(v, unit) {
  if (v == null || !isFinite(v)) return "–";
  const a = Math.abs(v);
  const steps = [[1e12, "T"], [1e9, "G"], [1e6, "M"], [1e3, "k"]];
  for (const [m, p] of steps) {
    if (a >= m) return sig(v / m) + " " + p + unit;
  }
  return sig(v) + " " + unit;
}
function sig(x) {
  const a = Math.abs(x);
  if (a === 0) return "0";
  if (a >= 100) return x.toFixed(0);
  if (a >= 10) return x.toFixed(1);
  return x.toFixed(2);
}
const fmtPps = (v) => si(v, "pps");
const fmtBits = (v) => si(v, "b/s");
const fmtMBs = (bytesPerS) => (bytesPerS == null ? "–" : sig(bytesPerS / 1e6) + " MB/s");
/** Bytes in IEC units (KiB, MiB, GiB, TiB). */
function fmtBytes(n) {
  if (n == null) return "–";
  const units = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
  let i = 0;
  let v = n;
  while (Math.abs(v) >= 1024 && i < units.length - 1) {
    v /= 1024;
    i++;
  }
  return (i === 0 ? String(v) : sig(v)) + " " + units[i];
}
const fmtCount = (n) => (n == null ? "–" : Number(n).toLocaleString("en-US"));
const fmtPct = (f) => (f == null ? "–" : (f * 100).toFixed(f < 0.1 ? 1 : 0) + " %");
function fmtDur(s) {
  if (s == null) return "–";
  if (s < 1) return sig(s * 1000) + " ms";
  if (s < 60) return s.toFixed(s < 10 ? 1 : 0) + " s";
  if (s < 3600) return Math.floor(s / 60) + " min " + String(Math.floor(s % 60)).padStart(2, "0") + " s";
  if (s < 86400 * 2) return Math.floor(s / 3600) + " h " + String(Math.floor((s % 3600) / 60)).padStart(2, "0") + " min";
  return (s / 86400).toFixed(1) + " days";
}
const fmtHours = (h) => (h == null ? "–" : h < 48 ? sig(h) + " h" : (h / 24).toFixed(1) + " days");
/** Milliseconds since the epoch as UTC "2026-01-02 15:04:05Z". */
const utc = (ms) => new Date(ms).toISOString().replace("T", " ").replace(/\.\d+Z$/, "Z");
/** The same instant in the browser's time zone. */
const local = (ms) => new Date(ms).toLocaleString(undefined, { hour12: false, timeZoneName: "short" });
/** An RFC 3339 time from the API ("...T..:..:..123456789Z") as ms. */
const parseTime = (s) => (s ? Date.parse(s.replace(/(\.\d{3})\d+Z$/, "$1Z")) : null);
/** "1 packet", "2 packets". */
const packetCount = (n) => fmtCount(n) + (n === 1 ? " packet" : " packets");
/** A date and time typed without a zone means UTC, as the range's description says: the API is given the Z. */
const asUtc = (v) => (/^\d{4}-\d\d-\d\d[Tt ]\d/.test(v) && !/([Zz]|[+-]\d\d:?\d\d)$/.test(v) ? v + "Z" : v);

// ---------------------------------------------------------------- API

let token = sessionStorage.getItem("wv_token") || "";

class ApiError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

/** GETs a JSON endpoint; throws ApiError with the server's sentence. */
async function api(path, signal) {
  const headers = token ? { Authorization: "Bearer " + token } : {};
  let r;
  try {
    r = await fetch(path, { headers, cache: "no-store", signal });
  } catch (e) {
    if (e.name === "AbortError") throw e;
    throw new ApiError(0, "the server does not answer (" + e.message + ")");
  }
  let body = null;
  try {
    body = await r.json();
  } catch (_) {
    body = null;
  }
  if (r.status === 401) {
    askToken();
    throw new ApiError(401, "waiting for an access token (top right)");
  }
  if (!r.ok) throw new ApiError(r.status, (body && body.error) || r.status + " " + r.statusText);
  return { body, headers: r.headers };
}

/** Asks the person at the page for a token, in words that say what one is and where it comes from. */
function askToken() {
  const form = $("auth");
  if (form.hidden) {
    form.hidden = false;
    $("token").focus();
  }
  // A request to the person first; red only once a token was refused.
  $("auth-msg").className = token ? "err" : "";
  $("auth-msg").textContent = token
    ? "That token was not accepted: it may be mistyped, or it was revoked. Ask the recorder's operator for a current one."
    : "This recorder shows its traffic only to people with an access token: a long secret word, like a password, " +
      "that its operator gave you (they keep them in the recorder's token file). Paste yours here; " +
      "this browser tab forgets it when you close the tab.";
}

/** The token goes with every API call, and as a cookie for plain download links. */
function setToken(t) {
  token = t;
  sessionStorage.setItem("wv_token", t);
  const secure = location.protocol === "https:" ? "; Secure" : "";
  if (/^[\x21\x23-\x2b\x2d-\x3a\x3c-\x5b\x5d-\x7e]+$/.test(t)) {
    document.cookie = "wv_token=" + t + "; path=/; SameSite=Strict" + secure;
  } else {
    $("auth-msg").textContent = "this token cannot travel in a cookie: downloads will be refused";
  }
}

$("auth").addEventListener("submit", (ev) => {
  ev.preventDefault();
  setToken($("token").value.trim());
  $("auth").hidden = true;
  $("auth-msg").textContent = "";
  booted = false;
  pollStatus();
  queryChanged(0);
});

// ---------------------------------------------------------------- charts

const COLORS = { line: "#4fb3ff", fill: "rgba(79,179,255,0.18)", drop: "#ff5c5c", grid: "#222a35", text: "#8593a3", sel: "rgba(240,180,41,0.35)" };

/** A value axis maximum that reads well: 1, 2 or 5 times a power of ten. */
function niceMax(v) {
  if (!(v > 0)) return 1;
  const p = Math.pow(10, Math.floor(Math.log10(v)));
  for (const m of [1, 2, 2.5, 5, 10]) if (m * p >= v) return m * p;
  return 10 * p;
}

/** Time ticks: a step from a fixed list that gives about `n` ticks. */
function timeTicks(t0, t1, n) {
  const steps = [0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200, 86400, 172800, 604800].map((s) => s * 1000);
  const step = steps.find((s) => (t1 - t0) / s <= n) || steps[steps.length - 1];
  const out = [];
  for (let t = Math.ceil(t0 / step) * step; t <= t1; t += step) out.push(t);
  return { ticks: out, step };
}

function tickLabel(t, step, span) {
  const iso = new Date(t).toISOString();
  if (span > 2 * 86400e3) return iso.slice(5, 10) + (step < 86400e3 ? " " + iso.slice(11, 16) : "");
  if (step >= 60e3) return iso.slice(11, 16);
  if (step < 1000) return iso.slice(17, 23);
  return iso.slice(11, 19);
}

/**
 * Draws time series or bars on a canvas. `o`: t0, t1 (ms), series (each
 * {points: [[t, v]...], color, fill, bars, width}), fmtY, yMax (optional),
 * sel ([ta, tb] shaded).
 */
function drawChart(canvas, o) {
  const dpr = window.devicePixelRatio || 1;
  const w = canvas.clientWidth;
  const h = canvas.clientHeight;
  if (canvas.width !== Math.round(w * dpr) || canvas.height !== Math.round(h * dpr)) {
    canvas.width = Math.round(w * dpr);
    canvas.height = Math.round(h * dpr);
  }
  const g = canvas.getContext("2d");
  g.setTransform(dpr, 0, 0, dpr, 0, 0);
  g.clearRect(0, 0, w, h);
  const L = 62, R = 8, T = 8, B = 18;
  const pw = w - L - R, ph = h - T - B;
  const span = Math.max(1, o.t1 - o.t0);
  const x = (t) => L + ((t - o.t0) / span) * pw;
  let max = 0;
  for (const s of o.series) for (const p of s.points) if (p[1] > max) max = p[1];
  const ymax = o.yMax || niceMax(max);
  const y = (v) => T + ph - (Math.min(v, ymax) / ymax) * ph;
  g.font = "10px " + getComputedStyle(document.body).getPropertyValue("--mono");
  g.lineWidth = 1;
  // Grid and value labels.
  g.fillStyle = COLORS.text;
  g.textAlign = "right";
  g.textBaseline = "middle";
  for (let i = 1; i <= 4; i++) {
    const v = (ymax * i) / 4;
    const yy = Math.round(y(v)) + 0.5;
    g.strokeStyle = COLORS.grid;
    g.beginPath();
    g.moveTo(L, yy);
    g.lineTo(w - R, yy);
    g.stroke();
    g.fillText(o.fmtY(v), L - 5, yy);
  }
  // Time labels (UTC).
  const { ticks, step } = timeTicks(o.t0, o.t1, Math.max(2, Math.floor(pw / 90)));
  g.textAlign = "center";
  g.textBaseline = "top";
  for (const t of ticks) {
    const xx = Math.round(x(t)) + 0.5;
    g.strokeStyle = COLORS.grid;
    g.beginPath();
    g.moveTo(xx, T);
    g.lineTo(xx, T + ph);
    g.stroke();
    const label = tickLabel(t, step, span);
    const half = g.measureText(label).width / 2;
    g.fillText(label, Math.min(Math.max(xx, L + half), w - R - half), T + ph + 4);
  }
  let drawn = 0;
  for (const s of o.series) {
    if (!s.points.length) continue;
    drawn += s.points.length;
    if (s.bars) {
      g.fillStyle = s.color;
      const gap = (s.width / span) * pw > 3 ? 1 : 0;
      for (const [t, v] of s.points) {
        const x0 = x(t), x1 = x(t + s.width);
        g.fillRect(x0, y(v), Math.max(1, x1 - x0 - gap), T + ph - y(v));
      }
      continue;
    }
    g.beginPath();
    s.points.forEach(([t, v], i) => (i ? g.lineTo(x(t), y(v)) : g.moveTo(x(t), y(v))));
    if (s.fill) {
      g.lineTo(x(s.points[s.points.length - 1][0]), T + ph);
      g.lineTo(x(s.points[0][0]), T + ph);
      g.closePath();
      g.fillStyle = s.fill;
      g.fill();
      g.beginPath();
      s.points.forEach(([t, v], i) => (i ? g.lineTo(x(t), y(v)) : g.moveTo(x(t), y(v))));
    }
    g.strokeStyle = s.color;
    g.lineWidth = 1.5;
    g.stroke();
    g.lineWidth = 1;
  }
  if (o.sel) {
    const [a, b] = [Math.min(o.sel[0], o.sel[1]), Math.max(o.sel[0], o.sel[1])];
    g.fillStyle = COLORS.sel;
    g.fillRect(x(a), T, Math.max(1, x(b) - x(a)), ph);
  }
  if (!drawn && o.empty) {
    g.fillStyle = COLORS.text;
    g.textAlign = "center";
    g.textBaseline = "middle";
    g.font = "12px sans-serif";
    g.fillText(o.empty, L + pw / 2, T + ph / 2);
  }
  canvas.dataset.points = String(drawn);
  const geom = { x, L, pw, t0: o.t0, span, series: o.series, fmtY: o.fmtY };
  canvas.wvGeom = geom;
  return geom;
}

/** Hovering a chart: the time and value of the nearest point of its first series. */
function hoverable(canvas, what) {
  const tip = $("tip");
  canvas.addEventListener("mousemove", (ev) => {
    const g = canvas.wvGeom;
    const pts = g && g.series[0] && g.series[0].points;
    if (!pts || !pts.length) return;
    const rect = canvas.getBoundingClientRect();
    const t = g.t0 + ((ev.clientX - rect.left - g.L) / g.pw) * g.span;
    const w = g.series[0].width || 0;
    let best = pts[0];
    for (const p of pts) if (Math.abs(p[0] + w / 2 - t) < Math.abs(best[0] + w / 2 - t)) best = p;
    const when = new Date(best[0]).toISOString().slice(11, w && w < 1000 ? 23 : 19);
    tip.textContent = when + " UTC · " + g.fmtY(best[1]) + (what ? " " + what(best) : "");
    tip.hidden = false;
    tip.style.left = Math.min(ev.clientX + 12, window.innerWidth - tip.offsetWidth - 4) + "px";
    tip.style.top = ev.clientY + 14 + "px";
  });
  canvas.addEventListener("mouseleave", () => (tip.hidden = true));
}

// ---------------------------------------------------------------- live panel

/** The last LIVE_SECONDS samples: {t, pps, bps, disk, dropsPerS, arena}. */
const live = [];
let lastDrops = null;
let status = null;

/** Counters of a live recording (`recording`) or of stats.json (`last_recording`): one report, alike. */
function counters(c) {
  if (!c) return null;
  const d = Array.isArray(c.dropped) ? c.dropped : Object.entries(c.dropped || {});
  return {
    received: c.received, written: c.written, filtered: c.filtered || 0,
    deduplicated: c.deduplicated || 0, cut: c.cut || 0, drops: d,
    dropped: d.reduce((a, [, n]) => a + n, 0), balanced: c.balanced, arena: c.arena_fill,
  };
}

function setFig(id, text, raw, cls) {
  const e = $(id);
  e.textContent = text;
  e.dataset.value = raw == null ? "" : String(raw);
  e.className = "val" + (cls ? " " + cls : "");
}

function renderLive(s) {
  const rec = s.recording;
  const badge = $("state");
  const running = rec && rec.state === "capturing";
  let c = null;
  if (rec && rec.state) {
    badge.textContent = rec.state === "capturing" ? "recording" : rec.state;
    badge.className = "badge " + (running ? "running" : "rest");
    $("live-note").textContent = rec.sources ? rec.sources.join(", ") + " · " + rec.workers + " worker(s)" : "";
    c = counters(rec);
  } else {
    badge.textContent = "at rest";
    badge.className = "badge rest";
    const last = s.last_recording;
    $("live-note").textContent = last
      ? "not recording: serving a store at rest. The last recording (" + (last.state || "?") + ", " + fmtDur(last.elapsed_s) + ") left these counters:"
      : "not recording: serving a store at rest (no stats.json from a previous recording)";
    c = counters(last);
  }
  if (running) {
    const drops = c ? c.dropped : 0;
    const dps = lastDrops == null ? 0 : Math.max(0, drops - lastDrops);
    lastDrops = drops;
    live.push({ t: Date.now(), pps: rec.pps, bps: rec.gbps * 1e9, disk: rec.disk_mb_s * 1e6, dps, arena: c ? c.arena : 0 });
    while (live.length > LIVE_SECONDS) live.shift();
    setFig("f-pps", fmtPps(rec.pps), rec.pps);
    setFig("f-bps", fmtBits(rec.gbps * 1e9), rec.gbps);
    setFig("f-disk", fmtMBs(rec.disk_mb_s * 1e6), rec.disk_mb_s);
  } else {
    for (const id of ["f-pps", "f-bps", "f-disk"]) setFig(id, "–", null);
  }
  setFig("f-arena", c ? fmtPct(c.arena) : "–", c ? c.arena : null, c && c.arena > 0.8 ? "bad" : "");
  setFig("f-drops", c ? fmtCount(c.dropped) : "–", c ? c.dropped : null, c ? (c.dropped ? "bad" : "good") : "");
  const el = rec && rec.elapsed_s != null ? rec.elapsed_s : s.last_recording && s.last_recording.elapsed_s;
  setFig("f-elapsed", fmtDur(el), el);
  renderCounters(c, running);
  // At rest there is nothing live to chart: the counters say it all.
  document.querySelector("#live .charts").hidden = !running && live.length === 0;
  drawLive();
}

function renderCounters(c, running) {
  const tb = $("counters");
  tb.replaceChildren();
  const bal = $("balance");
  if (!c) {
    bal.textContent = "";
    return;
  }
  const row = (name, n, cls) => {
    const d = document.createElement("div");
    d.className = "ctr " + (cls || "") + (n === 0 ? " zero" : "");
    const k = document.createElement("span");
    k.textContent = name;
    const v = document.createElement("span");
    v.className = "n";
    v.textContent = fmtCount(n);
    d.append(k, v);
    tb.appendChild(d);
  };
  row("received", c.received);
  row("written", c.written);
  row("filtered", c.filtered);
  row("deduplicated", c.deduplicated);
  row("cut", c.cut);
  for (const [cause, n] of c.drops) row("dropped: " + cause.replace(/_/g, " "), n, n ? "drop" : "");
  const accounted = c.written + c.filtered + c.deduplicated + c.cut + c.dropped;
  const inFlight = c.received - accounted;
  if (running) row("in the arena or an open file", inFlight);
  let text = "received = written + filtered + deduplicated + cut + dropped";
  if (c.balanced === true || (c.balanced == null && inFlight === 0)) {
    bal.textContent = text + ": balances ✓";
    bal.className = "good";
  } else if (c.balanced == null && running) {
    bal.textContent = text + " + in flight (" + fmtCount(inFlight) + "); checked when the arena is empty";
    bal.className = "dim";
  } else {
    bal.textContent = text + ": does NOT balance (off by " + fmtCount(inFlight) + ")";
    bal.className = "err";
  }
}

function drawLive() {
  // The window grows from one minute to LIVE_SECONDS as samples come in.
  const t1 = Date.now();
  const seen = live.length ? t1 - live[0].t : 0;
  const t0 = t1 - Math.min(LIVE_SECONDS * 1000, Math.max(60e3, seen + 5e3));
  const empty = status && status.recording && status.recording.state === "capturing" ? "waiting for samples" : "no recording in this process";
  const pts = (k) => live.map((p) => [p.t, p[k]]);
  drawChart($("c-pps"), {
    t0, t1, fmtY: (v) => si(v, "pps"), empty,
    series: [{ points: pts("pps"), color: COLORS.line, fill: COLORS.fill }, { points: pts("dps"), color: COLORS.drop }],
  });
  drawChart($("c-bps"), { t0, t1, fmtY: (v) => si(v, "b/s"), empty, series: [{ points: pts("bps"), color: "#3fcf8e", fill: "rgba(63,207,142,0.15)" }] });
  drawChart($("c-disk"), { t0, t1, fmtY: (v) => si(v, "B/s"), empty, series: [{ points: pts("disk"), color: "#b48cff", fill: "rgba(180,140,255,0.15)" }] });
  drawChart($("c-arena"), { t0, t1, yMax: 1, fmtY: (v) => (v * 100).toFixed(0) + " %", empty, series: [{ points: pts("arena"), color: "#f0b429", fill: "rgba(240,180,41,0.15)" }] });
}

// ---------------------------------------------------------------- store panel

function renderStore(s) {
  $("store").textContent = s.store + " · v" + s.version;
  const kv = $("store-kv");
  kv.replaceChildren();
  const row = (k, v, sub) => {
    const tr = kv.insertRow();
    tr.insertCell().textContent = k;
    const td = tr.insertCell();
    td.textContent = v;
    if (sub) {
      const sp = document.createElement("span");
      sp.className = "sub";
      sp.textContent = sub;
      td.appendChild(sp);
    }
  };
  const d = s.disk, h = s.horizon, r = s.retention;
  row("stored", fmtBytes(d.store_bytes), packetCount(d.packets) + " in " + fmtCount(d.files) + (d.files === 1 ? " file" : " files"));
  if (d.volume_size_bytes != null) {
    row("volume", fmtBytes(d.volume_free_bytes) + " free of " + fmtBytes(d.volume_size_bytes));
    const size = d.volume_size_bytes || 1;
    const used = size - d.volume_free_bytes;
    $("bar-store").style.width = (100 * Math.min(d.store_bytes, used)) / size + "%";
    $("bar-other").style.width = (100 * Math.max(0, used - d.store_bytes)) / size + "%";
  }
  row("retention", r.budget_bytes != null ? fmtBytes(r.budget_bytes) + " budget, when full: " + (r.on_full || "?") : "no budget: until the volume is full",
    r.files_deleted ? fmtCount(r.files_deleted) + " files (" + fmtBytes(r.bytes_deleted) + ") deleted" : null);
  const oldest = parseTime(h.oldest), newest = parseTime(h.newest);
  row("oldest packet", oldest ? utc(oldest) : "–", oldest ? local(oldest) : null);
  row("newest packet", newest ? utc(newest) : "–", newest ? local(newest) : null);
  row("span", fmtDur(h.span_s));
  row("write rate", fmtMBs(h.write_rate_bytes_s), h.rate_from);
  row("holds", fmtHours(h.holds_hours), h.capacity_bytes != null ? "of traffic in " + fmtBytes(h.capacity_bytes) : null);
  row("full in", h.full_in_hours == null ? (r.budget_bytes != null && r.on_full === "delete" ? "never: the oldest files go" : "–") : fmtHours(h.full_in_hours));
  row("queries", s.limits.queries_running + " running of " + s.limits.max_queries, "answers up to " + fmtBytes(s.limits.max_bytes));
}

// ---------------------------------------------------------------- fleet

// A fleet server (`serve --fleet`) answers /api/v1/status with its nodes' statuses: the page
// then shows them in a table, and its queries count and download over every node.
let fleetMode = false;

function renderFleet(f) {
  fleetMode = true;
  for (const id of ["live", "store-panel", "traffic", "flows", "packets"]) $(id).hidden = true;
  $("fleet").hidden = false;
  const up = f.nodes.filter((n) => n.up).length;
  const all = up === f.nodes.length;
  $("state").textContent = all ? "fleet" : f.nodes.length - up + " down";
  $("state").className = "badge " + (all ? "running" : "down");
  $("store").textContent = "a fleet of " + f.nodes.length + " nodes, " + up + " up";
  $("fleet-note").textContent = all ? "" : "a node that is down is left out of every answer, and named";
  $("q-download").textContent = "Download pcap (merged)";
  const tb = $("fleet-table").tBodies[0];
  tb.replaceChildren();
  let newest = null;
  for (const n of f.nodes) {
    const tr = tb.insertRow();
    tr.dataset.node = n.name;
    tr.dataset.state = n.up ? "up" : "down";
    const cell = cellAdder(tr);
    const s = n.status || {};
    const rec = s.recording && s.recording.state ? s.recording : null;
    const running = rec && rec.state === "capturing";
    const c = counters(rec || s.last_recording);
    const h = s.horizon || {};
    cell(n.name);
    cell(n.up ? (running ? "recording" : "at rest") : "down", n.up ? "up" : "down");
    cell(running ? fmtPps(rec.pps) : "–", "n");
    cell(running ? fmtBits(rec.gbps * 1e9) : "–", "n");
    const d = cell(c ? fmtCount(c.dropped) : "–", "n");
    if (c) d.title = c.drops.map(([k, v]) => k + " " + fmtCount(v)).join(", ");
    cell(h.oldest ? utc(parseTime(h.oldest)) : "–");
    cell(h.newest ? utc(parseTime(h.newest)) : "–");
    cell(s.disk ? fmtBytes(s.disk.store_bytes) : "–", "n");
    cell(n.up ? n.location : n.error);
    const t = parseTime(h.newest);
    if (t && (newest == null || t > newest)) newest = t;
  }
  // The presets count back from the newest packet of any node.
  f.horizon = { newest: newest == null ? null : new Date(newest).toISOString() };
  $("fleet-table").dataset.loaded = String(Date.now());
}

let statusTimer = null;
let booted = false;
async function pollStatus() {
  clearTimeout(statusTimer);
  try {
    const { body } = await api("/api/v1/status");
    status = body;
    if (body.nodes) {
      renderFleet(body);
      if (!booted) applyPreset("300");
    } else {
      renderLive(body);
      renderStore(body);
      followStore(body);
      if (!booted) loadHistogram();
    }
    booted = true;
  } catch (e) {
    if (e.status !== 401) {
      $("state").textContent = "no answer";
      $("state").className = "badge down";
      $("live-note").textContent = e.message;
    }
  }
  statusTimer = setTimeout(pollStatus, fleetMode ? 2000 : 1000);
}

// ---------------------------------------------------------------- stored traffic

let hist = null;
let histGeom = null;
let histSel = null;
let histLoaded = 0;
// One histogram request at a time (over a large store one takes seconds,
// and each holds one of the server's --max-queries slots): the refresh timer
// skips while one is in flight; a load the user asked for (sign-in) runs
// once after it.
let histInFlight = false;
let histAgain = false;

async function loadHistogram(byTimer = false) {
  if (histInFlight) {
    if (!byTimer) histAgain = true;
    return;
  }
  histInFlight = true;
  try {
    const { body } = await api("/api/v1/histogram");
    hist = body;
    drawHistogram();
  } catch (e) {
    $("hist-note").textContent = e.message;
  } finally {
    // The timer counts from this answer (or failure), as the status poll does.
    histLoaded = Date.now();
    histInFlight = false;
  }
  if (histAgain) {
    histAgain = false;
    loadHistogram();
  }
}

function drawHistogram() {
  if (!hist) return;
  const k = Number(document.querySelector("input[name=hist-what]:checked").value);
  const step = hist.step_ns / 1e6;
  // An empty store: an hour up to now, so the axis reads sensibly.
  const t0 = hist.buckets.length ? hist.from_ns / 1e6 : Date.now() - 3600e3;
  const t1 = hist.buckets.length ? hist.to_ns / 1e6 : Date.now();
  const perS = 1000 / step;
  const points = hist.buckets.map((b, i) => [t0 + i * step, b[k] * perS]);
  histGeom = drawChart($("c-hist"), {
    t0, t1, sel: histSel, empty: "the store holds no packets yet",
    fmtY: (v) => (k ? si(v * 8, "b/s") : si(v, "pps")),
    series: [{ points, color: k ? "#3fcf8e" : COLORS.line, bars: true, width: step }],
  });
  const n = hist.buckets.reduce((a, b) => a + b[0], 0);
  $("hist-note").textContent = hist.buckets.length
    ? packetCount(n) + " · " + (k ? "captured bits/s" : "packets/s") + " averaged per " + fmtDur(step / 1000) + " · drag to select a range"
    : "";
}

document.querySelectorAll("input[name=hist-what]").forEach((r) => r.addEventListener("change", drawHistogram));
for (const id of ["c-pps", "c-bps", "c-disk", "c-arena"]) hoverable($(id));
hoverable($("c-hist"), () => "(average over the bucket)");

(function histDrag() {
  const c = $("c-hist");
  let start = null;
  const at = (ev) => {
    if (!histGeom) return null;
    const rect = c.getBoundingClientRect();
    const px = Math.min(Math.max(ev.clientX - rect.left, histGeom.L), histGeom.L + histGeom.pw);
    return histGeom.t0 + ((px - histGeom.L) / histGeom.pw) * histGeom.span;
  };
  c.addEventListener("mousedown", (ev) => {
    start = at(ev);
    histSel = null;
  });
  c.addEventListener("mousemove", (ev) => {
    if (start == null) return;
    histSel = [start, at(ev)];
    drawHistogram();
  });
  window.addEventListener("mouseup", (ev) => {
    if (start == null) return;
    const end = at(ev);
    const [a, b] = [Math.min(start, end), Math.max(start, end)];
    start = null;
    if (b - a < 1) {
      histSel = null;
      drawHistogram();
      return;
    }
    histSel = [a, b];
    drawHistogram();
    $("q-from").value = new Date(Math.floor(a)).toISOString();
    $("q-to").value = new Date(Math.ceil(b)).toISOString();
    queryChanged(0);
  });
})();

// ---------------------------------------------------------------- query panel

function queryParams(extra) {
  const p = new URLSearchParams();
  const from = asUtc($("q-from").value.trim()), to = asUtc($("q-to").value.trim()), filter = $("q-filter").value.trim();
  if (from) p.set("from", from);
  if (to) p.set("to", to);
  if (filter) p.set("filter", filter);
  for (const [k, v] of Object.entries(extra || {})) p.set(k, v);
  return p;
}

let queryTimer = null;
let queryAbort = null;
let querySeq = 0;

function queryChanged(delay) {
  clearTimeout(queryTimer);
  queryTimer = setTimeout(runQuery, delay == null ? 300 : delay);
}

async function runQuery() {
  if (queryAbort) queryAbort.abort();
  queryAbort = new AbortController();
  const signal = queryAbort.signal;
  const seq = ++querySeq;
  const q = queryParams();
  const dl = $("q-download");
  dl.href = "/api/v1/query" + (q.toString() ? "?" + q : "");
  const count = $("q-count");
  count.textContent = "counting…";
  count.className = "mono busy";
  count.dataset.count = "";
  count.dataset.for = "";
  $("packets").dataset.for = "";
  $("q-error").textContent = "";
  describeRange();
  try {
    const { body } = await api("/api/v1/count?" + q, signal);
    if (seq !== querySeq) return;
    count.textContent = packetCount(body.matched) + (body.truncated ? " (limit reached, more match)" : "");
    count.className = "mono";
    count.dataset.count = String(body.matched);
    count.dataset.for = q.toString();
    const notes = [];
    if (body.outside) notes.push(body.outside);
    if (body.open_files_excluded) notes.push(body.open_files_excluded + " file(s) still being written are not included");
    for (const w of body.warnings || []) notes.push(w);
    $("q-error").textContent = notes.join("; ");
    $("q-error").className = body.outside ? "err" : "dim";
    dl.classList.toggle("off", body.matched === 0);
    for (const id of ["q-from", "q-to", "q-filter"]) $(id).classList.remove("bad");
    if (fleetMode) {
      // A node left out is said beside the count: the answer is the other nodes'.
      const out = (body.nodes || []).filter((n) => n.state !== "complete");
      if (out.length) {
        $("q-error").textContent = out.map((n) => n.error).concat(notes).join("; ");
        $("q-error").className = "err";
      }
      $("p-note").textContent = "the count and the download cover every node that answered; each node's own console shows its packets and flows";
      queryDone = Date.now();
      return;
    }
  } catch (e) {
    if (e.name === "AbortError" || seq !== querySeq) return;
    count.textContent = "–";
    count.className = "mono";
    $("q-error").textContent = e.message;
    $("q-error").className = "err";
    dl.classList.add("off");
    const m = e.message.toLowerCase();
    $("q-filter").classList.toggle("bad", e.status === 400 && (m.includes("filter") || m.includes("expression")));
    $("q-from").classList.toggle("bad", e.status === 400 && m.includes("from"));
    $("q-to").classList.toggle("bad", e.status === 400 && /\bto\b/.test(m) && !m.includes("from"));
    $("packets").tBodies[0].replaceChildren();
    $("p-note").textContent = "";
    count.dataset.for = q.toString();
    queryDone = Date.now();
    return;
  }
  loadPackets(q, seq, signal);
  loadFlows(q, seq, signal);
}

const PROTOCOLS = { 1: "icmp", 6: "tcp", 17: "udp", 58: "icmp6", 132: "sctp" };

/** The flow records of the query's range and filter (when the filter is one a flow key answers). */
async function loadFlows(q, seq, signal) {
  const note = $("f-note");
  const tb = $("flow-table").tBodies[0];
  note.textContent = "reading the flow records…";
  try {
    const { body } = await api("/api/v1/flows?" + queryParams({ sort: "bytes", limit: 100 }), signal);
    if (seq !== querySeq) return;
    tb.replaceChildren();
    const ep = (a, port, v6) => (port ? (v6 ? "[" + a + "]:" + port : a + ":" + port) : a);
    for (const f of body.flows) {
      const tr = tb.insertRow();
      const cell = cellAdder(tr);
      const ported = f.protocol === 6 || f.protocol === 17 || f.protocol === 132;
      cell(f.first.replace("T", " ").replace("Z", "")).title = local(parseTime(f.first));
      cell(((f.last_ns - f.first_ns) / 1e9).toFixed(3), "n");
      const proto = PROTOCOLS[f.protocol] || String(f.protocol);
      cell(ported ? proto : proto + "/" + f.icmp_type, "p-" + proto.toUpperCase());
      cell(ep(f.client, ported && f.client_port, f.ip_version === 6));
      cell(ep(f.server, ported && f.server_port, f.ip_version === 6));
      cell(f.to_server.packets, "n");
      cell(f.to_client.packets, "n");
      cell(f.to_server.bytes, "n");
      cell(f.to_client.bytes, "n");
      cell(f.end_reason + (f.vlans.length ? " · vlan " + f.vlans.join(".") : ""));
      const a = document.createElement("a");
      a.textContent = "packets";
      a.className = "flow-packets";
      a.href = f.packets_url;
      a.download = "";
      tr.insertCell().append(a);
    }
    $("flow-table").dataset.for = q.toString();
    const warned = (body.unreadable || []).join("; ");
    note.textContent = (body.flows.length
      ? (body.matched > body.flows.length ? "the " + body.flows.length + " largest of " + body.matched + " matching flows" : body.matched + " matching flows")
      : "no flow record matches (a store records them unless recorded with --no-flows)") + (warned ? " · " + warned : "");
    note.classList.toggle("err", Boolean(warned));
  } catch (e) {
    if (e.name === "AbortError" || seq !== querySeq) return;
    tb.replaceChildren();
    $("flow-table").dataset.for = q.toString();
    note.textContent = "flows: " + e.message;
  }
}

/** A function that appends a cell of `text` (class `cls`) to table row `tr`, and returns it. */
function cellAdder(tr) {
  return (text, cls) => {
    const td = tr.insertCell();
    td.textContent = text == null ? "" : String(text);
    if (cls) td.className = cls;
    return td;
  };
}

async function loadPackets(q, seq, signal) {
  const note = $("p-note");
  note.textContent = "reading the first packets…";
  try {
    const { body } = await api("/api/v1/packets?" + queryParams({ limit: 100 }), signal);
    if (seq !== querySeq) return;
    const tb = $("packets").tBodies[0];
    tb.replaceChildren();
    body.packets.forEach((p, i) => {
      const tr = tb.insertRow();
      const cell = cellAdder(tr);
      cell(i + 1, "n");
      const t = cell(p.time.replace("T", " ").replace("Z", ""));
      t.title = local(parseTime(p.time));
      t.dataset.time = p.time;
      cell(p.src);
      cell(p.dst);
      cell(p.sport, "n");
      cell(p.dport, "n");
      cell(p.proto, "p-" + p.proto);
      cell(p.len, "n").title = p.caplen < p.len ? p.caplen + " bytes captured" : "";
      cell(p.vlan ? p.vlan.join(".") : "");
    });
    $("packets").dataset.for = q.toString();
    queryDone = Date.now();
    // What could not be read is said beside the rows (or their absence).
    const warned = (body.warnings || []).join("; ");
    note.textContent = (body.packets.length
      ? "the first " + body.packets.length + " matching packets" + (body.more ? "; download the pcap for all of them" : "")
      : warned ? "no packet matches in what could be read" : "no packet matches") + (warned ? " · " + warned : "");
    note.classList.toggle("err", Boolean(warned));
  } catch (e) {
    if (e.name === "AbortError" || seq !== querySeq) return;
    note.textContent = e.message;
    queryDone = Date.now();
  }
}

/** The range in words: what the inputs mean in UTC and locally. */
function describeRange() {
  const parts = [];
  for (const id of ["q-from", "q-to"]) {
    const v = $(id).value.trim();
    let ms = NaN;
    if (/^\d{4}-\d\d-\d\d/.test(v)) ms = parseTime(asUtc(v));
    else if (/^\d+(\.\d+)?$/.test(v)) ms = parseFloat(v) * 1000;
    const shown = isFinite(ms) ? utc(ms) + " = " + local(ms) + " local" : v;
    parts.push(id.slice(2) + " " + (v ? shown : id === "q-from" ? "the oldest packet" : "the newest"));
  }
  $("q-local").textContent = parts.join(" · ") + " (from is included, to is not)";
}

for (const id of ["q-from", "q-to", "q-filter"]) $(id).addEventListener("input", () => queryChanged());
$("q-form").addEventListener("submit", (ev) => {
  ev.preventDefault();
  queryChanged(0);
});

/** Presets: the last N seconds up to now while recording, else up to the newest packet stored. */
function applyPreset(v) {
  histSel = null;
  if (v === "all") {
    $("q-from").value = "";
    $("q-to").value = "";
  } else {
    const running = status && status.recording && status.recording.state === "capturing";
    const newest = status && parseTime(status.horizon.newest);
    const end = running || !newest ? Date.now() : newest + 1;
    $("q-from").value = new Date(end - Number(v) * 1000).toISOString();
    $("q-to").value = running || !newest ? "" : new Date(end).toISOString();
  }
  drawHistogram();
  queryChanged(0);
}
document.querySelectorAll("[data-preset]").forEach((b) => b.addEventListener("click", () => applyPreset(b.dataset.preset)));

/**
 * The first status sets the range to the last five minutes (a whole
 * store can be terabytes: counting it is not for every page load). While
 * recording, a range open at its end is counted again as packets reach
 * the disk (the files being written included), at most every 5 s.
 */
let lastPackets = null;
let queryDone = 0;
function followStore(s) {
  if (lastPackets == null) {
    lastPackets = s.disk.packets;
    applyPreset("300");
    return;
  }
  const running = s.recording && s.recording.state === "capturing";
  if (running && s.disk.packets !== lastPackets && !$("q-to").value.trim() && queryDone && Date.now() - queryDone >= 5000) {
    lastPackets = s.disk.packets;
    queryChanged(0);
  }
}

// ---------------------------------------------------------------- clock and timers

function tickClock() {
  const now = Date.now();
  $("clock").textContent = utc(now).slice(11) + " UTC · " + new Date(now).toLocaleTimeString(undefined, { hour12: false }) + " local";
}

tickClock();
setInterval(tickClock, 1000);
pollStatus();
// The stored traffic grows while recording: redraw it every 10 s then.
setInterval(() => {
  if (status && status.recording && status.recording.state === "capturing" && Date.now() - histLoaded >= 10000) loadHistogram(true);
}, 2000);
window.addEventListener("resize", () => {
  drawLive();
  drawHistogram();
});
