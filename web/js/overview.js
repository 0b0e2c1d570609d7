// #/ : the GPUs with live telemetry sparklines and the runs on each, run counts, running runs,
// recent alerts and experiments.
import { h, fill, fmtBytes, fmtNum, fmtDuration, fmtAgo, fmtTime, paramsText, stateBadge, refresher, notice, isAbort } from "./util.js";
import { api, runCounts } from "./api.js";
import { events } from "./events.js";
import { Sparkline } from "./charts.js";

export async function mount(root, { scope }) {
  const countsEl = h("div", { class: "stat-row" });
  const gpuGrid = h("div", { class: "gpu-grid", id: "gpu-grid" });
  const runningEl = h("div", { class: "panel-body" });
  // Whose running runs (a shared daemon's users: docs/lab-server.md).
  const runningUser = h("select", { class: "input input-small", id: "running-user", "aria-label": "only this user's running runs" }, h("option", { value: "" }, "all users"));
  let lastRunning = [];
  const alertsEl = h("div", { class: "panel-body", id: "recent-alerts" });
  const expsEl = h("div", { class: "panel-body" });
  root.append(
    h("div", { class: "page-head" }, h("h1", null, "Overview"), countsEl),
    h("section", { class: "section" }, h("h2", null, "GPUs"), gpuGrid),
    h("div", { class: "two-col" },
      h("section", { class: "panel" }, h("div", { class: "panel-head" }, h("h2", null, "Running"), runningUser), runningEl),
      h("section", { class: "panel" }, h("div", { class: "panel-head" }, h("h2", null, "Recent alerts")), alertsEl)),
    h("section", { class: "panel" },
      h("div", { class: "panel-head" }, h("h2", null, "Recent experiments"), h("a", { href: "#/experiments", class: "btn btn-small" }, "All experiments")),
      expsEl),
  );

  const signal = scope.signal;
  const runInfo = new Map(); // run id -> run (running ones), for the GPU cards
  const expNames = new Map();
  const cards = new Map(); // gpu index -> card
  let lastGpus = [];

  // ---- counts
  let lastCounts = null;
  const renderCounts = () => {
    const c = lastCounts;
    if (!c) return;
    const stat = (label, n, cls) => h("div", { class: `stat ${cls || ""}`, dataset: { stat: label } }, h("div", { class: "stat-n" }, fmtNum(n ?? 0)), h("div", { class: "stat-label" }, label));
    fill(countsEl,
      stat("running", c.running, "state-running"),
      stat("queued", c.queued, "state-queued"),
      stat("retrying", c.retrying, "state-retrying"),
      stat("succeeded", c.succeeded, "state-succeeded"),
      stat("failed", c.failed, "state-failed"),
      stat("GPUs", lastGpus.length, ""));
  };

  // ---- experiments (names for the run lists) and the recent ones
  const loadExperiments = async () => {
    const r = await api("/experiments?limit=100", { signal });
    for (const e of r.experiments) expNames.set(e.id, e.name);
    const recent = r.experiments.slice(0, 6);
    if (!recent.length) {
      fill(expsEl, h("p", { class: "empty" }, "No experiments yet. ", h("a", { href: "#/new" }, "Start one"), "."));
      return;
    }
    fill(expsEl, h("table", { class: "table" },
      h("thead", null, h("tr", null, h("th", { class: "num" }, "#"), h("th", null, "name"), h("th", null, "status"), h("th", null, "created"))),
      h("tbody", null, recent.map((e) => h("tr", null,
        h("td", { class: "num" }, e.id),
        h("td", null, h("a", { href: `#/experiments/${e.id}` }, e.name)),
        h("td", null, h("span", { class: `badge exp-${e.status}` }, e.status)),
        h("td", { class: "muted" }, fmtTime(e.created_ms)))))));
  };

  // ---- the counts, the running runs and the runs on each GPU card: read together and drawn
  // together, so the counters never say "0 running" beside a Running panel or a GPU card that
  // still shows runs (they once came from three reads at three moments).
  const loadRunning = async () => {
    let c, running, retrying;
    try {
      [c, running, retrying] = await Promise.all([
        runCounts(signal),
        api("/runs?state=running&limit=1000", { signal }),
        api("/runs?state=retrying&limit=1000", { signal }),
      ]);
    } catch (e) {
      if (!isAbort(e)) fill(countsEl, h("span", { class: "muted" }, "counts unavailable"));
      throw e;
    }
    const runs = [...running.runs, ...retrying.runs];
    if (runs.some((r) => !expNames.has(r.experiment_id))) await loadExperiments().catch(() => {});
    runInfo.clear();
    for (const r of runs) runInfo.set(r.id, r);
    lastRunning = runs;
    lastCounts = c;
    renderCounts();
    renderRunning();
    renderGpuRuns();
  };
  const renderRunning = () => {
    const all = lastRunning;
    const users = [...new Set(all.map((r) => r.user).filter(Boolean))].sort();
    const chosen = runningUser.value;
    runningUser.replaceChildren(h("option", { value: "" }, "all users"), ...users.map((u) => h("option", { value: u }, u)));
    runningUser.value = users.includes(chosen) ? chosen : "";
    runningUser.hidden = users.length < 2 && !runningUser.value;
    const runs = all.filter((r) => !runningUser.value || r.user === runningUser.value);
    if (!runs.length) fill(runningEl, h("p", { class: "empty" }, all.length ? "None of this user's runs is running." : "Nothing is running."));
    else
      fill(runningEl, h("table", { class: "table" },
        h("thead", null, h("tr", null, h("th", { class: "num" }, "run"), h("th", null, "experiment"), h("th", null, "user"), h("th", null, "params"), h("th", null, "state"), h("th", { class: "num" }, "running for"))),
        h("tbody", null, runs.map((r) => h("tr", null,
          h("td", { class: "num" }, h("a", { href: `#/runs/${r.id}` }, `#${r.id}`)),
          h("td", null, h("a", { href: `#/experiments/${r.experiment_id}` }, expNames.get(r.experiment_id) || `#${r.experiment_id}`)),
          h("td", { class: "user" }, r.user || h("span", { class: "muted" }, "—")),
          h("td", { class: "params-cell", title: paramsText(r.params) }, paramsText(r.current_params || r.params)),
          h("td", null, stateBadge(r.state)),
          h("td", { class: "num" }, r.started_ms ? fmtDuration(Date.now() - r.started_ms) : "—"))))));
  };
  runningUser.addEventListener("change", renderRunning);

  // ---- GPUs
  const gpuCard = (g) => {
    const util = new Sparkline({ label: "Utilisation", unit: "%", min: 0, max: 100 });
    const mem = new Sparkline({ label: "Memory", min: 0, max: g.memory_total || null, format: (v) => fmtBytes(v) });
    const temp = new Sparkline({ label: "Temperature", unit: " °C", min: null, max: null });
    const title = h("div", { class: "gpu-title" });
    const reservedBar = h("div", { class: "bar-fill" });
    const reservedText = h("div", { class: "bar-text" });
    const runsEl = h("div", { class: "gpu-runs" });
    const extra = h("div", { class: "gpu-extra muted" });
    const root = h("article", { class: "panel gpu-card", dataset: { gpu: String(g.index) } },
      title,
      h("div", { class: "bar", title: "GPU memory reserved by drover's runs" }, reservedBar),
      reservedText,
      h("div", { class: "sparks" }, util.root, mem.root, temp.root),
      extra,
      runsEl);
    return { root, util, mem, temp, title, reservedBar, reservedText, runsEl, extra };
  };

  const renderGpuRuns = () => {
    for (const g of lastGpus) {
      const card = cards.get(g.index);
      if (!card) continue;
      // The GPU reading's runs that the last read of the running runs holds: a run that has
      // ended since the reading is not shown on its GPU (a new one is read at once: showGpus).
      const ids = (g.runs || []).filter((id) => runInfo.has(id));
      card.root.dataset.runs = ids.join(",");
      if (!ids.length) {
        fill(card.runsEl, h("span", { class: "muted" }, "No runs on this GPU"));
        continue;
      }
      fill(card.runsEl, ids.map((id) => {
        const r = runInfo.get(id);
        return h("a", { class: "gpu-run", href: `#/runs/${id}`, title: r ? paramsText(r.current_params || r.params) : "" },
          h("span", { class: "gpu-run-id" }, `#${id}`),
          r ? h("span", { class: "gpu-run-exp" }, expNames.get(r.experiment_id) || `exp #${r.experiment_id}`) : null,
          r ? h("span", { class: "gpu-run-params" }, paramsText(r.current_params || r.params)) : null);
      }));
    }
  };

  const showGpus = (gpus, t, push = true) => {
    const indexes = gpus.map((g) => g.index).join(",");
    if (indexes !== [...cards.keys()].join(",")) {
      for (const c of cards.values()) [c.util, c.mem, c.temp].forEach((s) => s.destroy());
      cards.clear();
      gpuGrid.replaceChildren();
      if (!gpus.length) gpuGrid.append(h("p", { class: "empty" }, "The daemon has no GPUs."));
      for (const g of gpus) {
        const c = gpuCard(g);
        cards.set(g.index, c);
        gpuGrid.append(c.root);
      }
    }
    const unknownRun = gpus.some((g) => (g.runs || []).some((id) => !runInfo.has(id)));
    lastGpus = gpus;
    for (const g of gpus) {
      const c = cards.get(g.index);
      const tel = g.telemetry;
      fill(c.title, h("span", { class: "gpu-index" }, `GPU ${g.index}`), h("span", { class: "gpu-name" }, g.name || ""),
        g.exclusive ? h("span", { class: "badge" }, "exclusive") : null);
      const pct = g.memory_total ? Math.min(100, (100 * g.memory_reserved) / g.memory_total) : 0;
      c.reservedBar.style.width = `${pct}%`;
      // What drover hands out is the device's memory less what it keeps (scheduler.gpu_reserve,
      // and what was in use when it started): a 16 GiB GPU offers 15 GiB, and says why.
      const kept = g.memory_device > g.memory_total ? g.memory_device - g.memory_total : 0;
      c.reservedText.textContent = `${fmtBytes(g.memory_reserved)} of ${fmtBytes(g.memory_total)} reserved by drover` +
        (kept ? ` (${fmtBytes(kept)} of its ${fmtBytes(g.memory_device)} kept for the driver)` : "");
      c.reservedText.title = kept ? "scheduler.gpu_reserve (1 GiB by default) and memory in use when the daemon started are never handed out" : "";
      if (tel) {
        const tm = tel.t_ms || t || Date.now();
        if (push) {
          c.util.push(tm, tel.utilization);
          c.mem.push(tm, tel.memory_used);
          c.temp.push(tm, tel.temperature_c);
        }
        const bits = [];
        if (tel.power_w !== null && tel.power_w !== undefined) bits.push(`${fmtNum(Math.round(tel.power_w))} W`);
        if (tel.processes && tel.processes.length) bits.push(`${tel.processes.length} process${tel.processes.length > 1 ? "es" : ""}`);
        bits.push(`read ${fmtAgo(tm)}`);
        c.extra.textContent = bits.join(" · ");
      } else {
        c.extra.textContent = "no telemetry yet";
      }
    }
    renderGpuRuns();
    if (unknownRun) refreshRunning();
  };

  const loadGpus = async () => {
    const [now, samples] = await Promise.all([
      api("/gpus", { signal }),
      api(`/gpus/samples?since_ms=${Date.now() - 3 * 3600 * 1000}&limit=10000`, { signal }).catch((e) => {
        if (isAbort(e)) throw e;
        return { samples: [] };
      }),
    ]);
    showGpus(now.gpus, Date.now(), false);
    for (const s of samples.samples) {
      const c = cards.get(s.gpu);
      if (!c) continue;
      c.util.push(s.t_ms, s.utilization);
      c.mem.push(s.t_ms, s.memory_used);
      c.temp.push(s.t_ms, s.temperature_c);
    }
    // The samples are older than the live reading: put the live one back at the end.
    showGpus(now.gpus, Date.now());
  };

  // ---- alerts
  let alerts = [];
  const renderAlerts = () => {
    if (!alerts.length) {
      fill(alertsEl, h("p", { class: "empty" }, "No alerts."));
      return;
    }
    fill(alertsEl, h("ul", { class: "alert-list" }, alerts.slice(0, 10).map(alertItem)));
  };
  const loadAlerts = async () => {
    alerts = mergeAlerts((await api("/alerts?limit=10", { signal })).alerts, alerts).slice(0, 10);
    renderAlerts();
  };

  const refreshRunning = refresher(() => loadRunning().catch(ignoreAbort), 1500);
  scope.add(() => refreshRunning.cancel());

  scope.add(events.on("gpu", (d) => showGpus(d.gpus, d.t_ms)));
  scope.add(events.on("run_state", () => refreshRunning()));
  scope.add(events.on("experiment_submitted", (d) => {
    expNames.set(d.experiment_id, d.name);
    refreshRunning();
    loadExperiments().catch(ignoreAbort);
  }));
  scope.add(events.on("alert", (a) => {
    alerts = mergeAlerts([a], alerts).slice(0, 10);
    renderAlerts();
  }));
  scope.add(events.on("gap", () => {
    loadAll();
  }));
  scope.interval(() => {
    for (const c of cards.values()) {
      if (c.extra.textContent.includes("read ")) c.extra.textContent = c.extra.textContent.replace(/read .*$/, `read ${fmtAgo(c.util.points.at(-1)?.[0] || c.mem.points.at(-1)?.[0] || 0)}`);
    }
  }, 5000);

  function loadAll() {
    return Promise.all([
      loadExperiments().then(() => loadRunning()),
      loadGpus(),
      loadAlerts(),
    ]).catch((e) => {
      if (!isAbort(e)) root.append(notice("error", e.message));
    });
  }
  await loadAll();
  renderCounts(); // GPU count known now
}

