#include "spec/spec_parser.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "spec/expand.h"

namespace drover {
namespace {

namespace fs = std::filesystem;

Result<Spec> Parse(const std::string& yaml, const std::vector<std::string>& overrides = {}) {
  return ParseSpecString(yaml, "compare.yaml", "/tmp", overrides);
}

// The message of a spec that must be rejected as bad input.
std::string Error(const std::string& yaml, const std::vector<std::string>& overrides = {}) {
  Result<Spec> r = Parse(yaml, overrides);
  EXPECT_FALSE(r.ok()) << "expected an error for:\n" << yaml;
  if (r.ok()) return "";
  EXPECT_EQ(r.status().code(), Code::kInvalidArgument) << r.status().message();
  return r.status().message();
}

const char kMinimal[] = "name: x\ncommand: python train.py\n";

TEST(SpecParserTest, MapsEveryField) {
  Result<Spec> r = Parse(R"(name: digits-compare
workdir: .
command: "{python} train.py --model {model} --batch-size {batch_size}"
params:
  python: /usr/bin/python3
  model: [mlp, cnn]
  batch_size: [32, 64]
  epochs: 5
  lr: 0.001
  amp: true
resources:
  gpus: 1
  gpu_memory: 6GiB
  cpus: 2
priority: 3
max_parallel: 4
retries: 1
retry_backoff: 2s
timeout: 30m
env: {OMP_NUM_THREADS: 1, MODE: fast}
objective: {metric: val_acc, mode: min}
oom: {param: batch_size, min: 8, accumulate: grad_accum}
)",
                         {});
  // grad_accum is not a parameter, so this spec is rejected; add it and parse again.
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(),
            "compare.yaml:22:46: oom.accumulate 'grad_accum' is not a parameter; name one of the "
            "parameters under params (python, model, batch_size, epochs, lr, amp)");
  r = Parse(R"(name: digits-compare
workdir: .
command: "{python} train.py --model {model} --batch-size {batch_size} --accum {grad_accum}"
params:
  python: /usr/bin/python3
  model: [mlp, cnn]
  batch_size: [32, 64]
  grad_accum: 1
  epochs: 5
  lr: 0.001
  amp: true
resources:
  gpus: 1
  gpu_memory: 6GiB
  cpus: 2
priority: 3
max_parallel: 4
retries: 1
retry_backoff: 2s
timeout: 30m
env: {OMP_NUM_THREADS: 1, MODE: fast}
objective: {metric: val_acc, mode: min}
oom: {param: batch_size, min: 8, accumulate: grad_accum}
)");
  ASSERT_TRUE(r.ok()) << r.status().message();
  const Spec& s = *r;
  EXPECT_EQ(s.name, "digits-compare");
  EXPECT_EQ(s.workdir, "/tmp");
  EXPECT_EQ(s.command,
            (std::vector<std::string>{"{python}", "train.py", "--model", "{model}", "--batch-size",
                                      "{batch_size}", "--accum", "{grad_accum}"}));
  EXPECT_FALSE(s.shell);
  EXPECT_EQ(s.params.dump(),
            R"({"python":"/usr/bin/python3","model":["mlp","cnn"],"batch_size":[32,64],)"
            R"("grad_accum":1,"epochs":5,"lr":0.001,"amp":true})");
  EXPECT_EQ(s.resources.gpus, 1);
  EXPECT_EQ(s.resources.gpu_memory, int64_t{6} << 30);
  EXPECT_EQ(s.resources.cpus, 2);
  EXPECT_EQ(s.priority, 3);
  EXPECT_EQ(s.max_parallel, 4);
  EXPECT_EQ(s.retries, 1);
  EXPECT_EQ(s.retry_backoff_ms, 2000);
  EXPECT_EQ(s.timeout_ms, 30 * 60 * 1000);
  EXPECT_EQ(s.env,
            (std::map<std::string, std::string>{{"OMP_NUM_THREADS", "1"}, {"MODE", "fast"}}));
  ASSERT_TRUE(s.objective.has_value());
  EXPECT_EQ(s.objective->metric, "val_acc");
  EXPECT_FALSE(s.objective->maximize);
  EXPECT_EQ(s.oom.param, "batch_size");
  EXPECT_EQ(s.oom.min, 8);
  EXPECT_EQ(s.oom.accumulate, "grad_accum");
  EXPECT_EQ(s.source_path, "");
  EXPECT_NE(s.source_text.find("digits-compare"), std::string::npos);
}

TEST(SpecParserTest, DefaultsForAnOptionalField) {
  Result<Spec> r = Parse(kMinimal);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->command, (std::vector<std::string>{"python", "train.py"}));
  EXPECT_EQ(r->workdir, "/tmp");
  EXPECT_TRUE(r->params.empty());
  EXPECT_EQ(r->resources.gpus, 0);
  EXPECT_EQ(r->resources.gpu_memory, 0);
  EXPECT_EQ(r->resources.cpus, 1);
  EXPECT_EQ(r->retries, 0);
  EXPECT_EQ(r->retry_backoff_ms, 1000);
  EXPECT_EQ(r->timeout_ms, 0);
  EXPECT_FALSE(r->objective.has_value());
  EXPECT_FALSE(r->oom.enabled());
  EXPECT_EQ(r->source_text, kMinimal);
}

TEST(SpecParserTest, CommandStringSplitsLikeSh) {
  Result<Spec> r = Parse(R"(name: x
command: python 'my script.py' --msg "a \"b\"" c\ d --lr={lr}
params: {lr: 0.1}
)");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->command, (std::vector<std::string>{"python", "my script.py", "--msg", "a \"b\"",
                                                  "c d", "--lr={lr}"}));
}

TEST(SpecParserTest, CommandListKeepsWords) {
  Result<Spec> r = Parse("name: x\ncommand: [python, 'a b.py', --epochs, 5]\n");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->command, (std::vector<std::string>{"python", "a b.py", "--epochs", "5"}));
}

TEST(SpecParserTest, ShellKeepsTheScript) {
  Result<Spec> r = Parse(
      "name: x\nshell: true\ncommand: \"cd sub && python t.py {a} | tee "
      "log\"\nparams: {a: 1}\n");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_TRUE(r->shell);
  EXPECT_EQ(r->command, (std::vector<std::string>{"cd sub && python t.py {a} | tee log"}));
}

