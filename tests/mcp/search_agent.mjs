// An agent steering a search through drover's MCP tools (ask/tell), over stdio with the official
// SDK client: it submits a search whose own trials take long, asks for suggestions, reports
// results of configs it ran itself (the best near x = 0.9), and checks that the search's next
// suggestions went towards them; then it adds a config of its own as a trial and cancels.
// The conversation goes to LOG (JSON lines), kept as a test artifact.
//   node search_agent.mjs DROVER_BIN STORE LOG
import { appendFileSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";

const [drover, store, log] = process.argv.slice(2);
writeFileSync(log, "");
const say = (who, data) => appendFileSync(log, JSON.stringify({ t: Date.now(), who, data }) + "\n");
const fail = (msg) => {
  say("agent", { failed: msg });
  console.error(`search_agent: ${msg}`);
  process.exit(1);
};
const client = new Client({ name: "drover-search-agent", version: "1.0.0" });
async function tool(name, args, expectError = false) {
  say("agent", { tool: name, arguments: args });
  const r = await client.callTool({ name, arguments: args }, undefined, { timeout: 55000 });
  say("drover", { tool: name, isError: r.isError ?? false, result: r.structuredContent ?? r.content });
  if (!expectError && r.isError) fail(`${name} failed: ${JSON.stringify(r.content)}`);
  if (expectError && !r.isError) fail(`${name} should have been refused`);
  return expectError ? r.content : r.structuredContent;
}
const mean = (xs) => xs.reduce((a, b) => a + b, 0) / xs.length;

try {
  const code = mkdtempSync(join(tmpdir(), "drover-search-agent-"));
  await client.connect(new StdioClientTransport({
    command: drover, args: ["mcp", "--store", store], cwd: code, stderr: "inherit",
  }));
  // The search's own trials sleep: only what the agent tells it is known.
  const spec = [
    "name: steered", "command: sleep 600",
    "params:", "  x: {uniform: [0, 1]}", "  width: {choice: [64, 128]}",
    "search: {trials: 40, parallel: 1, seed: 3, sampler: tpe}",
    "objective: {metric: score, mode: max}", "",
  ].join("\n");
  const sub = await tool("submit", { spec_yaml: spec, base_dir: code });
  const exp = String(sub.experiment_id);

  const before = await tool("suggest", { experiment: exp, count: 4 });
  if (before.configs.length !== 4) fail("not 4 suggestions");
  // Results of its own: a grid over x, both widths; the best at x = 0.9, width 128.
  for (let i = 0; i <= 12; i++) {
    const x = i / 12;
    const width = i % 2 ? 64 : 128;
    await tool("tell", {
      experiment: exp, params: { x, width }, value: -((x - 0.9) ** 2) - (width === 64 ? 0.05 : 0),
    });
  }
  // A config outside the space is refused, with what is wrong.
  const refused = await tool("tell", { experiment: exp, params: { x: 2, width: 64 }, value: 1 }, true);
  if (!JSON.stringify(refused).includes("outside the search")) fail(`refusal: ${JSON.stringify(refused)}`);

  const after = await tool("suggest", { experiment: exp, count: 6 });
  const xs = after.configs.map((c) => c.x);
  say("agent", { mean_x_before: mean(before.configs.map((c) => c.x)), mean_x_after: mean(xs) });
  if (!(mean(xs) > 0.65)) fail(`suggestions did not go towards x = 0.9: ${JSON.stringify(xs)}`);

  const added = await tool("add_trial", { experiment: exp, params: { x: 0.9, width: 128 } });
  const run = await tool("get_run", { run_id: added.run_id });
  if (run.params.x !== 0.9 || run.params.width !== 128) fail(`added trial: ${JSON.stringify(run.params)}`);
  await tool("cancel", { experiment: exp });
  await client.close();
  console.log("search_agent: done");
  process.exit(0);
} catch (e) {
  fail(e?.stack || String(e));
}
