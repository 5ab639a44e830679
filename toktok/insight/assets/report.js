// toktok report: draws the runs' plots (SVG) and the vocabulary browser from the JSON blocks above.
// No library and nothing fetched: the page must open offline, from a file, years from now.
"use strict";

const SVG = "http://www.w3.org/2000/svg";
const COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
  "#bcbd22", "#17becf", "#393b79", "#ad494a"];
const ROW = 24; // px, a vocabulary row (the CSS's .vrow height)

function $(id) { return document.getElementById(id); }
function node(tag, attrs, parent, text) {
  const e = tag.startsWith("svg:") ? document.createElementNS(SVG, tag.slice(4)) : document.createElement(tag);
  for (const k in attrs || {}) e.setAttribute(k, attrs[k]);
  if (text !== undefined) e.textContent = text;
  if (parent) parent.appendChild(e);
  return e;
}
function escHTML(s) {
  return s.replace(/[&<>"]/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;" }[c]));
}
function int(n) { return n === null || n === undefined ? "" : Number(n).toLocaleString("en-US"); }
function short(v) {
  const a = Math.abs(v);
  if (a >= 1e9) return +(v / 1e9).toPrecision(3) + "G";
  if (a >= 1e6) return +(v / 1e6).toPrecision(3) + "M";
  if (a >= 1e4) return +(v / 1e3).toPrecision(3) + "k";
  return +v.toPrecision(4) + "";
}
function bytes(n) {
  if (n === null || n === undefined) return "";
  return n >= 1e6 ? (n / 1e6).toFixed(1) + " MB" : n >= 1e3 ? (n / 1e3).toFixed(1) + " KB" : n + " B";
}

// ---- token text: readable, escaped where it would print as nothing, hex on demand -------------

// A byte that is not UTF-8 on its own comes as U+DC80..U+DCFF (Python's surrogateescape).
const UNSEEN = /[\p{Cc}\p{Cf}\p{Zl}\p{Zp}\p{Co}\p{Cn}\p{Cs}]|[^\S ]/u;
const NAMED = { 9: "\\t", 10: "\\n", 13: "\\r" };
function hex2(n) { return n.toString(16).padStart(2, "0"); }
function escName(cp) {
  if (NAMED[cp]) return NAMED[cp];
  if (cp < 0x100) return "\\x" + hex2(cp);
  return cp < 0x10000 ? "\\u" + cp.toString(16).padStart(4, "0") : "\\U" + cp.toString(16).padStart(8, "0");
}
function tokenHTML(s) {
  let out = "", lit = "";
  for (const ch of s) {
    const cp = ch.codePointAt(0);
    if (cp >= 0xdc80 && cp <= 0xdcff) {
      out += escHTML(lit) + '<span class="esc raw" title="a byte that is not UTF-8 on its own">\\x' + hex2(cp - 0xdc00) + "</span>";
      lit = "";
    } else if (UNSEEN.test(ch)) {
      out += escHTML(lit) + '<span class="esc">' + escName(cp) + "</span>";
      lit = "";
    } else lit += ch;
  }
  return '<span class="tok">' + out + escHTML(lit) + "</span>";
}
function tokenBytes(s) {
  const b = [];
  for (const ch of s) {
    const cp = ch.codePointAt(0);
    if (cp >= 0xdc80 && cp <= 0xdcff) b.push(cp - 0xdc00);
    else if (cp < 0x80) b.push(cp);
    else if (cp < 0x800) b.push(0xc0 | (cp >> 6), 0x80 | (cp & 63));
    else if (cp < 0x10000) b.push(0xe0 | (cp >> 12), 0x80 | ((cp >> 6) & 63), 0x80 | (cp & 63));
    else b.push(0xf0 | (cp >> 18), 0x80 | ((cp >> 12) & 63), 0x80 | ((cp >> 6) & 63), 0x80 | (cp & 63));
  }
  return b;
}
function tokenHex(s) { return tokenBytes(s).map(hex2).join(" "); }
// What a search types for what prints as nothing: \n \t \r \\ \xNN (NN >= 80: a lone byte) \uNNNN
function unescapeQuery(q) {
  return q.replace(/\\(n|t|r|\\|x[0-9a-fA-F]{2}|u[0-9a-fA-F]{4})/g, (m, e) => {
    if (e === "n") return "\n";
    if (e === "t") return "\t";
    if (e === "r") return "\r";
    if (e === "\\") return "\\";
    const v = parseInt(e.slice(1), 16);
    return String.fromCharCode(e[0] === "x" && v >= 0x80 ? 0xdc00 + v : v);
  });
}