TEST(SpecParserTest, ScalarsAreTypedByTheCoreSchema) {
  Result<Spec> r = Parse(R"(name: x
command: run
params:
  quoted: '5'
  int: 5
  neg: -3
  hex: 0x10
  float: 0.001
  exp: 1e-5
  yes_word: yes
  bool: false
  text: mlp
)");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->params.dump(),
            R"({"quoted":"5","int":5,"neg":-3,"hex":16,"float":0.001,"exp":1e-05,)"
            R"("yes_word":"yes","bool":false,"text":"mlp"})");
}

TEST(SpecParserTest, SyntaxErrorNamesThePosition) {
  EXPECT_EQ(Error("name: x\ncommand: [python, train.py\nretries: 1\n"),
            "compare.yaml:3:8: YAML syntax error: end of sequence flow not found; fix the YAML at "
            "this position");
  EXPECT_EQ(Error("name: x\n  command: run\n"),
            "compare.yaml:2:10: YAML syntax error: illegal map value; fix the YAML at this "
            "position");
}

TEST(SpecParserTest, ATabInTheIndentationIsNamed) {
  // yaml-cpp alone says "illegal map value" or similar, with no word about the tab.
  const std::string e = Error("name: x\ncommand: run\nresources:\n\tgpus: 1\n");
  EXPECT_NE(e.find("compare.yaml:"), std::string::npos) << e;
  EXPECT_NE(e.find("YAML syntax error"), std::string::npos) << e;
  EXPECT_NE(e.find("(line 4 indents with a tab: YAML indents with spaces only; replace the tab "
                   "with spaces)"),
            std::string::npos)
      << e;
  // A tab inside a value is no indentation: not named.
  EXPECT_EQ(Error("name: x\n  command: \"a\tb\"\n").find("tab"), std::string::npos);
}

TEST(SpecParserTest, TopLevelMustBeAMapping) {
  EXPECT_EQ(Error("- name: x\n- command: y\n"),
            "compare.yaml:1:1: the spec must be a mapping of keys (name:, command:, ...), got a "
            "list; write one 'key: value' per line");
  EXPECT_EQ(Error(""), "compare.yaml:1:1: the spec is empty; add at least name: and command:");
  EXPECT_EQ(Error("# only a comment\n"),
            "compare.yaml:1:1: the spec is empty; add at least name: and command:");
}

TEST(SpecParserTest, RequiredKeysPointAtTheStart) {
  EXPECT_EQ(Error("command: run\nretries: 1\n"),
            "compare.yaml:1:1: missing required key 'name'; add a name for the experiment, such "
            "as 'name: digits-compare'");
  EXPECT_EQ(Error("name: x\nretries: 1\n"),
            "compare.yaml:1:1: missing required key 'command'; add the command to run, such as "
            "'command: \"python train.py --lr {lr}\"'");
}

TEST(SpecParserTest, UnknownKeysSuggestTheClosest) {
  EXPECT_EQ(Error("name: x\ncommand: run\nprams:\n  lr: 0.1\n"),
            "compare.yaml:3:1: unknown key 'prams'; did you mean 'params'?");
  EXPECT_EQ(Error("name: x\ncommand: run\nresources:\n  gpu: 1\n"),
            "compare.yaml:4:3: unknown key 'gpu' under resources; did you mean 'gpus'?");
  EXPECT_EQ(Error("name: x\ncommand: run\nobjective: {metric: acc, direction: max}\n"),
            "compare.yaml:3:26: unknown key 'direction' under objective; valid keys are metric, "
            "mode, summary");
  EXPECT_EQ(Error("name: x\ncommand: run\nparams: {bs: 8}\noom: {parm: bs}\n"),
            "compare.yaml:4:7: unknown key 'parm' under oom; did you mean 'param'?");
  EXPECT_EQ(Error("name: x\ncommand: run\nlearning_rate: 0.1\n"),
            "compare.yaml:3:1: unknown key 'learning_rate'; valid keys are name, workdir, "
            "command, shell, params, resources, priority, group, preemptible, max_parallel, "
            "max_runs, retries, retry_backoff, "
            "timeout, env, objective, oom, monitor, data, search, prune, stages, force, rerun, executor, container, "
            "checkpoint, tensorboard, metrics, fail_fast "
            "(parameters "
            "go under "
            "params:)");
  // A section's key written at the top level is pointed at its section.
  EXPECT_EQ(Error("name: x\ncommand: run\ngpu_memory: 6GiB\n"),
            "compare.yaml:3:1: unknown key 'gpu_memory'; did you mean 'resources.gpu_memory'? "
            "(put it under resources:)");
}

TEST(SpecParserTest, MonitorSection) {
  Result<Spec> r = Parse(
      "name: x\ncommand: run\nmonitor: {watch: [loss, val_loss], on_nan: "
      "ignore, stall: 10m}\n");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->monitor.watch, (std::vector<std::string>{"loss", "val_loss"}));
  EXPECT_FALSE(r->monitor.stop_on_nan);
  EXPECT_EQ(r->monitor.stall_ms, 600'000);
  Result<Spec> one = Parse("name: x\ncommand: run\nmonitor: {watch: loss}\n");
  ASSERT_TRUE(one.ok()) << one.status().message();
  EXPECT_EQ(one->monitor.watch, (std::vector<std::string>{"loss"}));
  EXPECT_TRUE(one->monitor.stop_on_nan);
  EXPECT_EQ(Error("name: x\ncommand: run\nmonitor: {on_nan: panic}\n"),
            "compare.yaml:3:19: monitor.on_nan must be stop or ignore, got 'panic'; stop ends the "
            "run as diverged");
  EXPECT_EQ(Error("name: x\ncommand: run\nmonitor: {stal: 5m}\n"),
            "compare.yaml:3:11: unknown key 'stal' under monitor; did you mean 'stall'?");
  Result<Spec> set = Parse("name: x\ncommand: run\n", {"monitor.stall=30s"});
  ASSERT_TRUE(set.ok()) << set.status().message();
  EXPECT_EQ(set->monitor.stall_ms, 30'000);
}

TEST(SpecParserTest, GroupAndPreemptible) {
  Result<Spec> d = Parse(kMinimal);
  ASSERT_TRUE(d.ok()) << d.status().message();
  EXPECT_EQ(d->group, "");
  EXPECT_FALSE(d->preemptible);  // no checkpoints: a stop would lose its work
  Result<Spec> r = Parse("name: x\ncommand: run\ngroup: vision\npreemptible: false\n");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->group, "vision");
  EXPECT_FALSE(r->preemptible);
  EXPECT_EQ(Error("name: x\ncommand: run\npreemptible: no\n"),
            "compare.yaml:3:14: preemptible must be true or false, got 'no'; write false so no "
            "scheduling policy stops these runs to make room");
  EXPECT_EQ(Error("name: x\ncommand: run\ngroup: my team\n"),
            "compare.yaml:3:8: group 'my team' may only hold letters, digits, '.', '_' and '-'; "
            "write a group name such as vision");
  EXPECT_EQ(Error("name: x\ncommand: run\ngropu: nlp\n"),
            "compare.yaml:3:1: unknown key 'gropu'; did you mean 'group'?");
  Result<Spec> set = Parse(kMinimal, {"group=nlp", "preemptible=false"});
  ASSERT_TRUE(set.ok()) << set.status().message();
  EXPECT_EQ(set->group, "nlp");
  EXPECT_FALSE(set->preemptible);
}

