// #/experiments : every experiment, newest first, with its runs per state.
import { h, fmtTime, fmtNum, STATES, refresher, notice, isAbort } from "./util.js";
import { api, mapLimit } from "./api.js";
import { events } from "./events.js";

const LIMIT = 200;

export function stateBar(counts, total) {
  const n = total || STATES.reduce((s, k) => s + (counts?.[k] || 0), 0);
  const bar = h("div", { class: "state-bar", title: STATES.filter((k) => counts?.[k]).map((k) => `${counts[k]} ${k}`).join(", ") });
  if (!n) return bar;
  for (const k of STATES) {
    const c = counts?.[k] || 0;
    if (c) bar.append(h("span", { class: `seg state-${k}`, style: { flexGrow: String(c) } }));
  }
  return bar;
}

export function countsText(counts) {
  return STATES.filter((k) => counts?.[k]).map((k) => h("span", { class: `count state-text-${k}` }, `${fmtNum(counts[k])} ${k}`));
}

export async function mount(root, { scope }) {
  const signal = scope.signal;
  const filter = h("input", { type: "search", class: "input", placeholder: "Filter by name, id or user", "aria-label": "filter experiments" });
  // Whose experiments: everyone's, or one submitter's (a shared daemon records each one).
  const userFilter = h("select", { class: "input", id: "experiments-user", "aria-label": "only this user's experiments" }, h("option", { value: "" }, "all users"));
  const body = h("tbody");
  const info = h("span", { class: "muted" });
  root.append(
    h("div", { class: "page-head" }, h("h1", null, "Experiments"), h("div", { class: "toolbar" }, userFilter, filter, h("a", { href: "#/new", class: "btn btn-primary" }, "New experiment"))),
    h("section", { class: "panel" },
      h("table", { class: "table", id: "experiments-table" },
        h("thead", null, h("tr", null,
          h("th", { class: "num" }, "#"), h("th", null, "name"), h("th", null, "user"), h("th", null, "status"), h("th", { class: "w-bar" }, "runs"),
          h("th", null, ""), h("th", null, "objective"), h("th", null, "commit"), h("th", null, "created"))),
        body),
      h("div", { class: "panel-foot" }, info)));

  let list = [];
  const detail = new Map(); // id -> /experiments/{id} (counts)
  const rows = new Map();

  const row = (e) => {
    const d = detail.get(e.id);
    const obj = e.spec?.objective;
    return h("tr", { dataset: { id: String(e.id) } },
      h("td", { class: "num" }, e.id),
      h("td", null, h("a", { href: `#/experiments/${e.id}`, class: "strong" }, e.name)),
      h("td", { class: "user" }, e.user || h("span", { class: "muted" }, "—")),
      h("td", null, h("span", { class: `badge exp-${e.status}` }, e.status)),
      h("td", { class: "w-bar" }, d ? stateBar(d.counts, d.total_runs) : h("span", { class: "muted" }, "…")),
      h("td", { class: "counts" }, d ? [h("span", { class: "muted" }, `${fmtNum(d.total_runs)} run${d.total_runs === 1 ? "" : "s"} `), countsText(d.counts)] : null),
      h("td", null, obj && obj.metric ? `${obj.metric} (${obj.mode || "max"})` : h("span", { class: "muted" }, "—")),
      h("td", { class: "mono" }, e.git_commit ? e.git_commit.slice(0, 10) + (e.git_dirty ? "*" : "") : h("span", { class: "muted" }, "—")),
      h("td", { class: "muted" }, fmtTime(e.created_ms)));
  };

  const render = () => {
    const q = filter.value.trim().toLowerCase();
    const who = userFilter.value;
    const shown = list.filter((e) => (!who || e.user === who) &&
      (!q || e.name.toLowerCase().includes(q) || (e.user || "").toLowerCase() === q || String(e.id) === q.replace(/^#/, "")));
    body.replaceChildren();
    rows.clear();
    for (const e of shown) {
      const tr = row(e);
      rows.set(e.id, tr);
      body.append(tr);
    }
    if (!list.length) body.append(h("tr", null, h("td", { colspan: 9, class: "empty" }, "No experiments yet. ", h("a", { href: "#/new" }, "Start one"), ".")));
    info.textContent = `${shown.length} of ${list.length}${list.length >= LIMIT ? "+" : ""} experiments`;
  };

  const loadDetail = async (ids) => {
    await mapLimit(ids, 4, async (id) => {
      try {
        detail.set(id, await api(`/experiments/${id}`, { signal }));
      } catch (e) {
        if (isAbort(e)) throw e;
        return;
      }
      const e = list.find((x) => x.id === id);
      const old = rows.get(id);
      if (e && old) {
        const tr = row(e);
        old.replaceWith(tr);
        rows.set(id, tr);
      }
    });
  };

  const load = async () => {
    list = (await api(`/experiments?limit=${LIMIT}`, { signal })).experiments;
    const users = [...new Set(list.map((e) => e.user).filter(Boolean))].sort();
    const chosen = userFilter.value;
    userFilter.replaceChildren(h("option", { value: "" }, "all users"), ...users.map((u) => h("option", { value: u }, u)));
    userFilter.value = users.includes(chosen) ? chosen : "";
    // The listing carries each experiment's runs counted by state: no request per row.
    for (const e of list) detail.set(e.id, e);
    render();
  };

  filter.addEventListener("input", render);
  userFilter.addEventListener("change", render);
  const changed = new Set();
  const refreshChanged = refresher(() => {
    const ids = [...changed];
    changed.clear();
    loadDetail(ids).catch(() => {});
  }, 1500);
  scope.add(() => refreshChanged.cancel());
  scope.add(events.on("run_state", (d) => {
    if (d.experiment_id && detail.has(d.experiment_id)) {
      changed.add(d.experiment_id);
      refreshChanged();
    }
  }));
  scope.add(events.on("experiment_submitted", () => load().catch(() => {})));
  scope.add(events.on("gap", () => load().catch(() => {})));
  try {
    await load();
  } catch (e) {
    if (!isAbort(e)) root.append(notice("error", e.message));
  }
}