// ---- plots: SVG lines and stacked bars ------------------------------------------------------------

function niceTicks(lo, hi, log) {
  if (log) {
    const out = [], steps = Math.log10(hi / lo) <= 3 ? [1, 2, 5] : [1]; // (few decades: 1, 2, 5 of each)
    for (let e = Math.floor(Math.log10(lo)); e <= Math.ceil(Math.log10(hi)); e++) {
      for (const s of steps) {
        const v = s * Math.pow(10, e);
        if (v >= lo * 0.999 && v <= hi * 1.001) out.push(v);
      }
    }
    return out.length >= 2 ? out : [lo, hi];
  }
  const raw = (hi - lo) / 5 || 1, mag = Math.pow(10, Math.floor(Math.log10(raw))), f = raw / mag;
  const step = mag * (f < 1.5 ? 1 : f < 3 ? 2 : f < 7 ? 5 : 10);
  const out = [];
  for (let v = Math.ceil(lo / step) * step; v <= hi + step * 1e-9; v += step) out.push(+v.toPrecision(12));
  return out;
}

function frame(fig, o) {
  const W = 640, H = 300, m = { l: 58, r: 14, t: 10, b: 38 };
  const svg = node("svg:svg", { class: "chart", viewBox: `0 0 ${W} ${H}`, role: "img", "aria-label": o.title }, fig);
  const sx = o.logX ? (v) => Math.log10(v) : (v) => v, sy = o.logY ? (v) => Math.log10(v) : (v) => v;
  const [x0, x1, y0, y1] = [sx(o.xlo), sx(o.xhi), sy(o.ylo), sy(o.yhi)];
  const X = (v) => m.l + ((sx(v) - x0) / (x1 - x0 || 1)) * (W - m.l - m.r);
  const Y = (v) => H - m.b - ((sy(v) - y0) / (y1 - y0 || 1)) * (H - m.t - m.b);
  for (const v of niceTicks(o.ylo, o.yhi, o.logY)) {
    node("svg:line", { class: "grid", x1: m.l, x2: W - m.r, y1: Y(v), y2: Y(v) }, svg);
    node("svg:text", { x: m.l - 4, y: Y(v) + 4, "text-anchor": "end" }, svg, o.yfmt ? o.yfmt(v) : short(v));
  }
  if (!o.cats) {
    for (const v of niceTicks(o.xlo, o.xhi, o.logX)) {
      node("svg:line", { class: "grid", x1: X(v), x2: X(v), y1: m.t, y2: H - m.b }, svg);
      node("svg:text", { x: X(v), y: H - m.b + 14, "text-anchor": "middle" }, svg, short(v));
    }
  }
  node("svg:line", { class: "axis", x1: m.l, x2: W - m.r, y1: H - m.b, y2: H - m.b }, svg);
  node("svg:line", { class: "axis", x1: m.l, x2: m.l, y1: m.t, y2: H - m.b }, svg);
  node("svg:text", { x: (m.l + W - m.r) / 2, y: H - 4, "text-anchor": "middle" }, svg, o.xlabel);
  node("svg:text", { x: 12, y: (m.t + H - m.b) / 2, "text-anchor": "middle", transform: `rotate(-90 12 ${(m.t + H - m.b) / 2})` }, svg, o.ylabel);
  return { svg, X, Y, W, H, m };
}