TEST(SpecParserTest, DuplicateKeysAreRejected) {
  EXPECT_EQ(Error("name: x\ncommand: run\nretries: 1\nretries: 2\n"),
            "compare.yaml:4:1: duplicate key 'retries'; keep only one of them");
  EXPECT_EQ(Error("name: x\ncommand: run\nparams:\n  lr: 1\n  lr: 2\n"),
            "compare.yaml:5:3: duplicate key 'params.lr'; keep only one of them");
}

TEST(SpecParserTest, WrongTypesPointAtTheValue) {
  EXPECT_EQ(Error("name: x\ncommand: run\nretries: three\n"),
            "compare.yaml:3:10: retries must be a non-negative integer, got 'three'; write how "
            "many times to retry, such as 2");
  EXPECT_EQ(Error("name: x\ncommand: run\nretries: -1\n"),
            "compare.yaml:3:10: retries must be a non-negative integer, got '-1'; write how many "
            "times to retry, such as 2");
  EXPECT_EQ(Error("name: x\ncommand: run\nretries: 1.5\n"),
            "compare.yaml:3:10: retries must be a non-negative integer, got '1.5'; write how many "
            "times to retry, such as 2");
  EXPECT_EQ(Error("name: x\ncommand: run\nresources:\n  gpus: 1\n  gpu_memory: 6 gigs\n"),
            "compare.yaml:5:15: resources.gpu_memory: '6 gigs' is not a size; write a number with "
            "a unit, such as 6GiB, 512MiB or 8GB");
  EXPECT_EQ(Error("name: x\ncommand: run\ntimeout: soon\n"),
            "compare.yaml:3:10: timeout: 'soon' is not a duration; write e.g. 500ms, 90s, 30m, 2h "
            "or 1h30m");
  EXPECT_EQ(Error("name: x\ncommand: run\nshell: yes\n"),
            "compare.yaml:3:8: shell must be true or false, got 'yes'; write true to run the "
            "command with /bin/sh -c");
  EXPECT_EQ(Error("name: x\ncommand: run\npriority: high\n"),
            "compare.yaml:3:11: priority must be an integer, got 'high'; write a whole number; "
            "higher runs first");
  EXPECT_EQ(Error("name: x\ncommand: run\nresources:\n  gpus: [1, 2]\n"),
            "compare.yaml:4:9: resources.gpus must be a non-negative integer, got a list; write "
            "the number of GPUs per run, 0 for CPU only");
  EXPECT_EQ(Error("name: x\ncommand: run\nresources: 2\n"),
            "compare.yaml:3:12: resources must be a mapping, got '2'; write e.g. resources: "
            "{gpus: 1, gpu_memory: 6GiB}");
  EXPECT_EQ(Error("name: x\ncommand: run\nenv: {A: [1]}\n"),
            "compare.yaml:3:10: env.A must be a string, number or true/false, got a list; quote "
            "the value");
  EXPECT_EQ(Error("name: x\ncommand: {a: b}\n"),
            "compare.yaml:2:10: command must be a string or a list of words, got a mapping; write "
            "e.g. command: \"python train.py --lr {lr}\"");
}

TEST(SpecParserTest, AnEmptyValuePointsAtItsKey) {
  EXPECT_EQ(Error("name: x\ncommand: run\nretries:\npriority: 1\n"),
            "compare.yaml:3:1: retries must be a non-negative integer, got nothing; write how "
            "many times to retry, such as 2");
}

TEST(SpecParserTest, BadNames) {
  EXPECT_EQ(Error("name: my exp/1\ncommand: run\n"),
            "compare.yaml:1:7: name 'my exp/1' may only hold letters, digits, '.', '_' and '-'; "
            "rename it, e.g. 'my-exp-1'");
  EXPECT_EQ(Error("name: x\ncommand: run\nparams: {'learning rate': 1}\n"),
            "compare.yaml:3:10: parameter name 'learning rate' is not valid; use letters, digits, "
            "'_' and '-', starting with a letter or '_'");
}

TEST(SpecParserTest, BadParamValues) {
  EXPECT_EQ(Error("name: x\ncommand: run\nparams:\n  opt: {lr: 1}\n"),
            "compare.yaml:4:8: params.opt must be a value, a list of values (a grid axis) or a "
            "distribution to search such as {log_uniform: [1e-5, 0.1]}, got another mapping; "
            "nested parameters are not supported, flatten them into names such as optim_lr");
  EXPECT_EQ(Error("name: x\ncommand: run\nparams:\n  lr: []\n"),
            "compare.yaml:4:7: params.lr is an empty list; give at least one value, or remove the "
            "parameter");
  EXPECT_EQ(Error("name: x\ncommand: run\nparams:\n  lr: [0.1, [1, 2]]\n"),
            "compare.yaml:4:13: params.lr: a list value must be a string, number or true/false, "
            "got a list; nested values are not supported");
  EXPECT_EQ(Error("name: x\ncommand: run\nparams:\n  lr:\n  bs: 1\n"),
            "compare.yaml:4:3: params.lr has an empty value; give a value, or a list of values to "
            "sweep");
  EXPECT_EQ(Error("name: x\ncommand: run\nparams:\n  lr: .inf\n"),
            "compare.yaml:4:7: params.lr: '.inf' is not a finite number; use a finite value, or "
            "quote it to pass it as text");
}

TEST(SpecParserTest, MissingPlaceholderSuggestsAParam) {
  EXPECT_EQ(Error("name: x\ncommand: python train.py --lr {lrr}\nparams:\n  lr: [0.1, 0.01]\n"),
            "compare.yaml:2:10: command uses {lrr} but params has no 'lrr'; did you mean 'lr'? "
            "(add it under params or remove the placeholder)");
  EXPECT_EQ(Error("name: x\ncommand: python train.py --seed {seed}\n"),
            "compare.yaml:2:10: command uses {seed} but params has no 'seed'; add it under params "
            "or remove the placeholder");
  // In a list, the error points at the word that holds the placeholder.
  EXPECT_EQ(Error("name: x\ncommand:\n  - python\n  - --lr={lrr}\nparams: {lr: 1}\n"),
            "compare.yaml:4:5: command uses {lrr} but params has no 'lrr'; did you mean 'lr'? "
            "(add it under params or remove the placeholder)");
}

