// A pipeline's graph on the experiment page (docs/pipelines.md, docs/web.md): one box per stage,
// in columns by depth (the longest chain of needs before it), arrows from each need, the stage's
// state, its runs by state with the cached ones counted, and a dot per run (cached dots hollow).
// Clicking a stage shows only its runs in the table.
import { h, fill, fmtNum } from "./util.js";

const SVG = "http://www.w3.org/2000/svg";

// One word for a stage: running while any run is; failed when one failed; cached when every run
// was cached; succeeded when all succeeded; cancelled when all were stopped (a failed upstream);
// waiting otherwise.
export function stageState(st) {
  const c = st.counts || {};
  if (!st.runs) return "waiting";
  if ((c.running || 0) + (c.retrying || 0) > 0) return "running";
  if (c.failed > 0) return "failed";
  if (c.succeeded === st.runs) return st.cached === st.runs ? "cached" : "succeeded";
  if (c.cancelled === st.runs) return "cancelled";
  if ((c.succeeded || 0) + (c.cancelled || 0) === st.runs) return c.cancelled ? "cancelled" : "succeeded";
  return "waiting";
}

const BADGE = { cached: "succeeded", waiting: "queued" };

function countsLine(st) {
  const c = st.counts || {};
  const parts = [];
  const ran = (c.succeeded || 0) - (st.cached || 0);
  if (ran > 0) parts.push(`${fmtNum(ran)} ran`);
  if (st.cached) parts.push(`${fmtNum(st.cached)} cached`);
  if (c.running) parts.push(`${fmtNum(c.running)} running`);
  if (c.retrying) parts.push(`${fmtNum(c.retrying)} retrying`);
  if (st.waiting) parts.push(`${fmtNum(st.waiting)} waiting for needs`);
  const queued = (c.queued || 0) - (st.waiting || 0);
  if (queued > 0) parts.push(`${fmtNum(queued)} queued`);
  if (c.failed) parts.push(`${fmtNum(c.failed)} failed`);
  if (c.cancelled) parts.push(`${fmtNum(c.cancelled)} not run`);
  return parts.join(" · ") || "no runs";
}

export class PipelineGraph {
  constructor(root, { onPick } = {}) {
    this.root = root;
    this.onPick = onPick;
    this.key = "";
    this.el = h("div", { class: "pipeline", id: "pipeline-graph" });
    this.svg = document.createElementNS(SVG, "svg");
    this.svg.setAttribute("class", "pipeline-edges");
    this.svg.setAttribute("aria-hidden", "true");
    this.cols = h("div", { class: "pipeline-cols" });
    this.el.append(this.svg, this.cols);
    this.resize = () => this.drawEdges();
    window.addEventListener("resize", this.resize);
  }

  destroy() {
    window.removeEventListener("resize", this.resize);
  }

  set(stages, selected) {
    const key = JSON.stringify([stages, selected]);
    if (key === this.key) return;
    this.key = key;
    this.stages = stages;
    if (!this.el.isConnected) fill(this.root, this.el);
    const depth = Math.max(0, ...stages.map((s) => s.depth));
    const columns = [];
    for (let d = 0; d <= depth; d++) columns.push(h("div", { class: "pipeline-col" }));
    this.nodes = new Map();
    for (const st of stages) {
      const state = stageState(st);
      const more = st.runs - st.shown.length;
      const node = h("button", {
        type: "button",
        class: `stage-node stage-${state} ${selected === st.name ? "picked" : ""}`,
        dataset: { stage: st.name, state },
        "aria-pressed": selected === st.name ? "true" : "false",
        title: selected === st.name ? "show every stage's runs" : `show only ${st.name}'s runs`,
        onclick: () => this.onPick?.(selected === st.name ? "" : st.name),
      },
        h("div", { class: "stage-head" },
          h("span", { class: "stage-name" }, st.name),
          st.gather ? h("span", { class: "badge", title: "runs once over all its needs' runs" }, "gather") : null,
          h("span", { class: `badge state-${BADGE[state] || state} stage-state` }, state)),
        h("div", { class: "stage-counts muted small" }, `${fmtNum(st.runs)} run${st.runs === 1 ? "" : "s"}: ${countsLine(st)}`),
        h("div", { class: "stage-dots" },
          st.shown.map((r) => h("a", {
            class: `dot state-${r.state} ${r.cached_from ? "cached" : ""}`,
            href: `#/runs/${r.id}`,
            title: `#${r.id} ${r.state}${r.cached_from ? `, cached from #${r.cached_from}` : r.reason && r.reason !== r.state ? ` (${r.reason})` : ""}`,
            onclick: (ev) => ev.stopPropagation(),
          })),
          more > 0 ? h("span", { class: "muted small" }, ` +${fmtNum(more)}`) : null),
        st.outputs?.length ? h("div", { class: "stage-outputs mono small muted", title: "its declared outputs, stored as artifacts" }, `→ ${st.outputs.join(" ")}`) : null);
      this.nodes.set(st.name, node);
      columns[st.depth].append(node);
    }
    fill(this.cols, columns);
    requestAnimationFrame(() => this.drawEdges());
  }

  // Arrows from the right of each need's box to the left of the box that needs it.
  drawEdges() {
    if (!this.stages || !this.el.isConnected) return;
    const base = this.el.getBoundingClientRect();
    this.svg.setAttribute("width", String(this.el.scrollWidth));
    this.svg.setAttribute("height", String(this.el.scrollHeight));
    const paths = [];
    for (const st of this.stages) {
      const to = this.nodes.get(st.name)?.getBoundingClientRect();
      if (!to) continue;
      for (const need of st.needs) {
        const from = this.nodes.get(need)?.getBoundingClientRect();
        if (!from) continue;
        const x1 = from.right - base.left, y1 = from.top + from.height / 2 - base.top;
        const x2 = to.left - base.left - 4, y2 = to.top + to.height / 2 - base.top;
        const mx = (x1 + x2) / 2;
        const p = document.createElementNS(SVG, "path");
        p.setAttribute("d", `M${x1},${y1} C${mx},${y1} ${mx},${y2} ${x2},${y2}`);
        p.setAttribute("class", "edge");
        p.setAttribute("marker-end", "url(#pipeline-arrow)");
        p.dataset.from = need;
        p.dataset.to = st.name;
        paths.push(p);
      }
    }
    const defs = document.createElementNS(SVG, "defs");
    const marker = document.createElementNS(SVG, "marker");
    for (const [k, v] of Object.entries({ id: "pipeline-arrow", viewBox: "0 0 8 8", refX: "7", refY: "4", markerWidth: "8", markerHeight: "8", orient: "auto" })) marker.setAttribute(k, v);
    const tip = document.createElementNS(SVG, "path");
    tip.setAttribute("d", "M0,0 L8,4 L0,8 z");
    tip.setAttribute("class", "edge-tip");
    marker.append(tip);
    defs.append(marker);
    this.svg.replaceChildren(defs, ...paths);
  }
}