function legend(fig, series, redraw) {
  const box = node("div", { class: "legend" }, fig);
  series.forEach((s) => {
    const item = node("span", { title: "show or hide" }, box);
    node("i", { style: `background:${s.color}` }, item);
    item.append(s.name);
    if (s.hidden) item.classList.add("off");
    item.addEventListener("click", () => { s.hidden = !s.hidden; item.classList.toggle("off", s.hidden); redraw(); });
  });
}

// A line chart: o = {title, xlabel, ylabel, series: [{name, x, y, color}], logX, logY, yfmt, logXBox}
// (logXBox: a checkbox with this label switches the x axis between linear and logarithmic).
function lineChart(parent, o) {
  const fig = node("figure", {}, parent);
  node("figcaption", {}, fig, o.title);
  const holder = node("div", {}, fig), readout = node("div", { class: "readout" }, fig);
  const draw = () => {
    holder.textContent = "";
    const shown = o.series.filter((s) => !s.hidden);
    const xs = [], ys = [];
    for (const s of shown) s.x.forEach((x, i) => {
      const y = s.y[i];
      if (y === null || (o.logY && y <= 0) || (o.logX && x <= 0)) return;
      xs.push(x); ys.push(y);
    });
    if (!xs.length) { node("div", { class: "note" }, holder, "no data"); return; }
    let [ylo, yhi] = [Math.min(...ys), Math.max(...ys)];
    if (!o.logY) { const pad = (yhi - ylo) * 0.05 || Math.abs(yhi) * 0.05 || 1; ylo -= pad; yhi += pad; }
    const f = frame(holder, { ...o, xlo: Math.min(...xs), xhi: Math.max(...xs), ylo, yhi });
    for (const s of shown) {
      let d = "", n = 0;
      s.x.forEach((x, i) => {
        const y = s.y[i];
        if (y === null || (o.logY && y <= 0) || (o.logX && x <= 0)) return;
        d += (n++ ? "L" : "M") + f.X(x).toFixed(1) + " " + f.Y(y).toFixed(1);
      });
      node("svg:path", { d, fill: "none", stroke: s.color, "stroke-width": 1.6, class: "mark" }, f.svg);
      if (s.x.length <= 40) s.x.forEach((x, i) => {
        if (s.y[i] !== null) node("svg:circle", { cx: f.X(x), cy: f.Y(s.y[i]), r: 2.2, fill: s.color, class: "mark" }, f.svg);
      });
    }
    const line = node("svg:line", { class: "hover", y1: f.m.t, y2: f.H - f.m.b, visibility: "hidden" }, f.svg);
    f.svg.addEventListener("mousemove", (ev) => {
      const r = f.svg.getBoundingClientRect(), px = ((ev.clientX - r.left) / r.width) * f.W;
      line.setAttribute("x1", px); line.setAttribute("x2", px); line.setAttribute("visibility", "visible");
      const parts = shown.map((s) => {
        let best = 0;
        s.x.forEach((x, i) => { if (Math.abs(f.X(x) - px) < Math.abs(f.X(s.x[best]) - px)) best = i; });
        return `${s.name}: ${o.xlabel} ${int(s.x[best])} → ${o.yfmt ? o.yfmt(s.y[best]) : int(s.y[best])}`;
      });
      readout.textContent = parts.slice(0, 6).join(" · ") + (parts.length > 6 ? ` · … (${parts.length - 6} more)` : "");
    });
    f.svg.addEventListener("mouseleave", () => line.setAttribute("visibility", "hidden"));
  };
  if (o.series.length > 1) legend(fig, o.series, draw);
  if (o.logXBox) {
    const lab = node("label", { class: "note" }, fig), box = node("input", { type: "checkbox" }, lab);
    box.checked = !!o.logX;
    lab.append(" " + o.logXBox);
    box.addEventListener("change", () => { o.logX = box.checked; draw(); });
  }
  draw();
  return fig;
}

