// Charts: line charts of metric series with uPlot (loaded as the global `uPlot` from
// /static/uPlot.iife.min.js), GPU sparklines and the params-vs-objective scatter on a plain canvas.
import { h, fill, fmtNum, fmtValue, uPlotReady, replaceQuery } from "./util.js";

const dark = window.matchMedia("(prefers-color-scheme: dark)");

// The series colours: distinct in both themes, in the order runs are picked.
const PALETTE = {
  light: ["#2f6feb", "#e8590c", "#2b8a3e", "#c2255c", "#7048e8", "#0c8599", "#a07400", "#5c5f66", "#d6336c", "#1098ad"],
  dark: ["#6ea8fe", "#ff922b", "#69db7c", "#f783ac", "#b197fc", "#3bc9db", "#ffd43b", "#adb5bd", "#faa2c1", "#66d9e8"],
};

export function seriesColor(i) {
  const p = dark.matches ? PALETTE.dark : PALETTE.light;
  return p[((i % p.length) + p.length) % p.length];
}

function cssVar(name) {
  return getComputedStyle(document.documentElement).getPropertyValue(name).trim();
}

function theme() {
  return {
    text: cssVar("--text") || "#1b1f24",
    muted: cssVar("--muted") || "#5b6470",
    grid: cssVar("--grid") || "rgba(128,128,128,0.18)",
    panel: cssVar("--panel") || "#fff",
    font: cssVar("--font") || "system-ui, sans-serif",
    best: cssVar("--best") || "#d4a000",
  };
}

// Merges series with their own x values into uPlot's aligned columns: the union of the x values,
// and each series' y at each (null where it has none; spanGaps draws across them).
export function alignSeries(list) {
  let xs = [];
  for (const s of list) for (const x of s.xs) xs.push(x);
  xs.sort((a, b) => a - b);
  const uniq = [];
  for (let i = 0; i < xs.length; i++) if (i === 0 || xs[i] !== xs[i - 1]) uniq.push(xs[i]);
  xs = uniq;
  const cols = [xs];
  for (const s of list) {
    const col = new Array(xs.length).fill(null);
    let j = 0;
    for (let i = 0; i < s.xs.length; i++) {
      const x = s.xs[i];
      while (j < xs.length && xs[j] < x) j++;
      if (j < xs.length && xs[j] === x) col[j] = s.ys[i];
    }
    cols.push(col);
  }
  return cols;
}

// TensorBoard's smoothing: an exponential moving average with weight `w` (0: none, 0.99: most),
// debiased so the first points are not pulled towards zero. Non-finite values pass through and do
// not feed the average.
export function smoothEma(ys, w) {
  if (!(w > 0)) return ys.slice();
  const out = new Array(ys.length);
  let last = 0;
  let n = 0;
  for (let i = 0; i < ys.length; i++) {
    const y = ys[i];
    if (typeof y !== "number" || !Number.isFinite(y)) {
      out[i] = y;
      continue;
    }
    last = last * w + (1 - w) * y;
    n++;
    out[i] = last / (1 - Math.pow(w, n));
  }
  return out;
}

// Runs of one config (several seeds) as one curve: at each step the mean of the runs that reported
// it, and mean ± the sample standard deviation (the mean alone where one run did).
export function meanBand(seriesList) {
  const at = new Map(); // step -> values
  for (const s of seriesList) {
    for (let i = 0; i < s.xs.length; i++) {
      const y = s.ys[i];
      if (typeof y !== "number" || !Number.isFinite(y)) continue;
      if (!at.has(s.xs[i])) at.set(s.xs[i], []);
      at.get(s.xs[i]).push(y);
    }
  }
  const xs = [...at.keys()].sort((a, b) => a - b);
  const ys = [], lo = [], hi = [], ns = [];
  for (const x of xs) {
    const v = at.get(x);
    const mean = v.reduce((a, b) => a + b, 0) / v.length;
    const sd = v.length > 1 ? Math.sqrt(v.reduce((a, b) => a + (b - mean) ** 2, 0) / (v.length - 1)) : 0;
    ys.push(mean);
    lo.push(mean - sd);
    hi.push(mean + sd);
    ns.push(v.length);
  }
  return { xs, ys, lo, hi, ns };
}

