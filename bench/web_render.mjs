// bench/web_render.sh's browser half: signs in, then loads the experiment page and the run page
// N times each in fresh pages and reads Chromium's performance marks (ms since navigation start).
import { createRequire } from "node:module";
import path from "node:path";
import { fileURLToPath } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
const require = createRequire(path.join(here, "../tests/web/package.json"));
const { chromium } = require("playwright-core");

const [base, token, expId, runId, n] = process.argv.slice(2);
const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
  args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run"],
});
const context = await browser.newContext({ viewport: { width: 1440, height: 900 } });
const login = await context.newPage();
await login.goto(`${base}/login`);
await login.fill("input[name=token]", token);
await Promise.all([login.waitForURL(`${base}/`), login.click("button[type=submit]")]);
await login.close();

const errors = [];
async function firstRender(hash, mark) {
  const page = await context.newPage();
  page.on("console", (m) => { if (m.type() === "error") errors.push(m.text()); });
  page.on("response", (r) => { if (r.status() >= 400) errors.push(`${r.status()} ${r.url()}`); });
  page.on("pageerror", (e) => errors.push(String(e)));
  await page.goto(`${base}/${hash}`);
  const handle = await page.waitForFunction(
    (name) => performance.getEntriesByName(name)[0]?.startTime, mark, { timeout: 30000 });
  const ms = await handle.jsonValue();
  if (process.env.VERBOSE) {
    const res = await page.evaluate(() => performance.getEntriesByType("resource").map(
        (r) => `${Math.round(r.startTime)}+${Math.round(r.duration)} ${r.name}`));
    console.error(`${hash}: ${Math.round(ms)} ms\n  ${res.join("\n  ")}`);
  }
  await page.close();
  return ms;
}

function summary(xs) {
  const s = [...xs].sort((a, b) => a - b);
  return { median_ms: Math.round(s[Math.floor(s.length / 2)]), max_ms: Math.round(s[s.length - 1]),
           runs_ms: xs.map(Math.round) };
}

const table = [], curve = [];
for (let i = 0; i < Number(n); i++) {
  table.push(await firstRender(`#/experiments/${expId}`, "drover:table-rendered"));
  curve.push(await firstRender(`#/runs/${runId}`, "drover:chart-rendered"));
}
await browser.close();
const out = { experiment_page: summary(table), curve_page: summary(curve), console_errors: errors.length };
console.log(JSON.stringify(out));
if (errors.length) { console.error(errors.slice(0, 5).join("\n")); process.exit(1); }