// A refresh that failed (the daemon restarting, the page being left) is retried by the next
// event; the page keeps what it shows.
function ignoreAbort() {}

// The union of two alert lists by id, newest first; where both hold an alert, `fresh` wins. A page
// reads its alerts once and then follows the event stream: an alert raised while that read was in
// flight can arrive on the stream before the read's answer, which does not hold it yet.
export function mergeAlerts(fresh, known) {
  const byId = new Map();
  for (const a of known) byId.set(a.id, a);
  for (const a of fresh) byId.set(a.id, a);
  return [...byId.values()].sort((x, y) => y.id - x.id);
}

export function alertItem(a) {
  return h("li", { class: `alert-item sev-${a.severity}`, dataset: { kind: a.kind, id: String(a.id) } },
    h("div", { class: "alert-head" },
      h("span", { class: `badge sev-${a.severity}` }, a.kind),
      a.run_id ? h("a", { href: `#/runs/${a.run_id}` }, `run #${a.run_id}`) : null,
      a.gpu !== null && a.gpu !== undefined && a.gpu >= 0 ? h("span", { class: "muted" }, `GPU ${a.gpu}`) : null,
      h("span", { class: "muted alert-time", title: `first ${fmtTime(a.first_ms)}, last ${fmtTime(a.last_ms)}` },
        fmtAgo(a.last_ms || a.first_ms), a.count > 1 ? ` · ×${a.count}` : "")),
    h("div", { class: "alert-msg" }, a.message));
}