// A CSS colour (#rrggbb or rgb()) at this opacity, for a band's fill.
function withAlpha(color, a) {
  const m = /^#([0-9a-f]{6})$/i.exec(color || "");
  if (m) {
    const n = parseInt(m[1], 16);
    return `rgba(${(n >> 16) & 255}, ${(n >> 8) & 255}, ${n & 255}, ${a})`;
  }
  const r = /^rgb\((\d+),\s*(\d+),\s*(\d+)\)$/.exec(color || "");
  if (r) return `rgba(${r[1]}, ${r[2]}, ${r[3]}, ${a})`;
  return color;
}

// How a page's line charts are drawn: a log y axis and TensorBoard's smoothing slider, read from
// and kept in the URL (log=1, smooth=0.6). `el` is the controls; every chart given to follow()
// is drawn that way now and after each change.
export function curveView(query) {
  const view = {
    logY: query.get("log") === "1",
    smoothing: Math.min(0.99, Math.max(0, Number(query.get("smooth")) || 0)),
  };
  const charts = new Set();
  const logBox = h("input", { type: "checkbox", class: "curve-log", id: "curve-log", checked: view.logY });
  const slider = h("input", { type: "range", class: "curve-smoothing", id: "curve-smoothing", min: "0", max: "0.99", step: "0.01", value: String(view.smoothing), "aria-label": "smoothing" });
  const shown = h("span", { class: "muted small mono" }, view.smoothing.toFixed(2));
  const apply = () => {
    for (const c of charts) c.setView(view);
    replaceQuery({ log: view.logY ? "1" : null, smooth: view.smoothing > 0 ? String(view.smoothing) : null });
  };
  logBox.addEventListener("change", () => {
    view.logY = logBox.checked;
    apply();
  });
  slider.addEventListener("input", () => {
    view.smoothing = Number(slider.value);
    shown.textContent = view.smoothing.toFixed(2);
    apply();
  });
  const el = h("div", { class: "toolbar curve-view" },
    h("label", { class: "check-label" }, logBox, " log scale"),
    h("label", { class: "check-label", title: "exponential moving average, as TensorBoard's slider" }, "smoothing ", slider, shown));
  return {
    el,
    view,
    follow(chart) {
      charts.add(chart);
      chart.setView(view);
    },
    forget(chart) {
      charts.delete(chart);
    },
  };
}

let chartSeq = 0;
const INT_INCRS = [];
for (let m = 1; m <= 1e12; m *= 10) INT_INCRS.push(m, 2 * m, 5 * m);

// A line chart of named series [{key, label, xs, ys, color?}] that can be appended to live
// (color: a CSS colour, or a palette index that follows the light/dark theme).
// Its element carries data-points="n1,n2,..." (points per series) for tests and benchmarks.
export class LineChart {
  constructor(parent, { title = "", height = 220, xLabel = "step", sync = null, empty = "No points yet" } = {}) {
    this.id = ++chartSeq;
    this.height = height;
    this.xLabel = xLabel;
    this.sync = sync;
    this.series = [];
    this.u = null;
    this.structure = "";
    this.drawn = false;
    this.titleEl = h("div", { class: "chart-title" }, title);
    this.body = h("div", { class: "chart-body" });
    this.emptyEl = h("div", { class: "chart-empty" }, empty);
    this.root = h("div", { class: "chart", dataset: { chart: String(this.id), points: "" } }, this.titleEl, this.body, this.emptyEl);
    this.body.style.minHeight = `${height + 40}px`;
    parent.append(this.root);
    this.frame = 0;
    this.width = 0;
    this.resizeObserver = new ResizeObserver(() => this.schedule());
    this.resizeObserver.observe(this.body);
    this.onTheme = () => {
      this.structure = "";
      this.schedule();
    };
    dark.addEventListener("change", this.onTheme);
  }

  setTitle(t) {
    this.titleEl.textContent = t;
  }

  setEmptyText(t) {
    this.emptyEl.textContent = t;
  }

  // Replaces every series.
  set(list) {
    this.series = list.map((s, i) => ({
      key: s.key ?? String(i),
      label: s.label ?? String(s.key),
      color: s.color,
      xs: Array.from(s.xs),
      ys: Array.from(s.ys),
      // A shaded band around the line (mean ± sd of a group of seeds): lo and hi at the same xs.
      lo: s.lo ? Array.from(s.lo) : null,
      hi: s.hi ? Array.from(s.hi) : null,
      width: s.width,
      dash: s.dash,
    }));
    this.schedule();
  }

