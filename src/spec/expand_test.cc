#include "spec/expand.h"

#include <gtest/gtest.h>

#include "common/hash.h"
#include "spec/spec_parser.h"

namespace drover {
namespace {

Spec MustParse(const std::string& yaml) {
  Result<Spec> r = ParseSpecString(yaml, "test.yaml", "/tmp");
  EXPECT_TRUE(r.ok()) << r.status().message();
  return r.ok() ? *r : Spec{};
}

std::vector<std::string> MustRender(const Spec& spec, const Json& params) {
  Result<std::vector<std::string>> r = RenderCommand(spec, params);
  EXPECT_TRUE(r.ok()) << r.status().message();
  return r.ok() ? *r : std::vector<std::string>{};
}

TEST(ExpandGridTest, CartesianProductInFileOrderLastAxisFastest) {
  Spec s = MustParse(R"(name: x
command: "{python} t.py {model} {batch_size}"
params:
  python: /usr/bin/python3
  model: [mlp, cnn]
  epochs: 5
  batch_size: [32, 64]
)");
  std::vector<Json> runs = ExpandGrid(s);
  ASSERT_EQ(runs.size(), 4u);
  auto run = [](const char* model, int bs) {
    return Json{
        {"python", "/usr/bin/python3"}, {"model", model}, {"epochs", 5}, {"batch_size", bs}};
  };
  EXPECT_EQ(runs[0], run("mlp", 32));
  EXPECT_EQ(runs[1], run("mlp", 64));
  EXPECT_EQ(runs[2], run("cnn", 32));
  EXPECT_EQ(runs[3], run("cnn", 64));
}

TEST(ExpandGridTest, Counts) {
  EXPECT_EQ(ExpandGrid(MustParse("name: x\ncommand: run\nparams: {a: 1, b: hi, c: true}\n")),
            (std::vector<Json>{Json{{"a", 1}, {"b", "hi"}, {"c", true}}}));
  EXPECT_EQ(ExpandGrid(MustParse("name: x\ncommand: run\n")), (std::vector<Json>{Json::object()}));
  EXPECT_EQ(
      ExpandGrid(MustParse("name: x\ncommand: run\nparams: {a: [1, 2], b: [x, y, z], c: [t, f]}\n"))
          .size(),
      12u);
  // A one-value list is an axis of one.
  EXPECT_EQ(ExpandGrid(MustParse("name: x\ncommand: run\nparams: {a: [1], b: [1, 2]}\n")).size(),
            2u);
}

TEST(ExpandGridTest, KeepsValueTypes) {
  std::vector<Json> runs =
      ExpandGrid(MustParse("name: x\ncommand: run\nparams: {lr: [0.1, 1e-5], n: [3], s: ['7']}\n"));
  ASSERT_EQ(runs.size(), 2u);
  EXPECT_TRUE(runs[0]["lr"].is_number_float());
  EXPECT_TRUE(runs[0]["n"].is_number_integer());
  EXPECT_TRUE(runs[0]["s"].is_string());
  EXPECT_EQ(runs[1].dump(), R"({"lr":1e-05,"n":3,"s":"7"})");
}

TEST(RenderCommandTest, SubstitutesInsideWords) {
  Spec s = MustParse(
      "name: x\ncommand: python t.py --lr={lr} --model {model} "
      "run-{model}-{bs}.log\nparams: {lr: 0.001, model: mlp, bs: 32}\n");
  EXPECT_EQ(MustRender(s, ExpandGrid(s)[0]),
            (std::vector<std::string>{"python", "t.py", "--lr=0.001", "--model", "mlp",
                                      "run-mlp-32.log"}));
}

TEST(RenderCommandTest, FormatsValues) {
  Spec s = MustParse("name: x\ncommand: [p, '{v}']\nparams: {v: 1}\n");
  EXPECT_EQ(MustRender(s, {{"v", 0.001}})[1], "0.001");
  EXPECT_EQ(MustRender(s, {{"v", 1e-5}})[1], "1e-05");
  EXPECT_EQ(MustRender(s, {{"v", 0.1}})[1], "0.1");
  EXPECT_EQ(MustRender(s, {{"v", 2.5e10}})[1], "25000000000.0");
  EXPECT_EQ(MustRender(s, {{"v", 64}})[1], "64");
  EXPECT_EQ(MustRender(s, {{"v", -3}})[1], "-3");
  EXPECT_EQ(MustRender(s, {{"v", true}})[1], "true");
  EXPECT_EQ(MustRender(s, {{"v", false}})[1], "false");
  EXPECT_EQ(MustRender(s, {{"v", "a b"}})[1], "a b");
  EXPECT_EQ(MustRender(s, {{"v", ""}})[1], "");
}

TEST(RenderCommandTest, HostileValueStaysOneWordWithoutShell) {
  Spec s = MustParse("name: x\ncommand: echo {msg} --tag=x{msg}\nparams: {msg: 1}\n");
  EXPECT_EQ(MustRender(s, {{"msg", "; rm -rf ~"}}),
            (std::vector<std::string>{"echo", "; rm -rf ~", "--tag=x; rm -rf ~"}));
  EXPECT_EQ(MustRender(s, {{"msg", "$(reboot) `id` \"q\" 'q'"}})[1], "$(reboot) `id` \"q\" 'q'");
}

TEST(RenderCommandTest, ShellQuotesValues) {
  Spec s = MustParse(
      "name: x\nshell: true\ncommand: echo {msg} && python t.py --lr {lr} > "
      "out-{lr}.log\nparams: {msg: hi, lr: 0.1}\n");
  EXPECT_EQ(MustRender(s, {{"msg", "; rm -rf ~"}, {"lr", 0.1}}),
            (std::vector<std::string>{"/bin/sh", "-c",
                                      "echo '; rm -rf ~' && python t.py --lr 0.1 > out-0.1.log"}));
  EXPECT_EQ(MustRender(s, {{"msg", "it's"}, {"lr", 1}})[2],
            "echo 'it'\"'\"'s' && python t.py --lr 1 > out-1.log");
  EXPECT_EQ(MustRender(s, {{"msg", ""}, {"lr", 1}})[2],
            "echo '' && python t.py --lr 1 > out-1.log");
}

TEST(RenderCommandTest, DoubledBracesAreLiteral) {
  Spec s = MustParse(
      "name: x\nshell: true\ncommand: \"echo ${{HOME}} {{a}} {a}}} {{{a}\"\nparams: {a: 1}\n");
  EXPECT_EQ(MustRender(s, {{"a", 7}})[2], "echo ${HOME} {a} 7} {7");
}

TEST(RenderCommandTest, UnknownPlaceholderIsAnError) {
  Spec s = MustParse("name: x\ncommand: run {a}\nparams: {a: 1}\n");
  Result<std::vector<std::string>> r = RenderCommand(s, {{"b", 1}});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kInvalidArgument);
  EXPECT_EQ(r.status().message(),
            "command uses {a} but the run has no parameter 'a'; add it under params");
  // Rendering the unexpanded spec (a list value) is a caller bug, reported rather than guessed.
  r = RenderCommand(s, {{"a", {1, 2}}});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(),
            "parameter 'a' is a list where one value is needed; expand the grid first "
            "(ExpandGrid)");
}

