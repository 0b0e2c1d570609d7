// #/runs/ID : params, live curves of every metric, the log tail following live, attempts with
// their failure reasons, the reproducibility record and the run's alerts; cancel and priority.
import { h, fill, fmtNum, fmtValue, fmtBytes, fmtDuration, fmtTime, stateBadge, ENDED, throttle, refresher, notice, isAbort, confirmButton, toast, copyButton } from "./util.js";
import { api, post } from "./api.js";
import { events } from "./events.js";
import { LineChart, seriesByAttempt, curveView } from "./charts.js";
import { alertItem, mergeAlerts } from "./overview.js";

const CURVE_POINTS = 1000;
const TAIL_BYTES = 64 * 1024;
const KEEP_CHARS = 512 * 1024; // the log panel keeps this much text

const REASONS = {
  cuda_oom: "CUDA out of memory",
  diverged: "diverged (NaN or Inf)",
  stalled: "stalled: no output for too long",
  timeout: "ran past its timeout",
  exit_code: "exited with an error",
  signal: "killed by a signal",
  cancelled: "cancelled",
  cached: "cached: an earlier run with the same fingerprint stands for it",
  upstream_failed: "not run: a run it needs did not succeed",
  missing_output: "a declared output was not written",
  outputs_not_stored: "its outputs could not be stored",
  preempted: "preempted: its GPUs went to a better-ranked run; requeued",
  interrupted: "interrupted: the engine went away; requeued",
  lost: "lost (its end is unknown)",
};