  // How the series are drawn, not what they are: a log y axis (values <= 0 are left out) and
  // TensorBoard's EMA smoothing (0..0.99).
  setView({ logY = this.logY || false, smoothing = this.smoothing || 0 } = {}) {
    this.logY = !!logY;
    this.smoothing = Math.min(0.999, Math.max(0, Number(smoothing) || 0));
    this.root.dataset.logY = String(this.logY);
    this.root.dataset.smoothing = String(this.smoothing);
    this.schedule();
  }

  // The columns as drawn: each series smoothed, its band (if any) as two more columns, and
  // values a log axis cannot show left out.
  drawnSeries() {
    const keep = (v) => (this.logY && typeof v === "number" && v <= 0 ? null : v);
    const out = [];
    for (const s of this.series) {
      const ys = smoothEma(s.ys, this.smoothing).map(keep);
      out.push({ xs: s.xs, ys });
      if (s.lo && s.hi) {
        out.push({ xs: s.xs, ys: smoothEma(s.lo, this.smoothing).map(keep) });
        out.push({ xs: s.xs, ys: smoothEma(s.hi, this.smoothing).map(keep) });
      }
    }
    return out;
  }

  has(key) {
    return this.series.some((s) => s.key === key);
  }

  // Adds points to one series (x ascending is the usual case; older x values are sorted in).
  append(key, xs, ys) {
    const s = this.series.find((t) => t.key === key);
    if (!s) return false;
    for (let i = 0; i < xs.length; i++) {
      const x = xs[i];
      const n = s.xs.length;
      if (n === 0 || x > s.xs[n - 1]) {
        s.xs.push(x);
        s.ys.push(ys[i]);
      } else {
        let k = n - 1;
        while (k >= 0 && s.xs[k] > x) k--;
        if (k >= 0 && s.xs[k] === x) s.ys[k] = ys[i];
        else {
          s.xs.splice(k + 1, 0, x);
          s.ys.splice(k + 1, 0, ys[i]);
        }
      }
    }
    this.schedule();
    return true;
  }

  schedule() {
    if (this.frame || this.destroyed) return;
    this.frame = requestAnimationFrame(() => {
      this.frame = 0;
      this.render();
    });
  }

  render() {
    if (this.destroyed) return;
    const total = this.series.reduce((n, s) => n + s.xs.length, 0);
    this.root.dataset.points = this.series.map((s) => s.ys.filter((y) => y !== null && y !== undefined).length).join(",");
    this.root.dataset.series = String(this.series.length);
    this.emptyEl.hidden = total > 0;
    const width = Math.floor(this.body.clientWidth);
    if (total === 0 || width < 50) {
      if (this.u && total === 0) {
        this.u.destroy();
        this.u = null;
        this.structure = "";
      }
      return;
    }
    if (!window.uPlot) {
      uPlotReady().then(() => this.schedule(), () => this.setEmptyText("Charts could not be loaded (uPlot)"));
      return;
    }
    const data = alignSeries(this.drawnSeries());
    this.root.dataset.bands = String(this.series.filter((s) => s.lo && s.hi).length);
    const structure =
      `${this.logY ? "log" : "linear"}\n` +
      this.series.map((s) => `${s.key}|${s.label}|${s.color || ""}|${s.lo ? "band" : ""}`).join("\n");
    if (!this.u || structure !== this.structure) {
      if (this.u) this.u.destroy();
      this.structure = structure;
      this.width = width;
      this.u = new window.uPlot(this.options(width), data, this.body);
    } else {
      if (width !== this.width) {
        this.width = width;
        this.u.setSize({ width, height: this.height });
      }
      this.u.setData(data);
    }
  }

