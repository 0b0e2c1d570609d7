// drover's MCP server driven by the official TypeScript SDK client, as an agent would:
//   node sdk_client.mjs stdio DROVER_BIN STORE DIGITS_DIR LOG
//   node sdk_client.mjs http  URL TOKEN DIGITS_DIR LOG
// initialize, list tools, plan from an instruction, submit the digits example (fake GPUs), wait,
// read the curves, compare, cancel a run, and a bad argument answered as an isError result. The
// SDK checks every structuredContent against the tool's outputSchema. Every request and result is
// appended to LOG (JSON lines). Exits non-zero on the first thing that is not as expected.
import { appendFileSync, writeFileSync } from "node:fs";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const [mode, a1, a2, digits, log] = process.argv.slice(2);
writeFileSync(log, "");
const note = (what, data) => appendFileSync(log, JSON.stringify({ t: Date.now(), what, data }) + "\n");
const fail = (msg) => {
  note("FAIL", msg);
  console.error(`sdk_client (${mode}): ${msg}`);
  process.exit(1);
};
const expect = (cond, msg) => {
  if (!cond) fail(msg);
};

const transport =
  mode === "stdio"
    ? new StdioClientTransport({
        command: a1,
        args: ["mcp", "--store", a2, "--fake-gpus", "2x16GiB"],
        cwd: digits,
        stderr: "inherit",
      })
    : new StreamableHTTPClientTransport(new URL(a1), {
        requestInit: { headers: { Authorization: `Bearer ${a2}` } },
      });
const client = new Client({ name: "drover-sdk-test", version: "1.0.0" });

async function call(name, args) {
  note("call", { name, args });
  const result = await client.callTool({ name, arguments: args }, undefined, { timeout: 55000 });
  note("result", { name, result });
  return result;
}

try {
  await client.connect(transport);
  note("initialized", { server: client.getServerVersion(), instructions: client.getInstructions() });
  expect(client.getServerVersion()?.name === "drover", "server name is not drover");

  const { tools } = await client.listTools();
  note("tools", tools.map((t) => t.name));
  for (const name of ["gpu_status", "plan", "submit", "list_runs", "get_run", "get_metrics",
                      "compare", "wait", "logs", "cancel", "retry", "alerts"]) {
    expect(tools.some((t) => t.name === name), `tool ${name} is missing`);
  }

  const gpus = await call("gpu_status", {});
  expect(gpus.structuredContent.gpus.length === 2, "expected the 2 fake GPUs");

  const plan = await call("plan", {
    instruction: "compare mlp and cnn for 2 epochs, by accuracy",
    recipe: `${digits}/drover.yaml`,
  });
  expect(!plan.isError, `plan failed: ${JSON.stringify(plan.content)}`);
  expect(plan.structuredContent.runs === 2, "the plan should have 2 runs");
  expect(plan.structuredContent.ignored.length === 0, "the plan ignored words");

  const sub = await call("submit", {
    spec_yaml: plan.structuredContent.spec_yaml,
    base_dir: plan.structuredContent.base_dir,
  });
  expect(!sub.isError, `submit failed: ${JSON.stringify(sub.content)}`);
  const runIds = sub.structuredContent.run_ids;
  expect(runIds.length === 2, "submit should return 2 run ids");

  let waited;
  for (let i = 0; i < 6; i++) {
    waited = await call("wait", { run_ids: runIds, timeout_s: 45 });
    if (waited.structuredContent.done) break;
  }
  expect(waited.structuredContent.done, "runs did not finish");
  expect(waited.structuredContent.runs.every((r) => r.state === "succeeded"),
         `runs did not succeed: ${JSON.stringify(waited.structuredContent.runs)}`);

  const metrics = await call("get_metrics", { run_id: runIds[0], name: "val_acc", points: 50 });
  const series = metrics.structuredContent.series;
  expect(series.length === 1 && series[0].points.length >= 2, "expected a val_acc curve");

  const cmp = await call("compare", { experiment: String(sub.structuredContent.experiment_id) });
  expect(cmp.structuredContent.metric === "val_acc", "compare should rank by val_acc");
  expect(runIds.includes(cmp.structuredContent.best_run), "compare should name a best run");
  const values = cmp.structuredContent.runs.map((r) => r.score);
  expect(cmp.structuredContent.runs[0].run_id === cmp.structuredContent.best_run &&
         values[0] === Math.max(...values), `the best run is not the highest val_acc: ${values}`);

  // alerts takes the experiment by id or by name, as compare does.
  const byName = await call("alerts", { experiment: plan.structuredContent.spec.name });
  expect(!byName.isError && Array.isArray(byName.structuredContent.alerts),
         `alerts by experiment name failed: ${JSON.stringify(byName.content)}`);
  const unknown = await call("alerts", { experiment: "no-such-experiment" });
  expect(unknown.isError, "alerts for an unknown experiment should be an error");

  // Cancel: a run that would sleep for five minutes.
  const slow = await call("submit", {
    spec_yaml: "name: slow\ncommand: sleep 300\nresources: {gpus: 1}\n",
    base_dir: digits,
  });
  const slowId = slow.structuredContent.run_ids[0];
  const cancelled = await call("cancel", { run_ids: [slowId] });
  expect(!cancelled.isError, `cancel failed: ${JSON.stringify(cancelled.content)}`);
  const after = await call("wait", { run_ids: [slowId], timeout_s: 30 });
  expect(after.structuredContent.runs[0].state === "cancelled", "the slow run was not cancelled");
  // Retry: the cancelled run is queued again as the same run (then cancelled once more).
  const retried = await call("retry", { experiment: "slow", cancelled: true });
  expect(!retried.isError && retried.structuredContent.run_ids.length === 1 &&
         retried.structuredContent.run_ids[0] === slowId,
         `retry did not queue the cancelled run again: ${JSON.stringify(retried.content)}`);
  const nothingAsked = await call("retry", { experiment: "slow" });
  expect(nothingAsked.isError && nothingAsked.content[0].text.includes("say which runs"),
         `retry with nothing asked should say what to pass: ${JSON.stringify(nothingAsked.content)}`);
  await call("cancel", { run_ids: [slowId] });
  const again = await call("wait", { run_ids: [slowId], timeout_s: 30 });
  expect(again.structuredContent.runs[0].state === "cancelled", "the retried run was not cancelled");

  // A bad argument is a tool result with isError, and says what is wrong.
  const bad = await call("get_run", { run_id: "abc" });
  expect(bad.isError === true, "a bad argument should be an isError result");
  expect(bad.content[0].text.includes("run_id"), "the error should name the argument");

  await client.close();
  note("done", {});
  console.log(`sdk_client (${mode}): all checks passed`);
  process.exit(0);
} catch (e) {
  fail(e?.stack || String(e));
}