TEST(PlaceholderNamesTest, InOrder) {
  auto names = PlaceholderNames("--{a}-{b_2}{a}{{x}}");
  ASSERT_TRUE(names.ok());
  EXPECT_EQ(*names, (std::vector<std::string>{"a", "b_2", "a"}));
  names = PlaceholderNames("plain");
  ASSERT_TRUE(names.ok());
  EXPECT_TRUE(names->empty());
}

TEST(PlaceholderNamesTest, Malformed) {
  EXPECT_EQ(PlaceholderNames("{a").status().message(),
            "unbalanced '{' in '{a'; close the placeholder with '}' or write '{{' for a literal "
            "brace");
  EXPECT_EQ(PlaceholderNames("{a{b}").status().message(),
            "unbalanced '{' in '{a{b}'; close the placeholder with '}' or write '{{' for a "
            "literal brace");
  EXPECT_EQ(PlaceholderNames("a}").status().message(),
            "unmatched '}' in 'a}'; write '}}' for a literal brace");
  EXPECT_EQ(PlaceholderNames("{}").status().message(),
            "empty placeholder {} in '{}'; write {name} for a parameter or '{{}}' for literal "
            "braces");
  EXPECT_EQ(PlaceholderNames("{\"a\": 1}").status().message(),
            "'{\"a\": 1}' in '{\"a\": 1}' is not a placeholder (names hold letters, digits, '_' "
            "and '-'); write '{{' and '}}' for literal braces");
}