// Stacked bars: o = {title, xlabel, ylabel, cats: [labels], series: [{name, y, color}]}.
function barChart(parent, o) {
  const fig = node("figure", {}, parent);
  node("figcaption", {}, fig, o.title);
  const holder = node("div", {}, fig), readout = node("div", { class: "readout" }, fig);
  const draw = () => {
    holder.textContent = "";
    const shown = o.series.filter((s) => !s.hidden);
    const tot = o.cats.map((_, i) => shown.reduce((a, s) => a + s.y[i], 0));
    const f = frame(holder, { ...o, xlo: 0, xhi: o.cats.length, ylo: 0, yhi: Math.max(1, ...tot) * 1.05 });
    const bw = (f.X(1) - f.X(0)) * 0.8;
    o.cats.forEach((c, i) => {
      let acc = 0;
      for (const s of shown) {
        const v = s.y[i];
        if (!v) continue;
        const r = node("svg:rect", { x: f.X(i) + bw * 0.1, width: bw, y: f.Y(acc + v), height: Math.max(0.5, f.Y(acc) - f.Y(acc + v)), fill: s.color, class: "mark" }, f.svg);
        r.addEventListener("mouseenter", () => { readout.textContent = `${o.xlabel} ${c}: ${int(v)} ${s.name} (${int(tot[i])} in all)`; });
        acc += v;
      }
      if (o.cats.length <= 20 || i % Math.ceil(o.cats.length / 20) === 0)
        node("svg:text", { x: f.X(i) + bw * 0.6, y: f.H - f.m.b + 14, "text-anchor": "middle" }, f.svg, c);
    });
  };
  if (o.series.length > 1) legend(fig, o.series, draw);
  draw();
  return fig;
}

// ---- the runs --------------------------------------------------------------------------------

const RUNS = [];
for (let i = 0; $("run-" + i); i++) RUNS.push(JSON.parse($("run-" + i).textContent));

function table(parent, cols, rows) {
  const t = node("table", {}, parent), hr = node("tr", {}, node("thead", {}, t)), tb = node("tbody", {}, t);
  for (const [label, , num] of cols) node("th", num ? { class: "num" } : {}, hr, label);
  for (const r of rows) {
    const tr = node("tr", {}, tb);
    for (const [, get, num] of cols) node("td", num ? { class: "num" } : {}, tr, get(r));
  }
  return t;
}

// The curve's subsets to draw by default: 'all' and the 5 lowest and 5 highest at the last point.
function pickSubsets(curve) {
  const names = Object.keys(curve.subsets).filter((s) => s !== "all");
  if (names.length <= 10) return new Set(names);
  const last = (s) => curve.subsets[s][curve.k.length - 1] ?? 0;
  names.sort((a, b) => last(a) - last(b));
  return new Set([...names.slice(0, 5), ...names.slice(-5)]);
}

function curveText(r) {
  return { held_out: "held-out text (pieces the run's sampled phases left out)",
    training: "training text (a parity sample of the documents the run read)",
    mixed: "held-out text for sampled phases, training text for the others",
    given: "text given to compression_curve" }[r.curveText] || "the run's sample";
}

