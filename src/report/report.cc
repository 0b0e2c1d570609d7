#include "report/report.h"

#include "report/search_view.h"

#include <fmt/format.h>
#include <time.h>

#include <algorithm>
#include <cmath>
#include <set>

#include "common/strings.h"
#include "report/groups.h"

namespace drover::report {
namespace {

// The page's look: system fonts, one set of status colours, light and dark via
// prefers-color-scheme. Charts are inline SVG whose classes are coloured here.
constexpr const char* kStyle = R"css(
:root{color-scheme:light dark;--bg:#ffffff;--fg:#1f2328;--muted:#59636e;--border:#d1d9e0;
--card:#f6f8fa;--grid:#e6e8eb;--axis:#8c959f;--best:#dafbe1;--link:#0969da;
--succeeded:#1a7f37;--failed:#cf222e;--running:#0969da;--queued:#6e7781;--cancelled:#9a6700}
@media (prefers-color-scheme:dark){:root{--bg:#0d1117;--fg:#e6edf3;--muted:#9198a1;
--border:#30363d;--card:#151b23;--grid:#262c36;--axis:#6e7681;--best:#12261e;--link:#4493f8;
--succeeded:#3fb950;--failed:#f85149;--running:#58a6ff;--queued:#9198a1;--cancelled:#d29922}}
*{box-sizing:border-box}
body{margin:0;background:var(--bg);color:var(--fg);
font:14px/1.5 system-ui,-apple-system,"Segoe UI",Roboto,"Helvetica Neue",Arial,sans-serif}
main{max-width:1200px;margin:0 auto;padding:28px 24px 56px}
h1{font-size:26px;line-height:1.25;margin:0 0 6px;font-weight:650}
h2{font-size:18px;margin:36px 0 12px;padding-bottom:6px;border-bottom:1px solid var(--border)}
h3{font-size:14px;margin:0 0 8px}
a{color:var(--link);text-decoration:none}a:hover{text-decoration:underline}
.muted{color:var(--muted)}
code,pre,.mono{font-family:ui-monospace,SFMono-Regular,"SF Mono",Menlo,Consolas,monospace;font-size:12.5px}
pre{background:var(--card);border:1px solid var(--border);border-radius:6px;padding:12px;overflow:auto}
nav{margin:14px 0 0;display:flex;gap:16px;flex-wrap:wrap}
dl.meta{display:grid;grid-template-columns:max-content 1fr;gap:4px 18px;margin:16px 0 0}
dl.meta dt{color:var(--muted)}dl.meta dd{margin:0}
.counts{display:flex;gap:8px;flex-wrap:wrap;margin:10px 0 0}
.state{display:inline-flex;align-items:center;gap:5px;padding:0 8px;border-radius:999px;
border:1px solid currentColor;font-size:12px;font-weight:600;line-height:20px;white-space:nowrap;
color:var(--queued)}
.state::before{content:"";width:7px;height:7px;border-radius:50%;background:currentColor}
.state-succeeded{color:var(--succeeded)}.state-failed{color:var(--failed)}
.state-running,.state-retrying{color:var(--running)}.state-queued{color:var(--queued)}
.state-cancelled{color:var(--cancelled)}
.table-wrap{overflow:auto;max-height:80vh;border:1px solid var(--border);border-radius:8px}
thead th{position:sticky;top:0;z-index:1}
#results .table-wrap{margin-left:min(0px,calc(600px - 50vw));margin-right:min(0px,calc(616px - 50vw))}
table{border-collapse:collapse;width:100%;font-size:13px}
th,td{padding:7px 12px;border-bottom:1px solid var(--border);text-align:left;vertical-align:top}
tbody tr:last-child td{border-bottom:0}
th{font-weight:600;color:var(--muted);white-space:nowrap;background:var(--card)}
th.sortable{cursor:pointer;user-select:none}
th[aria-sort=ascending]::after{content:" \25B4"}th[aria-sort=descending]::after{content:" \25BE"}
td.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
tr.best td{background:var(--best)}
.star{color:var(--succeeded);font-weight:700}
.was{color:var(--muted);font-size:12px}
figure{margin:0 0 16px;padding:14px;border:1px solid var(--border);border-radius:8px;background:var(--card)}
figcaption{color:var(--muted);font-size:12.5px;margin-top:6px}
.charts{display:grid;grid-template-columns:repeat(auto-fill,minmax(470px,1fr));gap:16px}
.charts figure{margin:0}
svg.chart{display:block;max-width:100%;height:auto}
svg.chart text{fill:var(--fg)}
svg.chart .tick,svg.chart .nodata,svg.chart .more{fill:var(--muted)}
svg.chart .grid{stroke:var(--grid)}svg.chart .frame{stroke:var(--axis)}
svg.chart .point.best{stroke:var(--fg)}
footer{margin-top:40px;color:var(--muted);font-size:12.5px}
)css";

// Click a column head to sort by it (again to reverse); rows without a value stay last. The
// page is complete without it.
constexpr const char* kScript = R"js(
(function(){
function key(cell){if(!cell)return[2,""];var v=cell.getAttribute("data-v");
if(v===null)v=cell.textContent||"";v=String(v).trim();if(v===""||v==="-")return[2,""];
var n=Number(v);return isFinite(n)?[0,n]:[1,v];}
try{var tables=document.querySelectorAll("table.sortable");
for(var t=0;t<tables.length;t++)(function(table){
if(!table.tHead||!table.tBodies.length)return;var heads=table.tHead.rows[0].cells;
for(var i=0;i<heads.length;i++)(function(th,col){th.className+=" sortable";th.tabIndex=0;
var sort=function(){var asc=th.getAttribute("aria-sort")!=="ascending";
for(var h=0;h<heads.length;h++)heads[h].removeAttribute("aria-sort");
th.setAttribute("aria-sort",asc?"ascending":"descending");var body=table.tBodies[0];
var rows=Array.prototype.slice.call(body.rows);rows.sort(function(r1,r2){
var a=key(r1.cells[col]),b=key(r2.cells[col]);if(a[0]!==b[0])return a[0]-b[0];
var d=a[0]===0?a[1]-b[1]:String(a[1]).localeCompare(String(b[1]));return asc?d:-d;});
for(var r=0;r<rows.length;r++)body.appendChild(rows[r]);};
th.addEventListener("click",sort);
th.addEventListener("keydown",function(e){if(e.key==="Enter")sort();});})(heads[i],i);
})(tables[t]);}catch(e){}
})();
)js";

std::string E(std::string_view s) { return HtmlEscape(s); }

std::string FormatLocalTime(Millis ms) {
  if (ms <= 0) return "-";
  time_t t = static_cast<time_t>(ms / 1000);
  struct tm tm {};
  localtime_r(&t, &tm);
  char buf[48];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S %Z", &tm);
  return buf;
}

std::string StateBadge(std::string_view state, std::string_view text = {}) {
  return fmt::format("<span class=\"state state-{}\">{}</span>", E(state),
                     E(text.empty() ? state : text));
}

// The attempt reason's colour: what the run state of that outcome would be.
std::string_view ReasonState(std::string_view reason) {
  if (reason == "succeeded") return "succeeded";
  if (reason == "cancelled") return "cancelled";
  if (reason == "interrupted" || reason == "preempted") return "queued";
  return "failed";
}

// A value for data-v: numbers raw (so the table sorts them as numbers), text as shown.
std::string SortKey(const Json& v) {
  if (v.is_number()) return fmt::format("{}", v.get<double>());
  if (v.is_null()) return "";
  return FormatValue(v);
}

// "model=cnn batch_size=32": the values of `keys` in `params`.
std::string ParamText(const Json& params, const std::vector<std::string>& keys) {
  std::vector<std::string> parts;
  for (const auto& k : keys) {
    if (params.contains(k)) parts.push_back(k + "=" + FormatValue(params[k]));
  }
  return Join(parts, " ");
}

std::string SignalName(int sig) {
  switch (sig) {
    case 1:
      return "SIGHUP";
    case 2:
      return "SIGINT";
    case 6:
      return "SIGABRT";
    case 7:
      return "SIGBUS";
    case 8:
      return "SIGFPE";
    case 9:
      return "SIGKILL";
    case 11:
      return "SIGSEGV";
    case 13:
      return "SIGPIPE";
    case 15:
      return "SIGTERM";
    default:
      return fmt::format("signal {}", sig);
  }
}

// "batch_size=256 grad_accum=2": what `to` changed from `from`.
std::string Changed(const Json& from, const Json& to) {
  std::vector<std::string> parts;
  for (auto it = to.begin(); it != to.end(); ++it) {
    if (from.contains(it.key()) && from[it.key()] == it.value()) continue;
    parts.push_back(it.key() + "=" + FormatValue(it.value()));
  }
  return Join(parts, " ");
}

const Alert* FindAlert(const std::vector<Alert>& alerts, int64_t run_id, std::string_view kind) {
  for (const auto& a : alerts) {
    if (a.run_id == run_id && a.kind == kind) return &a;
  }
  return nullptr;
}

// Why an attempt ended, in words, and what happened next.
std::string FailureDetail(const ReportData& d, const Run& run, const Attempt& a,
                          const Attempt* next) {
  std::string what;
  const std::string& r = a.reason;
  if (r == "cuda_oom") {
    std::string oom_param = d.experiment.spec.contains("oom")
                                ? d.experiment.spec["oom"].value("param", std::string())
                                : std::string();
    what = "CUDA out of memory";
    if (!oom_param.empty() && a.params.contains(oom_param)) {
      what += fmt::format(" at {}={}", oom_param, FormatValue(a.params[oom_param]));
    }
  } else if (r == "exit_code") {
    what = fmt::format("exited with code {}", a.exit_code);
  } else if (r == "signal") {
    what = fmt::format("killed by {}", SignalName(a.signal));
  } else if (r == "timeout") {
    Millis limit = d.experiment.spec.value("timeout_ms", int64_t{0});
    what = limit > 0 ? fmt::format("ran past its timeout of {}", FormatDuration(limit))
                     : std::string("ran past its timeout");
  } else if (r == "diverged") {
    const Alert* al = FindAlert(d.alerts, run.id, "diverged");
    what = al ? al->message : "a watched metric became NaN or infinite; stopped, not retried";
  } else if (r == "stalled") {
    // Not the run's stalled alert: it is one per run and names the latest attempt it stopped.
    Millis stall = d.experiment.spec.contains("monitor")
                       ? d.experiment.spec["monitor"].value("stall_ms", int64_t{0})
                       : 0;
    what = stall > 0 ? fmt::format("no output for {} (monitor.stall)", FormatDuration(stall))
                     : std::string("no output for monitor.stall");
  } else if (r == "launch_error") {
    what = "could not be started (command or workdir missing?)";
  } else if (r == "interrupted") {
    what = "the engine went away while it ran";
  } else if (r == "preempted") {
    what = "preempted: its GPUs went to a better-ranked run";
  } else if (r == "cancelled") {
    what = "cancelled";
  } else {
    what = r;
  }
  // What the run said last (its exception), kept with the attempt.
  if (!a.error.empty() && (r == "exit_code" || r == "signal")) {
    what += ": " + LastLines(a.error, 1, 300);
  }
  if (next) {
    std::string changed = Changed(a.params, next->params);
    what += changed.empty() ? fmt::format("; retried as attempt {}", next->number)
                            : fmt::format("; retried with {}", changed);
  } else if (r == "cuda_oom") {
    what += "; not retried (oom.min reached)";
  }
  return what;
}

void Header(std::string& out, const ReportData& d, const Comparison& c) {
  const Experiment& e = d.experiment;
  out += fmt::format("<header>\n<h1>{} <span class=\"muted\">experiment {}</span></h1>\n",
                     E(e.name), e.id);
  std::map<std::string, int> counts;
  for (const Run& r : d.runs) counts[std::string(ToString(r.state))]++;
  out += fmt::format("<div class=\"counts\">{}",
                     StateBadge(e.status == ExperimentStatus::kDone ? "succeeded" : "running",
                                ToString(e.status)));
  out += fmt::format("<span class=\"muted\">{} run{}:</span>", d.runs.size(),
                     d.runs.size() == 1 ? "" : "s");
  for (RunState s : {RunState::kSucceeded, RunState::kFailed, RunState::kCancelled,
                     RunState::kRunning, RunState::kRetrying, RunState::kQueued}) {
    auto it = counts.find(std::string(ToString(s)));
    if (it == counts.end()) continue;
    out += StateBadge(ToString(s), fmt::format("{} {}", it->second, ToString(s)));
  }
  out += "</div>\n<dl class=\"meta\">\n";
  out += fmt::format("<dt>created</dt><dd>{}</dd>\n", E(FormatLocalTime(e.created_ms)));
  std::string code;
  if (!e.git_commit.empty()) {
    code = fmt::format("git <code>{}</code>{}", E(e.git_commit.substr(0, 12)),
                       e.git_diff.empty() ? " (clean)" : " + uncommitted changes");
  } else {
    code = "not a git repository";
  }
  if (!e.snapshot_hash.empty()) {
    code += fmt::format(", snapshot <code>{}</code>", E(e.snapshot_hash.substr(0, 12)));
  }
  out += fmt::format("<dt>code</dt><dd>{}</dd>\n", code);
  if (!c.metric.empty()) {
    out += fmt::format("<dt>ranked by</dt><dd><code>{}</code>, {} is better, each run by its {}{}</dd>\n",
                       E(c.metric), c.maximize ? "higher" : "lower", E(SummaryWords(c.rule)),
                       c.guessed ? " (the spec has no objective)" : "");
  } else if (!c.rule.Note().empty()) {
    out += fmt::format("<dt>ranked by</dt><dd>{}</dd>\n", E(c.rule.Note()));
  }
  if (c.best_run != 0) {
    auto it = std::find_if(c.runs.begin(), c.runs.end(),
                           [&](const Run& r) { return r.id == c.best_run; });
    std::string params = it == c.runs.end() ? "" : ParamText(it->current_params, c.varying);
    auto v = it == c.runs.end() ? std::nullopt : SortValue(c, *it);
    out += fmt::format(
        "<dt>best</dt><dd><a href=\"#run-{}\">run {}</a>{}{}</dd>\n", c.best_run, c.best_run,
        v ? fmt::format(": {} = <strong>{}</strong>", E(c.metric), E(FormatScore(*v)))
          : std::string(),
        params.empty() ? "" : fmt::format(" <span class=\"muted\">({})</span>", E(params)));
  }
  out +=
      "</dl>\n<nav><a href=\"#results\">Results</a><a href=\"#curves\">Curves</a>"
      "<a href=\"#params\">Parameters</a><a href=\"#failures\">Failures</a>"
      "<a href=\"#spec\">Spec</a></nav>\n</header>\n";
}

// Seeds pooled: each config's mean, spread and count, and whether the top two differ.
void Groups(std::string& out, const Comparison& c) {
  const Grouping g = GroupBySeed(c);
  if (g.groups.empty() || c.metric.empty()) return;
  out += fmt::format(
      "<h3>By config, {} pooled</h3>\n<div class=\"table-wrap\"><table id=\"groups\">\n"
      "<thead><tr><th>config</th><th>n</th><th>mean</th><th>std</th><th>min</th><th>max</th>"
      "<th>runs</th></tr></thead>\n<tbody>\n",
      E(Join(g.seeds, ", ")));
  for (size_t i = 0; i < g.groups.size(); ++i) {
    const RunGroup& r = g.groups[i];
    std::string config;
    for (const auto& [k, v] : r.params.items()) {
      if (std::find(c.varying.begin(), c.varying.end(), k) == c.varying.end()) continue;
      config += (config.empty() ? "" : " ") + k + "=" + FormatValue(v);
    }
    std::string runs;
    for (int64_t id : r.runs) runs += fmt::format("{}<a href=\"#run-{}\">{}</a>", runs.empty() ? "" : " ", id, id);
    out += fmt::format(
        "<tr{}><td>{}</td><td class=\"num\">{}/{}{}</td><td class=\"num strong\">{}</td>"
        "<td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td>"
        "<td>{}</td></tr>\n",
        i == 0 && r.complete ? " class=\"best\"" : (r.complete ? "" : " class=\"incomplete\""),
        E(config.empty() ? "(all)" : config), r.n, g.seeds_per_config,
        r.complete ? "" : " <span class=\"muted\">incomplete</span>",
        r.n > 0 ? E(FormatScore(r.mean)) : "-",
        r.n > 0 ? E(fmt::format("{:.2g}", r.stddev)) : "-", r.n > 0 ? E(FormatScore(r.min)) : "-",
        r.n > 0 ? E(FormatScore(r.max)) : "-", runs);
  }
  out += "</tbody></table></div>\n";
  if (g.top_two) {
    out += fmt::format(
        "<p class=\"muted\" id=\"groups-test\">{}: Welch's t-test p = {:.2g} (t = {:.3g}, df "
        "= {:.3g}).</p>\n",
        g.top_two->p < 0.05 ? "The top two configs differ"
                            : "The top two configs overlap; more seeds would tell them apart",
        g.top_two->p, g.top_two->t, g.top_two->df);
  }
}

// A search (or a sweep with a prune rule): trials by state, the best so far, importance.
void SearchSection(std::string& out, const ReportData& d, const Comparison& c) {
  if (!d.experiment.spec.contains("search") && !d.experiment.spec.contains("prune")) return;
  const SearchView v = SearchViewOf(c);
  out += "<section id=\"search\">\n<h2>Search</h2>\n<p id=\"search-states\">";
  std::string states;
  for (const auto& [state, n] : v.states) states += fmt::format("{}{} {}", states.empty() ? "" : ", ", n, state);
  out += E(states) + "</p>\n";
  if (std::string budget = BudgetLine(v); !budget.empty()) {
    out += "<p id=\"search-budget\">How the budget went: " + E(budget) + "</p>\n";
  }
  if (!v.history.empty()) {
    out += fmt::format("<h3>Best {} so far</h3>\n<div class=\"table-wrap\"><table id=\"search-history\">"
                       "<thead><tr><th>trial</th><th>run</th><th>best</th></tr></thead>\n<tbody>\n",
                       E(c.metric));
    double last = std::nan("");
    for (const auto& p : v.history) {
      if (p.best == last) continue;  // the trials that improved it
      last = p.best;
      out += fmt::format("<tr><td class=\"num\">{}</td><td><a href=\"#run-{}\">{}</a></td>"
                         "<td class=\"num\">{}</td></tr>\n",
                         p.trial, p.run_id, p.run_id, E(FormatScore(p.best)));
    }
    out += "</tbody></table></div>\n";
  }
  if (!v.importance.empty()) {
    out += "<h3>Parameter importance</h3>\n<div class=\"table-wrap\"><table id=\"importance\">"
           "<thead><tr><th>param</th><th>share</th></tr></thead>\n<tbody>\n";
    for (const auto& [p, share] : v.importance) {
      out += fmt::format("<tr><td>{}</td><td class=\"num\">{:.0f}%</td></tr>\n", E(p), 100 * share);
    }
    out += fmt::format("</tbody></table></div>\n<p class=\"muted\">The share of the variance of {} "
                       "explained by each parameter's value (epsilon squared; numbers by "
                       "quartile), over the finished trials; seeds and constants left out.</p>\n",
                       E(c.metric));
  } else if (!v.importance_note.empty()) {
    out += "<p class=\"muted\" id=\"importance-note\">" + E(v.importance_note) + "</p>\n";
  }
  out += "</section>\n";
}

void ResultsTable(std::string& out, const Comparison& c) {
  out += "<section id=\"results\">\n<h2>Results</h2>\n";
  if (c.runs.empty()) {
    out += "<p class=\"muted\">This experiment has no runs.</p>\n</section>\n";
    return;
  }
  out +=
      "<div class=\"table-wrap\"><table class=\"sortable\" id=\"runs\">\n<thead><tr>"
      "<th>rank</th><th>run</th>";
  for (const auto& p : c.varying) out += fmt::format("<th>{}</th>", E(p));
  out += "<th>state</th><th>attempts</th>";
  for (const auto& m : c.metrics) {
    out += m == c.metric
               ? fmt::format("<th title=\"each run's {}; {} is better\">{} ({}, {})</th>",
                             E(SummaryWords(c.rule)), c.maximize ? "higher" : "lower",
                             E(MetricLabel(c, m)), c.maximize ? "max" : "min",
                             E(ScoreSummaryText(c.rule.summary, c.rule.last_k)))
               : fmt::format("<th>{}</th>", E(MetricLabel(c, m)));
  }
  out += "<th>time</th></tr></thead>\n<tbody>\n";
  int rank = 0;
  for (const Run& r : c.runs) {
    ++rank;
    bool best = r.id == c.best_run;
    out += fmt::format("<tr id=\"run-{}\" data-run=\"{}\"{}>", r.id, r.id,
                       best ? " class=\"best\"" : "");
    out += fmt::format("<td class=\"num\" data-v=\"{}\">{}{}</td>", rank,
                       best ? "<span class=\"star\" title=\"best run\">\u2605</span> " : "", rank);
    out += fmt::format("<td class=\"num\" data-v=\"{}\">{}</td>", r.id, r.id);
    for (const auto& p : c.varying) {
      if (!r.current_params.contains(p)) {
        out += "<td></td>";
        continue;
      }
      const Json& v = r.current_params[p];
      std::string was;
      if (r.params.contains(p) && r.params[p] != v) {
        was = fmt::format(" <span class=\"was\">(was {})</span>", E(FormatValue(r.params[p])));
      }
      out += fmt::format("<td data-v=\"{}\">{}{}</td>", E(SortKey(v)), E(FormatValue(v)), was);
    }
    std::string state(ToString(r.state));
    std::string label = state;
    if (r.state != RunState::kSucceeded && !r.reason.empty() && r.reason != state) {
      label += " (" + r.reason + ")";
    }
    out += fmt::format("<td data-v=\"{}\">{}</td>", E(label), StateBadge(state, label));
    out += fmt::format("<td class=\"num\">{}</td>", r.attempts);
    for (const auto& m : c.metrics) {
      if (m == c.metric) {
        // The ranking metric's column holds the score it ranks by (NaN and infinities as such).
        auto score = SortValue(c, r);
        out += score ? fmt::format("<td class=\"num strong\" data-v=\"{}\">{}</td>",
                                   std::isfinite(*score) ? fmt::format("{}", *score) : "",
                                   E(FormatScore(*score)))
                     : "<td class=\"num\" data-v=\"\">-</td>";
        continue;
      }
      if (!r.final_metrics.contains(m)) {
        out += "<td class=\"num\" data-v=\"\">-</td>";
        continue;
      }
      const Json& v = r.final_metrics[m];
      out +=
          fmt::format("<td class=\"num\" data-v=\"{}\">{}</td>", E(SortKey(v)), E(FormatValue(v)));
    }
    if (r.started_ms > 0 && r.ended_ms > 0) {
      out += fmt::format("<td class=\"num\" data-v=\"{}\">{}</td>", r.ended_ms - r.started_ms,
                         E(FormatDuration(r.ended_ms - r.started_ms)));
    } else {
      out += "<td class=\"num\" data-v=\"\">-</td>";
    }
    out += "</tr>\n";
  }
  out += "</tbody></table></div>\n";
  Groups(out, c);
  if (c.best_run == 0 && !c.metric.empty()) {
    bool any_ok = std::any_of(c.runs.begin(), c.runs.end(),
                              [](const Run& r) { return r.state == RunState::kSucceeded; });
    out += fmt::format("<p class=\"muted\">{}</p>\n",
                       any_ok ? fmt::format("No succeeded run reported {}.", E(c.metric))
                              : std::string("No run succeeded."));
  }
  out += "</section>\n";
}

void Curves(std::string& out, const ReportData& d, const Comparison& c) {
  out += "<section id=\"curves\">\n<h2>Curves</h2>\n";
  std::vector<std::string> metrics = CurveMetrics(c);
  if (metrics.empty()) {
    out += "<p class=\"muted\">No run reported a metric.</p>\n</section>\n";
    return;
  }
  for (const auto& m : metrics) {
    out += "<figure class=\"curve\" data-metric=\"" + E(m) + "\">\n";
    out += CurvesSvg(d.experiment, c, d.details, m, /*standalone=*/false);
    out += fmt::format(
        "<figcaption>{} against step, one line per run (of its latest attempt that reported "
        "it); the best run is drawn thicker and comes first in the legend.</figcaption>\n"
        "</figure>\n",
        E(m));
  }
  out += "</section>\n";
}

void Params(std::string& out, const ReportData& d, const Comparison& c) {
  out += "<section id=\"params\">\n<h2>Parameters";
  if (!c.metric.empty()) out += " against " + E(c.metric);
  out += "</h2>\n";
  if (c.metric.empty()) {
    out += "<p class=\"muted\">No run reported a metric.</p>\n</section>\n";
    return;
  }
  if (c.varying.empty()) {
    out += "<p class=\"muted\">Every run has the same parameters.</p>\n</section>\n";
    return;
  }
  std::vector<Run> by_id = c.runs;
  std::sort(by_id.begin(), by_id.end(), [](const Run& a, const Run& b) { return a.id < b.id; });
  out += "<div class=\"charts\">\n";
  for (const auto& p : c.varying) {
    // Numbers on a numeric axis; anything else (names, booleans, a mix) as categories.
    bool numeric = true;
    for (const Run& r : by_id) {
      if (!r.current_params.contains(p)) continue;
      const Json& v = r.current_params[p];
      numeric = numeric && v.is_number();
    }
    std::vector<ScatterPoint> points;
    for (const Run& r : by_id) {
      auto value = SortValue(c, r);
      if (!value || !std::isfinite(*value) || !r.current_params.contains(p)) continue;
      const Json& v = r.current_params[p];
      ScatterPoint sp;
      sp.y = *value;
      if (numeric) sp.x = v.get<double>();
      sp.category = FormatValue(v);
      sp.label = fmt::format("run {} ({}): {}={}, {}={}", r.id, ToString(r.state), p,
                             FormatValue(v), c.metric, FormatScore(*value));
      sp.highlight = r.id == c.best_run;
      if (sp.highlight) sp.note = fmt::format("best: run {}", r.id);
      points.push_back(std::move(sp));
    }
    ChartOptions o;
    // A parameter searched on a log scale (log_uniform, int_log), or numbers spanning two
    // decades or more (a grid such as 1e-4, 1e-3, 1e-2), on a log axis.
    double lo = INFINITY, hi = 0;
    for (const ScatterPoint& sp : points) {
      lo = std::min(lo, sp.x);
      hi = std::max(hi, sp.x);
    }
    const bool log_declared = SearchedOnLogScale(d.experiment.spec, p);
    o.log_x = numeric && !points.empty() && lo > 0 && (log_declared || hi / lo >= 100);
    o.title = fmt::format("{} by {}", c.metric, p);
    o.x_label = o.log_x ? p + " (log scale)" : p;
    o.y_label = c.metric;
    o.width = 560;
    o.height = 340;
    o.standalone = false;
    out += fmt::format("<figure class=\"scatter\" data-param=\"{}\" data-scale=\"{}\">\n", E(p),
                       o.log_x ? "log" : "linear");
    out += ScatterSvg(points, !numeric, o);
    out += fmt::format(
        "<figcaption>The last {} each run reported; {} run{} with a "
        "value.</figcaption>\n</figure>\n",
        E(c.metric), points.size(), points.size() == 1 ? "" : "s");
  }
  out += "</div>\n</section>\n";
}

void Failures(std::string& out, const ReportData& d, const Comparison& c) {
  out += "<section id=\"failures\">\n<h2>Failures</h2>\n";
  std::string rows;
  int n = 0;
  std::set<int64_t> runs_hit;
  std::vector<Run> by_id = c.runs;
  std::sort(by_id.begin(), by_id.end(), [](const Run& a, const Run& b) { return a.id < b.id; });
  for (const Run& r : by_id) {
    auto it = d.details.find(r.id);
    if (it == d.details.end()) continue;
    const auto& attempts = it->second.attempts;
    for (size_t i = 0; i < attempts.size(); ++i) {
      const Attempt& a = attempts[i];
      // A pruned attempt was stopped for being behind, by design: not a failure.
      if (!a.ended || a.reason == "succeeded" || a.reason == "pruned") continue;
      const Attempt* next = i + 1 < attempts.size() ? &attempts[i + 1] : nullptr;
      ++n;
      runs_hit.insert(r.id);
      rows += fmt::format(
          "<tr data-run=\"{}\" data-attempt=\"{}\"><td class=\"num\" data-v=\"{}\"><a "
          "href=\"#run-{}\">run {}</a></td><td class=\"num\">{}</td><td>{}</td><td>{}</td>"
          "<td class=\"mono\">{}</td><td class=\"num\">{}</td></tr>\n",
          r.id, a.number, r.id, r.id, r.id, a.number, StateBadge(ReasonState(a.reason), a.reason),
          E(FailureDetail(d, r, a, next)), E(ParamText(a.params, c.varying)),
          E(a.started_ms > 0 && a.ended_ms > 0 ? FormatDuration(a.ended_ms - a.started_ms)
                                               : std::string("-")));
    }
  }
  if (n == 0) {
    out += "<p class=\"muted\">No attempt failed.</p>\n</section>\n";
    return;
  }
  out += fmt::format("<p>{} attempt{} of {} run{} did not succeed.</p>\n", n, n == 1 ? "" : "s",
                     runs_hit.size(), runs_hit.size() == 1 ? "" : "s");
  out +=
      "<div class=\"table-wrap\"><table class=\"sortable\" id=\"failures-table\">\n<thead><tr>"
      "<th>run</th><th>attempt</th><th>reason</th><th>what happened</th><th>params</th>"
      "<th>time</th></tr></thead>\n<tbody>\n" +
      rows + "</tbody></table></div>\n</section>\n";
}

}  // namespace

std::vector<std::string> CurveMetrics(const Comparison& c) {
  std::vector<std::string> out;
  if (c.metric.empty()) return out;
  out.push_back(c.metric);
  std::string loss;
  if (std::find(c.metrics.begin(), c.metrics.end(), "loss") != c.metrics.end()) {
    loss = "loss";
  } else {
    for (const auto& m : c.metrics) {
      if (m.find("loss") != std::string::npos) {
        loss = m;
        break;
      }
    }
  }
  if (!loss.empty() && loss != c.metric) out.push_back(loss);
  return out;
}

std::vector<LineSeries> CurveSeries(const Comparison& c,
                                    const std::map<int64_t, RunDetails>& details,
                                    const std::string& metric) {
  std::vector<LineSeries> out;
  for (const Run& r : c.runs) {
    auto it = details.find(r.id);
    // A run with curves of other metrics keeps its place, so it has the same colour in every
    // chart of the report.
    if (it == details.end() || it->second.curves.empty()) continue;
    LineSeries s;
    s.name = fmt::format("run {}", r.id);
    std::string params = ParamText(r.current_params, c.varying);
    if (!params.empty()) s.name += " \u00b7 " + params;
    s.emphasis = r.id == c.best_run;
    auto curve = it->second.curves.find(metric);
    if (curve != it->second.curves.end()) {
      s.points.reserve(curve->second.points.size());
      for (const auto& p : curve->second.points) {
        s.points.push_back({static_cast<double>(p.step), p.value});
      }
    }
    out.push_back(std::move(s));
  }
  return out;
}

std::string CurvesSvg(const Experiment& exp, const Comparison& c,
                      const std::map<int64_t, RunDetails>& details, const std::string& metric,
                      bool standalone) {
  ChartOptions o;
  bool objective = metric == c.metric;
  std::string better =
      objective ? fmt::format(" ({} is better)", c.maximize ? "higher" : "lower") : std::string();
  o.title = standalone ? fmt::format("{}: {}{}", exp.name, metric, better) : metric + better;
  o.x_label = "step";
  o.y_label = metric;
  o.width = 1120;  // the page's content width
  o.height = 380;
  o.standalone = standalone;
  return LineChartSvg(CurveSeries(c, details, metric), o);
}

std::string RenderReportHtml(const ReportData& d) {
  const Comparison& c = d.ranking;
  std::string out;
  out.reserve(64 * 1024);
  out +=
      "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
      "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
      "<meta name=\"color-scheme\" content=\"light dark\">\n"
      "<meta name=\"generator\" content=\"drover " +
      E(d.drover_version) + "\">\n";
  out += fmt::format("<title>{} \u00b7 experiment {} \u00b7 drover report</title>\n",
                     E(d.experiment.name), d.experiment.id);
  out += "<style>";
  out += kStyle;
  out += "</style>\n</head>\n<body>\n<main>\n";
  Header(out, d, c);
  ResultsTable(out, c);
  SearchSection(out, d, c);
  Curves(out, d, c);
  Params(out, d, c);
  Failures(out, d, c);
  out += "<section id=\"spec\">\n<h2>Spec</h2>\n";
  if (d.experiment.spec_yaml.empty()) {
    out += "<p class=\"muted\">Not recorded.</p>\n";
  } else {
    out += "<details><summary>The spec as submitted</summary>\n<pre>" + E(d.experiment.spec_yaml) +
           "</pre></details>\n";
  }
  out += "</section>\n";
  out += fmt::format(
      "<footer>Written by drover {} at {}. One file: styles and charts are inline, "
      "nothing is loaded from elsewhere.</footer>\n",
      E(d.drover_version), E(FormatLocalTime(d.generated_ms)));
  out += "</main>\n<script>";
  out += kScript;
  out += "</script>\n</body>\n</html>\n";
  return out;
}

}  // namespace drover::report
