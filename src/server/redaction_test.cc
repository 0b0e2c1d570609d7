// What another user of a shared daemon is shown of a spec and of an event (route_helpers.cc).
#include <gtest/gtest.h>

#include "model/spec.h"
#include "server/routes.h"
#include "spec/spec_parser.h"

namespace drover::server {
namespace {

bool Mentions(const Json& j, const std::string& text) {
  return j.dump().find(text) != std::string::npos;
}

TEST(Redaction, APipelinesStagesAreRedactedAsTheTopLevelIs) {
  // The stored form: stages as a list (SpecToJson).
  Json spec = {
      {"name", "pipe"},
      {"command", {"sh", "-c", "x --key=top-secret"}},
      {"workdir", "/home/alice/proj"},
      {"env", {{"API_KEY", "sk-top"}}},
      {"data", {{"imagenet", "/home/alice/private/imagenet"}}},
      {"params", {{"lr", 0.1}}},
      {"container", {{"image", "pytorch:2"}, {"mounts", {"/home/alice/private:/m"}}}},
      {"some_field_added_later", "/home/alice/secret-path"},
      {"stages",
       {{{"name", "prep"},
         {"command", {"sh", "-c", "prep --key=stage-secret"}},
         {"env", {{"STAGE_KEY", "sk-stage"}}},
         {"inputs", {"/home/alice/private/raw"}},
         {"input_hashes", {{"/home/alice/private/raw", "abc"}}},
         {"needs", Json::array()},
         {"outputs", {"data/"}}}}}};
  const Json shown = RedactedSpec(spec);
  for (const char* secret : {"top-secret", "sk-top", "/home/alice", "stage-secret", "sk-stage"}) {
    EXPECT_FALSE(Mentions(shown, secret)) << secret << " in " << shown.dump();
  }
  // What was asked for stays the lab's to see.
  EXPECT_EQ(shown["params"]["lr"], 0.1);
  EXPECT_EQ(shown["stages"][0]["name"], "prep");
  EXPECT_EQ(shown["stages"][0]["outputs"][0], "data/");
  EXPECT_TRUE(shown["env"].contains("API_KEY"));
  EXPECT_EQ(shown["container"]["image"], "pytorch:2");

  // A spec written by hand: stages as a mapping of name: stage.
  Json by_name = {{"stages", {{"prep", {{"command", "prep --key=map-secret"},
                                        {"env", {{"K", "sk-map"}}}}}}}};
  const Json shown_map = RedactedSpec(by_name);
  EXPECT_FALSE(Mentions(shown_map, "map-secret")) << shown_map.dump();
  EXPECT_FALSE(Mentions(shown_map, "sk-map")) << shown_map.dump();
  EXPECT_TRUE(shown_map["stages"].contains("prep"));
}

TEST(Redaction, AParsedPipelineKeepsNoSecretForAnotherUser) {
  auto spec = ParseSpecString(
      "name: p\nenv: {TOP: sk-top}\nstages:\n  a:\n    command: run --key=stage-secret\n"
      "    env: {S: sk-stage}\n  b:\n    command: run --key=b-secret\n    needs: [a]\n",
      "p", "/tmp", {});
  ASSERT_TRUE(spec.ok()) << spec.status().message();
  Experiment e;
  e.user = "alice";
  e.spec = SpecToJson(*spec);
  Caller bob;
  bob.user.name = "bob";
  bob.user.uid = 4242;
  const Experiment shown = RedactedFor(bob, e);
  const Json j = shown.spec;
  for (const char* secret : {"sk-top", "stage-secret", "sk-stage", "b-secret"}) {
    EXPECT_FALSE(Mentions(j, secret)) << secret << " in " << j.dump();
  }
  Caller admin = bob;
  admin.admin = true;
  EXPECT_TRUE(Mentions(RedactedFor(admin, e).spec, "stage-secret"));
}

TEST(Redaction, EventsAboutAnotherUsersRunCarryNoNote) {
  const Json state = {{"run_id", 3},        {"experiment_id", 1},
                      {"state", "failed"},  {"attempt", 1},
                      {"reason", "exit_code"}, {"user", "alice"},
                      {"note", "exit code 3 (KeyError: sk-alice at /home/alice/x.py)"}};
  const Json shown = RedactedEvent("run_state", state);
  EXPECT_EQ(shown["state"], "failed");
  EXPECT_EQ(shown["reason"], "exit_code");
  EXPECT_EQ(shown["run_id"], 3);
  EXPECT_EQ(shown["note"], "");
  EXPECT_FALSE(Mentions(shown, "sk-alice"));
  EXPECT_FALSE(Mentions(shown, "/home/alice"));
  // A field an event gains later is not shown until someone decides it may be.
  EXPECT_FALSE(RedactedEvent("run_state", {{"run_id", 3}, {"stderr", "x"}}).contains("stderr"));
  EXPECT_FALSE(RedactedEvent("new_kind", {{"run_id", 3}, {"text", "x"}}).contains("text"));

  // An alert in the run's own words (drover.alert) is hidden; a detector's is drover's words.
  const Json own = RedactedEvent(
      "alert", {{"kind", "run"}, {"run_id", 3}, {"message", "token sk-alice leaked"},
                {"key", "run:sk-alice"}, {"data", {{"details", "sk-alice"}}}});
  EXPECT_FALSE(Mentions(own, "sk-alice")) << own.dump();
  EXPECT_EQ(own["kind"], "run");
  const Json detector =
      RedactedEvent("alert", {{"kind", "stalled"}, {"run_id", 3}, {"message", "no output for 5m"}});
  EXPECT_EQ(detector["message"], "no output for 5m");
}

}  // namespace
}  // namespace drover::server
