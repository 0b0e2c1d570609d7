// The daemon's JSON API (docs/http-api.md, docs/web.md), same origin, authenticated by the session
// cookie. Requests that change something carry the page's CSRF token in X-Drover-Csrf.

let csrf = null;

function metaCsrf() {
  const v = document.querySelector('meta[name="drover-csrf"]')?.content || "";
  // Served without the placeholder filled in (a page opened from disk): ask the session instead.
  return v && !v.includes("{{") ? v : null;
}

export class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.name = "ApiError";
    this.status = status;
    this.code = code;
  }
}

function toLogin() {
  const back = location.hash && location.hash !== "#/" ? location.hash : "";
  // The login page sends us to "/" afterwards; keep where we were for after that.
  if (back) sessionStorage.setItem("drover.after-login", back);
  location.assign("/login");
}

export async function csrfToken() {
  if (csrf) return csrf;
  csrf = metaCsrf();
  if (!csrf) {
    const s = await api("/session");
    csrf = s.csrf || "";
  }
  return csrf;
}

// The request boot.js started for the first page, once, when the page asks for the same URL.
function takeEarly(url) {
  const e = window.droverEarly;
  if (!e || e.url !== url) return null;
  window.droverEarly = null;
  return e.response;
}

// api("/runs?experiment=3") -> parsed JSON; throws ApiError with the server's code and message.
export async function api(path, { method = "GET", body, signal } = {}) {
  const headers = { Accept: "application/json" };
  if (method !== "GET" && method !== "HEAD") headers["X-Drover-Csrf"] = await csrfToken();
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const url = path.startsWith("/api/") || path === "/metrics" ? path : `/api/v1${path}`;
  const early = method === "GET" ? takeEarly(url) : null;
  const res = await (early ||
    fetch(url, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
      signal,
      credentials: "same-origin",
      cache: "no-store",
    }));
  if (signal?.aborted) throw new DOMException("aborted", "AbortError");
  if (res.status === 401) {
    toLogin();
    throw new ApiError(401, "unauthenticated", "signed out");
  }
  const type = res.headers.get("Content-Type") || "";
  let data = null;
  if (type.includes("json")) {
    try {
      data = await res.json();
    } catch {
      data = null;
    }
  } else {
    data = await res.text();
  }
  if (!res.ok) {
    const err = data && data.error ? data.error : {};
    throw new ApiError(res.status, err.code || "http_" + res.status, err.message || `${res.status} ${res.statusText}`);
  }
  return data;
}

export const post = (path, body, opts = {}) => api(path, { ...opts, method: "POST", body: body ?? {} });

export async function signOut() {
  try {
    await fetch("/logout", {
      method: "POST",
      headers: { "X-Drover-Csrf": await csrfToken() },
      credentials: "same-origin",
      redirect: "manual",
    });
  } finally {
    location.assign("/login");
  }
}

// Runs fn over items with at most `limit` in flight; results in order.
export async function mapLimit(items, limit, fn) {
  const out = new Array(items.length);
  let next = 0;
  const worker = async () => {
    while (next < items.length) {
      const i = next++;
      out[i] = await fn(items[i], i);
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
  return out;
}

// Run counts per state, from the Prometheus exposition (one cheap request for the whole store).
export async function runCounts(signal) {
  const text = await api("/metrics", { signal });
  const counts = {};
  for (const m of String(text).matchAll(/^drover_runs\{state="(\w+)"\}\s+([0-9.eE+-]+)/gm)) {
    counts[m[1]] = Number(m[2]);
  }
  return counts;
}