function runSection(r, idx) {
  const sec = node("section", { id: "run-section-" + idx, class: "run" }, $("runs"));
  node("h2", {}, sec, r.name);
  node("pre", { class: "summary" }, sec, r.summary);
  node("h3", {}, sec, "Sources");
  table(sec, [["path", (s) => s.path], ["kind", (s) => s.kind], ["phase", (s) => s.phase],
    ["docs", (s) => int(s.docs), 1], ["text", (s) => bytes(s.text_bytes), 1],
    ["sampled", (s) => s.sampled_fraction == null ? "" : (s.sampled_fraction * 100).toFixed(1) + "%", 1],
    ["share of run", (s) => s.share_of_run == null ? "" : (s.share_of_run * 100).toFixed(1) + "%", 1]], r.sources);
  node("h3", {}, sec, "Phases");
  table(sec, [["phase", (p) => p.phase], ["merges", (p) => int(p.merges), 1], ["reused", (p) => int(p.reused), 1],
    ["ids", (p) => p.first_id == null ? "" : `${int(p.first_id)}–${int(p.last_id)}`],
    ["pair count", (p) => p.max_count == null ? "" : `${int(p.max_count)} → ${int(p.last_count)}`],
    ["docs", (p) => int(p.docs), 1], ["text", (p) => bytes(p.text_bytes), 1], ["unique words", (p) => int(p.words), 1],
    ["share of vocab", (p) => p.vocab_share == null ? "" : (p.vocab_share * 100).toFixed(1) + "%", 1]], r.phases);
  const plots = node("div", { class: "plots" }, sec);
  const c = r.curve, pick = pickSubsets(c), subs = Object.keys(c.subsets);
  if (c.k.length) {
    let shown = 0, other = 0; // the drawn subsets get distinct colours first
    const series = subs.map((s) => {
      const hidden = s !== "all" && !pick.has(s);
      const color = s === "all" ? "#111" : COLORS[(hidden ? pick.size + other++ : shown++) % COLORS.length];
      return { name: s, x: c.k, y: c.subsets[s], color, hidden };
    });
    const fig = lineChart(plots, { title: "Compression: bytes per token over the merges", xlabel: "merges", ylabel: "bytes per token",
      series, yfmt: (v) => v.toFixed(3) });
    node("div", { class: "note" }, fig, `Measured on ${curveText(r)}; ${subs.length - 1} subsets` +
      (subs.length - 1 > pick.size ? ` (${pick.size} shown: the lowest and highest; click the legend to show others)` : ""));
  } else node("p", { class: "note" }, plots, "This run file has no compression curve.");
  decayChart(plots, [{ r, color: "#1f77b4" }], r.decay.n > 2000);
  const L = r.lengths, cats = [];
  for (let i = 1; i <= L.max; i++) cats.push(i === L.max && L.capped ? `${i}+` : `${i}`);
  barChart(plots, { title: "Token lengths by kind and phase", xlabel: "bytes", ylabel: "tokens", cats,
    series: Object.entries(L.groups).map(([g, y], i) => ({ name: g, y, color: COLORS[i % COLORS.length] })) });
  return sec;
}

function decayChart(parent, items, logX) {
  const series = items.filter((it) => it.r.decay.n).map((it) => ({ name: it.r.name, x: it.r.decay.rank, y: it.r.decay.count, color: it.color }));
  if (!series.length) { node("p", { class: "note" }, parent, "No merges."); return; }
  lineChart(parent, { title: "Pair count of each merge (the decay)", xlabel: "merge", ylabel: "pair count", series, logY: true,
    logX, logXBox: "logarithmic merge axis" });
}

function compareSection() {
  const sec = $("compare");
  sec.hidden = false;
  node("h2", {}, sec, `${RUNS.length} runs compared`);
  const plots = node("div", { class: "plots" }, sec);
  const series = RUNS.map((r, i) => ({ name: r.name, x: r.curve.size, y: r.curve.subsets.all || [], color: COLORS[i % COLORS.length] }));
  const sizes = RUNS.map((r) => r.vocabSize || 1);
  const fig = lineChart(plots, { title: "Compression: bytes per token by vocabulary size", xlabel: "vocabulary size", ylabel: "bytes per token",
    series, yfmt: (v) => v.toFixed(3), logX: Math.max(...sizes) / Math.min(...sizes) >= 8, logXBox: "logarithmic size axis" });
  node("div", { class: "note" }, fig, "Each run's curve is measured on its own sample (see each run's note).");
  decayChart(plots, RUNS.map((r, i) => ({ r, color: COLORS[i % COLORS.length] })), true);
  node("h3", {}, sec, "Bytes per token at the end of training, per subset of the curve's text");
  const names = [];
  for (const r of RUNS) for (const s of Object.keys(r.curve.subsets)) if (!names.includes(s)) names.push(s);
  const last = (r, s) => { const y = r.curve.subsets[s]; return y ? y[y.length - 1] : null; };
  table(sec, [["subset", (s) => s], ...RUNS.map((r) => [r.name, (s) => last(r, s) == null ? "–" : last(r, s).toFixed(3), 1])], names);
  const txt = RUNS.map((r) => `${r.name}: ${r.curveText || "?"}`).join("; ");
  node("div", { class: "note" }, sec, "Curve text — " + txt);
}