TEST(SpecParserTest, UnbalancedBraces) {
  EXPECT_EQ(Error("name: x\ncommand: python train.py --lr {lr\nparams: {lr: 1}\n"),
            "compare.yaml:2:10: command: unbalanced '{' in '{lr'; close the placeholder with '}' "
            "or write '{{' for a literal brace");
  EXPECT_EQ(Error("name: x\ncommand: python train.py lr}\n"),
            "compare.yaml:2:10: command: unmatched '}' in 'lr}'; write '}}' for a literal brace");
  EXPECT_EQ(Error("name: x\ncommand: \"python t.py '{unterminated}\"\n"),
            "compare.yaml:2:10: unterminated single quote in command; close the quote");
  // Doubled braces are literal and need no parameter.
  Result<Spec> r = Parse("name: x\ncommand: \"python t.py --cfg={{\\\"a\\\": 1}}\"\n");
  ASSERT_TRUE(r.ok()) << r.status().message();
}

TEST(SpecParserTest, ShellNeedsAString) {
  EXPECT_EQ(Error("name: x\nshell: true\ncommand: [python, t.py]\n"),
            "compare.yaml:3:10: shell: true needs command as one string (a script for /bin/sh "
            "-c), got a list; join the words into one string, or set shell: false");
}

TEST(SpecParserTest, GpuMemoryNeedsGpus) {
  EXPECT_EQ(Error("name: x\ncommand: run\nresources: {gpu_memory: 6GiB}\n"),
            "compare.yaml:3:25: resources.gpu_memory needs resources.gpus of 1 or more (it is 0, "
            "a CPU-only run); set resources.gpus, or remove gpu_memory");
  Result<Spec> r = Parse("name: x\ncommand: run\nresources: {gpus: 0, cpus: 0}\n");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->resources.cpus, 0);
}

TEST(SpecParserTest, Objective) {
  Result<Spec> r = Parse("name: x\ncommand: run\nobjective: {metric: val_acc}\n");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_TRUE(r->objective->maximize);
  EXPECT_EQ(Error("name: x\ncommand: run\nobjective: {mode: max}\n"),
            "compare.yaml:3:12: objective needs a metric; add metric: NAME (the metric to "
            "optimise, as the run logs it)");
  EXPECT_EQ(Error("name: x\ncommand: run\nobjective: {metric: acc, mode: highest}\n"),
            "compare.yaml:3:32: objective.mode must be min or max, got 'highest'; write max when "
            "higher is better");
  // How a curve becomes a score: the last value unless the spec says otherwise.
  EXPECT_EQ(r->objective->summary, ScoreSummary::kLast);
  r = Parse("name: x\ncommand: run\nobjective: {metric: acc, summary: mean_last:5}\n");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->objective->summary, ScoreSummary::kMeanLast);
  EXPECT_EQ(r->objective->last_k, 5);
  EXPECT_EQ(SpecToJson(*r)["objective"]["summary"], "mean_last:5");
  Result<Spec> back = SpecFromJson(SpecToJson(*r));
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->objective->last_k, 5);
  r = Parse("name: x\ncommand: run\nobjective: {metric: acc, summary: best}\n");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->objective->summary, ScoreSummary::kBest);
  EXPECT_EQ(Error("name: x\ncommand: run\nobjective: {metric: acc, summary: peak}\n"),
            "compare.yaml:3:35: objective.summary: the summary must be last (the last value), "
            "best (the highest for max, the lowest for min) or mean_last:K (the mean of the last "
            "K values), got 'peak'");
  EXPECT_EQ(Error("name: x\ncommand: run\nobjective: {metric: acc, summary: mean_last:0}\n"),
            "compare.yaml:3:35: objective.summary: mean_last:K wants a whole number K from 1 to "
            "1000, got 'mean_last:0'");
}

TEST(SpecParserTest, OomPolicyNeedsAnIntegerParam) {
  const std::string head =
      "name: x\ncommand: run\nparams:\n  batch_size: [32, 64]\n  model: "
      "[mlp, cnn]\n  accum: 1\n  lr: 0.5\n";
  Result<Spec> r = Parse(head + "oom: {param: batch_size, accumulate: accum}\n");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->oom.param, "batch_size");
  EXPECT_EQ(r->oom.min, 1);
  EXPECT_EQ(r->oom.accumulate, "accum");

  EXPECT_EQ(Error(head + "oom: {param: batchsize}\n"),
            "compare.yaml:8:14: oom.param 'batchsize' is not a parameter (did you mean "
            "'batch_size'?); name one of the parameters under params (batch_size, model, accum, "
            "lr)");
  EXPECT_EQ(Error(head + "oom: {param: model}\n"),
            "compare.yaml:8:14: oom.param 'model' must have whole-number values of 1 or more (it "
            "is halved after an OOM), but it has 'mlp'; point oom.param at an integer parameter");
  EXPECT_EQ(Error(head + "oom: {param: batch_size, accumulate: lr}\n"),
            "compare.yaml:8:38: oom.accumulate 'lr' must have whole-number values of 1 or more "
            "(it is doubled when oom.param is halved), but it has '0.5'; point oom.accumulate at "
            "an integer parameter");
  EXPECT_EQ(Error(head + "oom: {min: 8}\n"),
            "compare.yaml:8:6: oom needs a param: the parameter to halve after a CUDA "
            "out-of-memory error; add param: batch_size (or your batch parameter)");
  EXPECT_EQ(Error(head + "oom: {param: batch_size, min: 0}\n"),
            "compare.yaml:8:31: oom.min must be an integer >= 1, got '0'; write the smallest "
            "value to try, such as 8");
}

TEST(SpecParserTest, Workdir) {
  fs::path dir = fs::temp_directory_path() / "drover_spec_workdir_test";
  fs::create_directories(dir / "sub");
  Result<Spec> r =
      ParseSpecString("name: x\ncommand: run\nworkdir: sub/../sub/\n", "w.yaml", dir.string());
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->workdir, (dir / "sub").string());
  r = ParseSpecString("name: x\ncommand: run\nworkdir: /\n", "w.yaml", dir.string());
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->workdir, "/");

  r = ParseSpecString("name: x\ncommand: run\nworkdir: nope\n", "w.yaml", dir.string());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(),
            "w.yaml:3:10: workdir 'nope' does not exist (looked for " + (dir / "nope").string() +
                "); create it or fix the path (relative paths start at the spec file's folder)");
  fs::remove_all(dir);
}

