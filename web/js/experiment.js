// #/experiments/ID : the runs table (sorted, filtered and paged on the server, so 10,000 runs cost
// one page of rows), the selected runs' curves for one metric (live), and params against the
// objective with the best run marked.
import { h, fill, fmtNum, fmtValue, fmtDuration, fmtTime, stateBadge, STATES, ENDED, refresher, debounce, replaceQuery, notice, isAbort, confirmButton, toast } from "./util.js";
import { api, post, mapLimit } from "./api.js";
import { events } from "./events.js";
import { LineChart, ScatterPlot, latestAttemptSeries, meanBand, curveView } from "./charts.js";
import { countsText } from "./experiments.js";
import { PipelineGraph } from "./pipeline.js";

const MAX_OVERLAY = 20;
const CURVE_POINTS = 1000;

export async function mount(root, { scope, params, query, setTitle }) {
  const signal = scope.signal;
  const idOrName = params[0];
  const st = {
    // "best" is what the score column was called before: links saved then still sort by it.
    // "" : the server's order (a pipeline's runs by stage, others by id).
    sort: query.get("sort") === "best" ? "score" : query.get("sort") || "",
    order: query.get("order") || "asc",
    q: query.get("q") || "",
    state: query.get("state") || "",
    stage: query.get("stage") || "",
    offset: Math.max(0, Number(query.get("offset")) || 0),
    limit: [25, 50, 100, 200].includes(Number(query.get("limit"))) ? Number(query.get("limit")) : 50,
    metric: query.get("metric") || "",
    x: query.get("x") || "",
    allParams: query.get("params") === "all",
    grouped: query.get("groups") === "1",
  };
  const selected = new Set((query.get("sel") || "").split(",").map(Number).filter((n) => n > 0));
  let autoSelect = selected.size === 0;
  let metricAuto = !st.metric;
  let table = null; // the last /table answer
  let exp = null;
  let firstPaint = true;

  // ---- layout
  const title = h("h1", null, idOrName);
  const headBadges = h("div", { class: "head-badges" });
  const headActions = h("div", { class: "toolbar" });
  const meta = h("div", { class: "meta-line muted" });
  const filterBox = h("input", { type: "search", class: "input", id: "runs-filter", placeholder: "Filter: cnn failed batch_size=32 …", value: st.q, "aria-label": "filter runs" });
  const stateSel = h("select", { class: "input", "aria-label": "state" }, h("option", { value: "" }, "all states"), STATES.map((s) => h("option", { value: s, selected: s === st.state }, s)));
  const stageSel = h("select", { class: "input", id: "stage-filter", "aria-label": "stage", hidden: true });
  const pipelineBox = h("section", { class: "panel", id: "pipeline-panel", hidden: true });
  const pipelineGraph = h("div", { class: "pipeline-wrap" });
  pipelineBox.append(h("div", { class: "panel-head" }, h("h2", null, "Pipeline"), h("span", { class: "muted small" }, "each stage with its runs; click one to list only its runs")), pipelineGraph);
  const sizeSel = h("select", { class: "input", "aria-label": "rows per page" }, [25, 50, 100, 200].map((n) => h("option", { value: String(n), selected: n === st.limit }, `${n} / page`)));
  const thead = h("thead");
  const tbody = h("tbody");
  const tableEl = h("table", { class: "table runs-table", id: "runs-table" }, thead, tbody);
  const pager = h("div", { class: "pager" });
  const selInfo = h("div", { class: "sel-info" });
  const metricSel = h("select", { class: "input", id: "curve-metric", "aria-label": "metric" });
  const curveNote = h("span", { class: "muted" });
  const chartBox = h("div", { class: "chart-box" });
  const view = curveView(query);
  const groupBox = h("input", { type: "checkbox", id: "curve-groups", checked: st.grouped });
  const groupLabel = h("label", { class: "check-label", hidden: true, title: "one curve per config: the mean over its seeds, shaded ± one standard deviation" }, groupBox, " seeds as bands");
  view.el.append(groupLabel);
  const groupsBox = h("div", { id: "seed-groups" });
  const searchBox = h("div", { id: "search-panel" });
  const xSel = h("select", { class: "input", id: "scatter-param", "aria-label": "parameter" });
  const scatterNote = h("span", { class: "muted" });
  const scatterBox = h("div", { class: "scatter-box" });
  const specBox = h("div");

  root.append(
    h("div", { class: "page-head" },
      h("div", null, h("div", { class: "crumbs" }, h("a", { href: "#/experiments" }, "Experiments"), " / "), h("div", { class: "title-row" }, title, headBadges), meta),
      headActions),
    pipelineBox,
    h("section", { class: "panel" },
      h("div", { class: "panel-head" }, h("h2", null, "Runs"), h("div", { class: "toolbar" }, filterBox, stageSel, stateSel, sizeSel)),
      h("div", { class: "table-wrap" }, tableEl),
      h("div", { class: "panel-foot" }, selInfo, pager)),
    h("div", { class: "two-col wide-left" },
      h("section", { class: "panel" },
        h("div", { class: "panel-head" }, h("h2", null, "Curves of the selected runs"), h("div", { class: "toolbar" }, curveNote, metricSel)),
        view.el,
        chartBox),
      h("section", { class: "panel" },
        h("div", { class: "panel-head" }, h("h2", null, "Params against the objective"), h("div", { class: "toolbar" }, scatterNote, xSel)),
        scatterBox)),
    searchBox,
    groupsBox,
    specBox);

  const chart = new LineChart(chartBox, { height: 280, empty: "Select runs in the table to see their curves" });
  view.follow(chart);
  scope.add(() => chart.destroy());
  const graph = new PipelineGraph(pipelineGraph, { onPick: (stage) => pickStage(stage) });
  scope.add(() => graph.destroy());
  const scatter = new ScatterPlot(scatterBox, { height: 310, onPick: (id) => (location.hash = `#/runs/${id}`) });
  scope.add(() => scatter.destroy());

  const saveQuery = () =>
    replaceQuery({
      sort: st.sort || null,
      order: st.order === "asc" ? null : st.order,
      q: st.q,
      state: st.state,
      stage: st.stage,
      offset: st.offset || null,
      limit: st.limit === 50 ? null : st.limit,
      metric: metricAuto ? null : st.metric,
      x: st.x,
      params: st.allParams ? "all" : null,
      log: view.view.logY ? "1" : null,
      smooth: view.view.smoothing > 0 ? String(view.view.smoothing) : null,
      groups: st.grouped ? "1" : null,
      sel: autoSelect ? null : [...selected].join(","),
    });

  const tableUrl = (extra = {}) => {
    const p = new URLSearchParams({ order: st.order, offset: String(st.offset), limit: String(st.limit) });
    if (st.sort) p.set("sort", st.sort);
    if (st.q) p.set("q", st.q);
    if (st.stage) p.set("stage", st.stage);
    if (st.state) p.set("state", st.state);
    for (const [k, v] of Object.entries(extra)) p.set(k, v);
    return `/experiments/${encodeURIComponent(idOrName)}/table?${p}`;
  };

  // ---- header
  const renderHead = () => {
    const e = table.experiment;
    title.textContent = e.name;
    setTitle(e.name);
    fill(headBadges, h("span", { class: "muted" }, `#${e.id}`), h("span", { class: `badge exp-${e.status}` }, e.status));
    const obj = table.objective;
    fill(meta,
      h("span", null, `${fmtNum(table.total)} runs: `), countsText(table.counts),
      h("span", { title: obj?.note || "" }, ` · ranked by ${obj?.metric ? obj.describe : "nothing"}${obj?.note ? " (no objective in the spec)" : ""}`),
      table.best_run_id ? h("span", null, " · best ", h("a", { href: `#/runs/${table.best_run_id}` }, `#${table.best_run_id}`)) : null,
      h("span", null, ` · created ${fmtTime(e.created_ms)}`),
      exp && exp.git_commit ? h("span", { class: "mono" }, ` · ${exp.git_commit.slice(0, 10)}${exp.git_dirty ? "*" : ""}`) : null);
    const active = (table.counts.queued || 0) + (table.counts.running || 0) + (table.counts.retrying || 0);
    fill(headActions,
      h("a", { class: "btn", href: `#/compare?runs=${[...selected].join(",")}`, id: "compare-selected", "aria-disabled": selected.size < 2 ? "true" : null, onclick: (ev) => { if (selected.size < 2) { ev.preventDefault(); toast("Select two or more runs to compare"); } } }, `Compare selected (${selected.size})`),
      active
        ? confirmButton("Cancel experiment", `Cancel ${active} unfinished run${active > 1 ? "s" : ""}?`, async () => {
          try {
            await post(`/experiments/${e.id}/cancel`);
            toast("Cancelling the experiment's unfinished runs");
          } catch (err) {
            toast(err.message, "error");
          }
        }, { cls: "btn btn-danger" })
        : null,
      ...retryButtons(e, active));
  };

  // Failed and cancelled runs back to the queue as new attempts (drover retry): on the code
  // recorded at the submit, or on the workdir as it is now (after a fix). A pipeline is run again
  // instead (its changed stages rerun), so it gets the first only.
  const retryButtons = (e, active) => {
    const finished = (table.counts.failed || 0) + (table.counts.cancelled || 0);
    if (active || !finished) return [];
    const retry = (code) => async () => {
      try {
        const r = await post(`/experiments/${e.id}/retry`, { failed: true, cancelled: true, code });
        toast(`${r.run_ids.length} run${r.run_ids.length === 1 ? "" : "s"} queued again: ${r.code}`);
      } catch (err) {
        toast(err.message, "error");
      }
    };
    const what = `${finished} failed or cancelled run${finished > 1 ? "s" : ""}`;
    return [
      confirmButton("Retry", `Retry ${what} on the submitted code?`, retry("submitted"), {
        cls: "btn", title: "Run them again on the code recorded at the submit (their checkpoints kept)",
      }),
      table.pipeline ? null : confirmButton("Retry on current code", `Retry ${what} on the workdir as it is now?`, retry("current"), {
        cls: "btn", title: "Run them again on the workdir as it is now, e.g. after a fix (a new snapshot; their checkpoints kept)",
      }),
    ];
  };

  // ---- table
  const columns = () => {
    const obj = table.objective;
    // Parameters with one value in every run are hidden unless asked for (selInfo says which).
    const shownParams = table.params.filter((p) => st.allParams || !(p in (table.constant || {})));
    // A metric named like a shown parameter (a script that logs its own lr) is told apart.
    const metricLabel = (m) => (shownParams.includes(m) ? `${m} (metric)` : m);
    const cols = [
      { key: "id", label: "#", num: true },
      ...(table.pipeline ? [{ key: "stage", label: "stage" }] : []),
      { key: "state", label: "state" },
      ...shownParams.map((p) => ({ key: `param:${p}`, label: p, param: p })),
      ...table.metrics.map((m) => ({ key: `metric:${m}`, label: metricLabel(m), metric: m, num: true, title: `${m}: the last value reported` })),
    ];
    if (obj?.metric) cols.push({ key: "score", label: `${obj.metric} (${obj.summary})`, num: true, title: `the score each run is ranked by: its ${obj.describe}` });
    cols.push({ key: "duration", label: "duration", num: true }, { key: "attempts", label: "attempts", num: true });
    return cols;
  };

  const defaultOrder = (key) => {
    if (key === "score") return table.objective?.mode === "min" ? "asc" : "desc";
    return "asc";
  };

  // The order the table is in: the one asked for, else the server's (a pipeline's: by stage).
  const sortKey = () => st.sort || (table.pipeline ? "stage" : "id");

  const renderTable = () => {
    const cols = columns();
    const sorted = sortKey();
    const pageIds = table.rows.map((r) => r.id);
    const allChecked = pageIds.length > 0 && pageIds.every((id) => selected.has(id));
    const headBox = h("input", { type: "checkbox", "aria-label": "select every run on this page", checked: allChecked });
    headBox.addEventListener("change", () => {
      autoSelect = false;
      for (const id of pageIds) headBox.checked ? selected.add(id) : selected.delete(id);
      selectionChanged();
    });
    fill(thead, h("tr", null,
      h("th", { class: "check" }, headBox),
      cols.map((c) => {
        const active = sorted === c.key;
        return h("th", {
          class: `sortable ${c.num ? "num" : ""} ${active ? "sorted" : ""}`,
          "aria-sort": active ? (st.order === "asc" ? "ascending" : "descending") : "none",
          title: c.title || `sort by ${c.label}`,
          dataset: { sort: c.key },
        }, h("button", { type: "button", class: "th-btn", onclick: () => sortBy(c.key) }, c.label, h("span", { class: "sort-ind" }, active ? (st.order === "asc" ? "▲" : "▼") : "")));
      })));
    // Sorted by stage: a heading row starts each stage's runs.
    const stageInfo = new Map((table.pipeline?.stages || []).map((s) => [s.name, s]));
    let lastStage = null;
    const rows = table.rows.flatMap((r) => {
      const head = [];
      if (sorted === "stage" && r.stage !== lastStage) {
        lastStage = r.stage;
        const info = stageInfo.get(r.stage);
        head.push(h("tr", { class: "stage-group", dataset: { stageGroup: r.stage || "" } },
          h("td", { colspan: cols.length + 1 },
            h("span", { class: "stage-name" }, r.stage || "no stage"),
            info ? h("span", { class: "muted small" }, ` · ${info.runs} run${info.runs === 1 ? "" : "s"}${info.needs.length ? ` · needs ${info.needs.join(", ")}` : ""}${info.cached ? ` · ${info.cached} cached` : ""}${info.gather ? " · gather" : ""}`) : null)));
      }
      const isBest = r.id === table.best_run_id;
      const box = h("input", { type: "checkbox", "aria-label": `select run ${r.id}`, checked: selected.has(r.id) });
      box.addEventListener("change", () => {
        autoSelect = false;
        box.checked ? selected.add(r.id) : selected.delete(r.id);
        selectionChanged();
      });
      return [...head, h("tr", { class: `${isBest ? "best" : ""} ${selected.has(r.id) ? "selected" : ""}`, dataset: { run: String(r.id), state: r.state, ...(r.stage ? { stage: r.stage } : {}) } },
        h("td", { class: "check" }, box),
        cols.map((c) => {
          if (c.key === "id") return h("td", { class: "num" }, isBest ? h("span", { class: "star", title: "best run" }, "★ ") : null, h("a", { href: `#/runs/${r.id}` }, `#${r.id}`));
          if (c.key === "state") {
            return h("td", null, stateBadge(r.state, r.reason),
              r.cached_from ? h("span", { class: "cached-note" }, " cached from ", h("a", { href: `#/runs/${r.cached_from}` }, `#${r.cached_from}`)) : null,
              r.reason && r.state !== "succeeded" && r.reason !== r.state ? h("span", { class: "reason" }, r.reason) : null);
          }
          if (c.key === "stage") return h("td", { class: "mono" }, r.stage || "—");
          if (c.param) return h("td", { class: "param" }, fmtValue(r.params?.[c.param]));
          if (c.metric) return h("td", { class: "num" }, fmtNum(r.metrics?.[c.metric]));
          if (c.key === "score") return h("td", { class: "num strong" }, fmtNum(r.score));
          if (c.key === "duration") return h("td", { class: "num" }, r.duration_ms ? fmtDuration(r.duration_ms) : "—");
          if (c.key === "attempts") return h("td", { class: "num" }, r.attempts || "—");
          return h("td");
        }))];
    });
    if (!rows.length) rows.push(h("tr", null, h("td", { class: "empty", colspan: cols.length + 1 }, table.total ? "No run matches the filter." : "No runs.")));
    fill(tbody, rows);
    const from = table.matched ? st.offset + 1 : 0;
    const to = Math.min(st.offset + table.rows.length, table.matched);
    const last = Math.max(0, Math.floor((table.matched - 1) / st.limit) * st.limit);
    fill(pager,
      h("span", { class: "muted", id: "runs-range" }, `${fmtNum(from)}–${fmtNum(to)} of ${fmtNum(table.matched)}${table.matched !== table.total ? ` (${fmtNum(table.total)} in all)` : ""}`),
      h("button", { class: "btn btn-small", type: "button", disabled: st.offset === 0, onclick: () => page(0), "aria-label": "first page" }, "«"),
      h("button", { class: "btn btn-small", type: "button", disabled: st.offset === 0, onclick: () => page(Math.max(0, st.offset - st.limit)) }, "‹ Prev"),
      h("button", { class: "btn btn-small", type: "button", disabled: to >= table.matched, onclick: () => page(st.offset + st.limit) }, "Next ›"),
      h("button", { class: "btn btn-small", type: "button", disabled: to >= table.matched, onclick: () => page(last), "aria-label": "last page" }, "»"));
    renderSelInfo();
  };

  const renderSelInfo = () => {
    const constant = Object.entries(table.constant || {});
    const toggle = () => {
      st.allParams = !st.allParams;
      saveQuery();
      renderTable();
    };
    const constNote = constant.length
      ? h("span", { class: "muted const-note", id: "constant-params", title: constant.map(([k, v]) => `${k}=${fmtValue(v)}`).join("\n") },
        ` · ${constant.length} ${constant.length === 1 ? "parameter has" : "parameters have"} one value in every run (${constant.slice(0, 3).map(([k, v]) => `${k}=${fmtValue(v)}`).join(", ")}${constant.length > 3 ? ", …" : ""}): `,
        h("button", { type: "button", class: "link-btn", id: "toggle-constant", onclick: toggle }, st.allParams ? "hide" : "show"))
      : null;
    fill(selInfo,
      selected.size ? h("span", null, `${selected.size} selected`, autoSelect ? h("span", { class: "muted" }, " (first runs of the page)") : null, " · ", h("button", { type: "button", class: "link-btn", onclick: () => { autoSelect = false; selected.clear(); selectionChanged(); } }, "clear")) : h("span", { class: "muted" }, "Tick runs to overlay their curves or compare them"), constNote);
  };

  const sortBy = (key) => {
    if (sortKey() === key) {
      st.sort = key;
      st.order = st.order === "asc" ? "desc" : "asc";
    }
    else {
      st.sort = key;
      st.order = defaultOrder(key);
    }
    st.offset = 0;
    saveQuery();
    loadTable().catch(report);
  };

  const page = (offset) => {
    st.offset = offset;
    saveQuery();
    loadTable().catch(report);
  };

  let tableSeq = 0;
  const loadTable = async () => {
    const seq = ++tableSeq;
    const t = await api(tableUrl(), { signal });
    if (seq !== tableSeq) return;
    table = t;
    if (st.offset > 0 && t.rows.length === 0 && t.matched > 0) {
      st.offset = Math.floor((t.matched - 1) / st.limit) * st.limit;
      saveQuery();
      return loadTable();
    }
    if (autoSelect) {
      const before = [...selected].join(",");
      selected.clear();
      // The first runs that report what the chart shows first (the objective): a pipeline's
      // objective may come from its last stage alone, after many rows that report nothing of it.
      const obj = t.objective?.metric;
      const reports = (r) => r.metrics && r.metrics[obj] !== undefined;
      const pool = obj && t.rows.some(reports) ? t.rows.filter(reports) : t.rows;
      for (const r of pool.slice(0, 5)) selected.add(r.id);
      if (t.best_run_id && !selected.has(t.best_run_id) && t.offset === 0) selected.add(t.best_run_id);
      if ([...selected].join(",") !== before) scheduleCurves();
    }
    renderHead();
    renderPipeline();
    renderTable();
    renderMetricSel();
    renderGroups();
    renderSearch();
    if (firstPaint) {
      firstPaint = false;
      requestAnimationFrame(() => setTimeout(() => performance.mark("drover:table-rendered"), 0));
    }
  };

  // ---- a pipeline: its graph, and the stage filter
  const renderPipeline = () => {
    const p = table.pipeline;
    pipelineBox.hidden = !p;
    stageSel.hidden = !p;
    if (!p) return;
    graph.set(p.stages, st.stage);
    const want = ["", ...p.stages.map((s) => s.name)].join(",");
    if ([...stageSel.options].map((o) => o.value).join(",") !== want) {
      fill(stageSel, h("option", { value: "" }, "all stages"), p.stages.map((s) => h("option", { value: s.name }, s.name)));
    }
    stageSel.value = st.stage;
  };
  const pickStage = (stage) => {
    st.stage = stage;
    st.offset = 0;
    saveQuery();
    loadTable().catch(report);
    refreshScatter();
  };
  stageSel.addEventListener("change", () => pickStage(stageSel.value));

  const selectionChanged = () => {
    for (const tr of tbody.querySelectorAll("tr[data-run]")) tr.classList.toggle("selected", selected.has(Number(tr.dataset.run)));
    const pageIds = table.rows.map((r) => r.id);
    const headBox = thead.querySelector("input[type=checkbox]");
    if (headBox) headBox.checked = pageIds.length > 0 && pageIds.every((id) => selected.has(id));
    for (const box of tbody.querySelectorAll("tr[data-run] input[type=checkbox]")) box.checked = selected.has(Number(box.closest("tr").dataset.run));
    saveQuery();
    renderHead();
    renderSelInfo();
    scheduleCurves();
  };

  // ---- a search: trials by state, the best so far trial by trial, parameter importance
  let searchKey = "";
  let historyChart = null;
  const renderSearch = () => {
    const s = table.search;
    const key = JSON.stringify(s);
    if (key === searchKey) return;
    searchKey = key;
    if (!s) {
      fill(searchBox);
      return;
    }
    const metric = table.objective?.metric || "score";
    const chartEl = h("div", { class: "chart-box", id: "search-history" });
    fill(searchBox, h("section", { class: "panel" },
      h("div", { class: "panel-head" }, h("h2", null, "Search"),
        h("span", { class: "muted small", id: "search-states" },
          Object.entries(s.states).map(([state, n]) => `${n} ${state}`).join(", "))),
      s.budget ? h("p", { class: "muted small", id: "search-budget" }, `How the budget went: ${s.budget}`) : null,
      h("div", { class: "two-col wide-left" },
        h("div", null, chartEl),
        h("div", null,
          h("h3", null, "Parameter importance"),
          s.importance.length
            ? h("table", { class: "table", id: "importance-table" },
              h("thead", null, h("tr", null, h("th", null, "param"), h("th", null, "share"))),
              h("tbody", null, s.importance.map((p) => h("tr", null,
                h("td", { class: "mono" }, p.param),
                h("td", null, h("div", { class: "bar" }, h("div", { class: "bar-fill", style: `width:${Math.round(p.share * 100)}%` })), h("span", { class: "bar-text" }, `${Math.round(p.share * 100)}%`))))))
            : h("p", { class: "muted", id: "importance-note" }, s.importance_note || "Shown from 8 finished trials with a score."),
          h("p", { class: "muted small" }, `The share of the variance of ${metric} explained by each parameter's value (epsilon squared; numbers by quartile), over the finished trials; seeds and constants left out.`)))));
    if (historyChart) historyChart.destroy();
    historyChart = new LineChart(chartEl, { title: `best ${metric} so far`, height: 220, xLabel: "trial", empty: "No trial has succeeded yet" });
    const xs = s.history.map((p) => p.trial);
    historyChart.set([
      { key: "best", label: "best so far", xs, ys: s.history.map((p) => p.best), color: 0, width: 2.5 },
      { key: "trial", label: "trial", xs, ys: s.history.map((p) => p.score), color: 1, width: 1 },
    ]);
  };
  scope.add(() => historyChart?.destroy());

  // ---- seeds and noise: runs that differ only in their seed, as drover compare groups them
  let groupsKey = "";
  const renderGroups = () => {
    const g = table.groups;
    groupLabel.hidden = !g;
    const key = JSON.stringify(g);
    if (key === groupsKey) return;
    const hadGroups = groupsKey && groupsKey !== "null";
    groupsKey = key;
    if (st.grouped && (g || hadGroups)) scheduleCurves();
    if (!g) {
      fill(groupsBox);
      return;
    }
    const obj = table.objective || {};
    const shown = (p) => Object.entries(p || {}).filter(([k]) => !(k in (table.constant || {}))).map(([k, v]) => `${k}=${fmtValue(v)}`).join(" ") || "(all the same)";
    const tt = g.top_two;
    fill(groupsBox, h("section", { class: "panel" },
      h("div", { class: "panel-head" }, h("h2", null, "Seed groups"),
        h("span", { class: "muted small" }, `runs that differ only in ${g.seeds.join(", ")}, ranked by the mean ${obj.metric ? `${obj.metric} (${obj.summary})` : "score"}`)),
      h("div", { class: "table-wrap" }, h("table", { class: "table", id: "groups-table" },
        h("thead", null, h("tr", null, ["#", "config", "n", "mean", "± sd", "min", "max", "runs"].map((c) => h("th", null, c)))),
        h("tbody", null, g.configs.map((c, i) => h("tr", { class: i === 0 && c.complete ? "best" : (c.complete ? null : "incomplete"), dataset: { group: String(i + 1) } },
          h("td", { class: "num" }, i === 0 && c.complete ? "★ 1" : String(i + 1)),
          h("td", { class: "mono" }, shown(c.params)),
          h("td", { class: "num", title: c.complete ? null : "not every seed of this config has a score yet" },
            `${c.n}/${g.seeds_per_config}`, c.complete ? null : h("span", { class: "muted" }, " incomplete")),
          h("td", { class: "num" }, c.mean === null ? "—" : fmtNum(c.mean)),
          h("td", { class: "num" }, c.std === null ? "—" : fmtNum(c.std)),
          h("td", { class: "num" }, c.min === null ? "—" : fmtNum(c.min)),
          h("td", { class: "num" }, c.max === null ? "—" : fmtNum(c.max)),
          h("td", null, c.runs.map((id, k) => [k ? " " : "", h("a", { href: `#/runs/${id}` }, `#${id}`)]))))))),
      tt ? h("div", { class: "panel-foot" }, h("span", { class: tt.overlap ? "notice notice-warn" : "muted", id: "groups-verdict" },
        tt.overlap
          ? `The top two configs overlap (Welch's t-test p = ${fmtNum(tt.p)}): the difference may be noise; run more seeds before choosing.`
          : `The top two configs differ (Welch's t-test p = ${fmtNum(tt.p)}).`)) : null));
  };

  // ---- curves
  groupBox.addEventListener("change", () => {
    st.grouped = groupBox.checked;
    saveQuery();
    scheduleCurves();
  });
  // One curve per seed group: the mean over its runs, shaded ± one standard deviation.
  const loadGroupCurves = async (seq, metric) => {
    const configs = table.groups.configs.slice(0, MAX_OVERLAY);
    const shown = (p) => Object.entries(p || {}).filter(([k]) => !(k in (table.constant || {}))).slice(0, 3).map(([k, v]) => `${k}=${fmtValue(v)}`).join(" ");
    const ids = configs.flatMap((c) => c.runs.slice(0, MAX_OVERLAY));
    const series = new Map();
    await mapLimit(ids, 4, async (id) => {
      const r = await api(`/runs/${id}/metrics?name=${encodeURIComponent(metric)}&points=${CURVE_POINTS}`, { signal });
      series.set(id, latestAttemptSeries(r.series.find((s) => s.name === metric)?.points || []));
    });
    if (seq !== curveSeq) return;
    curveNote.textContent = `${configs.length} config${configs.length === 1 ? "" : "s"}, mean ± sd over seeds`;
    const list = configs.map((c, i) => {
      const b = meanBand(c.runs.map((id) => series.get(id)).filter(Boolean));
      return { key: `g${i}`, label: `${shown(c.params) || "config"} (n=${c.runs.length})`, xs: b.xs, ys: b.ys, lo: b.lo, hi: b.hi, color: i, width: i === 0 ? 2.5 : 1.5 };
    });
    chart.setTitle(`${metric}, by config`);
    chart.setEmptyText(`No run has reported ${metric} yet`);
    chart.set(list);
  };

  const renderMetricSel = () => {
    const metrics = table.metrics;
    // Until someone picks one, show the objective (it may be reported after other metrics).
    if (metricAuto || !st.metric || !metrics.includes(st.metric)) {
      const obj = table.objective?.metric;
      const want = obj && metrics.includes(obj) ? obj : metrics.includes("loss") ? "loss" : metrics[0] || "";
      if (want !== st.metric) {
        st.metric = want;
        scheduleCurves();
      }
    }
    const have = [...metricSel.options].map((o) => o.value).join(",");
    if (have !== metrics.join(",")) fill(metricSel, metrics.map((m) => h("option", { value: m }, m)));
    metricSel.value = st.metric;
    metricSel.disabled = !metrics.length;
  };
  metricSel.addEventListener("change", () => {
    metricAuto = false;
    st.metric = metricSel.value;
    saveQuery();
    scheduleCurves();
  });

  const runLabel = new Map(); // run id -> label
  const curveAttempt = new Map(); // run id -> attempt id shown
  const pending = new Map(); // run id -> points that arrived while its series loaded
  let curveSeq = 0;
  const loadCurves = async () => {
    const seq = ++curveSeq;
    const metric = st.metric;
    if (st.grouped && table?.groups && metric) return loadGroupCurves(seq, metric);
    const ids = [...selected].slice(0, MAX_OVERLAY);
    curveNote.textContent = selected.size > MAX_OVERLAY ? `first ${MAX_OVERLAY} of ${selected.size} selected` : "";
    if (!metric || !ids.length) {
      chart.set([]);
      chart.setEmptyText(!metric ? "No metrics reported yet" : "Select runs in the table to see their curves");
      return;
    }
    pending.clear();
    for (const id of ids) pending.set(id, []);
    const rowsById = new Map(table.rows.map((r) => [r.id, r]));
    const results = await mapLimit(ids, 4, async (id) => {
      const r = await api(`/runs/${id}/metrics?name=${encodeURIComponent(metric)}&points=${CURVE_POINTS}`, { signal });
      return { id, points: r.series.find((s) => s.name === metric)?.points || [] };
    });
    if (seq !== curveSeq) return;
    const list = results.map(({ id, points }, i) => {
      const s = latestAttemptSeries(points);
      curveAttempt.set(id, s.attemptId);
      const row = rowsById.get(id);
      const label = row ? `#${id} ${shortParams(row.params)}` : runLabel.get(id) || `#${id}`;
      runLabel.set(id, label);
      return { key: String(id), label, xs: s.xs, ys: s.ys, color: i, width: id === table.best_run_id ? 2.5 : 1.5 };
    });
    chart.setTitle(metric);
    chart.setEmptyText(`The selected runs have not reported ${metric} yet`);
    chart.set(list);
    for (const id of ids) {
      const early = pending.get(id) || [];
      pending.delete(id);
      if (early.length) applyPoints(id, early);
    }
  };
  const scheduleCurves = debounce(() => loadCurves().catch(report), 50);
  scope.add(() => scheduleCurves.cancel());

  // Params that differ between runs say more than a full list: keep the first few.
  const shortParams = (p) => {
    const varying = varyingParams.length ? varyingParams : table.params;
    return varying.slice(0, 3).map((k) => `${k}=${fmtValue(p?.[k])}`).join(" ");
  };
  let varyingParams = [];

  const applyPoints = (runId, points) => {
    if (st.grouped && table?.groups) return scheduleCurves(); // the group's mean moves
    const mine = points.filter((p) => p.name === st.metric);
    if (!mine.length) return;
    if (pending.has(runId)) {
      pending.get(runId).push(...mine);
      return;
    }
    const key = String(runId);
    if (!chart.has(key)) return;
    const att = curveAttempt.get(runId);
    const newest = Math.max(...mine.map((p) => p.attempt_id));
    if (att !== null && att !== undefined && newest > att) {
      // A new attempt: its curve replaces the old one.
      curveAttempt.set(runId, newest);
      const rest = chart.series.filter((s) => s.key !== key);
      const own = chart.series.find((s) => s.key === key);
      const fresh = mine.filter((p) => p.attempt_id === newest);
      chart.set([...rest, { ...own, xs: fresh.map((p) => p.step), ys: fresh.map((p) => (typeof p.value === "number" ? p.value : null)) }].sort((a, b) => Number(a.key) - Number(b.key)));
      return;
    }
    if (att === null || att === undefined) curveAttempt.set(runId, newest);
    const cur = curveAttempt.get(runId);
    const use = mine.filter((p) => p.attempt_id === cur);
    chart.append(key, use.map((p) => p.step), use.map((p) => (typeof p.value === "number" ? p.value : null)));
  };

  // ---- scatter
  let scatterData = null;
  const loadScatter = async () => {
    const t = await api(tableUrl({ scatter: "1", limit: "1", offset: "0" }), { signal });
    scatterData = t.scatter || { params: [], rows: [] };
    const ps = scatterData.params;
    const before = varyingParams.join(",");
    varyingParams = ps.filter((_, i) => new Set(scatterData.rows.map((r) => fmtValue(r[2 + i]))).size > 1);
    if (!varyingParams.length) varyingParams = ps.slice();
    if (varyingParams.join(",") !== before && chart.series.length) scheduleCurves(); // shorter labels
    if (!st.x || !ps.includes(st.x)) st.x = varyingParams[0] || ps[0] || "";
    const have = [...xSel.options].map((o) => o.value).join(",");
    if (have !== ps.join(",")) fill(xSel, ps.map((p) => h("option", { value: p }, p)));
    xSel.value = st.x;
    xSel.disabled = !ps.length;
    drawScatter(t);
  };
  const drawScatter = (t) => {
    if (!scatterData) return;
    const i = scatterData.params.indexOf(st.x);
    const obj = t.objective;
    scatterNote.textContent = obj?.metric ? `${fmtNum(scatterData.rows.length)} runs` : "";
    scatter.set({
      // NaN and infinite scores ("NaN", "Infinity") are in the table, not on the chart.
      points: scatterData.rows.filter((r) => typeof r[1] === "number").map((r) => ({
        id: r[0],
        y: r[1],
        x: i >= 0 ? r[2 + i] : null,
        label: scatterData.params.map((p, k) => `${p}=${fmtValue(r[2 + k])}`).join(" "),
      })),
      bestId: t.best_run_id,
      xName: st.x,
      // Searched on a log scale (log_uniform, int_log): a log axis, whatever the values' span.
      logX: (scatterData.log_params || []).includes(st.x),
      yName: obj?.metric ? `${obj.metric} (${obj.summary}, ${obj.mode})` : "objective",
    });
  };
  xSel.addEventListener("change", () => {
    st.x = xSel.value;
    saveQuery();
    drawScatter(table);
  });

  // ---- toolbar
  const applyFilter = debounce(() => {
    st.q = filterBox.value.trim();
    st.offset = 0;
    saveQuery();
    loadTable().catch(report);
    refreshScatter();
  }, 250);
  scope.add(() => applyFilter.cancel());
  filterBox.addEventListener("input", applyFilter);
  stateSel.addEventListener("change", () => {
    st.state = stateSel.value;
    st.offset = 0;
    saveQuery();
    loadTable().catch(report);
    refreshScatter();
  });
  sizeSel.addEventListener("change", () => {
    st.limit = Number(sizeSel.value);
    st.offset = Math.floor(st.offset / st.limit) * st.limit;
    saveQuery();
    loadTable().catch(report);
  });

  // ---- live
  const refreshTable = refresher(() => loadTable().catch(report), 1000);
  const refreshScatter = refresher(() => loadScatter().catch(report), 1500);
  scope.add(() => refreshTable.cancel());
  scope.add(() => refreshScatter.cancel());
  const expId = () => table?.experiment?.id;
  scope.add(events.on("run_state", (d) => {
    if (d.experiment_id !== expId()) return;
    refreshTable();
    if (ENDED.has(d.state) || d.state === "running") refreshScatter();
    if (selected.has(d.run_id) && d.state === "running") scheduleCurves(); // a new attempt
  }));
  scope.add(events.on("metrics", (d) => {
    if (!table) return;
    const onPage = table.rows.some((r) => r.id === d.run_id);
    if (onPage) refreshTable();
    if (selected.has(d.run_id)) {
      if (d.downsampled_from) scheduleCurves();
      else applyPoints(d.run_id, d.points);
    }
    if (onPage && table.objective?.metric && d.points.some((p) => p.name === table.objective.metric)) refreshScatter();
  }));
  scope.add(events.on("gap", () => {
    refreshTable();
    refreshScatter();
    scheduleCurves();
  }));

  function report(e) {
    if (isAbort(e) || !scope.alive) return;
    toast(e.message, "error");
  }

  // ---- first render: the page of rows first, then everything else
  try {
    await loadTable();
  } catch (e) {
    if (isAbort(e)) return;
    if (e.status === 404) {
      fill(root, h("h1", null, "No such experiment"), notice("error", e.message), h("p", null, h("a", { href: "#/experiments" }, "All experiments")));
      return;
    }
    throw e;
  }
  loadScatter().catch(report);
  api(`/experiments/${table.experiment.id}`, { signal })
    .then((e) => {
      exp = e;
      renderHead();
      fill(specBox, h("section", { class: "panel" },
        h("details", null, h("summary", null, h("h2", { class: "inline" }, "Spec")),
          h("pre", { class: "code" }, e.spec_yaml || JSON.stringify(e.spec, null, 2)),
          e.git_diff ? [h("h3", null, "Uncommitted changes at submission"), h("pre", { class: "code diff" }, e.git_diff)] : null)));
    })
    .catch(report);
}
