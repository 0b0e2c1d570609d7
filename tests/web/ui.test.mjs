// drover's web UI in Debian's chromium, driven by playwright-core, against a real daemon with two
// fake GPUs and the digits example (docs/web.md; tests/web/run.sh starts it):
//   node ui.test.mjs DROVER_BIN DIGITS_DIR ARTIFACTS_DIR [CHROMIUM]
// Signs in through the form, checks that requests without the cookie or the token are refused,
// submits an experiment through the checkbox form, watches its runs and curves, opens a run and
// follows its live log, cancels it, compares two runs, and opens `drover report`'s HTML file
// from disk. Any console error or page error fails the test. A screenshot of every page goes to
// ARTIFACTS_DIR; so do the daemon's output and, on failure, the console log.
import { spawn, spawnSync } from "node:child_process";
import { mkdtempSync, writeFileSync, readFileSync, existsSync, mkdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { pathToFileURL } from "node:url";
import { chromium } from "playwright-core";

const [droverArg, digitsArg, artifactsArg, chromiumArg] = process.argv.slice(2);
if (!droverArg || !digitsArg || !artifactsArg) {
  console.error("usage: node ui.test.mjs DROVER_BIN DIGITS_DIR ARTIFACTS_DIR [CHROMIUM]");
  process.exit(2);
}
const drover = path.resolve(droverArg);
const digits = path.resolve(digitsArg);
const artifacts = path.resolve(artifactsArg);
const chromiumPath = chromiumArg || "/usr/bin/chromium";
mkdirSync(artifacts, { recursive: true });

const work = mkdtempSync(path.join(tmpdir(), "drover-web-"));
const store = path.join(work, "store");
const t0 = Date.now();
const log = (...a) => console.log(`[${((Date.now() - t0) / 1000).toFixed(1).padStart(5)}s]`, ...a);

let daemon = null;
let browser = null;
const consoleProblems = []; // console errors/warnings and page errors, over the whole test
const consoleLog = [];

function fail(msg) {
  throw new Error(msg);
}
function expect(cond, msg) {
  if (!cond) fail(msg);
}

// ---- the daemon: fake GPUs with scripted telemetry (so the sparklines move), telemetry every
// second, a stored sample every 2 s (so /gpus/samples has rows), run from the digits folder (so
// its drover.yaml is the recipe offered).
function startDaemon() {
  mkdirSync(store, { recursive: true });
  const telemetry = path.join(work, "telemetry.jsonl");
  writeFileSync(telemetry, [
    // both GPUs stay under 30% busy, so a run held on either raises an idle_gpu alert
    { at: "0s", gpu: 0, utilization: 12, memory_used: "3GiB", temperature: 45, power: 90 },
    { at: "0s", gpu: 1, utilization: 27, memory_used: "9GiB", temperature: 61, power: 240 },
    { at: "2s", gpu: 0, utilization: 8, temperature: 47 },
    { at: "2s", gpu: 1, utilization: 19, memory_used: "10GiB", temperature: 64, power: 260 },
    { at: "4s", gpu: 0, utilization: 15, memory_used: "4GiB", temperature: 46 },
    { at: "4s", gpu: 1, utilization: 24, memory_used: "11GiB", temperature: 66 },
    { repeat: "6s" },
  ].map((l) => JSON.stringify(l)).join("\n") + "\n");
  const config = path.join(work, "config.yaml");
  writeFileSync(config, "telemetry:\n  period: 1s\n  store_every: 2s\nalerts:\n  sinks: []\ndetectors:\n  idle_gpu: {utilization: 30, for: 3s}\n");
  const out = path.join(artifacts, "serve.log");
  writeFileSync(out, "");
  daemon = spawn(drover, ["serve", "--store", store, "--listen", "127.0.0.1:0", "--fake-gpus", "2x16GiB",
    "--fake-telemetry", telemetry, "--config", config, "--stop-runs"], {
    cwd: digits,
    stdio: ["ignore", "pipe", "pipe"],
  });
  daemon.stdout.on("data", (d) => writeFileSync(out, d, { flag: "a" }));
  daemon.stderr.on("data", (d) => writeFileSync(out, d, { flag: "a" }));
  daemon.on("exit", (code, sig) => {
    if (daemon) log(`daemon exited (${code ?? sig})`);
    daemon = null;
  });
}

async function waitFor(what, fn, timeoutMs = 30000, everyMs = 100) {
  const end = Date.now() + timeoutMs;
  let last;
  for (;;) {
    try {
      last = await fn();
      if (last) return last;
    } catch (e) {
      last = e;
    }
    if (Date.now() > end) fail(`timed out waiting for ${what} (last: ${last instanceof Error ? last.message : JSON.stringify(last)})`);
    await new Promise((r) => setTimeout(r, everyMs));
  }
}

async function stopDaemon() {
  if (!daemon) return;
  const d = daemon;
  d.kill("SIGTERM");
  await waitFor("the daemon to stop", () => d.exitCode !== null || d.signalCode !== null, 15000).catch(() => d.kill("SIGKILL"));
}

// ---- main
let base, token, api;
const shot = async (page, name) => {
  await page.screenshot({ path: path.join(artifacts, `${name}.png`), fullPage: true });
  log(`screenshot ${name}.png`);
};

async function main() {
  startDaemon();
  const info = await waitFor("daemon.json", () => {
    const f = path.join(store, "daemon.json");
    if (!existsSync(f)) return null;
    const text = readFileSync(f, "utf8");
    return text.includes('"port"') ? JSON.parse(text) : null;
  }, 20000, 50);
  base = `http://127.0.0.1:${info.port}`;
  token = readFileSync(path.join(store, "token"), "utf8").trim();
  api = async (p, opts = {}) => {
    const r = await fetch(`${base}/api/v1${p}`, { ...opts, headers: { Authorization: `Bearer ${token}`, ...(opts.body ? { "Content-Type": "application/json" } : {}), ...(opts.headers || {}) } });
    const body = await r.json();
    if (!r.ok) fail(`${opts.method || "GET"} ${p}: ${r.status} ${JSON.stringify(body)}`);
    return body;
  };
  log(`daemon on ${base}`);

  // ---- without the cookie or the token: refused
  {
    const r1 = await fetch(`${base}/api/v1/runs`);
    expect(r1.status === 401, `GET /api/v1/runs without auth: want 401, got ${r1.status}`);
    const b1 = await r1.json();
    expect(b1.error?.code === "unauthenticated", `401 body: ${JSON.stringify(b1)}`);
    const r2 = await fetch(`${base}/`, { redirect: "manual" });
    expect(r2.status === 303 && (r2.headers.get("location") || "").endsWith("/login"), `GET / without auth: want 303 to /login, got ${r2.status} ${r2.headers.get("location")}`);
    const r3 = await fetch(`${base}/api/v1/events`);
    expect(r3.status === 401, `GET /api/v1/events without auth: want 401, got ${r3.status}`);
    await r3.body?.cancel();
    const r4 = await fetch(`${base}/login`, { method: "POST", body: new URLSearchParams({ token: "not-the-token" }), redirect: "manual" });
    const page4 = await r4.text();
    expect(r4.status === 401 && !r4.headers.get("set-cookie"), `POST /login with a wrong token: want 401 without a cookie, got ${r4.status}`);
    expect(/token/i.test(page4) && !page4.includes("{{error}}"), "the sign-in page shows no error for a wrong token");
    const r5 = await fetch(`${base}/static/app.js`);
    expect(r5.status === 200 && (r5.headers.get("content-type") || "").includes("javascript"), `GET /static/app.js: ${r5.status} ${r5.headers.get("content-type")}`);
    const r6 = await fetch(`${base}/static/uPlot.iife.min.js`);
    expect(r6.status === 200, `GET /static/uPlot.iife.min.js: ${r6.status}`);
    log("refused without cookie or token: /api/v1/runs 401, / 303 -> /login, /api/v1/events 401, wrong token 401");
  }

  browser = await chromium.launch({
    executablePath: chromiumPath,
    args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update", "--disable-sync", "--no-first-run"],
  });
  const context = await browser.newContext({ viewport: { width: 1280, height: 860 }, colorScheme: "light" });
  const page = await context.newPage();
  page.setDefaultTimeout(30000);
  const watchConsole = (p, where) => {
    p.on("console", (m) => {
      const line = `${where} ${m.type()}: ${m.text()} ${m.location()?.url || ""}`;
      consoleLog.push(line);
      if (m.type() === "error" || m.type() === "warning") consoleProblems.push(line);
    });
    p.on("pageerror", (e) => {
      const line = `${where} pageerror: ${e.message}\n${e.stack || ""}`;
      consoleLog.push(line);
      consoleProblems.push(line);
    });
  };
  watchConsole(page, "app");

  // ---- sign in through the form
  await page.goto(`${base}/`);
  expect(page.url().endsWith("/login"), `the app without a cookie should land on /login, got ${page.url()}`);
  await page.waitForSelector("form input[name=token]");
  await shot(page, "login");
  await page.fill("input[name=token]", token);
  await Promise.all([page.waitForURL(`${base}/`), page.click("button[type=submit]")]);
  const cookies = await context.cookies();
  const session = cookies.find((c) => c.name.startsWith("drover_session_"));
  expect(session && session.httpOnly && session.sameSite === "Strict", `session cookie: ${JSON.stringify(session)}`);
  log("signed in through the form; cookie is HttpOnly, SameSite=Strict");

  // CSRF: the cookie alone cannot change anything; the page's token can.
  {
    const csrf = await page.getAttribute('meta[name="drover-csrf"]', "content");
    expect(csrf && !csrf.includes("{{"), `the page has no CSRF token: ${csrf}`);
    const cookie = `${session.name}=${session.value}`;
    const s = await (await fetch(`${base}/api/v1/session`, { headers: { Cookie: cookie } })).json();
    expect(s.auth === "cookie" && s.csrf === csrf, `GET /api/v1/session: ${JSON.stringify(s)}`);
    const bad = await fetch(`${base}/api/v1/runs/1/priority`, { method: "POST", headers: { Cookie: cookie, "Content-Type": "application/json" }, body: '{"priority": 1}' });
    expect(bad.status === 403, `POST with the cookie but no CSRF header: want 403, got ${bad.status}`);
    const runs = await fetch(`${base}/api/v1/runs`, { headers: { Cookie: cookie } });
    expect(runs.status === 200, `GET /api/v1/runs with the cookie: ${runs.status}`);
    log("cookie works for reads; a POST without X-Drover-Csrf is 403");
  }

  // ---- overview: both GPUs, sparklines fed by /gpus/samples and the gpu events
  await page.waitForSelector(".gpu-card[data-gpu='1']");
  expect((await page.locator(".gpu-card").count()) === 2, "the overview should show 2 GPU cards");
  await waitFor("GPU sparklines with 3+ points", async () =>
    page.evaluate(() => [...document.querySelectorAll(".gpu-card .spark")].every((s) => Number(s.dataset.points) >= 3)), 20000, 250);
  await page.waitForSelector("#live-dot.live-live");
  // A 16 GiB fake GPU offers 15 GiB to runs: the card says the rest is kept, and why.
  const gpuApi = (await api("/gpus")).gpus[0];
  expect(gpuApi.memory_device === 16 * 2 ** 30 && gpuApi.memory_total === 15 * 2 ** 30, `GPU 0's memory in the API: ${JSON.stringify(gpuApi)}`);
  const reservedText = await page.textContent(".gpu-card[data-gpu='0'] .bar-text");
  expect(/of 15(\.0)? GiB reserved by drover \(1(\.0)? GiB of its 16(\.0)? GiB kept for the driver\)/.test(reservedText), `GPU 0's card: ${reservedText}`);
  await shot(page, "overview-idle");
  log("overview: 2 GPU cards with live sparklines; event stream live");

  // ---- new experiment through the checkbox form: 2 batch sizes -> 2 runs
  await page.click("a.nav-link[data-nav=new]");
  await page.waitForSelector("fieldset[data-param=batch_size] input[type=checkbox]");
  const recipePath = await page.inputValue("#recipe-path");
  expect(recipePath === path.join(digits, "drover.yaml"), `the recipe offered: ${recipePath}`);
  await waitFor("the plan of the defaults", () => page.evaluate(() => document.querySelector("#run-count").dataset.runs === "1"));
  // batch_size: 16 as well as the default 32
  const bsBoxes = await page.$$eval("fieldset[data-param=batch_size] input[type=checkbox]", (els) => els.map((e) => [e.value, e.checked]));
  log(`batch_size values offered: ${bsBoxes.map(([v, c]) => (c ? `[${v}]` : v)).join(" ")}`);
  const other = bsBoxes.find(([v, c]) => !c && v === "16") || bsBoxes.find(([, c]) => !c);
  expect(other, "no second batch size to tick");
  await page.check(`fieldset[data-param=batch_size] input[value="${other[0]}"]`);
  // 2 epochs keep it quick: untick the default, type 2
  for (const [v, c] of await page.$$eval("fieldset[data-param=epochs] input[type=checkbox]", (els) => els.map((e) => [e.value, e.checked]))) {
    if (c) await page.uncheck(`fieldset[data-param=epochs] input[value="${v}"]`);
  }
  await page.fill("fieldset[data-param=epochs] input.free", "2");
  await waitFor("the plan to say 2 runs", () => page.evaluate(() => document.querySelector("#run-count").dataset.runs === "2"));
  const yaml = await page.textContent("#plan-yaml");
  expect(/batch_size/.test(yaml) && yaml.includes(other[0]) && /epochs:\s*2\b/.test(yaml), `the YAML to submit:\n${yaml}`);
  // The YAML is shown whole: nothing cut off to the right or below.
  const yamlBox = await page.$eval("#plan-yaml", (el) => ({ sw: el.scrollWidth, cw: el.clientWidth, sh: el.scrollHeight, ch: el.clientHeight }));
  expect(yamlBox.sw <= yamlBox.cw + 1 && yamlBox.sh <= yamlBox.ch + 1, `the YAML preview scrolls (cut off): ${JSON.stringify(yamlBox)}`);
  expect(!(await page.isDisabled("#submit-experiment")), "Submit is disabled");
  await shot(page, "new-experiment");
  await page.click("#submit-experiment");
  await page.waitForURL(/#\/experiments\/\d+/);
  const expId = Number(page.url().match(/#\/experiments\/(\d+)/)[1]);
  log(`submitted experiment ${expId} through the form (2 runs shown before submitting)`);

  // ---- the experiment page: runs appear, curves draw, best marked, sort, filter
  await page.waitForSelector("#runs-table tbody tr[data-run]");
  await waitFor("2 rows in the runs table", async () => (await page.locator("#runs-table tbody tr[data-run]").count()) === 2);
  const marks = await page.evaluate(() => performance.getEntriesByName("drover:table-rendered").length);
  expect(marks >= 1, "no drover:table-rendered performance mark");
  await waitFor("both runs to succeed", async () =>
    (await page.$$eval("#runs-table tbody tr[data-run]", (rows) => rows.map((r) => r.dataset.state))).every((s) => s === "succeeded"), 90000, 250);
  // the overlay: one uPlot series per selected run, 2 epochs of val_acc each
  const curve = await waitFor("the curves of both runs", async () => {
    const c = await page.evaluate(() => {
      const el = document.querySelector(".chart-box .chart");
      return el ? { points: el.dataset.points, canvas: !!el.querySelector(".uplot canvas"), metric: document.querySelector("#curve-metric").value } : null;
    });
    return c && c.metric === "val_acc" && c.canvas && c.points.split(",").length === 2 && c.points.split(",").every((n) => Number(n) >= 2) ? c : null;
  }, 20000, 200);
  expect(curve.metric === "val_acc", `the curves should show the objective, val_acc, not ${curve.metric}`);
  log(`curves drawn: metric ${curve.metric}, points per run ${curve.points}`);
  expect((await page.evaluate(() => performance.getEntriesByName("drover:chart-rendered").length)) >= 1, "no drover:chart-rendered mark");
  const table = await api(`/experiments/${expId}/table?sort=score&order=desc`);
  expect(table.best_run_id && table.rows[0].id === table.best_run_id, `best run: ${JSON.stringify(table.rows.map((r) => [r.id, r.score]))}`);
  await page.waitForSelector(`#runs-table tr.best[data-run="${table.best_run_id}"] .star`);
  await waitFor("the scatter to mark the best run", () =>
    page.evaluate((best) => {
      const s = document.querySelector(".scatter");
      return s && s.dataset.points === "2" && s.dataset.best === String(best);
    }, table.best_run_id));
  await page.click("#runs-table th[data-sort=score] button");
  await waitFor("rows sorted by score, descending", async () => {
    const ids = await page.$$eval("#runs-table tbody tr[data-run]", (rows) => rows.map((r) => Number(r.dataset.run)));
    return ids.join(",") === table.rows.map((r) => r.id).join(",") && page.url().includes("sort=score");
  });
  // Parameters with one value in every run (lr, epochs, seed here) are hidden and named once.
  const hidden = Object.keys(table.constant || {});
  expect(hidden.length > 0 && !hidden.includes("batch_size"), `constant params: ${JSON.stringify(table.constant)}`);
  expect((await page.locator(`#runs-table th[data-sort="param:${hidden[0]}"]`).count()) === 0, `${hidden[0]} has the same value in every run but has a column`);
  await page.waitForSelector("#constant-params");
  await page.click("#toggle-constant");
  await page.waitForSelector(`#runs-table th[data-sort="param:${hidden[0]}"]`);
  await page.click("#toggle-constant");
  await waitFor("the constant column hidden again", async () => (await page.locator(`#runs-table th[data-sort="param:${hidden[0]}"]`).count()) === 0);
  await page.fill("#runs-filter", `batch_size=${other[0]}`);
  await waitFor("the filter to leave one row", async () => (await page.locator("#runs-table tbody tr[data-run]").count()) === 1);
  await page.fill("#runs-filter", "");
  await waitFor("the filter to clear", async () => (await page.locator("#runs-table tbody tr[data-run]").count()) === 2);
  await shot(page, "experiment");
  log("experiment page: runs table, best marked, sorted by best, filtered, scatter with the best run");

  // ---- compare the two runs
  const runIds = table.rows.map((r) => r.id).sort((a, b) => a - b);
  await waitFor("both runs selected", () => page.evaluate(() => document.querySelectorAll("#runs-table tbody tr.selected").length === 2));
  await page.click("#compare-selected");
  await page.waitForURL(/#\/compare\?runs=/);
  await page.waitForSelector("#compare-params tbody tr.differs");
  const differs = await page.$$eval("#compare-params tbody tr.differs th", (ths) => ths.map((t) => t.textContent));
  expect(differs.includes("batch_size"), `compare should mark batch_size as differing: ${differs}`);
  await waitFor("overlaid curves on the compare page", () =>
    page.evaluate(() => {
      const charts = [...document.querySelectorAll("#compare-charts .chart")];
      return charts.length >= 3 && charts.every((c) => c.dataset.points.split(",").length === 2 && c.dataset.points.split(",").every((n) => Number(n) > 0) && c.querySelector(".uplot canvas"));
    }));
  await page.waitForSelector("#compare-metrics td.best-cell");
  await shot(page, "compare");
  log(`compared runs ${runIds.join(" and ")}: params differ in batch_size, curves overlaid, best marked`);

  // ---- a long run from an instruction: its live log and curves, then cancel it
  await page.click("a.nav-link[data-nav=new]");
  await page.waitForSelector("fieldset[data-param=model]");
  await page.click("#tab-words");
  await page.fill("#instruction", "train mlp for 2000 epochs");
  await waitFor("the instruction's plan", () => page.evaluate(() => document.querySelector("#run-count").dataset.runs === "1" && document.querySelectorAll("#plan-understood .ok-list li").length >= 2));
  expect((await page.locator("#plan-understood .ignored-list li").count()) === 0, "the planner ignored words");
  await shot(page, "new-experiment-instruction");
  await page.click("#submit-experiment");
  await page.waitForURL(/#\/experiments\/\d+/);
  await page.waitForSelector("#runs-table tbody tr[data-run] a");
  const longRun = Number(await page.getAttribute("#runs-table tbody tr[data-run]", "data-run"));
  await page.click(`#runs-table tbody tr[data-run="${longRun}"] td.num a`);
  await page.waitForURL(new RegExp(`#/runs/${longRun}$`));
  await page.waitForSelector(".head-badges .badge.state-running", { timeout: 60000 });
  const logLen1 = await waitFor("log text", async () => {
    const t = await page.textContent("#run-log");
    return t.includes("grad_norm") ? t.length : 0;
  }, 30000, 200);
  const logLen2 = await waitFor("the log to grow while we watch", async () => {
    const n = (await page.textContent("#run-log")).length;
    return n > logLen1 ? n : 0;
  }, 30000, 200);
  const lossPoints = async () => page.evaluate(() => Number(document.querySelector("#run-charts .chart[data-metric=loss]")?.dataset.points || 0));
  const p1 = await waitFor("a loss curve", lossPoints, 30000, 200);
  await waitFor("the loss curve to grow live", async () => (await lossPoints()) > p1, 30000, 200);
  await shot(page, "run");
  log(`run ${longRun}: live log (${logLen1} -> ${logLen2} chars), live loss curve (${p1}+ points)`);

  // the overview while it runs: which run holds which GPU
  await page.click("a.nav-link[data-nav=overview]");
  await page.waitForSelector(`.gpu-card a.gpu-run[href="#/runs/${longRun}"]`);
  // the running runs name their submitter (the user filter appears once several users run)
  const runningHead = await page.locator(".panel .table thead").first().innerText();
  expect(/\buser\b/.test(runningHead), `the running runs should have a user column: ${runningHead}`);
  const runningSubmitter = (await page.locator(".panel .table tbody td.user").first().innerText()).trim();
  expect(runningSubmitter.length > 0 && runningSubmitter !== "—", `the running run should name its submitter, got ${runningSubmitter}`);
  await overviewAgrees(page, "while a run runs", (s) => s.running >= 1);
  await shot(page, "overview");
  await page.emulateMedia({ colorScheme: "dark" });
  await page.waitForTimeout(300);
  await shot(page, "overview-dark");
  await page.emulateMedia({ colorScheme: "light" });
  log("overview shows the run on its GPU");

  await page.goto(`${base}/#/runs/${longRun}`);
  await page.waitForSelector(".head-badges .badge");
  // its GPU is held but idle: the watcher's alert shows on the run's page
  await page.waitForSelector("#run-alerts .alert-item[data-kind=idle_gpu]", { timeout: 20000 });
  log("the run's idle_gpu alert is shown on its page");
  const cancel = page.locator("button.btn-danger", { hasText: "Cancel run" });
  await cancel.click();
  await page.locator("button.btn-danger", { hasText: "Really cancel?" }).click();
  await page.waitForSelector(".head-badges .badge.state-cancelled", { timeout: 30000 });
  // (the daemon may announce the change a moment before it is stored)
  await waitFor(`the API to say run ${longRun} is cancelled`, async () => (await api(`/runs/${longRun}`)).state === "cancelled", 10000, 100);
  await waitFor("the log to say the run ended", () => page.evaluate(() => document.querySelector("#run-log").dataset.ended === "true"), 30000, 200);
  await page.waitForSelector("#attempts-table tbody tr");
  await shot(page, "run-cancelled");
  log(`cancelled run ${longRun} from its page: cancelled in the UI and in the API`);

  // ---- the overview lists the alert
  await page.click("a.nav-link[data-nav=overview]");
  await page.waitForSelector("#recent-alerts .alert-item[data-kind=idle_gpu]");
  // The run was cancelled: the counters, the Running panel and the GPU cards say so together.
  await overviewAgrees(page, "after the run was cancelled", (s) => !s.gpuRuns.includes(longRun));
  await shot(page, "overview-after");

  // ---- the experiments list
  await page.click("a.nav-link[data-nav=experiments]");
  await waitFor("2 experiments listed", async () => (await page.locator("#experiments-table tbody tr[data-id]").count()) === 2);
  await page.waitForSelector(`#experiments-table tr[data-id="${expId}"] .state-bar .seg`);
  // Each experiment names its submitter, and the list filters by user.
  const submitter = (await page.locator(`#experiments-table tr[data-id="${expId}"] td.user`).textContent()).trim();
  const apiUser = (await api(`/experiments/${expId}`)).user;
  expect(submitter && submitter === apiUser, `experiment ${expId} shows user '${submitter}', the API says '${apiUser}'`);
  await page.selectOption("#experiments-user", submitter);
  await waitFor("the user filter keeps that user's experiments", async () => (await page.locator("#experiments-table tbody tr[data-id]").count()) === 2);
  await page.fill("input[aria-label='filter experiments']", "nobody-of-that-name");
  await waitFor("a filter for another user shows none", async () => (await page.locator("#experiments-table tbody tr[data-id]").count()) === 0);
  await page.fill("input[aria-label='filter experiments']", "");
  await page.selectOption("#experiments-user", "");
  log(`experiments list: submitter ${submitter} shown and filtered`);
  await shot(page, "experiments");

  await page.goto(`${base}/#/experiments/${expId}`);
  await page.waitForSelector(".chart-box .uplot canvas");
  await page.emulateMedia({ colorScheme: "dark" });
  await page.waitForTimeout(300);
  await shot(page, "experiment-dark");
  await page.emulateMedia({ colorScheme: "light" });

  // ---- one ranking everywhere: the page marks the run `drover compare` names
  await rankingCheck(page);
  // ---- two experiments compared on one page (added by name)
  await crossCompareCheck(page);

  // ---- seeds and noise: 2 configs x 3 seeds make 2 groups; curves as bands, log scale, EMA
  await seedsCheck(page);
  await searchCheck(page);

  // ---- a pipeline drawn as a graph, its runs grouped by stage, cached stages, artifacts
  await pipelineCheck(page);

  // ---- a failed run's page says why, and its log opens on stderr
  await failureCheck(page);

  // ---- drover report: the same digits experiment as one HTML file, opened from disk
  await reportCheck(expId);

  // ---- a run placed by Slurm says where it is (where a test Slurm answers)
  await slurmCheck(watchConsole);

  expect(consoleProblems.length === 0, `console errors or warnings:\n${consoleProblems.join("\n")}`);
  log("no console errors or warnings, no page errors");
}

// A second daemon with the Slurm executor (docs/slurm.md), where scripts/slurm-local.sh has one
// running: its run page says which job runs the run, on which node, and its attempts table has a
// "where" column instead of GPUs. Skipped, and said so, where no Slurm answers.
async function slurmCheck(watchConsole) {
  const sinfo = spawnSync("sinfo", ["-h", "-o", "%T"], { encoding: "utf8", timeout: 5000 });
  if (sinfo.status !== 0 || !/idle|mixed|allocated|completing/.test(sinfo.stdout || "")) {
    log("Slurm run page: skipped (no Slurm answers here: scripts/slurm-local.sh start)");
    return;
  }
  const dir = path.join(work, "slurm");
  const store2 = path.join(dir, "store");
  mkdirSync(path.join(dir, "code"), { recursive: true });
  const config = path.join(dir, "config.yaml");
  writeFileSync(config, "executor: {kind: slurm}\n");
  const out = path.join(artifacts, "serve-slurm.log");
  writeFileSync(out, "");
  const d2 = spawn(drover, ["serve", "--store", store2, "--listen", "127.0.0.1:0", "--config", config], { stdio: ["ignore", "pipe", "pipe"] });
  d2.stdout.on("data", (d) => writeFileSync(out, d, { flag: "a" }));
  d2.stderr.on("data", (d) => writeFileSync(out, d, { flag: "a" }));
  try {
    const info = await waitFor("the Slurm daemon", () => {
      try { return JSON.parse(readFileSync(path.join(store2, "daemon.json"), "utf8")); } catch { return null; }
    }, 60000);
    const base2 = `http://127.0.0.1:${info.port}`;
    const token2 = readFileSync(path.join(store2, "token"), "utf8").trim();
    const spec = path.join(dir, "sleep.yaml");
    writeFileSync(spec, "name: on-slurm\nworkdir: code\ncommand: [sleep, \"120\"]\n");
    const sub = spawnSync(drover, ["--store", store2, "submit", spec], { encoding: "utf8", cwd: dir, timeout: 60000 });
    expect(sub.status === 0, `drover submit to the Slurm daemon failed:\n${sub.stdout}\n${sub.stderr}`);
    const run = await waitFor("the job to run in Slurm", async () => {
      const r = await fetch(`${base2}/api/v1/runs/1`, { headers: { Authorization: `Bearer ${token2}` } });
      const j = r.ok ? await r.json() : null;
      const a = j?.attempt_list?.at(-1);
      return a?.executor?.state === "RUNNING" ? j : null;
    }, 60000, 250);
    const job = run.attempt_list.at(-1).executor.job_id;
    const context = await browser.newContext({ viewport: { width: 1280, height: 860 }, colorScheme: "light" });
    const page = await context.newPage();
    watchConsole(page, "slurm");
    await page.goto(`${base2}/`);
    await page.fill("input[name=token]", token2);
    await Promise.all([page.waitForURL(`${base2}/`), page.click("button[type=submit]")]);
    await page.goto(`${base2}/#/runs/1`);
    await page.waitForSelector("#placement");
    const where = (await page.textContent("#placement")).trim();
    expect(where === `Slurm job ${job} on localhost (partition debug)`, `the run page says where the run is: "${where}"`);
    await page.waitForSelector("#attempts-table tbody tr");
    const head = await page.$$eval("#attempts-table thead th", (ths) => ths.map((t) => t.textContent.trim()));
    const cell = await page.$$eval("#attempts-table tbody tr td", (tds) => tds.map((t) => t.textContent.trim()));
    expect(head.includes("where") && cell.some((c) => c.startsWith(`Slurm job ${job}`)), `the attempts table: ${JSON.stringify(head)} ${JSON.stringify(cell)}`);
    await shot(page, "slurm-run");
    await context.close();
    const cancel = spawnSync(drover, ["--store", store2, "cancel", "1"], { encoding: "utf8", timeout: 60000 });
    expect(cancel.status === 0, `drover cancel on the Slurm daemon: ${cancel.stderr}`);
    log(`Slurm run page: "${where}", attempts table "where" column (slurm-run.png)`);
  } finally {
    d2.kill("SIGTERM");
    await waitFor("the Slurm daemon to stop", () => d2.exitCode !== null || d2.signalCode !== null, 15000).catch(() => d2.kill("SIGKILL"));
  }
}

// Two runs whose val_acc peaks and last values disagree ("peak" peaks highest, "steady" ends
// highest), in an experiment ranked by `summary: best` and one ranked by `summary: last`: the
// experiment page stars the run `drover compare` names, and the score column says the summary.
async function rankingCheck(page) {
  const dir = path.join(work, "peaks");
  mkdirSync(dir, { recursive: true });
  writeFileSync(path.join(dir, "curve.sh"),
    "case $1 in\n  peak) vals='0.5 0.99 0.90' ;;\n  steady) vals='0.5 0.95 0.94' ;;\nesac\n" +
    "i=0\nfor v in $vals; do i=$((i + 1)); echo \"{\\\"step\\\": $i, \\\"val_acc\\\": $v}\"; done\n");
  for (const [summary, winner] of [["best", "peak"], ["last", "steady"]]) {
    const name = `peaks-${summary}`;
    const spec = path.join(dir, `${name}.yaml`);
    writeFileSync(spec, `name: ${name}\nworkdir: .\ncommand: sh curve.sh {curve}\nparams: {curve: [peak, steady]}\n` +
      `objective: {metric: val_acc, mode: max, summary: ${summary}}\n`);
    const sub = spawnSync(drover, ["--store", store, "submit", spec], { encoding: "utf8", cwd: dir, timeout: 60000 });
    expect(sub.status === 0, `drover submit ${name} failed (${sub.status}):\n${sub.stdout}\n${sub.stderr}`);
    const exp = (await api("/experiments?limit=100")).experiments.find((e) => e.name === name);
    expect(exp, `${name} is not listed`);
    await waitFor(`${name}'s runs to succeed`, async () => (await api(`/experiments/${exp.id}/table`)).counts.succeeded === 2, 30000, 200);
    const cmp = spawnSync(drover, ["--store", store, "compare", name, "--json"], { encoding: "utf8", timeout: 60000 });
    expect(cmp.status === 0, `drover compare ${name} failed:\n${cmp.stderr}`);
    const best = JSON.parse(cmp.stdout).best_run;
    const table = await api(`/experiments/${exp.id}/table`);
    const row = table.rows.find((r) => r.id === best);
    expect(row && row.params.curve === winner, `${name}: compare's best run ${best} is not the ${winner} run: ${JSON.stringify(table.rows)}`);
    await page.goto(`${base}/#/experiments/${exp.id}`);
    await page.waitForSelector(`#runs-table tr.best[data-run="${best}"] .star`);
    const head = await page.$eval("#runs-table th[data-sort=score]", (th) => th.textContent);
    expect(head.includes(`val_acc (${summary})`), `${name}: the score column is "${head}"`);
    await shot(page, `ranking-${summary}`);
    log(`${name}: the page stars run ${best} (${winner}), as drover compare does`);
  }
}

// Two configs tried with three seeds each: the experiment page's seed groups agree with
// `drover compare --json` (mean, spread, count, runs, the Welch verdict), the curves draw one
// mean line per config with its ± sd band, and log scale and smoothing change how they are drawn.
async function seedsCheck(page) {
  const dir = path.join(work, "seeds");
  mkdirSync(dir, { recursive: true });
  // val_acc = base(config) + seed/100 at each of 3 steps, rising.
  writeFileSync(path.join(dir, "curve.sh"),
    "case $1 in\n  wide) base=80 ;;\n  narrow) base=70 ;;\nesac\n" +
    "for i in 1 2 3; do echo \"{\\\"step\\\": $i, \\\"val_acc\\\": 0.$((base + i + $2))}\"; done\n");
  const spec = path.join(dir, "seeds.yaml");
  writeFileSync(spec, "name: seeds\nworkdir: .\ncommand: sh curve.sh {width} {seed}\n" +
    "params: {width: [wide, narrow], seed: [0, 1, 2]}\nobjective: {metric: val_acc, mode: max}\n");
  const sub = spawnSync(drover, ["--store", store, "submit", spec], { encoding: "utf8", cwd: dir, timeout: 60000 });
  expect(sub.status === 0, `drover submit seeds failed (${sub.status}):\n${sub.stdout}\n${sub.stderr}`);
  const exp = (await api("/experiments?limit=100")).experiments.find((e) => e.name === "seeds");
  expect(exp, "seeds is not listed");
  await waitFor("the 6 seed runs to succeed", async () => (await api(`/experiments/${exp.id}/table`)).counts.succeeded === 6, 60000, 200);
  const cmp = spawnSync(drover, ["--store", store, "compare", "seeds", "--json"], { encoding: "utf8", timeout: 60000 });
  expect(cmp.status === 0, `drover compare seeds failed:\n${cmp.stderr}`);
  const groups = JSON.parse(cmp.stdout).groups;
  expect(groups && groups.configs.length === 2 && groups.configs.every((c) => c.n === 3), `compare's groups: ${cmp.stdout}`);
  expect(groups.configs[0].params.width === "wide", `the wide config should rank first: ${JSON.stringify(groups.configs)}`);

  await page.goto(`${base}/#/experiments/${exp.id}`);
  await page.waitForSelector("#groups-table tbody tr[data-group='2']");
  const rows = await page.$$eval("#groups-table tbody tr", (trs) => trs.map((tr) => [...tr.querySelectorAll("td")].map((td) => td.textContent)));
  for (let i = 0; i < 2; i++) {
    const want = groups.configs[i];
    const [, config, n, mean, sd, , , runs] = rows[i];
    expect(config.includes(`width=${want.params.width}`) && !config.includes("seed="), `group ${i + 1} config "${config}"`);
    expect(n === "3/3", `group ${i + 1} n = ${n}`);
    expect(Math.abs(Number(mean) - want.mean) < 1e-3 && Math.abs(Number(sd) - want.std) < 1e-3, `group ${i + 1}: page ${mean} ± ${sd}, compare ${want.mean} ± ${want.std}`);
    expect(runs.trim().split(/\s+/).join(",") === want.runs.map((id) => `#${id}`).join(","), `group ${i + 1} runs "${runs}" vs ${want.runs}`);
  }
  const verdict = await page.$eval("#groups-verdict", (el) => el.textContent);
  expect(verdict.includes(groups.top_two.overlap ? "overlap" : "differ") && verdict.includes("Welch"), `the verdict: ${verdict}`);

  // One mean curve per config, each with its band.
  await page.check("#curve-groups");
  const drawn = await waitFor("two banded curves", () => page.evaluate(() => {
    const el = document.querySelector(".chart-box .chart");
    return el && el.dataset.series === "2" && el.dataset.bands === "2" && el.querySelector(".uplot canvas") ? el.dataset.points : null;
  }), 20000, 200);
  expect(drawn === "3,3", `points per config curve: ${drawn}`);
  await shot(page, "seed-groups");
  await page.check("#curve-log");
  await page.$eval("#curve-smoothing", (el) => { el.value = "0.6"; el.dispatchEvent(new Event("input", { bubbles: true })); });
  await waitFor("log scale and smoothing in force", () => page.evaluate(() => {
    const el = document.querySelector(".chart-box .chart");
    return el.dataset.logY === "true" && el.dataset.smoothing === "0.6" && location.hash.includes("log=1") && location.hash.includes("smooth=0.6");
  }), 10000, 100);
  // The smoothing is TensorBoard's debiased EMA.
  const ema = await page.evaluate(async () => (await import("/static/js/charts.js")).smoothEma([1, 2, 3, NaN, 4], 0.5));
  const want = [1, 5 / 3, 17 / 7, NaN, 49 / 15];
  expect(ema.every((v, i) => (Number.isNaN(want[i]) ? Number.isNaN(v) : Math.abs(v - want[i]) < 1e-9)), `smoothEma: ${ema}`);
  await shot(page, "seed-groups-log-smoothed");
  // The run page and the compare page draw their curves the same way, from the same URL keys.
  const [a, b] = groups.configs[0].runs;
  await page.goto(`${base}/#/runs/${a}?log=1&smooth=0.5`);
  await waitFor("the run page's curves on a log scale, smoothed", () => page.evaluate(() => {
    const el = document.querySelector("#run-charts .chart");
    return el && el.dataset.logY === "true" && el.dataset.smoothing === "0.5" && document.querySelector("#curve-log").checked;
  }), 10000, 100);
  await page.goto(`${base}/#/compare?runs=${a},${b}&log=1`);
  await waitFor("the compare page's curves on a log scale", () => page.evaluate(() => {
    const el = document.querySelector("#compare-charts .chart");
    return el && el.dataset.logY === "true";
  }), 10000, 100);
  log(`seed groups: ${groups.configs.map((c) => `${c.params.width} ${c.mean.toFixed(3)}±${c.std.toFixed(3)} (n=${c.n})`).join(", ")}; bands, log scale and EMA drawn`);
}

// A search with ASHA (12 quick trials of a shell script): the experiment page shows its trials
// by state, the best so far and the parameter importance, as drover compare --json does.
async function searchCheck(page) {
  const dir = path.join(work, "search");
  mkdirSync(dir, { recursive: true });
  // acc rises over 3 steps to a level set by mode (a or b) and x, a step every 0.4 s: a run that
  // has already ended when its rung is judged is compared but never pruned.
  writeFileSync(path.join(dir, "fit.sh"),
    "for i in 1 2 3; do awk -v m=$1 -v x=$2 -v i=$i 'BEGIN { b = (m == \"a\") ? 0.5 : 0.2; " +
    "printf \"{\\\"step\\\": %d, \\\"acc\\\": %.4f}\\n\", i, b + i * 0.1 - (x - 0.5) * (x - 0.5) }'; sleep 0.4; done\n");
  const spec = path.join(dir, "search.yaml");
  // lr (not used by fit.sh) is searched on a log scale over one decade: the scatter's axis is
  // log because the spec says so, not because the values span far.
  writeFileSync(spec, "name: web-search\nworkdir: .\ncommand: sh fit.sh {mode} {x} {lr}\n" +
    "params: {mode: {choice: [a, b]}, x: {uniform: [0, 1]}, lr: {log_uniform: [0.001, 0.01]}}\n" +
    "search: {trials: 12, parallel: 2, seed: 4}\nprune: {rule: asha, min_steps: 1, reduction: 2, max_steps: 3}\n" +
    "objective: {metric: acc, mode: max}\n");
  const sub = spawnSync(drover, ["--store", store, "submit", spec], { encoding: "utf8", cwd: dir, timeout: 60000 });
  expect(sub.status === 0, `drover submit web-search failed (${sub.status}):\n${sub.stdout}\n${sub.stderr}`);
  const exp = (await api("/experiments?limit=100")).experiments.find((e) => e.name === "web-search");
  expect(exp, "web-search is not listed");
  await waitFor("the 12 trials to end", async () => {
    const t = await api(`/experiments/${exp.id}/table`);
    return t.total === 12 && (t.counts.succeeded || 0) + (t.counts.pruned || 0) === 12;
  }, 60000, 200);
  const cmp = spawnSync(drover, ["--store", store, "compare", "web-search", "--json"], { encoding: "utf8", timeout: 60000 });
  expect(cmp.status === 0, `drover compare web-search failed:\n${cmp.stderr}`);
  const want = JSON.parse(cmp.stdout).search;
  expect(want.states.pruned > 0 && want.history.length > 0, `compare's search: ${cmp.stdout}`);
  // Importance is computed over the finished trials only (a pruned one's value is from earlier):
  // with fewer than 8 of them, the page says why instead.
  const finished = want.states.succeeded || 0;
  expect(finished >= 8 ? want.importance.length > 0 : want.importance.length === 0 && /needs 8 finished trials/.test(want.importance_note || ""), `compare's importance: ${JSON.stringify(want)}`);
  await page.goto(`${base}/#/experiments/${exp.id}`);
  await page.waitForSelector(want.importance.length ? "#importance-table tbody tr" : "#importance-note");
  const states = await page.textContent("#search-states");
  expect(states.includes(`${want.states.pruned} pruned`), `the states shown: ${states}`);
  // How the budget went: the random start, the model's trials, the pruned ones, as compare says.
  expect(/random \(the start\)/.test(want.budget || "") && /pruned early/.test(want.budget), `compare's budget: ${want.budget}`);
  const budget = await page.textContent("#search-budget");
  expect(budget === `How the budget went: ${want.budget}`, `the budget shown: ${budget}`);
  if (want.importance.length) {
    const rows = await page.$$eval("#importance-table tbody tr", (trs) => trs.map((tr) => [...tr.querySelectorAll("td")].map((td) => td.textContent.trim())));
    expect(rows[0][0] === want.importance[0].param && rows[0][1] === `${Math.round(want.importance[0].share * 100)}%`, `importance: ${JSON.stringify(rows)} vs ${JSON.stringify(want.importance)}`);
  } else {
    const note = await page.textContent("#importance-note");
    expect(note === want.importance_note, `the importance note: ${note} vs ${want.importance_note}`);
  }
  const drawn = await waitFor("the best-so-far chart", () => page.evaluate(() => {
    const el = document.querySelector("#search-history .chart");
    return el && el.querySelector(".uplot canvas") ? el.dataset.points : null;
  }), 20000, 200);
  expect(drawn.split(",")[0] === String(want.history.length), `points of the best-so-far chart: ${drawn}`);
  // The params scatter against lr: a log axis, said in its label.
  await page.selectOption("#scatter-param", "lr");
  const scale = await waitFor("the scatter against lr", () => page.evaluate(() => {
    const s = document.querySelector(".scatter");
    return s && Number(s.dataset.points) > 8 ? { scale: s.dataset.scale, points: s.dataset.points, x: document.querySelector("#scatter-param").value } : null;
  }), 10000, 100);
  expect(scale.scale === "log", `the scatter's axis for lr (log_uniform): ${JSON.stringify(scale)}`);
  await shot(page, "search");
  log(`search: ${JSON.stringify(want.states)}; importance ${want.importance.map((p) => `${p.param} ${Math.round(p.share * 100)}%`).join(", ") || want.importance_note}`);
}

// The compare page takes whole experiments: peaks-best and peaks-last, two runs each, side by side.
async function crossCompareCheck(page) {
  await page.goto(`${base}/#/compare`);
  for (const [k, name] of ["peaks-best", "peaks-last"].entries()) {
    await page.fill("#compare-add-experiment", name);
    await page.click("#compare-add-experiment-btn");
    await waitFor(`${name}'s runs added`, async () => (await page.locator(".param-chips .chip").count()) === 2 * (k + 1), 10000, 100);
  }
  await waitFor("4 runs of 2 experiments compared", () => page.evaluate(() => {
    const row = [...document.querySelectorAll("#compare-summary tbody tr")].find((tr) => tr.querySelector("th")?.textContent === "experiment");
    const names = row ? [...row.querySelectorAll("td")].map((td) => td.textContent) : [];
    const chart = document.querySelector("#compare-charts .chart[data-metric=val_acc]");
    return names.length === 4 && names.filter((n) => n === "peaks-best").length === 2 && names.filter((n) => n === "peaks-last").length === 2 &&
      chart && chart.dataset.series === "4" && chart.querySelector(".uplot canvas");
  }), 20000, 200);
  await shot(page, "compare-experiments");
  log("compare page: peaks-best and peaks-last side by side, 4 val_acc curves");
}

// A three-stage pipeline of shell commands (prepare -> train over two lr values -> analyze, a
// gather): the experiment page draws its stages as a graph (boxes in columns by depth, an arrow per
// need, each with its state and a dot per run), lists the runs grouped by stage, and a click on a
// stage lists only its runs. Submitted again unchanged, every stage is cached: the graph marks
// them, a cached run's page links the run it was cached from and offers its source's artifacts
// for download (the bytes the run wrote).
async function pipelineCheck(page) {
  const dir = path.join(work, "pipe");
  mkdirSync(dir, { recursive: true });
  const spec = path.join(dir, "pipe.yaml");
  writeFileSync(spec, `name: web-pipeline
workdir: .
shell: true
params: {lr: [0.1, 0.01]}
stages:
  prepare: {command: "mkdir -p data && echo rows-42 > data/rows.txt", outputs: [data/]}
  train:
    command: "mkdir -p ckpt && cat data/rows.txt > ckpt/model.txt && echo lr={lr} >> ckpt/model.txt && echo '{{\\"step\\": 1, \\"acc\\": 0.5}}'"
    needs: [prepare]
    outputs: [ckpt/]
  analyze: {command: "cat $DROVER_INPUTS > /dev/null && echo done", needs: [train], gather: true}
`);
  const submit = () => {
    const sub = spawnSync(drover, ["--store", store, "submit", spec, "--json"], { encoding: "utf8", cwd: dir, timeout: 60000 });
    expect(sub.status === 0, `drover submit web-pipeline failed (${sub.status}):\n${sub.stdout}\n${sub.stderr}`);
    return JSON.parse(sub.stdout).experiment_id;
  };
  const ended = (id) => waitFor(`pipeline ${id}'s 4 runs to end`, async () => {
    const t = await api(`/experiments/${id}/table`);
    return t.total === 4 && t.counts.succeeded === 4 ? t : null;
  }, 60000, 200);
  const first = submit();
  const t1 = await ended(first);
  expect(t1.pipeline?.stages?.map((s) => s.name).join(",") === "prepare,train,analyze", `the table's stages: ${JSON.stringify(t1.pipeline)}`);
  await page.goto(`${base}/#/experiments/${first}`);
  await page.waitForSelector("#pipeline-graph .stage-node[data-stage=analyze]");
  const graph = await waitFor("the graph's arrows", () => page.evaluate(() => {
    const nodes = [...document.querySelectorAll("#pipeline-graph .stage-node")].map((n) => ({
      stage: n.dataset.stage, state: n.dataset.state, dots: n.querySelectorAll(".dot").length,
      cached: n.querySelectorAll(".dot.cached").length, x: Math.round(n.getBoundingClientRect().left) }));
    const edges = [...document.querySelectorAll("#pipeline-graph path.edge")].map((p) => `${p.dataset.from}>${p.dataset.to}`);
    return edges.length === 2 ? { nodes, edges } : null;
  }), 10000, 100);
  const node = (g, name) => g.nodes.find((n) => n.stage === name);
  expect(graph.edges.sort().join(" ") === "prepare>train train>analyze", `edges: ${graph.edges}`);
  expect(node(graph, "prepare").x < node(graph, "train").x && node(graph, "train").x < node(graph, "analyze").x, `columns by depth: ${JSON.stringify(graph.nodes)}`);
  expect(graph.nodes.every((n) => n.state === "succeeded" && n.cached === 0), `a first run's stages: ${JSON.stringify(graph.nodes)}`);
  expect(node(graph, "train").dots === 2 && node(graph, "prepare").dots === 1, `dots: ${JSON.stringify(graph.nodes)}`);
  // The runs come grouped by stage, each group under its heading, in the spec's order.
  const groups = await page.$$eval("#runs-table tbody tr", (trs) => trs.map((tr) => tr.dataset.stageGroup !== undefined ? `[${tr.dataset.stageGroup}]` : tr.dataset.stage));
  expect(groups.join(" ") === "[prepare] prepare [train] train train [analyze] analyze", `the table's rows: ${groups.join(" ")}`);
  await shot(page, "pipeline");
  await page.click("#pipeline-graph .stage-node[data-stage=train]");
  await waitFor("only train's runs listed", async () => {
    const stages = await page.$$eval("#runs-table tbody tr[data-run]", (trs) => trs.map((tr) => tr.dataset.stage));
    return stages.length === 2 && stages.every((s) => s === "train") && (await page.inputValue("#stage-filter")) === "train";
  }, 10000, 100);
  expect(page.url().includes("stage=train"), `the stage filter is not in the address: ${page.url()}`);

  // Unchanged: every stage cached, marked in the graph; a cached run links its source and offers
  // the artifacts it stored.
  const second = submit();
  const t2 = await ended(second);
  expect(t2.pipeline.stages.every((s) => s.cached === s.runs), `the second pipeline's stages: ${JSON.stringify(t2.pipeline.stages)}`);
  await page.goto(`${base}/#/experiments/${second}`);
  const cachedGraph = await waitFor("every stage cached in the graph", () => page.evaluate(() => {
    const nodes = [...document.querySelectorAll("#pipeline-graph .stage-node")];
    return nodes.length === 3 && nodes.every((n) => n.dataset.state === "cached" && n.querySelectorAll(".dot.cached").length === n.querySelectorAll(".dot").length) ? nodes.length : null;
  }), 10000, 100);
  expect(cachedGraph === 3, "cached graph");
  const cachedNotes = await page.$$eval("#runs-table .cached-note", (els) => els.length);
  expect(cachedNotes === 4, `rows saying "cached from": ${cachedNotes}`);
  await shot(page, "pipeline-cached");
  const cachedTrain = t2.rows.find((r) => r.stage === "train");
  const sourceTrain = t1.rows.find((r) => r.stage === "train" && r.params.lr === cachedTrain.params.lr);
  expect(cachedTrain.cached_from === sourceTrain.id, `run ${cachedTrain.id} cached from ${cachedTrain.cached_from}, want ${sourceTrain.id}`);
  await page.goto(`${base}/#/runs/${cachedTrain.id}`);
  await page.waitForSelector("#artifacts-table a[download]");
  const link = await page.$eval("#cached-from", (a) => a.getAttribute("href"));
  expect(link === `#/runs/${sourceTrain.id}`, `the cached run links ${link}`);
  const files = await page.$$eval("#artifacts-table a[download]", (as) => as.map((a) => a.textContent));
  expect(files.join(",") === "ckpt/model.txt", `the artifacts offered: ${files}`);
  // The browser's own download of the link, with its session cookie: the bytes the run wrote.
  const [download] = await Promise.all([page.waitForEvent("download"), page.click("#artifacts-table a[download]")]);
  const saved = path.join(work, "downloaded-model.txt");
  await download.saveAs(saved);
  const got = readFileSync(saved, "utf8");
  expect(got === `rows-42\nlr=${cachedTrain.params.lr}\n`, `the downloaded artifact: ${JSON.stringify(got)}`);
  expect(download.suggestedFilename() === "model.txt", `the download's name: ${download.suggestedFilename()}`);
  await shot(page, "pipeline-cached-run");

  // A pipeline whose objective only its last stage reports (6 train runs before it): the curves
  // first shown are that stage's, not the first rows' (prepare and train report no test_acc).
  const evalSpec = path.join(dir, "pipe-eval.yaml");
  writeFileSync(evalSpec, `name: web-pipeline-eval
workdir: .
shell: true
params: {lr: [1, 2, 3, 4, 5, 6]}
objective: {metric: test_acc, mode: max}
stages:
  prepare: {command: "true"}
  train: {command: "echo '{{\\"step\\": 1, \\"loss\\": 0.{lr}}}'", needs: [prepare]}
  evaluate: {command: "echo '{{\\"step\\": 1, \\"test_acc\\": 0.9}}'; echo '{{\\"step\\": 2, \\"test_acc\\": 0.93}}'", needs: [train], gather: true}
`);
  const evalSub = spawnSync(drover, ["--store", store, "submit", evalSpec, "--json"], { encoding: "utf8", cwd: dir, timeout: 60000 });
  expect(evalSub.status === 0, `drover submit web-pipeline-eval failed (${evalSub.status}):\n${evalSub.stdout}\n${evalSub.stderr}`);
  const evalId = JSON.parse(evalSub.stdout).experiment_id;
  await waitFor("web-pipeline-eval's 8 runs to end", async () => {
    const t = await api(`/experiments/${evalId}/table`);
    return t.total === 8 && t.counts.succeeded === 8;
  }, 60000, 200);
  await page.goto(`${base}/#/experiments/${evalId}`);
  const evalCurve = await waitFor("the evaluate stage's test_acc curve", () => page.evaluate(() => {
    const el = document.querySelector(".chart-box .chart");
    const metric = document.querySelector("#curve-metric")?.value;
    return el && el.dataset.points && metric ? { points: el.dataset.points, metric } : null;
  }), 10000, 100);
  expect(evalCurve.metric === "test_acc" && evalCurve.points === "2", `the first curves of a pipeline judged by its last stage: ${JSON.stringify(evalCurve)}`);
  log(`pipeline: graph of 3 stages with 2 arrows, runs grouped by stage, stage filter; resubmitted: all cached; artifact downloaded (${got.length} bytes); a last stage's objective plotted first`);
}

// The overview's counters, its Running panel and its GPU cards tell one story: as many running
// (and retrying) runs counted as listed, and every run on a GPU card among them. `also` is what
// the moment adds.
async function overviewAgrees(page, when, also) {
  const s = await waitFor(`the overview to agree with itself ${when}`, () => page.evaluate(() => {
    const n = (stat) => Number((document.querySelector(`.stat[data-stat=${stat}] .stat-n`)?.textContent || "").replace(/\D/g, "") || NaN);
    const rows = [...document.querySelectorAll(".panel .table tbody tr a[href^='#/runs/']")].map((a) => Number(a.getAttribute("href").split("/").pop()));
    const cards = [...document.querySelectorAll(".gpu-card")];
    if (!cards.length || cards.some((c) => c.dataset.runs === undefined)) return null;
    const gpuRuns = cards.flatMap((c) => (c.dataset.runs ? c.dataset.runs.split(",").map(Number) : []));
    return { running: n("running") + n("retrying"), rows, gpuRuns };
  }).then((s) => (s && s.running === s.rows.length && s.gpuRuns.every((id) => s.rows.includes(id)) && also(s) ? s : null)), 15000, 200);
  log(`overview ${when}: ${s.running} running, listed ${s.rows.join(",") || "none"}, on GPUs ${s.gpuRuns.join(",") || "none"}`);
}

async function failureCheck(page) {
  const dir = path.join(work, "crash");
  mkdirSync(dir, { recursive: true });
  const spec = path.join(dir, "crash.yaml");
  writeFileSync(spec, "name: crash\nworkdir: .\nshell: true\n" +
    "command: \"echo 'Traceback (most recent call last):' >&2; echo 'RuntimeError: simulated crash at epoch 3' >&2; exit 1\"\n");
  const sub = spawnSync(drover, ["--store", store, "submit", spec], { encoding: "utf8", cwd: dir, timeout: 60000 });
  expect(sub.status === 0, `drover submit crash failed (${sub.status}):\n${sub.stdout}\n${sub.stderr}`);
  const exp = (await api("/experiments?limit=100")).experiments.find((e) => e.name === "crash");
  expect(exp, "crash is not listed");
  const table = await waitFor("the crash run to fail", async () => {
    const t = await api(`/experiments/${exp.id}/table`);
    return t.counts.failed === 1 ? t : null;
  }, 30000, 200);
  const runId = table.rows[0].id;
  await page.goto(`${base}/#/runs/${runId}`);
  await page.waitForSelector("#run-error pre");
  const error = await page.$eval("#run-error pre", (el) => el.textContent);
  expect(error.includes("RuntimeError: simulated crash at epoch 3"), `the run page's error: ${error}`);
  const stream = await page.$eval("select[aria-label=stream]", (el) => el.value);
  expect(stream === "stderr", `a failed run's log should open on stderr, not ${stream}`);
  await waitFor("stderr in the log", async () => (await page.$eval("#run-log", (el) => el.textContent)).includes("simulated crash"));
  const line = await page.$eval("#attempts-table .error-line", (el) => el.textContent);
  expect(line === "RuntimeError: simulated crash at epoch 3", `the attempts table says ${line}`);
  await shot(page, "run-failed");
  log("the failed run's page shows its exception and opens its log on stderr");
}

async function reportCheck(expId) {
  const help = spawnSync(drover, ["report", "--help"], { encoding: "utf8" });
  if (help.status !== 0 || /unknown|not a command|The following argument was not expected/i.test(help.stderr + help.stdout)) {
    log("SKIPPED the HTML report: this drover has no `report` command yet");
    return;
  }
  const file = path.join(artifacts, "report.html");
  rmSync(file, { force: true });
  const r = spawnSync(drover, ["--store", store, "report", String(expId), "-o", file], { encoding: "utf8", cwd: digits, timeout: 60000 });
  expect(r.status === 0, `drover report failed (${r.status}):\n${r.stdout}\n${r.stderr}`);
  expect(existsSync(file), `drover report wrote no ${file}`);
  const html = readFileSync(file, "utf8");
  expect(!/<script[^>]+src=|<link[^>]+href="?https?:/i.test(html), "the report loads something from outside its file");
  const page = await browser.newPage({ viewport: { width: 1280, height: 860 } });
  const problems = [];
  page.on("console", (m) => (m.type() === "error" || m.type() === "warning") && problems.push(`report ${m.type()}: ${m.text()}`));
  page.on("pageerror", (e) => problems.push(`report pageerror: ${e.message}`));
  page.on("request", (q) => !q.url().startsWith("file:") && !q.url().startsWith("data:") && problems.push(`report fetched ${q.url()}`));
  await page.goto(pathToFileURL(file).href);
  const svg = await page.evaluate(() => {
    const svgs = [...document.querySelectorAll("svg")];
    const curves = svgs.filter((s) => s.querySelector("path[d*='L'], polyline"));
    const boxes = curves.map((s) => s.getBoundingClientRect()).filter((b) => b.width > 50 && b.height > 50);
    return { svgs: svgs.length, curves: curves.length, visible: boxes.length };
  });
  expect(svg.curves >= 2 && svg.visible >= 2, `the report's SVG curves: ${JSON.stringify(svg)}`);
  // The results table is never cut off: at a laptop's width and a narrow one, it ends inside the
  // window, and when it is wider than its box, the box (and its scroll bar) fits on the screen.
  for (const width of [1280, 760]) {
    await page.setViewportSize({ width, height: 800 });
    const fit = await page.evaluate(() => {
      const wrap = document.querySelector("#runs").closest(".table-wrap");
      wrap.scrollIntoView();
      const r = wrap.getBoundingClientRect();
      return { right: r.right, left: r.left, height: r.height, inner: innerWidth, innerH: innerHeight,
        scrolls: wrap.scrollWidth > wrap.clientWidth, page: document.documentElement.scrollWidth };
    });
    expect(fit.left >= 0 && fit.right <= fit.inner && fit.page <= fit.inner && (!fit.scrolls || fit.height <= fit.innerH), `the report's results table at ${width} px: ${JSON.stringify(fit)}`);
  }
  await page.setViewportSize({ width: 1280, height: 800 });
  await page.screenshot({ path: path.join(artifacts, "report.png"), fullPage: true });
  await page.close();
  expect(problems.length === 0, problems.join("\n"));
  log(`report: ${svg.svgs} SVGs, ${svg.curves} with curves drawn, no console errors (report.png)`);
}

let failed = false;
try {
  await main();
} catch (e) {
  failed = true;
  console.error(`FAIL: ${e.message}`);
  try {
    for (const p of browser?.contexts().flatMap((c) => c.pages()) || []) {
      await p.screenshot({ path: path.join(artifacts, "failure.png"), fullPage: true }).catch(() => {});
      break;
    }
  } catch {}
} finally {
  writeFileSync(path.join(artifacts, "console.log"), consoleLog.join("\n") + "\n");
  // leave nothing running: cancel what is left, then stop the browser and the daemon
  if (daemon && api) {
    try {
      for (const e of (await api("/experiments")).experiments) await api(`/experiments/${e.id}/cancel`, { method: "POST" }).catch(() => {});
    } catch {}
  }
  await browser?.close().catch(() => {});
  await stopDaemon();
  if (!failed) rmSync(work, { recursive: true, force: true });
  else console.error(`kept the store for a look: ${work}`);
}
log(failed ? "FAILED" : `PASSED in ${((Date.now() - t0) / 1000).toFixed(1)}s; artifacts in ${artifacts}`);
process.exit(failed ? 1 : 0);
