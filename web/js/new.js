// #/new : pick a recipe (drover.yaml), tick the values to try for each parameter (or type an
// instruction), see the run count and the spec the daemon would run, submit.
import { h, fill, fmtValue, debounce, notice, isAbort, toast, replaceQuery } from "./util.js";
import { api, post, ApiError } from "./api.js";

export async function mount(root, { scope, query }) {
  const signal = scope.signal;
  const recipeSel = h("select", { class: "input", id: "recipe-select", "aria-label": "recipe" });
  const recipePath = h("input", { class: "input grow", id: "recipe-path", placeholder: "/path/to/project/drover.yaml", "aria-label": "recipe path" });
  const recipeLoad = h("button", { class: "btn", type: "button" }, "Load");
  const recipeInfo = h("div", { class: "muted small" });
  const tabTick = h("button", { type: "button", class: "tab active", role: "tab", id: "tab-tick", "aria-selected": "true" }, "Tick values");
  const tabWords = h("button", { type: "button", class: "tab", role: "tab", id: "tab-words", "aria-selected": "false" }, "Describe in words");
  const tickPane = h("div", { class: "tab-pane", id: "pane-tick" });
  const wordsPane = h("div", { class: "tab-pane", id: "pane-words", hidden: true });
  const runCount = h("div", { class: "run-count", id: "run-count" }, "—");
  const planMsg = h("div", { class: "plan-msg", id: "plan-msg" });
  const understoodEl = h("div", { id: "plan-understood" });
  const yamlEl = h("pre", { class: "code yaml", id: "plan-yaml" }, "");
  const submitBtn = h("button", { class: "btn btn-primary btn-big", type: "button", id: "submit-experiment", disabled: true }, "Submit");

  root.append(
    h("div", { class: "page-head" }, h("h1", null, "New experiment")),
    h("div", { class: "new-layout" },
      h("div", null,
        h("section", { class: "panel" },
          h("div", { class: "panel-head" }, h("h2", null, "Recipe")),
          h("div", { class: "panel-body" },
            h("div", { class: "row" }, recipeSel, recipePath, recipeLoad),
            recipeInfo)),
        h("section", { class: "panel" },
          h("div", { class: "tabs", role: "tablist" }, tabTick, tabWords),
          tickPane, wordsPane)),
      h("aside", { class: "panel plan-panel" },
        h("div", { class: "panel-head" }, h("h2", null, "Plan")),
        h("div", { class: "panel-body" },
          runCount, planMsg, understoodEl,
          h("details", { open: true }, h("summary", null, "Spec to submit"), yamlEl),
          submitBtn))));

  let recipe = null; // /recipes/show
  let mode = "tick";
  let plan = null; // the last /plan answer that matches the form
  let planSeq = 0;
  const fields = new Map(); // param -> {boxes, free, error}

  const setMode = (m) => {
    mode = m;
    tabTick.classList.toggle("active", m === "tick");
    tabWords.classList.toggle("active", m === "words");
    tabTick.setAttribute("aria-selected", String(m === "tick"));
    tabWords.setAttribute("aria-selected", String(m === "words"));
    tickPane.hidden = m !== "tick";
    wordsPane.hidden = m !== "words";
    plan = null;
    showPlan(null);
    if (m === "tick") schedulePlan();
    else if (instruction.value.trim()) schedulePlan();
  };
  tabTick.addEventListener("click", () => setMode("tick"));
  tabWords.addEventListener("click", () => setMode("words"));

  // ---- the words pane
  const instruction = h("textarea", { class: "input", id: "instruction", rows: 3, placeholder: "compare mlp and cnn at batch size 32 and 64, 3 seeds" });
  const planBtn = h("button", { class: "btn", type: "button", id: "plan-button" }, "Plan");
  fill(wordsPane, h("div", { class: "panel-body" },
    h("label", { for: "instruction", class: "label" }, "What to try, in English or Chinese"),
    instruction,
    h("div", { class: "row" }, planBtn, h("span", { class: "muted small" }, "The planner reads the recipe's parameter names and aliases; what it did not understand is listed, and nothing is submitted until you press Submit."))));
  // Planned once typing pauses (each half-typed instruction need not be planned).
  // Any change makes the shown plan stale: Submit waits for the plan of what the form says now
  // (and an answer still on its way for the old form is dropped).
  const invalidate = () => {
    plan = null;
    planSeq++;
    submitBtn.disabled = true;
  };
  const wordsLater = debounce(() => runPlan(), 600);
  scope.add(() => wordsLater.cancel());
  const scheduleWords = () => {
    invalidate();
    wordsLater();
  };
  instruction.addEventListener("input", () => scheduleWords());
  planBtn.addEventListener("click", () => runPlan());

  // ---- the tick pane
  const parseValue = (p, text) => {
    const t = text.trim();
    if (p.type === "int") {
      if (!/^[-+]?\d+$/.test(t)) throw new Error(`${p.name}: '${t}' is not a whole number`);
      return Number(t);
    }
    if (p.type === "float") {
      const v = Number(t);
      if (t === "" || !Number.isFinite(v)) throw new Error(`${p.name}: '${t}' is not a number`);
      return v;
    }
    if (p.type === "choice" && p.choices && !p.choices.map(fmtValue).includes(t)) {
      throw new Error(`${p.name}: '${t}' is not one of ${p.choices.map(fmtValue).join(", ")}`);
    }
    return t;
  };

  const objectiveSel = h("select", { class: "input", id: "objective", "aria-label": "objective" });
  const gpusIn = h("input", { class: "input input-num", type: "number", min: "0", step: "1", id: "gpus", "aria-label": "GPUs per run" });
  const prioIn = h("input", { class: "input input-num", type: "number", step: "1", value: "0", id: "priority", "aria-label": "priority" });

  const renderTick = () => {
    fields.clear();
    if (!recipe) {
      fill(tickPane, h("div", { class: "panel-body" }, h("p", { class: "empty" }, "Pick a recipe first.")));
      return;
    }
    const paramEls = recipe.params.map((p) => {
      const values = [];
      const seen = new Set();
      const add = (v) => {
        const k = fmtValue(v);
        if (!seen.has(k)) {
          seen.add(k);
          values.push(v);
        }
      };
      for (const v of p.type === "choice" ? p.choices || [] : []) add(v);
      for (const v of p.suggested || []) add(v);
      if (p.default !== null && p.default !== undefined) add(p.default);
      if (p.type === "int" || p.type === "float") values.sort((a, b) => Number(a) - Number(b));
      const def = p.default !== null && p.default !== undefined ? fmtValue(p.default) : p.type === "choice" && p.choices?.length ? fmtValue(p.choices[0]) : null;
      const boxes = values.map((v) => {
        const box = h("input", { type: "checkbox", value: fmtValue(v), checked: fmtValue(v) === def, dataset: { param: p.name, value: fmtValue(v) } });
        box.addEventListener("change", () => schedulePlan());
        box._value = v;
        return box;
      });
      const free = h("input", { class: "input free", type: "text", placeholder: p.type === "choice" ? "" : "other values, comma-separated", "aria-label": `other values of ${p.name}`, dataset: { param: p.name }, hidden: p.type === "choice" });
      free.addEventListener("input", () => schedulePlan());
      const error = h("div", { class: "field-error" });
      fields.set(p.name, { p, boxes, free, error });
      return h("fieldset", { class: "param-field", dataset: { param: p.name } },
        h("legend", null, h("span", { class: "strong" }, p.name), " ",
          h("span", { class: "muted small" }, [p.type, def !== null ? `default ${def}` : "no default", p.aliases?.length ? `aka ${p.aliases.slice(0, 4).join(", ")}` : null].filter(Boolean).join(" · "))),
        h("div", { class: "value-boxes" }, boxes.map((b) => h("label", { class: "value-box" }, b, h("span", null, b.value)))),
        free, error);
    });
    fill(objectiveSel, h("option", { value: "" }, "no objective"), (recipe.metrics || []).map((m) => h("option", { value: m.name }, `${m.name} (${m.mode})`)));
    if (recipe.metrics?.length) objectiveSel.value = recipe.metrics[0].name;
    gpusIn.value = String(recipe.gpus ?? 1);
    fill(tickPane, h("div", { class: "panel-body" },
      paramEls,
      h("div", { class: "row options-row" },
        h("label", { class: "label-inline" }, "Objective ", objectiveSel),
        h("label", { class: "label-inline" }, "GPUs per run ", gpusIn),
        h("label", { class: "label-inline" }, "Priority ", prioIn))));
  };
  for (const el of [objectiveSel, gpusIn, prioIn]) el.addEventListener("input", () => schedulePlan());

  // The form as a /plan body; throws with a message when something in it is not valid.
  const tickBody = () => {
    const params = {};
    const problems = [];
    for (const [name, f] of fields) {
      f.error.textContent = "";
      const vals = f.boxes.filter((b) => b.checked).map((b) => b._value);
      for (const part of f.free.value.split(",")) {
        if (!part.trim()) continue;
        try {
          vals.push(parseValue(f.p, part));
        } catch (e) {
          f.error.textContent = e.message;
          problems.push(e.message);
        }
      }
      const uniq = [];
      const seen = new Set();
      for (const v of vals) if (!seen.has(fmtValue(v))) (seen.add(fmtValue(v)), uniq.push(v));
      if (uniq.length) params[name] = uniq;
      else if (f.p.default === null || f.p.default === undefined) {
        if (f.p.type !== "choice") {
          f.error.textContent = `pick or type at least one value (${name} has no default)`;
          problems.push(f.error.textContent);
        }
      }
    }
    if (problems.length) throw new Error(problems[0]);
    const body = { recipe: recipe.path, params };
    if (objectiveSel.value) body.objective = objectiveSel.value;
    const g = Number(gpusIn.value);
    if (gpusIn.value !== "" && Number.isInteger(g) && g >= 0) body.gpus = g;
    const pr = Number(prioIn.value);
    if (prioIn.value !== "" && Number.isInteger(pr)) body.priority = pr;
    return body;
  };

  const showPlan = (p, error) => {
    plan = p;
    submitBtn.disabled = !p || !p.runs;
    if (error) {
      runCount.textContent = "—";
      runCount.dataset.runs = "";
      fill(planMsg, notice("error", error));
      fill(understoodEl);
      yamlEl.textContent = "";
      return;
    }
    if (!p) {
      runCount.textContent = "—";
      runCount.dataset.runs = "";
      fill(planMsg);
      fill(understoodEl);
      yamlEl.textContent = "";
      return;
    }
    runCount.dataset.runs = String(p.runs);
    fill(runCount, h("span", { class: "run-count-n" }, String(p.runs)), ` run${p.runs === 1 ? "" : "s"}`);
    fill(planMsg, p.runs > 500 ? notice("warn", `That is ${p.runs} runs.`) : null);
    const und = p.understood || [];
    const ign = p.ignored || [];
    fill(understoodEl,
      mode === "words" || und.length ? h("div", { class: "plan-list" }, h("div", { class: "small strong" }, "Understood"),
        und.length ? h("ul", { class: "ok-list" }, und.map((u) => h("li", null, u))) : h("p", { class: "muted small" }, "nothing")) : null,
      ign.length ? h("div", { class: "plan-list" }, h("div", { class: "small strong" }, "Ignored (not understood)"), h("ul", { class: "ignored-list" }, ign.map((u) => h("li", null, u))))
        : mode === "words" ? h("div", { class: "plan-list" }, h("div", { class: "small strong" }, "Ignored"), h("p", { class: "muted small" }, "nothing: every word was understood")) : null);
    yamlEl.textContent = p.spec_yaml || "";
    submitBtn.textContent = `Submit ${p.runs} run${p.runs === 1 ? "" : "s"}`;
  };

  const runPlan = async () => {
    if (!recipe) return;
    const seq = ++planSeq;
    let body;
    try {
      if (mode === "tick") body = tickBody();
      else {
        const text = instruction.value.trim();
        if (!text) return showPlan(null);
        body = { recipe: recipe.path, instruction: text };
      }
    } catch (e) {
      return showPlan(null, e.message);
    }
    runCount.classList.add("busy");
    try {
      const p = await post("/plan", body, { signal });
      if (seq !== planSeq) return;
      showPlan(p);
    } catch (e) {
      if (isAbort(e) || seq !== planSeq) return;
      showPlan(null, e.message);
    } finally {
      if (seq === planSeq) runCount.classList.remove("busy");
    }
  };
  const planLater = debounce(runPlan, 200);
  scope.add(() => planLater.cancel());
  function schedulePlan() {
    invalidate();
    planLater();
  }

  submitBtn.addEventListener("click", async () => {
    if (!plan) return;
    submitBtn.disabled = true;
    try {
      const r = await post("/experiments", { spec_yaml: plan.spec_yaml, spec_name: "web.yaml", base_dir: plan.base_dir }, { signal });
      toast(`Submitted experiment #${r.experiment_id}: ${r.run_ids.length} run${r.run_ids.length === 1 ? "" : "s"}`);
      location.hash = `#/experiments/${r.experiment_id}`;
    } catch (e) {
      if (isAbort(e)) return;
      fill(planMsg, notice("error", `Not submitted: ${e.message}`));
      submitBtn.disabled = false;
    }
  });

  // ---- recipes
  const loadRecipe = async (path) => {
    if (!path) return;
    fill(recipeInfo, "loading…");
    try {
      recipe = await api(`/recipes/show?path=${encodeURIComponent(path)}`, { signal });
    } catch (e) {
      if (isAbort(e)) return;
      recipe = null;
      fill(recipeInfo, notice("error", e instanceof ApiError ? e.message : String(e)));
      renderTick();
      showPlan(null);
      return;
    }
    replaceQuery({ recipe: recipe.path });
    recipePath.value = recipe.path;
    fill(recipeInfo, h("span", null, h("span", { class: "mono" }, recipe.command), h("br"),
      `${recipe.params.length} parameters · ${(recipe.metrics || []).length} metrics · runs in ${recipe.dir}`));
    renderTick();
    if (mode === "tick") runPlan();
    else schedulePlan();
  };
  recipeSel.addEventListener("change", () => loadRecipe(recipeSel.value));
  recipeLoad.addEventListener("click", () => loadRecipe(recipePath.value.trim()));
  recipePath.addEventListener("keydown", (e) => {
    if (e.key === "Enter") loadRecipe(recipePath.value.trim());
  });

  renderTick();
  let recipes = [];
  try {
    recipes = (await api("/recipes", { signal })).recipes || [];
  } catch (e) {
    if (isAbort(e)) return;
    fill(recipeInfo, notice("error", e.message));
  }
  fill(recipeSel, recipes.length ? recipes.map((r) => h("option", { value: r.path }, `${r.name} — ${r.dir}`)) : h("option", { value: "" }, "no recipe found: type a path"));
  recipeSel.disabled = !recipes.length;
  const wanted = query.get("recipe");
  const first = wanted || recipes[0]?.path;
  if (wanted && recipes.some((r) => r.path === wanted)) recipeSel.value = wanted;
  if (first) await loadRecipe(first);
  else fill(recipeInfo, "The daemon knows no recipe. Type the path of a drover.yaml (docs/planner.md says how to write one).");
}