TEST(SpecParserTest, OverridesSetDottedPaths) {
  const std::string yaml =
      "name: x\ncommand: python t.py --lr {lr} --bs {bs}\nparams:\n  lr: "
      "0.1\n  bs: [8, 16]\nretries: 0\n";
  Result<Spec> r = Parse(yaml, {"retries=2", "resources.gpus=1", "resources.gpu_memory=4GiB",
                                "params.lr=[0.1,0.01]", "timeout=1h", "env.SEED=7"});
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->retries, 2);
  EXPECT_EQ(r->resources.gpus, 1);
  EXPECT_EQ(r->resources.gpu_memory, int64_t{4} << 30);
  EXPECT_EQ(r->timeout_ms, 3'600'000);
  EXPECT_EQ(r->env.at("SEED"), "7");
  // An existing parameter keeps its place in the grid.
  EXPECT_EQ(r->params.dump(), R"({"lr":[0.1,0.01],"bs":[8,16]})");
  EXPECT_EQ(ExpandGrid(*r).size(), 4u);
}

TEST(SpecParserTest, OverridesWorkOnSpecsWithoutParams) {
  const std::string yaml = "name: x\ncommand: python t.py\n";
  Result<Spec> r = Parse(yaml, {"retries=0", "timeout=5s", "resources.gpus=0", "params.lr=1"});
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->timeout_ms, 5000);
  EXPECT_EQ(r->params.dump(), R"({"lr":1})");
  Result<Spec> bad = Parse(yaml, {"lr=0"});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("--set 'lr=0': unknown key 'lr'"), std::string::npos)
      << bad.status().message();
}

TEST(SpecParserTest, BareOverrideKeySetsAParam) {
  const std::string yaml = "name: x\ncommand: python t.py --lr {lr}\nparams:\n  lr: [1, 2]\n";
  Result<Spec> r = Parse(yaml, {"lr=0.5"});
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->params.dump(), R"({"lr":0.5})");
  r = Parse(yaml, {"lr=[3, 4, 5]", "params.seed=1"});
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->params.dump(), R"({"lr":[3,4,5],"seed":1})");
  // A quoted value stays a string.
  r = Parse(yaml, {"lr='0.5'"});
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->params.dump(), R"({"lr":"0.5"})");
}

TEST(SpecParserTest, OverrideSourceTextParsesBackToTheSameSpec) {
  const std::string yaml =
      "# comment\nname: x\ncommand: python t.py --lr {lr} --tag {tag}\n"
      "params:\n  lr: [0.1, 0.01]\n  tag: '5'\nenv: {A: 'yes'}\n";
  Result<Spec> r = Parse(yaml, {"resources.gpus=2", "lr=0.5"});
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_NE(r->source_text, yaml);
  Result<Spec> again = Parse(r->source_text);
  ASSERT_TRUE(again.ok()) << again.status().message() << "\n" << r->source_text;
  EXPECT_EQ(SpecToJson(*again), SpecToJson(*r));
  EXPECT_EQ(again->params.dump(), R"({"lr":0.5,"tag":"5"})");
  EXPECT_EQ(again->resources.gpus, 2);
}

TEST(SpecParserTest, BadOverrides) {
  const std::string yaml = "name: x\ncommand: python t.py --lr {lr}\nparams:\n  lr: 1\n";
  EXPECT_EQ(Error(yaml, {"xyz"}),
            "--set 'xyz': expected key=value, such as retries=2, resources.gpus=1 or "
            "params.lr=[0.1,0.01]; add '=' and a value");
  EXPECT_EQ(Error(yaml, {"=3"}),
            "--set '=3': the key before '=' is empty; write key=value, such as retries=2");
  EXPECT_EQ(Error(yaml, {"retires=2"}),
            "--set 'retires=2': unknown key 'retires'; did you mean 'retries'? (to add a "
            "parameter, write --set params.retires=VALUE)");
  EXPECT_EQ(Error(yaml, {"lrr=2"}),
            "--set 'lrr=2': unknown key 'lrr'; did you mean 'lr'? (to add a parameter, write "
            "--set params.lrr=VALUE)");
  EXPECT_EQ(Error(yaml, {"resources.gpu=1"}),
            "--set 'resources.gpu=1': unknown key 'resources.gpu'; did you mean "
            "'resources.gpus'?");
  EXPECT_EQ(Error(yaml, {"retries.max=1"}),
            "--set 'retries.max=1': 'retries' has no sub-keys; write --set retries=VALUE");
  EXPECT_EQ(Error(yaml, {"params.lr.x=1"}),
            "--set 'params.lr.x=1': params entries are not nested; write --set params.lr=VALUE");
  EXPECT_EQ(Error(yaml, {"lr=[1,"}),
            "--set 'lr=[1,': the value is not valid YAML (end of sequence flow not found); quote "
            "it, e.g. --set 'lr=\"...\"'");
}

TEST(SpecParserTest, ErrorsInOverriddenValuesNameTheOverride) {
  const std::string yaml = "name: x\ncommand: python t.py --lr {lr}\nparams:\n  lr: 1\n";
  EXPECT_EQ(Error(yaml, {"retries=three"}),
            "--set 'retries=three': retries must be a non-negative integer, got 'three'; write "
            "how many times to retry, such as 2");
  EXPECT_EQ(Error(yaml, {"lr=[]"}),
            "--set 'lr=[]': params.lr is an empty list; give at least one value, or remove the "
            "parameter");
  EXPECT_EQ(Error(yaml, {"params.lr=[1, {a: 2}]"}),
            "--set 'params.lr=[1, {a: 2}]': params.lr: a list value must be a string, number or "
            "true/false, got a mapping; nested values are not supported");
  EXPECT_EQ(Error(yaml, {"resources.gpu_memory=8GiB"}),
            "--set 'resources.gpu_memory=8GiB': resources.gpu_memory needs resources.gpus of 1 or "
            "more (it is 0, a CPU-only run); set resources.gpus, or remove gpu_memory");
  // A value that is fine in itself but breaks a rule elsewhere still points into the file.
  EXPECT_EQ(Error(yaml, {"params={rate: 1}"}),
            "compare.yaml:2:10: command uses {lr} but params has no 'lr'; add it under params or "
            "remove the placeholder");
}

