// An agent's research loop through drover's MCP tools, scripted, over stdio with the official
// SDK client: plan from an instruction, submit, wait, read the curves, pick the best config,
// submit a follow-up around it (its learning rate halved and doubled), wait, and find the
// follow-up's results. The whole conversation goes to LOG (JSON lines), kept as a test artifact.
//   node agent_loop.mjs DROVER_BIN STORE DIGITS_DIR LOG
import { appendFileSync, writeFileSync } from "node:fs";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";

const [drover, store, digits, log] = process.argv.slice(2);
writeFileSync(log, "");
const say = (who, data) => appendFileSync(log, JSON.stringify({ t: Date.now(), who, data }) + "\n");
const fail = (msg) => {
  say("agent", { failed: msg });
  console.error(`agent_loop: ${msg}`);
  process.exit(1);
};
const client = new Client({ name: "drover-agent-loop", version: "1.0.0" });
async function tool(name, args) {
  say("agent", { tool: name, arguments: args });
  const r = await client.callTool({ name, arguments: args }, undefined, { timeout: 55000 });
  say("drover", { tool: name, isError: r.isError ?? false, result: r.structuredContent ?? r.content });
  if (r.isError) fail(`${name} failed: ${JSON.stringify(r.content)}`);
  return r.structuredContent;
}
async function waitAll(runIds) {
  for (let i = 0; i < 8; i++) {
    const w = await tool("wait", { run_ids: runIds, timeout_s: 45 });
    if (w.done) return w;
  }
  fail("runs did not finish");
}

try {
  await client.connect(new StdioClientTransport({
    command: drover, args: ["mcp", "--store", store, "--fake-gpus", "2x16GiB"], cwd: digits,
    stderr: "inherit",
  }));
  say("agent", { goal: "find a good digits classifier, then refine its learning rate" });

  // 1. Plan from words and run it.
  const plan = await tool("plan", { instruction: "compare mlp and cnn for 3 epochs, by accuracy" });
  const first = await tool("submit", { spec_yaml: plan.spec_yaml, base_dir: plan.base_dir });
  await waitAll(first.run_ids);

  // 2. Read the curves and pick the best config.
  for (const id of first.run_ids) {
    const m = await tool("get_metrics", { run_id: id, name: "val_acc", points: 20 });
    if (!m.series?.[0]?.points?.length) fail(`run ${id} has no val_acc curve`);
  }
  const cmp = await tool("compare", { experiment: String(first.experiment_id) });
  if (!cmp.best_run) fail("no best run");
  const best = cmp.runs.find((r) => r.run_id === cmp.best_run);
  if (best.score !== Math.max(...cmp.runs.filter((r) => typeof r.score === "number").map((r) => r.score))) fail("compare's best is not the best");
  say("agent", { picked: best });

  // 3. Follow up around it: the same model, its learning rate halved and doubled.
  const lr = best.params.lr;
  const follow = await tool("plan", {
    instruction: `${best.params.model}, learning rate ${lr / 2} and ${lr * 2}, 3 epochs, by accuracy`,
  });
  if (follow.runs !== 2) fail(`the follow-up plan has ${follow.runs} runs, not 2`);
  const second = await tool("submit", { spec_yaml: follow.spec_yaml, base_dir: follow.base_dir });
  await waitAll(second.run_ids);

  // 4. Find its results.
  const found = await tool("list_runs", { experiment: String(second.experiment_id) });
  if (found.runs.length !== 2) fail("the follow-up's runs are not listed");
  if (!found.runs.every((r) => r.state === "succeeded" && r.params.model === best.params.model)) {
    fail(`follow-up runs: ${JSON.stringify(found.runs)}`);
  }
  const cmp2 = await tool("compare", { experiment: String(second.experiment_id) });
  say("agent", { conclusion: { first_best: best, follow_up_best: cmp2.runs[0] } });
  await client.close();
  console.log("agent_loop: done");
  process.exit(0);
} catch (e) {
  fail(e?.stack || String(e));
}