// ---- the vocabulary browser ---------------------------------------------------------------------

const VOCABS = {};
let V = null, list = new Int32Array(0), selected = -1;

function vocabOf(i) {
  if (!VOCABS[i]) {
    const v = JSON.parse($("vocab-" + i).textContent);
    v.k = unrun(v.k, v.n); v.p = unrun(v.p, v.n);
    v.len = new Int32Array(v.n);
    const low = new Array(v.n), starts = new Int32Array(v.n + 1);
    let pos = 0;
    for (let id = 0; id < v.n; id++) {
      v.len[id] = tokenBytes(v.t[id]).length;
      low[id] = v.t[id].toLowerCase();
      starts[id] = pos;
      pos += low[id].length + 1;
    }
    starts[v.n] = pos;
    v.low = low; v.starts = starts; v.hay = low.join("\u0001"); // the search index: one string, each token's start
    VOCABS[i] = v;
  }
  return VOCABS[i];
}

// [value, length, value, length, ...] -> one value an id
function unrun(runs, n) {
  const out = new Int32Array(n);
  for (let j = 0, at = 0; j < runs.length; j += 2) { out.fill(runs[j], at, at + runs[j + 1]); at += runs[j + 1]; }
  return out;
}

function findText(v, q) {
  const hits = [], starts = v.starts;
  if (!q) return hits;
  for (let from = 0; ;) {
    const at = v.hay.indexOf(q, from);
    if (at < 0) break;
    let lo = 0, hi = v.n; // the token holding position `at`: the last start <= at
    while (hi - lo > 1) { const mid = (lo + hi) >> 1; if (starts[mid] <= at) lo = mid; else hi = mid; }
    if (at + q.length <= starts[lo + 1] - 1) { hits.push(lo); from = starts[lo + 1]; } else from = at + 1;
  }
  return hits;
}