TEST(SpecParserTest, TextThatIsNotUtf8IsRefusedWhereItIs) {
  Result<Spec> r = Parse("name: x\ncommand: echo {lr}\nparams: {lr: [\"\xff\"]}\n");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(),
            "compare.yaml:3:16: byte 0xff is not UTF-8 text; save the spec as UTF-8");
  // Overlong forms and surrogates are not UTF-8 either; real UTF-8 is fine.
  EXPECT_FALSE(Parse("name: \xc0\xaf\ncommand: run\n").ok());
  EXPECT_FALSE(Parse("name: \xed\xa0\x80\ncommand: run\n").ok());
  EXPECT_TRUE(Parse("name: x\ncommand: echo {tag}\nparams: {tag: [\"\xe5\xad\xa6\xe4\xb9\xa0\"]}\n").ok());
  r = Parse("name: x\ncommand: echo {lr}\nparams: {lr: [1]}\n", {"lr=\xff"});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(),
            "--set: byte 0xff at offset 3 of the override is not UTF-8 text; give key=value as "
            "UTF-8");
}

TEST(SpecParserTest, ControlBytesAndEscapesThatMakeNonUtf8AreRefused) {
  // Found by fuzz_spec: a NUL before "N" read as the escape \N, which yaml-cpp turns into the
  // lone byte 0x85; the fingerprint's JSON then threw (an internal error, exit 3).
  Result<Spec> r =
      Parse(std::string("name: x\ncommand: echo {lr}\nparams:\n  lr: [0.1, \x01\x00NULL]\n", 55));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(),
            "compare.yaml:4:13: byte 0x01 is a control character, which YAML text may not hold; "
            "remove it from the spec (write it as an escape such as \"\\t\" inside double "
            "quotes)");
  r = Parse("name: x\ncommand: echo {lr}\nparams:\n  lr: [\"a\\Nb\"]\n");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("compare.yaml:4:8: this value reads as byte 0x85"),
            std::string::npos)
      << r.status().message();
  // Tabs and escapes that make UTF-8 are fine.
  EXPECT_TRUE(Parse("name: x\ncommand: echo {lr}\nparams:\n  lr: [\"a\\u0085b\", \"\\t\"]\n").ok());
}

TEST(SpecParserTest, AGridIsCountedBeforeItIsExpanded) {
  // Ten axes of ten values: 10^10 runs. Refused at once, from the count, with the count.
  std::string yaml = "name: huge\ncommand: run {a0}\nparams:\n";
  for (int i = 0; i < 10; ++i) {
    yaml += "  a" + std::to_string(i) + ": [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]\n";
  }
  Result<Spec> r = Parse(yaml);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(),
            "compare.yaml:3:1: params expand to 10000000000 runs (10 a0 x 10 a1 x 10 a2 x 10 a3 x "
            "10 a4 x 10 a5 x 10 a6 x 10 a7 x 10 a8 x 10 a9), over the limit of 100000 runs per "
            "experiment; use fewer values, or raise the limit with max_runs: N (at most 10000000)");
  // Past int64: still a count, not a wrapped number.
  std::string huger = "name: huge\ncommand: run {a0}\nparams:\n";
  for (int i = 0; i < 20; ++i) {
    huger += "  a" + std::to_string(i) + ": [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]\n";
  }
  r = Parse(huger);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("params expand to more than 9.2e18 runs"), std::string::npos);
  // max_runs raises (or lowers) the limit.
  EXPECT_TRUE(Parse("name: g\ncommand: run {a}\nmax_runs: 3\nparams: {a: [1, 2, 3]}\n").ok());
  r = Parse("name: g\ncommand: run {a}\nmax_runs: 2\nparams: {a: [1, 2, 3]}\n");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("params expand to 3 runs (3 a), over the limit of 2"),
            std::string::npos);
  r = Parse("name: g\ncommand: run\nmax_runs: 0\n");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("max_runs must be an integer from 1 to 10000000"),
            std::string::npos);
  // --set cannot get past it either.
  r = Parse("name: g\ncommand: run {a}\nparams: {a: [1, 2]}\nmax_runs: 2\n", {"max_runs=1"});
  EXPECT_FALSE(r.ok());
}

TEST(SpecParserTest, YamlAliasesCannotMultiplyWork) {
  // Nested aliases (a "billion laughs": nine levels of ten, 10^9 values if expanded) and an alias
  // of a node inside itself: values are scalars, so both are refused where they are, at once.
  std::string bomb = "name: lol\ncommand: run {x}\nparams:\n  y: &l0 [1, 1, 1, 1, 1, 1, 1, 1, 1, 1]\n";
  for (int i = 1; i < 9; ++i) {
    bomb += "  y" + std::to_string(i) + ": &l" + std::to_string(i) + " [";
    for (int k = 0; k < 10; ++k) bomb += (k ? ", *l" : "*l") + std::to_string(i - 1);
    bomb += "]\n";
  }
  bomb += "  x: [*l8]\n";
  // (Where: the aliased node, which is where its anchor was written.)
  EXPECT_NE(Error(bomb).find("compare.yaml:4:6: params.y1: a list value must be a string, number "
                             "or true/false, got a list"),
            std::string::npos)
      << Error(bomb);
  EXPECT_NE(Error("name: c\ncommand: run {x}\nparams:\n  x: &a [*a]\n").find("params.x"),
            std::string::npos);
  EXPECT_NE(Error("name: c\ncommand: run\nenv: &e {A: *e}\n").find("env.A must be a string"),
            std::string::npos);
  // An axis reused through an alias counts once per use: the grid's limit still holds.
  std::string reused = "name: r\ncommand: run {a}\nparams:\n  a: &v [";
  for (int k = 0; k < 100; ++k) reused += (k ? ", " : "") + std::to_string(k);
  reused += "]\n  b: *v\n  c: *v\n";
  EXPECT_NE(Error(reused).find("params expand to 1000000 runs"), std::string::npos)
      << Error(reused);
}