  options(width) {
    const t = theme();
    const font = `11px ${t.font}`;
    const axis = {
      stroke: t.muted,
      font,
      labelFont: font,
      grid: { stroke: t.grid, width: 1 },
      ticks: { stroke: t.grid, width: 1, size: 4 },
    };
    const self = this;
    // Each series, then its band's edges (lo, hi) right after it when it has one.
    const uSeries = [];
    const bands = [];
    const edges = []; // uPlot indexes of band edges: kept out of the legend
    this.series.forEach((s, i) => {
      const stroke = typeof s.color === "number" ? seriesColor(s.color) : s.color || seriesColor(i);
      uSeries.push({
        label: s.label,
        // a number picks from the palette of the theme in force when drawn
        stroke,
        width: s.width || 1.5,
        dash: s.dash,
        spanGaps: true,
        // a series of one point has no line to draw: show it as a dot
        points: { show: () => this.series[i] && this.series[i].ys.filter((y) => y !== null && y !== undefined).length < 2, size: 6 },
        value: (u, v) => (v === null || v === undefined ? "—" : fmtNum(v)),
      });
      if (s.lo && s.hi) {
        const lo = uSeries.length + 1; // uPlot's index: 0 is x
        const edge = (name) => ({ label: `${s.label} ${name}`, stroke: "transparent", width: 0, spanGaps: true, points: { show: false }, value: (u, v) => (v === null || v === undefined ? "—" : fmtNum(v)) });
        uSeries.push(edge("− sd"), edge("+ sd"));
        edges.push(lo, lo + 1);
        bands.push({ series: [lo + 1, lo], fill: withAlpha(stroke, 0.18) });
      }
    });
    return {
      width,
      height: this.height,
      pxAlign: 0,
      scales: { x: { time: false }, ...(this.logY ? { y: { distr: 3 } } : {}) },
      cursor: {
        drag: { x: true, y: false, setScale: true },
        ...(this.sync ? { sync: { key: this.sync } } : {}),
      },
      legend: { live: true },
      axes: [
        // steps are whole numbers: no ticks at 1.5
        { ...axis, label: this.xLabel, labelSize: 18, size: 36, incrs: INT_INCRS, values: (u, vals) => vals.map((v) => fmtNum(v)) },
        { ...axis, size: 56, values: (u, vals) => vals.map((v) => fmtNum(v)) },
      ],
      series: [{ label: this.xLabel, value: (u, v) => (v === null || v === undefined ? "—" : fmtNum(v)) }, ...uSeries],
      bands,
      hooks: {
        init: [
          (u) => {
            const rows = u.root.querySelectorAll(".u-legend .u-series");
            for (const i of edges) if (rows[i]) rows[i].style.display = "none";
          },
        ],
        draw: [
          () => {
            if (self.drawn) return;
            self.drawn = true;
            performance.mark("drover:chart-rendered");
          },
        ],
      },
    };
  }

  destroy() {
    this.destroyed = true;
    if (this.frame) cancelAnimationFrame(this.frame);
    this.resizeObserver.disconnect();
    dark.removeEventListener("change", this.onTheme);
    if (this.u) this.u.destroy();
    this.u = null;
    this.root.remove();
  }
}

// Splits metric points (as the API gives them, ordered by attempt then step) into one series per
// attempt: steps start again at each attempt.
export function seriesByAttempt(points) {
  const byAttempt = new Map();
  for (const p of points) {
    if (!byAttempt.has(p.attempt_id)) byAttempt.set(p.attempt_id, { xs: [], ys: [] });
    const s = byAttempt.get(p.attempt_id);
    s.xs.push(p.step);
    s.ys.push(typeof p.value === "number" ? p.value : null);
  }
  return byAttempt; // insertion order = attempt order
}

// The latest attempt that has points: what an overlay of several runs shows for each run.
export function latestAttemptSeries(points) {
  const by = seriesByAttempt(points);
  let last = null;
  let lastId = null;
  for (const [id, s] of by) {
    last = s;
    lastId = id;
  }
  return last ? { attemptId: lastId, xs: last.xs, ys: last.ys } : { attemptId: null, xs: [], ys: [] };
}

// A small line of the last values (GPU utilisation, memory, temperature), drawn on a canvas.
export class Sparkline {
  constructor({ label, unit = "", min = 0, max = null, color = null, format = null, capacity = 240 }) {
    this.label = label;
    this.unit = unit;
    this.min = min;
    this.max = max;
    this.color = color;
    this.format = format || ((v) => `${fmtNum(Math.round(v * 10) / 10)}${unit}`);
    this.capacity = capacity;
    this.points = []; // [t_ms, value]
    this.canvas = h("canvas", { class: "spark-canvas", height: 32 });
    this.valueEl = h("span", { class: "spark-value" }, "—");
    this.root = h("div", { class: "spark", dataset: { points: "0" } },
      h("div", { class: "spark-head" }, h("span", { class: "spark-label" }, label), this.valueEl),
      this.canvas);
    this.frame = 0;
  }