TEST(FingerprintTest, CanonicalFormIsPinned) {
  Spec s = MustParse("name: x\ncommand: python t.py --lr {lr}\nparams: {lr: 0.1}\n");
  Json params = ExpandGrid(s)[0];
  std::vector<std::string> argv = MustRender(s, params);
  // The canonical form is part of the store's contract: a change here makes every stored run
  // look new. Digest computed once with `printf %s '<json>' | sha256sum`.
  const std::string canonical =
      R"({"argv":["python","t.py","--lr","0.1"],"env":{},"params":{"lr":0.1},"shell":false,)"
      R"("snapshot":"abc123"})";
  EXPECT_EQ(Fingerprint(s, argv, params, "abc123"), Sha256Hex(canonical));
  EXPECT_EQ(Fingerprint(s, argv, params, "abc123"),
            "014ef34d6fcc87ec147fbcc1294977f49b0a1655b9f27694ffd97908499745ed");
}

// A stage run's fingerprint (moved out of the engine, issue 40): the same canonical form it had
// there, so runs stored before are still found.
TEST(FingerprintTest, AStagesCanonicalFormIsPinned) {
  const std::string canonical =
      R"({"base":"b","inputs":{"data.csv":"h1"},"needs":[{"fingerprint":"f1","outputs":"o1"}],)"
      R"("stage":"train"})";
  EXPECT_EQ(StageFingerprint("b", "train", {{"data.csv", "h1"}}, {{"f1", "o1"}}),
            Sha256Hex(canonical));
  EXPECT_EQ(StageFingerprint("b", "prep", {}, {}),
            Sha256Hex(R"({"base":"b","inputs":{},"needs":[],"stage":"prep"})"));
}

TEST(FingerprintTest, WhichRunsMayBeCached) {
  Spec plain = MustParse("name: x\ncommand: t\n");
  EXPECT_EQ(CacheBypassOf(plain, ""), CacheBypass::kNone);
  plain.rerun = true;
  EXPECT_EQ(CacheBypassOf(plain, ""), CacheBypass::kRerun);
  Spec stages = MustParse("name: x\nstages:\n  a: {command: t}\n  b: {command: u, needs: [a]}\n");
  stages.force = {"b"};
  EXPECT_EQ(CacheBypassOf(stages, "a"), CacheBypass::kNone);
  EXPECT_EQ(CacheBypassOf(stages, "b"), CacheBypass::kForced);
  EXPECT_EQ(CacheBypassOf(stages, "c"), CacheBypass::kNoStage);
  stages.force = {"all"};
  EXPECT_EQ(CacheBypassOf(stages, "a"), CacheBypass::kForced);
}

TEST(FingerprintTest, KeyOrderDoesNotMatterButValuesDo) {
  Spec a =
      MustParse("name: x\ncommand: t {lr} {bs}\nparams: {lr: 0.1, bs: 8}\nenv: {A: 1, B: 2}\n");
  Spec b = MustParse(
      "env: {B: 2, A: 1}\nparams:\n  bs: 8\n  lr: 0.1\ncommand: t {lr} {bs}\n"
      "name: y\nretries: 3\npriority: 9\nresources: {gpus: 2}\n");
  Json pa = ExpandGrid(a)[0], pb = ExpandGrid(b)[0];
  std::string fa = Fingerprint(a, MustRender(a, pa), pa, "snap");
  EXPECT_EQ(fa.size(), 64u);
  // Same config, other key order and other scheduling settings: the same run.
  EXPECT_EQ(fa, Fingerprint(b, MustRender(b, pb), pb, "snap"));

  EXPECT_NE(fa, Fingerprint(a, MustRender(a, pa), pa, "other-snap"));
  Json changed = pa;
  changed["lr"] = 0.2;
  EXPECT_NE(fa, Fingerprint(a, MustRender(a, changed), changed, "snap"));
  Spec c = a;
  c.env["A"] = "2";
  EXPECT_NE(fa, Fingerprint(c, MustRender(c, pa), pa, "snap"));
  Spec d = a;
  d.shell = true;
  EXPECT_NE(fa, Fingerprint(d, MustRender(a, pa), pa, "snap"));
}

}  // namespace
}  // namespace drover