TEST(SpecParserTest, ParseSpecFile) {
  const std::string dir = std::string(DROVER_SOURCE_DIR) + "/tests/data/specs";
  Result<Spec> r = ParseSpecFile(dir + "/compare.yaml");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->source_path, fs::path(dir + "/compare.yaml").lexically_normal().string());
  EXPECT_EQ(r->workdir, fs::path(dir).lexically_normal().string());
  EXPECT_EQ(r->name, "digits-compare");
  EXPECT_EQ(ExpandGrid(*r).size(), 4u);
  EXPECT_NE(r->source_text.find("# A small sweep"), std::string::npos);

  r = ParseSpecFile(dir + "/typo_placeholder.yaml");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(),
            dir +
                "/typo_placeholder.yaml:5:5: command uses {lrr} but params has no 'lrr'; did "
                "you mean 'lr'? (add it under params or remove the placeholder)");

  r = ParseSpecFile(dir + "/missing.yaml");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kNotFound);
}

// Every ```yaml block in docs/spec.md marked as valid must parse: the docs cannot drift from the
// parser.
TEST(SpecParserTest, DocsExamplesParse) {
  std::ifstream in(std::string(DROVER_SOURCE_DIR) + "/docs/spec.md");
  ASSERT_TRUE(in) << "docs/spec.md is missing";
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string doc = ss.str();
  const std::string open = "```yaml\n";
  int parsed = 0;
  for (size_t pos = doc.find(open); pos != std::string::npos; pos = doc.find(open, pos)) {
    pos += open.size();
    size_t end = doc.find("```", pos);
    ASSERT_NE(end, std::string::npos);
    std::string block = doc.substr(pos, end - pos);
    if (block.find("name:") == std::string::npos || block.find("command:") == std::string::npos) {
      continue;  // a fragment, not a whole spec
    }
    Result<Spec> r = ParseSpecString(block, "docs/spec.md", "/tmp");
    EXPECT_TRUE(r.ok()) << r.status().message() << "\n" << block;
    if (r.ok() && r->name == "digits-compare") {
      EXPECT_EQ(ExpandGrid(*r).size(), 4u);
      Result<std::vector<std::string>> argv = RenderCommand(*r, ExpandGrid(*r)[0]);
      ASSERT_TRUE(argv.ok()) << argv.status().message();
      EXPECT_EQ(*argv, (std::vector<std::string>{"/usr/bin/python3", "train.py", "--model", "mlp",
                                                 "--batch-size", "32", "--epochs", "5"}));
    }
    ++parsed;
  }
  EXPECT_GE(parsed, 2);
}

}  // namespace
}  // namespace drover

namespace drover {
namespace {

TEST(SearchSpec, DistributionsSearchAndPruneAreRead) {
  Result<Spec> r = ParseSpecString(R"(name: s
command: python train.py --lr {lr} --layers {layers} --model {model}
params:
  lr: {log_uniform: [1e-5, 1e-1]}
  layers: {int: [1, 8]}
  width: {int_log: [16, 1024]}
  dropout: {uniform: [0.0, 0.5]}
  act: {choice: [relu, gelu, tanh]}
  model: [mlp, cnn]
  kernel: {choice: [3, 5], when: {model: cnn}}
search: {trials: 30, parallel: 4, seed: 1}
prune: {rule: asha, min_steps: 1, reduction: 3}
objective: {metric: val_acc, mode: max}
)", "s.yaml", "/tmp");
  ASSERT_TRUE(r.ok()) << r.status().message();
  ASSERT_TRUE(r->search.has_value());
  EXPECT_EQ(r->search->trials, 30);
  EXPECT_EQ(r->search->parallel, 4);
  EXPECT_EQ(r->search->seed, 1u);
  EXPECT_EQ(r->search->sampler, SamplerKind::kAuto);
  ASSERT_TRUE(r->prune.has_value());
  EXPECT_EQ(r->prune->rule, PruneRule::kAsha);
  EXPECT_EQ(r->prune->metric, "val_acc");  // the objective's
  EXPECT_TRUE(r->prune->maximize);
  EXPECT_EQ(r->params["kernel"]["when"]["model"], OrderedJson::array({"cnn"}));
  EXPECT_EQ(r->params["layers"]["int"], OrderedJson::array({1, 8}));
  // The grid holds the list axis and no distribution; the stored spec reads back the same.
  std::vector<Json> grid = ExpandGrid(*r);
  ASSERT_EQ(grid.size(), 2u);
  EXPECT_FALSE(grid[0].contains("lr"));
  Result<Spec> back = SpecFromJson(SpecToJson(*r));
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(SpecToJson(*back), SpecToJson(*r));
}

std::string SearchError(const std::string& body) {
  Result<Spec> r = ParseSpecString(
      "name: s\ncommand: python t.py\n" + body + "objective: {metric: acc}\n", "s.yaml", "/tmp");
  return r.ok() ? std::string("(parsed)") : r.status().message();
}

TEST(SearchSpec, ErrorsPointAtTheFieldAndSayWhatToDo) {
  EXPECT_EQ(SearchError("params:\n  lr: {log_uniform: [0, 1]}\nsearch: {trials: 3}\n"),
            "s.yaml:4:22: params.lr.log_uniform: a log scale needs low > 0, got 0; use uniform "
            "for ranges that reach 0");
  EXPECT_EQ(SearchError("params:\n  lr: {uniform: [1, 1]}\nsearch: {trials: 3}\n"),
            "s.yaml:4:17: params.lr.uniform: low (1) must be below high (1); write [low, high], "
            "or a fixed value instead of a range");
  EXPECT_EQ(SearchError("params:\n  n: {int: [1, 2.5]}\nsearch: {trials: 3}\n"),
            "s.yaml:4:16: params.n.int[1] must be an integer, got '2.5'; the ends of int ranges "
            "are whole numbers; use uniform for real numbers");
  EXPECT_EQ(SearchError("params:\n  lr: {uniform: [0, 1], choice: [a]}\nsearch: {trials: 3}\n"),
            "s.yaml:4:25: params.lr has two distributions (uniform and choice); give one");
  EXPECT_EQ(SearchError("params:\n  lr: {log_uniform: [1e-5, 1]}\n"),
            "s.yaml:4:7: params.lr is a distribution, which only a search samples; add search: "
            "{trials: 30} (or write a list of values to sweep a grid)");
  EXPECT_EQ(SearchError("params:\n  lr: [1, 2]\nsearch: {trials: 3}\n"),
            "s.yaml:5:1: search needs a parameter to search: give one a distribution, such as "
            "lr: {log_uniform: [1e-5, 1e-1]} (lists are grid axes)");
  EXPECT_EQ(SearchError("params:\n  lr: {uniform: [0, 1]}\nsearch: {parallel: 2}\n"),
            "s.yaml:5:9: search needs trials: N, the number of configs to try (such as 30)");
  EXPECT_EQ(SearchError("params:\n  m: [a, b]\n  k: {choice: [3], when: {m: c}}\nsearch: "
                        "{trials: 3}\n"),
            "s.yaml:5:6: params.k.when: m never takes [\"c\"], so k would never be sampled");
  EXPECT_EQ(SearchError("params:\n  k: {choice: [3], when: {q: c}}\nsearch: {trials: 3}\n"),
            "s.yaml:3:1: params.k.when names 'q', which is not another parameter");
  Result<Spec> no_objective = ParseSpecString(
      "name: s\ncommand: python t.py\nparams:\n  lr: {uniform: [0, 1]}\nsearch: {trials: 3}\n",
      "s.yaml", "/tmp");
  ASSERT_FALSE(no_objective.ok());
  EXPECT_EQ(no_objective.status().message(),
            "s.yaml:5:1: a search needs an objective, the metric it improves: add objective: "
            "{metric: val_acc, mode: max}");
  EXPECT_EQ(SearchError("params:\n  lr: {uniform: [0, 1]}\nsearch: {trials: 3}\nprune: "
                        "{rule: hyperband, metric: acc}\n"),
            "s.yaml:6:8: hyperband needs max_steps: what a full run takes, in the resource's "
            "units (its brackets' last rung), such as 27");
  EXPECT_EQ(SearchError("params:\n  lr: {uniform: [0, 1]}\nsearch: {trials: 3, sampler: tp}\n"),
            "s.yaml:5:30: search.sampler must be one of auto, tpe, gp, random, grid, got 'tp'; "
            "did you mean 'tpe'?");
}

TEST(SearchSpec, ACommandCannotNameAConditionalParameter) {
  Result<Spec> r = ParseSpecString(R"(name: s
command: python t.py --kernel {kernel}
params:
  model: [mlp, cnn]
  kernel: {choice: [3, 5], when: {model: cnn}}
search: {trials: 4}
objective: {metric: acc}
)", "s.yaml", "/tmp");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(),
            "s.yaml:2:10: command uses {kernel}, which exists only in some trials (when: "
            "{\"model\":[\"cnn\"]}); read it from $DROVER_PARAMS (JSON) in the script, or drop "
            "when:");
}

}  // namespace
}  // namespace drover