  push(t, v) {
    if (v === null || v === undefined || !Number.isFinite(v)) return;
    const n = this.points.length;
    if (n && t <= this.points[n - 1][0]) {
      if (t === this.points[n - 1][0]) this.points[n - 1][1] = v;
      else return;
    } else {
      this.points.push([t, v]);
    }
    if (this.points.length > this.capacity) this.points.splice(0, this.points.length - this.capacity);
    this.schedule();
  }

  schedule() {
    if (this.frame) return;
    this.frame = requestAnimationFrame(() => {
      this.frame = 0;
      this.draw();
    });
  }

  draw() {
    const pts = this.points;
    this.root.dataset.points = String(pts.length);
    this.valueEl.textContent = pts.length ? this.format(pts[pts.length - 1][1]) : "—";
    const c = this.canvas;
    const dpr = window.devicePixelRatio || 1;
    const w = Math.max(40, c.clientWidth);
    const hgt = 32;
    if (c.width !== Math.round(w * dpr)) c.width = Math.round(w * dpr);
    c.height = Math.round(hgt * dpr);
    const ctx = c.getContext("2d");
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    ctx.clearRect(0, 0, w, hgt);
    if (pts.length === 0) return;
    let lo = this.min ?? Infinity;
    let hi = this.max ?? -Infinity;
    for (const [, v] of pts) {
      if (this.min === null) lo = Math.min(lo, v);
      if (this.max === null) hi = Math.max(hi, v);
    }
    if (!(hi > lo)) hi = lo + 1;
    const t0 = pts[0][0];
    const t1 = pts[pts.length - 1][0];
    const span = Math.max(1, t1 - t0);
    const x = (tm) => (pts.length === 1 ? w - 2 : 1 + ((tm - t0) / span) * (w - 3));
    const y = (v) => hgt - 2 - ((v - lo) / (hi - lo)) * (hgt - 4);
    const color = this.color || cssVar("--accent") || "#2f6feb";
    ctx.beginPath();
    ctx.moveTo(x(pts[0][0]), hgt);
    for (const [tm, v] of pts) ctx.lineTo(x(tm), y(v));
    ctx.lineTo(x(pts[pts.length - 1][0]), hgt);
    ctx.closePath();
    ctx.globalAlpha = 0.15;
    ctx.fillStyle = color;
    ctx.fill();
    ctx.globalAlpha = 1;
    ctx.beginPath();
    pts.forEach(([tm, v], i) => (i ? ctx.lineTo(x(tm), y(v)) : ctx.moveTo(x(tm), y(v))));
    ctx.strokeStyle = color;
    ctx.lineWidth = 1.5;
    ctx.stroke();
    const [lt, lv] = pts[pts.length - 1];
    ctx.fillStyle = color;
    ctx.beginPath();
    ctx.arc(x(lt), y(lv), 2.2, 0, Math.PI * 2);
    ctx.fill();
  }

  destroy() {
    if (this.frame) cancelAnimationFrame(this.frame);
  }
}

function niceTicks(lo, hi, count) {
  const span = hi - lo;
  if (!(span > 0)) return [lo];
  const step0 = span / count;
  const mag = Math.pow(10, Math.floor(Math.log10(step0)));
  const step = [1, 2, 2.5, 5, 10].map((m) => m * mag).find((s) => span / s <= count) || 10 * mag;
  const out = [];
  for (let v = Math.ceil(lo / step) * step; v <= hi + step * 1e-9; v += step) out.push(Number(v.toPrecision(12)));
  return out;
}

// A small, stable sideways offset per run (-0.5..0.5), so runs with the same value do not hide
// each other in a column.
function hashJitter(id) {
  let x = Math.imul(id, 2654435761) >>> 0;
  x = (x ^ (x >>> 15)) >>> 0;
  return (x % 1000) / 1000 - 0.5;
}

