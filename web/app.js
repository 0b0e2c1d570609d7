// drover's web UI: one page, hash routes (docs/web.md). Each page module exports
// mount(root, ctx) and ties everything it starts to ctx.scope, which ends when the route changes.
import { h, fill, parseHash, Scope, notice, isAbort, uPlotReady } from "./js/util.js";
import { events } from "./js/events.js";
import { signOut } from "./js/api.js";

// Each page's module is loaded when it is first shown, so the first page waits only for its own.
const routes = [
  { re: /^\/$/, load: () => import("./js/overview.js"), nav: "overview", title: "Overview" },
  { re: /^\/experiments\/?$/, load: () => import("./js/experiments.js"), nav: "experiments", title: "Experiments" },
  { re: /^\/experiments\/([^/]+)$/, load: () => import("./js/experiment.js"), nav: "experiments", title: "Experiment" },
  { re: /^\/runs\/(\d+)$/, load: () => import("./js/run.js"), nav: "experiments", title: "Run" },
  { re: /^\/new$/, load: () => import("./js/new.js"), nav: "new", title: "New experiment" },
  { re: /^\/compare$/, load: () => import("./js/compare.js"), nav: "experiments", title: "Compare", keepQuery: true },
];

const main = document.getElementById("main");
let current = null; // {scope, key}

function renderShell() {
  const dot = h("span", { class: "live-dot", id: "live-dot", title: "connecting to the event stream" });
  const liveLabel = h("span", { class: "live-label" }, "connecting");
  const setLive = ({ state }) => {
    dot.className = `live-dot live-${state}`;
    liveLabel.textContent = state === "live" ? "live" : state;
    dot.title = state === "live" ? "receiving live updates" : `event stream: ${state}`;
  };
  events.on("connection", setLive);
  const nav = (href, key, text) => h("a", { href, class: "nav-link", dataset: { nav: key } }, text);
  const header = h("header", { class: "topbar" },
    h("a", { href: "#/", class: "brand", "aria-label": "drover overview" },
      h("span", { class: "brand-mark", "aria-hidden": "true" }), "drover"),
    h("nav", { class: "nav", "aria-label": "main" },
      nav("#/", "overview", "Overview"),
      nav("#/experiments", "experiments", "Experiments"),
      nav("#/new", "new", "New experiment")),
    h("div", { class: "topbar-right" },
      h("span", { class: "live" }, dot, liveLabel),
      h("button", { class: "btn btn-ghost btn-small", type: "button", onclick: () => signOut() }, "Sign out")));
  document.body.prepend(header);
}

function route() {
  const { path, query } = parseHash();
  let match = null;
  let r = null;
  for (const candidate of routes) {
    match = path.match(candidate.re);
    if (match) {
      r = candidate;
      break;
    }
  }
  // Same page, only the query changed by the page itself (sorting, filters): keep it.
  const key = `${path}?${r && r.keepQuery ? query.toString() : ""}`;
  if (current && current.key === key) return;
  if (current) current.scope.dispose();
  const scope = new Scope();
  current = { scope, key };
  for (const a of document.querySelectorAll(".nav-link")) a.classList.toggle("active", r && a.dataset.nav === r.nav);
  window.scrollTo(0, 0);
  const root = h("div", { class: "page" });
  fill(main, root);
  if (!r) {
    document.title = "Not found · drover";
    root.append(h("h1", null, "Not found"), notice("error", `No page at #${path}.`), h("p", null, h("a", { href: "#/" }, "Back to the overview")));
    return;
  }
  document.title = `${r.title} · drover`;
  const ctx = {
    scope,
    params: match.slice(1).map(safeDecode),
    query,
    setTitle: (t) => (document.title = `${t} · drover`),
  };
  r.load()
    .then((page) => (scope.alive ? page.mount(root, ctx) : null))
    .catch((e) => {
      if (isAbort(e) || !scope.alive) return;
      root.append(notice("error", `This page failed to load: ${e.message}`));
    });
}

function safeDecode(s) {
  try {
    return decodeURIComponent(s);
  } catch {
    return s;
  }
}

function start() {
  const after = sessionStorage.getItem("drover.after-login");
  if (after) {
    sessionStorage.removeItem("drover.after-login");
    if (!location.hash || location.hash === "#/") history.replaceState(null, "", after);
  }
  renderShell();
  events.start();
  window.addEventListener("hashchange", route);
  route();
  // uPlot was preloaded by index.html: run it once the first page is on its way, so that
  // charts find it ready (and the preload is used whichever page comes first).
  setTimeout(() => uPlotReady().catch(() => {}), 0);
}

start();