function search() {
  const raw = $("vsearch").value, sort = $("vsort").value, v = V;
  let ids;
  const idq = raw.trim().match(/^#?(\d+)$/);
  if (!raw) ids = Int32Array.from({ length: v.n }, (_, i) => i);
  else {
    const q = unescapeQuery(raw).toLowerCase();
    const text = raw.trim().startsWith("#") ? [] : findText(v, q);
    const exact = [], prefix = [], rest = [];
    for (const id of text) (v.low[id] === q ? exact : v.low[id].startsWith(q) ? prefix : rest).push(id);
    const byId = idq && +idq[1] < v.n ? [+idq[1]] : [];
    const order = (a) => sort === "id" ? a : a.sort(cmp(sort));
    ids = Int32Array.from([...byId, ...order(exact), ...order(prefix), ...order(rest)].filter((id, i, a) => !byId.length || i === 0 || id !== byId[0]));
  }
  if (!raw && sort !== "id") ids.sort(cmp(sort));
  list = ids;
  $("vcount").textContent = raw ? `${int(ids.length)} of ${int(v.n)} tokens` : `${int(v.n)} tokens`;
  $("vspace").style.height = list.length * ROW + "px";
  $("vlist").scrollTop = 0;
  drawRows();
  if (raw && list.length) select(list[0]);
}

function cmp(sort) {
  const v = V;
  if (sort === "c") return (a, b) => v.c[b] - v.c[a] || a - b;
  if (sort === "q") return (a, b) => v.q[b] - v.q[a] || a - b;
  if (sort === "len") return (a, b) => v.len[b] - v.len[a] || a - b;
  return (a, b) => a - b;
}

function parentHTML(v, id) {
  if (v.l[id] < 0) return "";
  const one = (p) => `<a class="tid" data-id="${p}">${tokenHTML(v.t[p])}</a>`;
  return one(v.l[id]) + " + " + one(v.r[id]);
}

function drawRows() {
  const box = $("vlist"), v = V, hex = $("vhex").checked;
  const first = Math.max(0, Math.floor(box.scrollTop / ROW) - 4);
  const last = Math.min(list.length, Math.ceil((box.scrollTop + box.clientHeight) / ROW) + 4);
  let html = "";
  for (let i = first; i < last; i++) {
    const id = list[i], t = v.t[id];
    html += `<div class="vrow vgrid${id === selected ? " sel" : ""}" data-id="${id}"><span class="num">${id}</span>` +
      `<span>${hex ? '<span class="hex">' + tokenHex(t) + "</span>" : tokenHTML(t)}</span><span>${v.kinds[v.k[id]] || ""}</span>` +
      `<span>${v.p[id] < 0 ? "" : escHTML(v.phases[v.p[id]])}</span><span class="num">${v.len[id]}</span>` +
      `<span>${parentHTML(v, id)}</span><span class="num">${v.q[id] ? int(v.q[id]) : ""}</span><span class="num">${int(v.c[id])}</span></div>`;
  }
  const rows = $("vrows");
  rows.style.transform = `translateY(${first * ROW}px)`;
  rows.innerHTML = html;
}

function select(id) {
  const v = V;
  selected = id;
  const kids = [];
  for (let j = 0; j < v.n && kids.length < 40; j++) if (v.l[j] === id || v.r[j] === id) kids.push(j);
  const link = (p) => `<a class="tid" data-id="${p}">#${p} ${tokenHTML(v.t[p])}</a>`;
  $("vdetail").innerHTML =
    `<div class="big">#${id} ${tokenHTML(v.t[id])}</div>` +
    `<div>bytes (${v.len[id]}): <span class="hex">${tokenHex(v.t[id])}</span></div>` +
    `<div>kind ${v.kinds[v.k[id]] || "?"}${v.p[id] < 0 ? "" : ", phase " + escHTML(v.phases[v.p[id]])}` +
    `; count in the training words ${int(v.c[id])}${v.q[id] ? "; pair count when merged " + int(v.q[id]) : ""}</div>` +
    (v.l[id] >= 0 ? `<div>parents: ${link(v.l[id])} + ${link(v.r[id])}</div>` : "") +
    (kids.length ? `<div>merged into: ${kids.map(link).join(", ")}${kids.length >= 40 ? ", …" : ""}</div>` : "");
  drawRows();
}

function jump(id) {
  $("vsearch").value = "#" + id;
  search();
}

function vocabBrowser() {
  const sel = $("vrun");
  RUNS.forEach((r, i) => node("option", { value: i }, sel, r.name));
  if (RUNS.length < 2) $("vrun-label").hidden = true;
  const use = () => { V = vocabOf(+sel.value); selected = -1; $("vdetail").textContent = ""; search(); };
  sel.addEventListener("change", use);
  let timer = 0;
  $("vsearch").addEventListener("input", () => { clearTimeout(timer); timer = setTimeout(search, 120); });
  $("vsearch").addEventListener("keydown", (e) => { if (e.key === "Enter") { clearTimeout(timer); search(); } });
  $("vsort").addEventListener("change", search);
  $("vhex").addEventListener("change", drawRows);
  let pending = false;
  $("vlist").addEventListener("scroll", () => {
    if (!pending) { pending = true; requestAnimationFrame(() => { pending = false; drawRows(); }); }
  });
  $("vrows").addEventListener("click", (e) => {
    const a = e.target.closest("a.tid");
    if (a) { jump(+a.dataset.id); return; }
    const row = e.target.closest(".vrow");
    if (row) select(+row.dataset.id);
  });
  $("vdetail").addEventListener("click", (e) => { const a = e.target.closest("a.tid"); if (a) jump(+a.dataset.id); });
  use();
}

function main() {
  const nav = $("nav");
  if (RUNS.length > 1) { compareSection(); node("a", { href: "#compare" }, nav, "compare"); }
  RUNS.forEach((r, i) => { runSection(r, i); node("a", { href: "#run-section-" + i }, nav, r.name); });
  node("a", { href: "#vocab" }, nav, "vocabulary");
  vocabBrowser();
  document.body.dataset.ready = "1";
}

main();