// Params against the objective: one dot per run (x = the chosen parameter, y = the run's best
// objective value), the best run marked with a ring and a star. Categorical parameters get
// evenly spaced columns; a numeric one spanning more than 50x a log scale.
export class ScatterPlot {
  constructor(parent, { height = 260, onPick = null } = {}) {
    this.height = height;
    this.onPick = onPick;
    this.canvas = h("canvas", { class: "scatter-canvas" });
    this.tip = h("div", { class: "scatter-tip", hidden: true });
    this.root = h("div", { class: "scatter", dataset: { points: "0" } }, this.canvas, this.tip);
    parent.append(this.root);
    this.points = [];
    this.screen = [];
    this.frame = 0;
    this.resizeObserver = new ResizeObserver(() => this.schedule());
    this.resizeObserver.observe(this.root);
    this.canvas.addEventListener("mousemove", (e) => this.hover(e));
    this.canvas.addEventListener("mouseleave", () => (this.tip.hidden = true));
    this.canvas.addEventListener("click", (e) => {
      const p = this.nearest(e);
      if (p && this.onPick) this.onPick(p.id);
    });
    this.onTheme = () => this.schedule();
    dark.addEventListener("change", this.onTheme);
  }

  // points: [{id, x, y, label}], bestId, xName, yName; logX: the parameter is searched on a log
  // scale (else a log axis when its values span more than 50x)
  set({ points, bestId, xName, yName, logX = false }) {
    this.points = points;
    this.bestId = bestId;
    this.logX = logX;
    this.xName = xName;
    this.yName = yName;
    this.schedule();
  }

  schedule() {
    if (this.frame) return;
    this.frame = requestAnimationFrame(() => {
      this.frame = 0;
      this.draw();
    });
  }

