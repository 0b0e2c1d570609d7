// Small helpers shared by every page: building elements, formatting numbers, times and states.

// h("div", {class: "x", onclick: f}, "text", child, [more]) -> an element. Attributes starting
// with "on" become listeners; `dataset` and `style` take objects; null/false children are skipped.
export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  if (attrs) {
    for (const [k, v] of Object.entries(attrs)) {
      if (v === null || v === undefined || v === false) continue;
      if (k.startsWith("on") && typeof v === "function") el.addEventListener(k.slice(2), v);
      else if (k === "class") el.className = v;
      else if (k === "dataset") Object.assign(el.dataset, v);
      else if (k === "style" && typeof v === "object") Object.assign(el.style, v);
      else if (k === "text") el.textContent = v;
      else if (k in el && typeof v !== "string") el[k] = v;
      else el.setAttribute(k, v === true ? "" : String(v));
    }
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const c of children) {
    if (c === null || c === undefined || c === false) continue;
    if (Array.isArray(c)) append(el, c);
    else el.append(c instanceof Node ? c : String(c));
  }
}

// Replaces an element's children.
export function fill(el, ...children) {
  el.replaceChildren();
  append(el, children);
  return el;
}

export const STATES = ["queued", "running", "retrying", "succeeded", "failed", "cancelled", "pruned"];
export const ENDED = new Set(["succeeded", "failed", "cancelled", "pruned"]);

export function stateBadge(state, extra) {
  return h("span", { class: `badge state-${state}`, title: extra || null }, state);
}

export function fmtNum(v) {
  if (v === null || v === undefined) return "—";
  if (typeof v !== "number") return String(v);
  if (!Number.isFinite(v)) return String(v);
  if (Number.isInteger(v) && Math.abs(v) < 1e15) return v.toLocaleString("en-US");
  const a = Math.abs(v);
  if (a !== 0 && (a < 1e-3 || a >= 1e6)) return v.toExponential(3);
  return String(Number(v.toPrecision(4)));
}

// A parameter value as the spec writes it.
export function fmtValue(v) {
  if (v === null || v === undefined) return "—";
  if (typeof v === "number") return String(v);
  if (typeof v === "object") return JSON.stringify(v);
  return String(v);
}

export function fmtBytes(b) {
  if (b === null || b === undefined || b < 0) return "—";
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  while (b >= 1024 && i < units.length - 1) {
    b /= 1024;
    i++;
  }
  return `${i === 0 ? b : b.toFixed(b < 10 ? 1 : 0)} ${units[i]}`;
}

export function fmtDuration(ms) {
  if (ms === null || ms === undefined || ms < 0) return "—";
  const s = Math.round(ms / 1000);
  if (s < 60) return `${s}s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m}m ${String(s % 60).padStart(2, "0")}s`;
  const hr = Math.floor(m / 60);
  if (hr < 24) return `${hr}h ${String(m % 60).padStart(2, "0")}m`;
  return `${Math.floor(hr / 24)}d ${hr % 24}h`;
}

const pad = (n) => String(n).padStart(2, "0");

export function fmtTime(ms) {
  if (!ms) return "—";
  const d = new Date(ms);
  const now = new Date();
  const hms = `${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`;
  if (d.toDateString() === now.toDateString()) return hms;
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ${hms.slice(0, 5)}`;
}

export function fmtAgo(ms) {
  if (!ms) return "—";
  const s = Math.max(0, (Date.now() - ms) / 1000);
  if (s < 60) return `${Math.floor(s)}s ago`;
  if (s < 3600) return `${Math.floor(s / 60)}m ago`;
  if (s < 86400) return `${Math.floor(s / 3600)}h ago`;
  return `${Math.floor(s / 86400)}d ago`;
}

export function paramsText(params) {
  return Object.entries(params || {})
    .map(([k, v]) => `${k}=${fmtValue(v)}`)
    .join(" ");
}

// Calls fn at most once per `ms`, always with a trailing call after the last request.
export function throttle(fn, ms) {
  let timer = null;
  let last = 0;
  let pending = false;
  const run = () => {
    timer = null;
    pending = false;
    last = Date.now();
    fn();
  };
  const wrapped = () => {
    pending = true;
    if (timer) return;
    timer = setTimeout(run, Math.max(0, last + ms - Date.now()));
  };
  wrapped.cancel = () => {
    if (timer) clearTimeout(timer);
    timer = null;
    pending = false;
  };
  wrapped.pending = () => pending;
  return wrapped;
}

export function debounce(fn, ms) {
  let timer = null;
  const wrapped = (...args) => {
    if (timer) clearTimeout(timer);
    timer = setTimeout(() => {
      timer = null;
      fn(...args);
    }, ms);
  };
  wrapped.cancel = () => timer && clearTimeout(timer);
  return wrapped;
}

// The parts of the location hash: "#/compare?runs=1,2" -> {path: "/compare", query}.
export function parseHash(hash = location.hash) {
  const raw = hash.replace(/^#/, "") || "/";
  const q = raw.indexOf("?");
  const path = q < 0 ? raw : raw.slice(0, q);
  const query = new URLSearchParams(q < 0 ? "" : raw.slice(q + 1));
  return { path: path || "/", query };
}

// Rewrites the hash's query without a navigation (the page keeps its state; reload restores it).
export function replaceQuery(values) {
  const { path, query } = parseHash();
  for (const [k, v] of Object.entries(values)) {
    if (v === null || v === undefined || v === "") query.delete(k);
    else query.set(k, String(v));
  }
  const qs = query.toString();
  history.replaceState(history.state, "", `#${path}${qs ? "?" + qs : ""}`);
}