namespace drover {
namespace {

TEST(SpecParserExecutor, ASpecMayAskForSlurmAndHostMemory) {
  auto s = Parse(std::string(kMinimal) +
                 "executor: {kind: slurm, partition: debug, sbatch: [--constraint=a100]}\n"
                 "resources: {gpus: 1, memory: 16GiB}\n");
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_TRUE(s->executor.given);
  EXPECT_EQ(s->executor.kind, ExecutorKind::kSlurm);
  EXPECT_EQ(s->executor.partition, "debug");
  EXPECT_EQ(s->resources.memory, 16LL << 30);
  // Stored with the experiment and read back the same.
  auto back = SpecFromJson(SpecToJson(*s));
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->executor.kind, ExecutorKind::kSlurm);
  EXPECT_EQ(back->executor.sbatch, std::vector<std::string>{"--constraint=a100"});
  EXPECT_EQ(back->resources.memory, 16LL << 30);
  // --set reaches it; a spec that says nothing has no executor of its own.
  auto set = Parse(kMinimal, {"executor.kind=slurm"});
  ASSERT_TRUE(set.ok()) << set.status().message();
  EXPECT_EQ(set->executor.kind, ExecutorKind::kSlurm);
  EXPECT_FALSE(Parse(kMinimal)->executor.given);
}

TEST(SpecParserExecutor, WhatTheDaemonAloneSetsIsRefusedInASpec) {
  EXPECT_NE(Error(std::string(kMinimal) + "executor: {kind: slurm, max_jobs: 3}\n")
                .find("max_jobs"),
            std::string::npos);
  EXPECT_NE(Error(std::string(kMinimal) + "executor: {kind: slurm, sbatch: [--export=ALL]}\n")
                .find("'--export' is drover's to set"),
            std::string::npos);
  EXPECT_NE(Error(std::string(kMinimal) + "resources: {memory: lots}\n").find("resources.memory"),
            std::string::npos);
}

}  // namespace
}  // namespace drover

namespace drover {
namespace {

TEST(ContainerSpecTest, ParsesTheSectionAndRefusesWhatARuntimeCouldMisread) {
  auto spec = ParseSpecString(
      "name: c\ncommand: [true]\ncontainer:\n  image: localhost/digits:latest\n"
      "  runtime: docker\n  mounts: [/data/imagenet:/data:ro]\n  network: true\n", "c.yaml", "/tmp");
  ASSERT_TRUE(spec.ok()) << spec.status().message();
  ASSERT_TRUE(spec->container.has_value());
  EXPECT_EQ(spec->container->image, "localhost/digits:latest");
  EXPECT_EQ(spec->container->runtime, ContainerRuntime::kDocker);
  EXPECT_EQ(spec->container->mounts, std::vector<std::string>{"/data/imagenet:/data:ro"});
  EXPECT_TRUE(spec->container->network);
  // Round trip through the stored JSON, with the pinned id.
  spec->container->image_id = "sha256:" + std::string(64, 'a');
  auto back = SpecFromJson(SpecToJson(*spec));
  ASSERT_TRUE(back.ok());
  ASSERT_TRUE(back->container.has_value());
  EXPECT_EQ(back->container->image_id, spec->container->image_id);
  EXPECT_TRUE(back->container->network);

  for (const auto& [yaml, says] : std::vector<std::pair<std::string, std::string>>{
           {"container: {runtime: podman}", "has no image"},
           {"container: {image: --privileged}", "is not an image reference"},
           {"container: {image: 'a b'}", "is not an image reference"},
           {"container: {image: x, runtime: lxc}", "runtime"},
           {"container: {image: x, mounts: [data:/data]}", "not an absolute path"},
           {"container: {image: x, mounts: ['/a:/b:z']}", "not ro or rw"},
           {"container: {image: x, mounts: ['/a,b:/b']}", "holds a ','"},
           {"container: {image: x, network: yes}", "true or false"},
           {"container: {image: x, imgae: y}", "imgae"},
           {"executor: {kind: local}\ncontainer: {image: x, runtime: pyxis}", "pyxis"}}) {
    auto bad = ParseSpecString("name: c\ncommand: [true]\n" + yaml + "\n", "c.yaml", "/tmp");
    ASSERT_FALSE(bad.ok()) << yaml;
    EXPECT_NE(bad.status().message().find(says), std::string::npos)
        << yaml << ": " << bad.status().message();
  }
}

}  // namespace
}  // namespace drover