export async function mount(root, { scope, params, query, setTitle }) {
  const signal = scope.signal;
  const runId = Number(params[0]);
  let run = null;
  let objective = null;

  const title = h("h1", null, `Run #${runId}`);
  const badges = h("div", { class: "head-badges" });
  const crumbs = h("div", { class: "crumbs" }, h("a", { href: "#/experiments" }, "Experiments"), " / ");
  const actions = h("div", { class: "toolbar" });
  const paramsEl = h("div", { class: "param-chips" });
  const infoEl = h("dl", { class: "info-grid" });
  const chartsEl = h("div", { class: "chart-grid", id: "run-charts" });
  const curves = curveView(query);
  const chartsNote = h("span", { class: "muted" });
  const logPre = h("pre", { class: "log", id: "run-log", tabindex: "0", "aria-label": "log" });
  const logStatus = h("span", { class: "muted", id: "log-status" });
  const streamSel = h("select", { class: "input", "aria-label": "stream" }, h("option", { value: "stdout" }, "stdout"), h("option", { value: "stderr" }, "stderr"));
  const attemptSel = h("select", { class: "input", "aria-label": "attempt" });
  const followBox = h("input", { type: "checkbox", checked: true, id: "log-follow" });
  const attemptsEl = h("div", { class: "panel-body" });
  const reproEl = h("div", { class: "panel-body" });
  // A stage's stored outputs (a cached run: its source's), each downloadable.
  const artifactsEl = h("section", { class: "panel", id: "run-artifacts", hidden: true });
  const alertsEl = h("div", { class: "panel-body", id: "run-alerts" });
  // Why the latest attempt failed, in its own words (the end of its stderr), kept with it.
  const errorEl = h("section", { class: "panel", id: "run-error", hidden: true });

  root.append(
    h("div", { class: "page-head" }, h("div", null, crumbs, h("div", { class: "title-row" }, title, badges), paramsEl), actions),
    h("section", { class: "panel" }, infoEl),
    errorEl,
    h("section", { class: "panel" }, h("div", { class: "panel-head" }, h("h2", null, "Curves"), chartsNote), curves.el, chartsEl),
    h("section", { class: "panel" },
      h("div", { class: "panel-head" }, h("h2", null, "Log"),
        h("div", { class: "toolbar" }, logStatus, attemptSel, streamSel, h("label", { class: "check-label" }, followBox, " follow"))),
      logPre),
    h("div", { class: "two-col" },
      h("section", { class: "panel" }, h("div", { class: "panel-head" }, h("h2", null, "Attempts")), attemptsEl),
      h("section", { class: "panel" }, h("div", { class: "panel-head" }, h("h2", null, "Alerts")), alertsEl)),
    artifactsEl,
    h("section", { class: "panel" }, h("div", { class: "panel-head" }, h("h2", null, "Reproducibility")), reproEl));

  const report = (e) => {
    if (!isAbort(e) && scope.alive) toast(e.message, "error");
  };

  // ---- the run
  const renderRun = () => {
    setTitle(`Run #${run.id}`);
    fill(crumbs, h("a", { href: "#/experiments" }, "Experiments"), " / ",
      h("a", { href: `#/experiments/${run.experiment.id}` }, run.experiment.name), " / ");
    fill(badges, stateBadge(run.state), run.reason && run.reason !== run.state ? h("span", { class: "reason" }, REASONS[run.reason] || run.reason) : null);
    const changed = Object.keys(run.current_params || {}).filter((k) => fmtValue(run.current_params[k]) !== fmtValue(run.params?.[k]));
    fill(paramsEl, Object.entries(run.params || {}).map(([k, v]) =>
      h("span", { class: "chip", title: changed.includes(k) ? `now ${fmtValue(run.current_params[k])} after recovery` : null },
        h("span", { class: "chip-k" }, k), h("span", { class: "chip-v" }, fmtValue(v)),
        changed.includes(k) ? h("span", { class: "chip-now" }, ` → ${fmtValue(run.current_params[k])}`) : null)));
    const ended = ENDED.has(run.state);
    const queued = run.state === "queued" || run.state === "retrying";
    // The buttons are rebuilt only when what they offer changes, so a click half-way through a
    // confirmation or a priority being typed survives the live updates.
    const actionsKey = `${ended}|${queued}|${run.priority}`;
    if (actionsKey !== renderedActions) {
      renderedActions = actionsKey;
      renderActions(ended, queued);
    }
    renderInfo();
    const reproKey = JSON.stringify([run.snapshot?.hash, (run.environments || []).length, run.attempts, run.attempt_list?.at(-1)?.ended]);
    if (reproKey !== renderedRepro) {
      renderedRepro = reproKey;
      renderRepro();
    }
    renderAttempts();
    if (run.state === "succeeded" && artifactsFor !== run.id) {
      artifactsFor = run.id;
      loadArtifacts().catch(report);
    }
    const numbers = (run.attempt_list || []).map((a) => a.number);
    const have = [...attemptSel.options].map((o) => o.value).join(",");
    const want = ["", ...numbers].join(",");
    if (have !== want) {
      const keep = attemptSel.value;
      fill(attemptSel, h("option", { value: "" }, "latest attempt"), numbers.map((n) => h("option", { value: String(n) }, `attempt ${n}`)));
      attemptSel.value = keep;
    }
  };
  let renderedActions = "";
  let artifactsFor = 0;
  let renderedRepro = "";

  const renderActions = (ended, queued) => {
    const prio = h("input", { type: "number", class: "input input-num", value: String(run.priority), step: "1", "aria-label": "priority", id: "priority-input", disabled: !queued });
    const setPrio = h("button", { class: "btn", type: "button", id: "priority-set", disabled: !queued, title: queued ? "higher starts first" : "only a queued run's priority can change" }, "Set priority");
    setPrio.addEventListener("click", async () => {
      const n = Number(prio.value);
      if (!Number.isInteger(n)) return toast("The priority is a whole number", "error");
      setPrio.disabled = true;
      try {
        const r = await post(`/runs/${run.id}/priority`, { priority: n });
        toast(`Priority of run #${run.id} set to ${r.priority}`);
        await loadRun();
      } catch (e) {
        report(e);
      } finally {
        setPrio.disabled = false;
      }
    });
    fill(actions,
      h("a", { class: "btn", href: `#/compare?runs=${run.id}`, title: "compare this run with others" }, "Compare…"),
      h("span", { class: "prio-box" }, prio, setPrio),
      ended ? null : confirmButton("Cancel run", "Really cancel?", async () => {
        try {
          await post(`/runs/${run.id}/cancel`);
          toast(`Cancelling run #${run.id}`);
          await loadRun();
        } catch (e) {
          report(e);
        }
      }, { cls: "btn btn-danger", title: "queued: it never starts; running: SIGTERM, then SIGKILL" }));
  };

  const renderInfo = () => {
    const last = run.attempt_list?.[run.attempt_list.length - 1];
    const info = [
      ["state", stateBadge(run.state)],
      ["reason", run.reason && run.reason !== run.state ? REASONS[run.reason] || run.reason : "—"],
      ...(run.waiting ? [["waiting", h("span", { id: "waiting", title: run.waiting.code }, run.waiting.reason)]] : []),
      ...(last?.hparams && Object.keys(last.hparams).length ? [["hparams", h("span", { class: "mono", id: "hparams" },
        Object.entries(last.hparams).map(([k, v]) => `${k}=${fmtValue(v)}`).join("  "))]] : []),
      ...(last?.checkpoint ? [["checkpoint", `step ${last.checkpoint.step}, saved ${fmtTime(last.checkpoint.t_ms)}`]] : []),
      ["experiment", h("a", { href: `#/experiments/${run.experiment.id}` }, `${run.experiment.name} #${run.experiment.id}`)],
      ...(run.stage ? [["stage", h("span", { class: "mono" }, run.stage)],
        ["needs", run.needs?.length ? run.needs.map((id, i) => [i ? " " : "", h("a", { href: `#/runs/${id}` }, `#${id}`)]) : "—"]] : []),
      ...(run.cached_from ? [["cached from", h("a", { href: `#/runs/${run.cached_from}`, id: "cached-from" }, `run #${run.cached_from}`)]] : []),
      ["index", String(run.index)],
      ["priority", String(run.priority)],
      ["attempts", `${run.attempts}${run.retries_used ? ` (${run.retries_used} ${run.retries_used === 1 ? "retry" : "retries"})` : ""}`],
      ["created", fmtTime(run.created_ms)],
      ["started", fmtTime(run.started_ms)],
      ["ended", fmtTime(run.ended_ms)],
      ["duration", run.started_ms ? fmtDuration((run.ended_ms || Date.now()) - run.started_ms) : "—"],
      ["resources", `${run.resources?.gpus ?? 0} GPU${run.resources?.gpus === 1 ? "" : "s"}${run.resources?.gpu_memory ? `, ${fmtBytes(run.resources.gpu_memory)}` : ""}${run.resources?.cpus ? `, ${run.resources.cpus} CPU` : ""}`],
      ...(last?.placement ? [["where", h("span", { id: "placement" }, last.placement)]] : [["GPUs", last?.cuda_visible_devices || "—"]]),
      ["fingerprint", h("span", { class: "mono", title: run.fingerprint }, (run.fingerprint || "—").slice(0, 16))],
    ];
    if (run.metrics && Object.keys(run.metrics).length) {
      info.push(["last metrics", Object.entries(run.metrics).map(([k, v]) => `${k} ${fmtNum(v)}`).join(" · ")]);
    }
    fill(infoEl, info.map(([k, v]) => h("div", { class: "info-item" }, h("dt", null, k), h("dd", null, v))));
    const failed = last?.ended && last.error;
    errorEl.hidden = !failed;
    if (failed) {
      fill(errorEl,
        h("div", { class: "panel-head" }, h("h2", null, `Why attempt ${last.number} failed`), h("span", { class: "muted" }, "the end of its stderr")),
        h("pre", { class: "log error-tail" }, last.error));
    }
  };

  const renderAttempts = () => {
    const list = run.attempt_list || [];
    if (!list.length) {
      fill(attemptsEl, h("p", { class: "empty" }, run.state === "queued" ? "Queued: no attempt has started." : "No attempts."));
      return;
    }
    fill(attemptsEl, h("table", { class: "table", id: "attempts-table" },
      h("thead", null, h("tr", null, h("th", { class: "num" }, "#"), h("th", null, "outcome"), h("th", null, "started"), h("th", { class: "num" }, "took"), h("th", null, list.some((a) => a.placement) ? "where" : "GPUs"), h("th", null, "params"))),
      h("tbody", null, list.map((a, i) => {
        const next = list[i + 1];
        const diff = next ? Object.keys(next.params || {}).filter((k) => fmtValue(next.params[k]) !== fmtValue(a.params?.[k])) : [];
        let outcome;
        if (!a.ended) outcome = [stateBadge("running")];
        else if (!a.reason || a.reason === "ok" || a.reason === "succeeded") outcome = [stateBadge("succeeded")];
        else {
          outcome = [h("span", { class: `badge ${a.reason === "cancelled" ? "state-cancelled" : "state-failed"}` }, a.reason),
            a.reason !== "cancelled" ? h("span", { class: "reason" }, REASONS[a.reason] || "") : null,
            a.exit_code > 0 ? h("span", { class: "muted small" }, ` exit ${a.exit_code}`) : null,
            a.signal > 0 ? h("span", { class: "muted small" }, ` signal ${a.signal}`) : null,
            a.error ? h("div", { class: "error-line mono small", title: a.error }, a.error.split("\n").at(-1)) : null];
        }
        if (diff.length) outcome.push(h("div", { class: "retry-note" }, `retried with ${diff.map((k) => `${k}=${fmtValue(next.params[k])}`).join(", ")}`));
        return h("tr", null,
          h("td", { class: "num" }, a.number),
          h("td", null, outcome),
          h("td", { class: "muted" }, fmtTime(a.started_ms)),
          h("td", { class: "num" }, a.started_ms ? fmtDuration((a.ended_ms || Date.now()) - a.started_ms) : "—"),
          h("td", null, a.placement || a.cuda_visible_devices || (a.gpus || []).join(",") || "—"),
          h("td", { class: "params-cell" }, Object.entries(a.params || {}).map(([k, v]) => `${k}=${fmtValue(v)}`).join(" ")));
      }))));
  };

  const renderRepro = () => {
    const snap = run.snapshot || {};
    const last = run.attempt_list?.[run.attempt_list.length - 1];
    const envs = run.environments || [];
    const env = envs[envs.length - 1] || {};
    const row = (k, v) => h("div", { class: "info-item" }, h("dt", null, k), h("dd", null, v));
    fill(reproEl,
      h("dl", { class: "info-grid" },
        row("git commit", snap.git_commit ? h("span", { class: "mono" }, snap.git_commit, snap.git_dirty ? h("span", { class: "badge state-retrying" }, "uncommitted changes") : null) : snap.git === false ? "not a git checkout" : "—"),
        row("code snapshot", snap.hash ? h("span", { class: "mono", title: snap.path }, `${snap.hash.slice(0, 16)} · ${fmtNum(snap.files)} files · ${fmtBytes(snap.bytes)}`) : "—"),
        row("command", last?.argv ? h("code", { class: "mono wrap" }, last.argv.join(" ")) : "—"),
        row("working folder", last?.workdir ? h("span", { class: "mono wrap" }, last.workdir) : "—"),
        ...(run.container ? [row("container", h("span", { class: "mono wrap", id: "container" }, run.container.description || run.container.image))] : []),
        row("interpreter", env.interpreter || "—"),
        row("host", env.hostname || last?.hostname || "—"),
        row("drover", last?.drover_version || "—")),
      snap.git_diff
        ? h("details", { class: "repro-block" }, h("summary", null, "Diff against the commit ", copyButton(() => snap.git_diff)), h("pre", { class: "code diff" }, snap.git_diff))
        : h("p", { class: "muted small" }, snap.git_commit ? "No uncommitted changes." : ""),
      env.packages
        ? h("details", { class: "repro-block" }, h("summary", null, `Packages (${env.packages.trim().split("\n").length}) `, copyButton(() => env.packages)), h("pre", { class: "code" }, env.packages))
        : h("p", { class: "muted small" }, "No package list recorded."),
      env.gpu_info
        ? h("details", { class: "repro-block" }, h("summary", null, "GPU and driver"), h("pre", { class: "code" }, env.gpu_info))
        : h("p", { class: "muted small" }, "No GPU information recorded (fake GPUs or none)."));
  };

  const loadArtifacts = async () => {
    const a = await api(`/runs/${runId}/artifacts`, { signal });
    artifactsEl.hidden = !a.files.length;
    if (!a.files.length) return;
    const url = (p) => `/api/v1/runs/${runId}/artifacts/file?path=${encodeURIComponent(p)}`;
    const total = a.files.reduce((n, f) => n + f.bytes, 0);
    fill(artifactsEl,
      h("div", { class: "panel-head" }, h("h2", null, "Artifacts"),
        h("span", { class: "muted small" }, `${a.files.length} file${a.files.length === 1 ? "" : "s"}, ${fmtBytes(total)}${a.source_run && a.source_run !== runId ? ` · stored by run #${a.source_run}` : ""} · drover artifacts ${runId}`)),
      h("div", { class: "table-wrap" }, h("table", { class: "table", id: "artifacts-table" },
        h("thead", null, h("tr", null, h("th", null, "file"), h("th", { class: "num" }, "size"), h("th", null, "sha256"))),
        h("tbody", null, a.files.map((f) => h("tr", null,
          h("td", { class: "mono" }, f.mode === 0o120777 ? `${f.path} (link)` : h("a", { href: url(f.path), download: f.path.split("/").pop() }, f.path)),
          h("td", { class: "num" }, fmtBytes(f.bytes)),
          h("td", { class: "mono small", title: f.sha256 }, f.sha256.slice(0, 16))))))));
  };

  // Answers can come back out of order (a reload after a click and one after an event): only
  // the newest request's answer is shown.
  let runSeq = 0;
  let evented = null; // the latest run_state event: {state, reason, attempt}
  const loadRun = async () => {
    const seq = ++runSeq;
    const r = await api(`/runs/${runId}`, { signal });
    if (seq !== runSeq) return;
    // An event may say the run ended a moment before the store does: trust the event.
    if (evented && ENDED.has(evented.state) && !ENDED.has(r.state)) {
      r.state = evented.state;
      r.reason = evented.reason || r.reason;
    }
    run = r;
    renderRun();
  };
  const refreshRun = refresher(() => loadRun().catch(report), 500);
  scope.add(() => refreshRun.cancel());

  // ---- curves: one chart per metric, one series per attempt
  const charts = new Map(); // metric -> {chart, attempts:Set}
  const attemptNumber = (attemptId) => run?.attempt_list?.find((a) => a.id === attemptId)?.number;
  const metricOrder = (a, b) => {
    const rank = (m) => (m === objective ? 0 : m === "loss" ? 1 : m.startsWith("val") ? 2 : 3);
    return rank(a) - rank(b) || a.localeCompare(b);
  };
  const chartFor = (name) => {
    if (charts.has(name)) return charts.get(name);
    const c = { chart: new LineChart(chartsEl, { title: name, height: 200, sync: `run-${runId}` }) };
    c.chart.root.dataset.metric = name;
    curves.follow(c.chart);
    charts.set(name, c);
    scope.add(() => c.chart.destroy());
    // keep the grid in a stable order
    for (const m of [...charts.keys()].sort(metricOrder)) chartsEl.append(charts.get(m).chart.root);
    return c;
  };
  const labelFor = (attemptId, many) => {
    const n = attemptNumber(attemptId);
    return many ? `attempt ${n ?? "?"}` : n ? `attempt ${n}` : "value";
  };
  const setSeries = (name, points) => {
    const c = chartFor(name);
    const by = seriesByAttempt(points);
    const many = by.size > 1;
    c.chart.set([...by].map(([attemptId, s], i) => ({ key: String(attemptId), label: labelFor(attemptId, many), xs: s.xs, ys: s.ys, color: i, dash: i < by.size - 1 ? [4, 3] : undefined })));
  };
  let curvesLoaded = false;
  const early = [];
  const loadCurves = async (asked) => {
    const r = await (asked || api(`/runs/${runId}/metrics?points=${CURVE_POINTS}`, { signal }));
    curvesLoaded = true;
    for (const s of r.series) setSeries(s.name, s.points);
    chartsNote.textContent = r.series.length ? "" : "No metrics reported yet: they appear here as the run prints them.";
    if (r.series.some((s) => s.count > s.points.length)) chartsNote.textContent = `long series shown as ${CURVE_POINTS} min/max points`;
    for (const d of early.splice(0)) applyMetrics(d);
  };
  const applyMetrics = (d) => {
    if (!curvesLoaded) {
      early.push(d);
      return;
    }
    if (d.downsampled_from) {
      refreshCurves();
      return;
    }
    const byName = new Map();
    for (const p of d.points) {
      if (!byName.has(p.name)) byName.set(p.name, []);
      byName.get(p.name).push(p);
    }
    for (const [name, pts] of byName) {
      const c = chartFor(name);
      chartsNote.textContent = "";
      for (const p of pts) {
        const key = String(p.attempt_id);
        if (!c.chart.has(key)) {
          // A new attempt (or the first point): rebuild the series list with it.
          const list = c.chart.series.map((s) => ({ ...s }));
          list.push({ key, label: "", xs: [], ys: [] });
          const many = list.length > 1;
          c.chart.set(list.map((s, i) => ({ ...s, label: labelFor(Number(s.key), many), color: i, dash: i < list.length - 1 ? [4, 3] : undefined })));
        }
        c.chart.append(key, [p.step], [typeof p.value === "number" ? p.value : null]);
      }
    }
  };
  const refreshCurves = throttle(() => loadCurves().catch(report), 2000);
  scope.add(() => refreshCurves.cancel());

  // ---- log
  let logGen = 0;
  let logText = "";
  const logWrite = (text, replace = false) => {
    logText = replace ? text : logText + text;
    let trimmed = false;
    if (logText.length > KEEP_CHARS) {
      logText = logText.slice(logText.length - KEEP_CHARS);
      logText = logText.slice(logText.indexOf("\n") + 1);
      trimmed = true;
    }
    const atBottom = logPre.scrollHeight - logPre.scrollTop - logPre.clientHeight < 40;
    if (replace || trimmed) logPre.textContent = logText;
    else if (text) logPre.append(text);
    if (followBox.checked && (atBottom || replace)) logPre.scrollTop = logPre.scrollHeight;
  };
  const logNote = (text) => logWrite(`\n── ${text} ──\n`);
  const logUrl = (attempt, offset, extra = "") =>
    `/runs/${runId}/logs?stream=${streamSel.value}${attempt ? `&attempt=${attempt}` : ""}&offset=${offset}${extra}`;

  // Follows one stream: the tail of the chosen attempt (or the latest), then each new byte as it
  // is written, then the next attempt's when a retry starts (docs/http-api.md, "Following").
  const followLog = async () => {
    const gen = ++logGen;
    const live = () => gen === logGen && scope.alive;
    const pinned = attemptSel.value ? Number(attemptSel.value) : null;
    logWrite("", true);
    logStatus.textContent = "loading…";
    let attempt = pinned || run.attempts || null;
    let offset = 0;
    // 1. the first attempt to show (waiting for one to start when there is none yet)
    if (!attempt) {
      let r;
      do {
        logStatus.textContent = "waiting for the run to start…";
        r = await api(logUrl(null, 0, "&follow=1&limit_bytes=1"), { signal });
        if (!live()) return;
        if (r.attempt === 0 && r.run_ended) {
          logStatus.textContent = `the run ${r.run_state} without starting`;
          // A cached run: its log is the run it stands for.
          logWrite(run?.cached_from ? `(no output: cached, it did not run; run #${run.cached_from}'s log is on its page)` : "(no output: the run never started)", true);
          return;
        }
      } while (r.attempt === 0);
      attempt = r.attempt;
    }
    // 2. its tail
    let r = await api(logUrl(attempt, 0, "&limit_bytes=1"), { signal });
    if (!live()) return;
    if (r.size > TAIL_BYTES) {
      offset = r.size - TAIL_BYTES;
      r = await api(logUrl(attempt, offset, `&limit_bytes=${TAIL_BYTES}`), { signal });
      if (!live()) return;
      const cut = r.data.indexOf("\n");
      logWrite(`… ${fmtBytes(offset + cut + 1)} earlier not shown …\n` + r.data.slice(cut + 1), true);
      offset = r.next_offset;
    } else {
      r = await api(logUrl(attempt, 0), { signal });
      if (!live()) return;
      logWrite(r.data, true);
      offset = r.next_offset;
    }
    // 3. follow
    for (;;) {
      if (r.ended) {
        if (pinned) {
          logStatus.textContent = `attempt ${attempt} ended`;
          return;
        }
        if (attempt < r.attempts) {
          attempt += 1;
          offset = 0;
          logNote(`attempt ${attempt}`);
        } else if (r.run_ended) {
          logStatus.textContent = `run ${r.run_state}`;
          logPre.dataset.ended = "true";
          return;
        } else {
          // A retry may come: ask for the next attempt, which waits for it to start.
          logStatus.textContent = `waiting to see whether attempt ${attempt + 1} starts…`;
          const w = await api(logUrl(attempt + 1, 0, "&follow=1"), { signal });
          if (!live()) return;
          if (w.attempts > attempt) {
            attempt += 1;
            logNote(`attempt ${attempt}`);
            if (w.data) logWrite(w.data);
            offset = w.next_offset;
            r = w;
          } else if (w.run_ended) {
            logStatus.textContent = `run ${w.run_state}`;
            logPre.dataset.ended = "true";
            return;
          }
          continue;
        }
      }
      logStatus.textContent = `attempt ${attempt} · following`;
      logPre.dataset.attempt = String(attempt);
      r = await api(logUrl(attempt, offset, "&follow=1"), { signal });
      if (!live()) return;
      if (r.data) logWrite(r.data);
      offset = r.next_offset;
    }
  };
  const restartLog = () =>
    followLog().catch((e) => {
      if (isAbort(e) || !scope.alive) return;
      logStatus.textContent = `log unavailable: ${e.message}`;
      // Too many open follows (503) or a hiccup: try again in a moment.
      setTimeout(() => scope.alive && restartLog(), 3000);
    });
  streamSel.addEventListener("change", restartLog);
  attemptSel.addEventListener("change", restartLog);
  followBox.addEventListener("change", () => {
    if (followBox.checked) logPre.scrollTop = logPre.scrollHeight;
  });

  // ---- alerts
  let alerts = [];
  const renderAlerts = () => fill(alertsEl, alerts.length ? h("ul", { class: "alert-list" }, alerts.map(alertItem)) : h("p", { class: "empty" }, "No alerts about this run."));
  const loadAlerts = async () => {
    alerts = mergeAlerts((await api(`/alerts?run=${runId}&limit=50`, { signal })).alerts, alerts);
    renderAlerts();
  };

  // ---- live
  scope.add(events.on("run_state", (d) => {
    if (d.run_id !== runId) return;
    evented = d;
    if (run) {
      run.state = d.state;
      run.reason = d.reason ?? run.reason;
      renderRun();
    }
    refreshRun();
  }));
  scope.add(events.on("metrics", (d) => {
    if (d.run_id === runId) applyMetrics(d);
  }));
  scope.add(events.on("alert", (a) => {
    if (a.run_id !== runId) return;
    alerts = mergeAlerts([a], alerts);
    renderAlerts();
  }));
  scope.add(events.on("gap", () => {
    refreshRun();
    refreshCurves();
  }));
  // While the run is not over, read it again now and then: durations move, and nothing stays
  // stale should an event be missed.
  scope.interval(() => {
    if (run && !ENDED.has(run.state)) refreshRun();
  }, 5000);

  // The curves are asked for at once, beside the run itself: on a long run they take longest.
  const firstCurves = Number.isInteger(runId) && runId > 0 ? api(`/runs/${runId}/metrics?points=${CURVE_POINTS}`, { signal }) : null;
  firstCurves?.catch(() => {}); // its error is reported where it is awaited
  try {
    await loadRun();
  } catch (e) {
    if (isAbort(e)) return;
    if (e.status === 404 || e.status === 400) {
      fill(root, h("h1", null, `No run ${params[0]}`), notice("error", e.message), h("p", null, h("a", { href: "#/experiments" }, "All experiments")));
      return;
    }
    throw e;
  }
  // A failed run's log opens on stderr, where it said why.
  if (run.state === "failed" && run.attempt_list?.at(-1)?.error) streamSel.value = "stderr";
  restartLog();
  api(`/experiments/${run.experiment.id}`, { signal })
    .then((e) => {
      objective = e.spec?.objective?.metric || null;
      for (const m of [...charts.keys()].sort(metricOrder)) chartsEl.append(charts.get(m).chart.root);
    })
    .catch(() => {});
  await Promise.all([loadCurves(firstCurves), loadAlerts()]).catch(report);
}