  draw() {
    const c = this.canvas;
    const dpr = window.devicePixelRatio || 1;
    const w = Math.max(100, this.root.clientWidth);
    const hgt = this.height;
    c.style.width = `${w}px`;
    c.style.height = `${hgt}px`;
    c.width = Math.round(w * dpr);
    c.height = Math.round(hgt * dpr);
    const ctx = c.getContext("2d");
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    ctx.clearRect(0, 0, w, hgt);
    const t = theme();
    ctx.font = `11px ${t.font}`;
    const pts = this.points.filter((p) => typeof p.y === "number" && Number.isFinite(p.y));
    this.root.dataset.points = String(pts.length);
    const L = 64, R = 16, T = 12, B = 40;
    const pw = w - L - R, ph = hgt - T - B;
    this.screen = [];
    if (pts.length === 0) {
      ctx.fillStyle = t.muted;
      ctx.textAlign = "center";
      ctx.fillText("No run has reported the objective yet", w / 2, hgt / 2);
      return;
    }
    // A numeric parameter swept over a few values (a grid) reads best as columns; one the spec
    // searches on a log scale is on its axis however few values its trials took.
    const numeric = pts.every((p) => typeof p.x === "number" && Number.isFinite(p.x)) && (this.logX || new Set(pts.map((p) => p.x)).size > 8);
    let xOf, xTicks, log = false;
    if (numeric) {
      let lo = Math.min(...pts.map((p) => p.x)), hi = Math.max(...pts.map((p) => p.x));
      log = lo > 0 && (this.logX || hi / lo > 50);
      const f = log ? Math.log10 : (v) => v;
      let a = f(lo), b = f(hi);
      if (a === b) { a -= 1; b += 1; }
      const pad = (b - a) * 0.05;
      a -= pad; b += pad;
      xOf = (v) => L + ((f(v) - a) / (b - a)) * pw;
      if (log) {
        xTicks = [];
        for (let e = Math.ceil(a); e <= Math.floor(b); e++) xTicks.push([Math.pow(10, e), fmtNum(Math.pow(10, e))]);
        if (xTicks.length < 2) xTicks = [[lo, fmtNum(lo)], [hi, fmtNum(hi)]];
      } else {
        xTicks = niceTicks(a, b, Math.max(2, Math.floor(pw / 80))).map((v) => [v, fmtNum(v)]);
      }
    } else {
      const allNum = pts.every((p) => typeof p.x === "number");
      const cats = [...new Set(pts.map((p) => fmtValue(p.x)))].sort((p, q) => (allNum ? Number(p) - Number(q) : p.localeCompare(q, undefined, { numeric: true })));
      const idx = new Map(cats.map((cat, i) => [cat, i]));
      const slot = pw / cats.length;
      xOf = (v, id) => L + slot * (idx.get(fmtValue(v)) + 0.5 + hashJitter(id) * Math.min(0.5, 60 / slot));
      xTicks = cats.map((cat, i) => [null, cat, L + slot * (i + 0.5)]);
    }
    let ylo = Math.min(...pts.map((p) => p.y)), yhi = Math.max(...pts.map((p) => p.y));
    if (ylo === yhi) { ylo -= Math.abs(ylo) * 0.1 || 1; yhi += Math.abs(yhi) * 0.1 || 1; }
    const ypad = (yhi - ylo) * 0.06;
    ylo -= ypad; yhi += ypad;
    const yOf = (v) => T + ph - ((v - ylo) / (yhi - ylo)) * ph;

    // grid and axes
    ctx.strokeStyle = t.grid;
    ctx.fillStyle = t.muted;
    ctx.lineWidth = 1;
    ctx.textAlign = "right";
    ctx.textBaseline = "middle";
    for (const v of niceTicks(ylo, yhi, Math.max(2, Math.floor(ph / 40)))) {
      const y = Math.round(yOf(v)) + 0.5;
      ctx.beginPath(); ctx.moveTo(L, y); ctx.lineTo(L + pw, y); ctx.stroke();
      ctx.fillText(fmtNum(v), L - 6, y);
    }
    ctx.textAlign = "center";
    ctx.textBaseline = "top";
    for (const [v, label, sx] of xTicks) {
      const x = Math.round(sx ?? xOf(v)) + 0.5;
      ctx.beginPath(); ctx.moveTo(x, T); ctx.lineTo(x, T + ph); ctx.stroke();
      ctx.fillText(label, x, T + ph + 6);
    }
    ctx.fillText(log ? `${this.xName || ""} (log scale)` : this.xName || "", L + pw / 2, T + ph + 22);
    this.root.dataset.scale = log ? "log" : numeric ? "linear" : "columns";
    ctx.save();
    ctx.translate(12, T + ph / 2);
    ctx.rotate(-Math.PI / 2);
    ctx.textBaseline = "middle";
    ctx.fillText(this.yName || "", 0, 0);
    ctx.restore();

    const color = seriesColor(0);
    let best = null;
    for (const p of pts) {
      const sx = xOf(p.x, p.id), sy = yOf(p.y);
      this.screen.push({ p, sx, sy });
      if (p.id === this.bestId) { best = { p, sx, sy }; continue; }
      ctx.globalAlpha = pts.length > 2000 ? 0.35 : 0.7;
      ctx.fillStyle = color;
      ctx.beginPath(); ctx.arc(sx, sy, pts.length > 2000 ? 2 : 3.5, 0, Math.PI * 2); ctx.fill();
    }
    ctx.globalAlpha = 1;
    if (best) {
      ctx.fillStyle = t.best;
      ctx.strokeStyle = t.best;
      ctx.lineWidth = 2;
      ctx.beginPath(); ctx.arc(best.sx, best.sy, 7, 0, Math.PI * 2); ctx.stroke();
      ctx.beginPath(); ctx.arc(best.sx, best.sy, 3.5, 0, Math.PI * 2); ctx.fill();
      ctx.textAlign = "left";
      ctx.textBaseline = "bottom";
      ctx.fillStyle = t.text;
      ctx.fillText(`★ best #${best.p.id}`, Math.min(best.sx + 9, L + pw - 60), best.sy - 6);
    }
    this.root.dataset.best = best ? String(best.p.id) : "";
  }

  nearest(e) {
    const r = this.canvas.getBoundingClientRect();
    const mx = e.clientX - r.left, my = e.clientY - r.top;
    let found = null, d0 = 64;
    for (const s of this.screen) {
      const d = (s.sx - mx) ** 2 + (s.sy - my) ** 2;
      if (d < d0) { d0 = d; found = s; }
    }
    return found ? { ...found.p, sx: found.sx, sy: found.sy } : null;
  }

  hover(e) {
    const p = this.nearest(e);
    if (!p) {
      this.tip.hidden = true;
      this.canvas.style.cursor = "";
      return;
    }
    this.canvas.style.cursor = "pointer";
    fill(this.tip, h("b", null, `#${p.id}`), " ", p.label || "", h("br"), `${this.yName} = ${fmtNum(p.y)}`);
    this.tip.hidden = false;
    this.tip.style.left = `${Math.min(p.sx + 10, this.root.clientWidth - 220)}px`;
    this.tip.style.top = `${Math.max(0, p.sy - 40)}px`;
  }

  destroy() {
    if (this.frame) cancelAnimationFrame(this.frame);
    this.resizeObserver.disconnect();
    dark.removeEventListener("change", this.onTheme);
    this.root.remove();
  }
}
