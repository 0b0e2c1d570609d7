// #/compare?runs=1,2 : two or more runs side by side, from one experiment or several (an
// experiment added by id or name brings its runs): params (differences marked), final metrics
// (the best marked), and each metric's curves overlaid.
import { h, fill, fmtNum, fmtValue, fmtDuration, stateBadge, throttle, refresher, notice, isAbort, replaceQuery, toast } from "./util.js";
import { api, mapLimit } from "./api.js";
import { events } from "./events.js";
import { LineChart, latestAttemptSeries, seriesColor, curveView } from "./charts.js";

const CURVE_POINTS = 1000;
const MAX_FROM_EXPERIMENT = 50;

function metricMode(name, objective) {
  if (objective && objective.metric === name) return objective.mode || "max";
  if (/loss|err|perplexity|ppl/i.test(name)) return "min";
  if (/acc|f1|auc|precision|recall|score|bleu|iou/i.test(name)) return "max";
  return null;
}

export async function mount(root, { scope, query, setTitle }) {
  const signal = scope.signal;
  let ids = (query.get("runs") || "").split(",").map((s) => Number(s.trim())).filter((n) => Number.isInteger(n) && n > 0);
  ids = [...new Set(ids)];
  const addIn = h("input", { class: "input input-num", type: "number", min: "1", placeholder: "run id", "aria-label": "add a run by id", id: "compare-add" });
  const addBtn = h("button", { class: "btn", type: "button" }, "Add");
  const expIn = h("input", { class: "input", type: "text", placeholder: "experiment id or name", "aria-label": "add an experiment's runs", id: "compare-add-experiment" });
  const expBtn = h("button", { class: "btn", type: "button", id: "compare-add-experiment-btn" }, "Add experiment");
  const chips = h("div", { class: "param-chips" });
  const summaryEl = h("div", { class: "table-wrap" });
  const paramsEl = h("div", { class: "table-wrap" });
  const metricsEl = h("div", { class: "table-wrap" });
  const chartsEl = h("div", { class: "chart-grid", id: "compare-charts" });
  const curves = curveView(query);
  root.append(
    h("div", { class: "page-head" }, h("div", null, h("h1", null, "Compare runs"), chips), h("div", { class: "toolbar" }, addIn, addBtn, expIn, expBtn)),
    h("div", { class: "two-col" },
      h("section", { class: "panel" }, h("div", { class: "panel-head" }, h("h2", null, "Params"), h("span", { class: "muted small" }, "differences highlighted")), paramsEl),
      h("section", { class: "panel" }, h("div", { class: "panel-head" }, h("h2", null, "Final metrics"), h("span", { class: "muted small" }, "best marked")), metricsEl)),
    h("section", { class: "panel" }, h("div", { class: "panel-head" }, h("h2", null, "Runs")), summaryEl),
    h("section", { class: "panel" }, h("div", { class: "panel-head" }, h("h2", null, "Curves")), curves.el, chartsEl));

  const runs = new Map(); // id -> run detail
  const objectives = new Map(); // experiment id -> objective
  const charts = new Map(); // metric -> LineChart
  const shownAttempt = new Map(); // run id -> attempt id shown
  let loaded = false;

  const setIds = (next) => {
    ids = [...new Set(next)];
    replaceQuery({ runs: ids.join(",") });
    load().catch(report);
  };
  const add = () => {
    const n = Number(addIn.value);
    if (!Number.isInteger(n) || n < 1) return toast("A run id is a positive whole number", "error");
    addIn.value = "";
    setIds([...ids, n]);
  };
  addBtn.addEventListener("click", add);
  // Every run of an experiment (its first MAX_FROM_EXPERIMENT), beside those already compared.
  const addExperiment = async () => {
    const which = expIn.value.trim();
    if (!which) return toast("Type an experiment's id or name", "error");
    expIn.value = ""; // taken now: the next one may be typed while this one loads
    try {
      const r = await api(`/runs?experiment=${encodeURIComponent(which)}&limit=${MAX_FROM_EXPERIMENT}`, { signal });
      if (!r.runs.length) return toast(`Experiment ${which} has no runs`, "error");
      setIds([...ids, ...r.runs.map((x) => x.id)]);
    } catch (e) {
      if (isAbort(e)) return;
      expIn.value = which;
      toast(e.message, "error");
    }
  };
  expBtn.addEventListener("click", addExperiment);
  expIn.addEventListener("keydown", (e) => e.key === "Enter" && addExperiment());
  addIn.addEventListener("keydown", (e) => e.key === "Enter" && add());

  // A run's name in legends: its id and the params that differ between the runs compared (the
  // experiment's name when none do).
  const label = (id) => {
    const r = runs.get(id);
    if (!r) return `#${id}`;
    const have = ids.filter((x) => runs.has(x));
    const names = [...new Set(have.flatMap((x) => Object.keys(runs.get(x).params || {})))];
    const differ = names.filter((p) => new Set(have.map((x) => fmtValue(runs.get(x).params?.[p]))).size > 1);
    const sameExp = new Set(have.map((x) => runs.get(x).experiment.id)).size === 1;
    const bits = differ.slice(0, 3).map((p) => `${p}=${fmtValue(r.params?.[p])}`);
    return `#${id} ${bits.length ? bits.join(" ") : r.experiment.name}${!sameExp && bits.length ? ` (${r.experiment.name})` : ""}`;
  };

  const renderTables = () => {
    setTitle(`Compare ${ids.map((i) => `#${i}`).join(", ")}`);
    fill(chips, ids.map((id, i) => h("span", { class: "chip" },
      h("span", { class: "swatch", style: { background: seriesColor(i) } }),
      h("a", { href: `#/runs/${id}` }, label(id)),
      h("button", { type: "button", class: "chip-x", "aria-label": `remove run ${id}`, onclick: () => setIds(ids.filter((x) => x !== id)) }, "×"))));
    const have = ids.filter((id) => runs.has(id));
    if (have.length < 2) {
      const msg = ids.length < 2 ? "Add two or more runs to compare (tick them in an experiment's table, or type an id above)." : "Fewer than two of these runs could be read.";
      fill(paramsEl, h("p", { class: "empty" }, msg));
      fill(metricsEl);
      fill(summaryEl);
      return;
    }
    const headRow = h("tr", null, h("th", null, ""), have.map((id) => h("th", { class: "num" }, h("a", { href: `#/runs/${id}` }, `#${id}`))));
    // params
    const pnames = [...new Set(have.flatMap((id) => Object.keys(runs.get(id).params || {})))];
    fill(paramsEl, h("table", { class: "table compare-table", id: "compare-params" }, h("thead", null, headRow.cloneNode(true)),
      h("tbody", null, pnames.map((p) => {
        const vals = have.map((id) => fmtValue(runs.get(id).params?.[p]));
        const differs = new Set(vals).size > 1;
        return h("tr", { class: differs ? "differs" : "" }, h("th", { scope: "row" }, p), vals.map((v) => h("td", { class: `num ${differs ? "diff" : ""}` }, v)));
      }))));
    // metrics
    const mnames = [...new Set(have.flatMap((id) => Object.keys(runs.get(id).metrics || {})))].sort();
    fill(metricsEl, mnames.length ? h("table", { class: "table compare-table", id: "compare-metrics" }, h("thead", null, headRow.cloneNode(true)),
      h("tbody", null, mnames.map((m) => {
        const vals = have.map((id) => runs.get(id).metrics?.[m]);
        const mode = metricMode(m, objectives.get(runs.get(have[0]).experiment.id));
        const nums = vals.filter((v) => typeof v === "number" && Number.isFinite(v));
        const best = mode && nums.length > 1 ? (mode === "max" ? Math.max(...nums) : Math.min(...nums)) : null;
        return h("tr", null, h("th", { scope: "row" }, m, mode ? h("span", { class: "muted small" }, ` ${mode}`) : null),
          vals.map((v) => h("td", { class: `num ${best !== null && v === best ? "best-cell" : ""}` }, v === best && best !== null ? "★ " : "", fmtNum(v))));
      }))) : h("p", { class: "empty" }, "No metrics reported yet."));
    // summary
    const rowOf = (name, f) => h("tr", null, h("th", { scope: "row" }, name), have.map((id) => h("td", { class: "num" }, f(runs.get(id)))));
    fill(summaryEl, h("table", { class: "table compare-table", id: "compare-summary" }, h("thead", null, headRow.cloneNode(true)),
      h("tbody", null,
        rowOf("experiment", (r) => h("a", { href: `#/experiments/${r.experiment.id}` }, r.experiment.name)),
        rowOf("state", (r) => stateBadge(r.state)),
        rowOf("reason", (r) => r.reason || "—"),
        rowOf("attempts", (r) => String(r.attempts)),
        rowOf("duration", (r) => (r.started_ms ? fmtDuration((r.ended_ms || Date.now()) - r.started_ms) : "—")),
        rowOf("commit", (r) => h("span", { class: "mono" }, (r.snapshot?.git_commit || "—").slice(0, 10))))));
  };

  const chartFor = (name) => {
    if (!charts.has(name)) {
      const c = new LineChart(chartsEl, { title: name, height: 220, sync: "compare" });
      c.root.dataset.metric = name;
      curves.follow(c);
      charts.set(name, c);
      const sorted = [...charts.keys()].sort();
      for (const m of sorted) chartsEl.append(charts.get(m).root);
    }
    return charts.get(name);
  };
  scope.add(() => {
    for (const c of charts.values()) c.destroy();
  });

  const loadCurves = async () => {
    const series = await mapLimit(ids, 4, async (id) => {
      try {
        return { id, r: await api(`/runs/${id}/metrics?points=${CURVE_POINTS}`, { signal }) };
      } catch (e) {
        if (isAbort(e)) throw e;
        return { id, r: { series: [] } };
      }
    });
    const names = new Set();
    for (const { r } of series) for (const s of r.series) names.add(s.name);
    for (const [name, c] of charts) {
      if (!names.has(name)) {
        c.destroy();
        charts.delete(name);
      }
    }
    for (const name of [...names].sort()) {
      const list = series.map(({ id, r }, i) => {
        const s = latestAttemptSeries(r.series.find((x) => x.name === name)?.points || []);
        shownAttempt.set(id, s.attemptId);
        return { key: String(id), label: label(id), xs: s.xs, ys: s.ys, color: i };
      });
      chartFor(name).set(list);
    }
    if (!names.size) fill(chartsEl, h("p", { class: "empty" }, "No curves yet."));
    loaded = true;
  };
  const refreshCurves = throttle(() => loadCurves().catch(report), 2000);
  scope.add(() => refreshCurves.cancel());

  const load = async () => {
    loaded = false;
    await mapLimit(ids, 4, async (id) => {
      try {
        runs.set(id, await api(`/runs/${id}`, { signal }));
      } catch (e) {
        if (isAbort(e)) throw e;
        toast(`Run #${id}: ${e.message}`, "error");
      }
    });
    for (const id of ids) {
      const r = runs.get(id);
      if (r && !objectives.has(r.experiment.id)) {
        try {
          const e = await api(`/experiments/${r.experiment.id}`, { signal });
          objectives.set(r.experiment.id, e.spec?.objective || null);
        } catch (e) {
          if (isAbort(e)) throw e;
        }
      }
    }
    renderTables();
    if (ids.length) await loadCurves();
    else chartsEl.replaceChildren();
  };

  const refreshRuns = refresher(() => {
    mapLimit(ids, 4, async (id) => runs.set(id, await api(`/runs/${id}`, { signal })))
      .then(renderTables)
      .catch(report);
  }, 1000);
  scope.add(() => refreshRuns.cancel());
  scope.add(events.on("run_state", (d) => {
    if (ids.includes(d.run_id)) {
      refreshRuns();
      if (d.state === "running") refreshCurves();
    }
  }));
  scope.add(events.on("metrics", (d) => {
    if (!loaded || !ids.includes(d.run_id)) return;
    if (d.downsampled_from) return refreshCurves();
    let att = shownAttempt.get(d.run_id);
    for (const p of d.points) {
      if (att === null || att === undefined) {
        att = p.attempt_id;
        shownAttempt.set(d.run_id, att);
      }
      if (p.attempt_id !== att) {
        refreshCurves();
        return;
      }
      const c = charts.get(p.name);
      if (!c) {
        refreshCurves();
        return;
      }
      c.append(String(d.run_id), [p.step], [typeof p.value === "number" ? p.value : null]);
    }
    refreshRuns();
  }));
  scope.add(events.on("gap", () => {
    refreshRuns();
    refreshCurves();
  }));

  function report(e) {
    if (!isAbort(e) && scope.alive) toast(e.message, "error");
  }

  if (!ids.length) {
    renderTables();
    return;
  }
  try {
    await load();
  } catch (e) {
    if (!isAbort(e)) root.append(notice("error", e.message));
  }
}