// Everything a page starts (requests, timers, event handlers) is tied to its scope, and ends
// when the page is left.
export class Scope {
  constructor() {
    this.controller = new AbortController();
    this.disposers = [];
  }
  get signal() {
    return this.controller.signal;
  }
  get alive() {
    return !this.controller.signal.aborted;
  }
  add(dispose) {
    this.disposers.push(dispose);
    return dispose;
  }
  interval(fn, ms) {
    const id = setInterval(fn, ms);
    this.add(() => clearInterval(id));
  }
  dispose() {
    this.controller.abort();
    for (const d of this.disposers.splice(0).reverse()) {
      try {
        d();
      } catch (e) {
        setTimeout(() => {
          throw e;
        });
      }
    }
  }
}

export function isAbort(e) {
  return e && (e.name === "AbortError" || e.code === "aborted");
}

// A message box inside a page.
export function notice(kind, text) {
  return h("div", { class: `notice notice-${kind}`, role: kind === "error" ? "alert" : "status" }, text);
}

export function copyButton(getText, label = "Copy") {
  const b = h("button", { class: "btn btn-small", type: "button" }, label);
  b.addEventListener("click", async () => {
    try {
      await navigator.clipboard.writeText(getText());
      b.textContent = "Copied";
    } catch {
      b.textContent = "Select and copy";
    }
    setTimeout(() => (b.textContent = label), 1500);
  });
  return b;
}

// A button that asks once more before doing something that cannot be undone (no window.confirm:
// it blocks the page and the event stream).
export function confirmButton(label, confirmLabel, action, { cls = "btn", title = null } = {}) {
  const b = h("button", { class: cls, type: "button", title });
  b.textContent = label;
  let armed = null;
  const disarm = () => {
    if (armed) clearTimeout(armed);
    armed = null;
    b.classList.remove("armed");
    b.textContent = label;
  };
  b.addEventListener("click", async () => {
    if (!armed) {
      b.classList.add("armed");
      b.textContent = confirmLabel;
      armed = setTimeout(disarm, 4000);
      return;
    }
    disarm();
    b.disabled = true;
    try {
      await action();
    } finally {
      b.disabled = false;
    }
  });
  return b;
}

// A short message in the corner (an action's result).
export function toast(text, kind = "info") {
  let box = document.getElementById("toasts");
  if (!box) {
    box = h("div", { id: "toasts", class: "toasts", "aria-live": "polite" });
    document.body.append(box);
  }
  const t = h("div", { class: `toast toast-${kind}` }, text);
  box.append(t);
  setTimeout(() => t.remove(), kind === "error" ? 8000 : 4000);
}

// For refreshes triggered by an event: the daemon may publish an event a moment before the
// change is readable through the API, so read now (throttled) and once more when things settle.
export function refresher(fn, ms, settleMs = 1200) {
  const now = throttle(fn, ms);
  const later = debounce(now, settleMs);
  const wrapped = () => {
    now();
    later();
  };
  wrapped.cancel = () => {
    now.cancel();
    later.cancel();
  };
  return wrapped;
}

// uPlot is a classic script (index.html preloads it): run it the first time a chart needs it.
let uplotLoading = null;
export function uPlotReady() {
  if (window.uPlot) return Promise.resolve(window.uPlot);
  if (!uplotLoading) {
    uplotLoading = new Promise((resolve, reject) => {
      const s = document.createElement("script");
      s.src = "/static/uPlot.iife.min.js";
      s.onload = () => resolve(window.uPlot);
      s.onerror = () => {
        uplotLoading = null;
        reject(new Error("could not load uPlot"));
      };
      document.head.append(s);
    });
  }
  return uplotLoading;
}
