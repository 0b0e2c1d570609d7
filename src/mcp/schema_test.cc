#include "mcp/schema.h"

#include <gtest/gtest.h>

namespace drover::mcp {
namespace {

std::string Error(const Json& value, const char* schema) {
  Status st = ValidateJson(value, Json::parse(schema));
  return st.ok() ? "" : st.message();
}

TEST(ValidateJsonTest, Types) {
  EXPECT_EQ(Error("abc", R"({"type": "integer"})"),
            "arguments: expected an integer, got \"abc\"");
  EXPECT_EQ(Error(3, R"({"type": "integer"})"), "");
  EXPECT_EQ(Error(3.0, R"({"type": "integer"})"), "");  // integral numbers are integers
  EXPECT_EQ(Error(3.5, R"({"type": "integer"})"), "arguments: expected an integer, got 3.5");
  EXPECT_EQ(Error(3.5, R"({"type": "number"})"), "");
  EXPECT_EQ(Error(-2, R"({"type": "number"})"), "");
  EXPECT_EQ(Error(true, R"({"type": "boolean"})"), "");
  EXPECT_EQ(Error(1, R"({"type": "boolean"})"), "arguments: expected true or false, got 1");
  EXPECT_EQ(Error(nullptr, R"({"type": "null"})"), "");
  EXPECT_EQ(Error(Json::array(), R"({"type": "object"})"),
            "arguments: expected an object, got an array of 0");
  EXPECT_EQ(Error(Json::object(), R"({"type": "array"})"),
            "arguments: expected an array, got an object");
  EXPECT_EQ(Error(nullptr, R"({"type": ["string", "null"]})"), "");
  EXPECT_EQ(Error("x", R"({"type": ["string", "null"]})"), "");
  EXPECT_EQ(Error(4, R"({"type": ["string", "null"]})"),
            "arguments: expected a string or null, got 4");
  EXPECT_EQ(Error(4, R"({})"), "");    // no constraints
  EXPECT_EQ(Error(4, R"(true)"), "");  // the boolean schemas
  EXPECT_EQ(Error(4, R"(false)"), "arguments: no value is allowed here");
}

TEST(ValidateJsonTest, AnIntegerIsOneAToolCanHold) {
  // `run_id: 1e23` is a whole number, but read as a 64-bit id it would wrap (to
  // -9223372036854775808): refused, saying what fits, as is 2^64 - 1.
  EXPECT_EQ(Error(Json::parse("1e23"), R"({"type": "integer"})")
                .rfind("arguments: expected an integer from -2^63 to 2^63-1, got ", 0),
            0u)
      << Error(Json::parse("1e23"), R"({"type": "integer"})");
  EXPECT_NE(Error(Json::parse("18446744073709551615"), R"({"type": "integer"})"), "");
  EXPECT_NE(Error(Json::parse("9223372036854775808"), R"({"type": "integer"})"), "");
  EXPECT_NE(Error(Json::parse("9.3e18"), R"({"type": "integer"})"), "");
  EXPECT_EQ(Error(Json::parse("9223372036854775807"), R"({"type": "integer"})"), "");
  EXPECT_EQ(Error(Json::parse("-9223372036854775808"), R"({"type": "integer"})"), "");
  EXPECT_EQ(Error(Json::parse("-9.2e18"), R"({"type": "integer"})"), "");
  EXPECT_EQ(Error(Json::parse("1e23"), R"({"type": "number"})"), "");  // a number, fine
}

TEST(ValidateJsonTest, LongValuesAreShortenedInMessages) {
  std::string message = Error(std::string(200, 'x'), R"({"type": "integer"})");
  EXPECT_LT(message.size(), 120u);
  EXPECT_NE(message.find("..."), std::string::npos);
}

TEST(ValidateJsonTest, ObjectsNameThePath) {
  const char* schema = R"({
    "type": "object",
    "properties": {
      "run_id": {"type": "integer", "minimum": 1},
      "filter": {"type": "object", "properties": {"state": {"enum": ["running", "done"]}},
                 "additionalProperties": false},
      "tags": {"type": "object", "additionalProperties": {"type": "string"}}
    },
    "required": ["run_id"],
    "additionalProperties": false
  })";
  EXPECT_EQ(Error({{"run_id", "abc"}}, schema),
            "arguments.run_id: expected an integer, got \"abc\"");
  EXPECT_EQ(Error(Json::object(), schema), "arguments.run_id: missing (it is required)");
  EXPECT_EQ(Error({{"run_id", 0}}, schema), "arguments.run_id: must be at least 1, got 0");
  EXPECT_EQ(Error({{"runid", 1}}, schema),
            "arguments.runid: unknown field (did you mean \"run_id\"?)");
  EXPECT_EQ(Error({{"run_id", 1}, {"zzzzzzzz", 1}}, schema),
            "arguments.zzzzzzzz: unknown field (known: filter, run_id, tags)");
  EXPECT_EQ(Error({{"run_id", 1}, {"filter", {{"state", "queued"}}}}, schema),
            "arguments.filter.state: expected one of \"running\", \"done\", got \"queued\"");
  EXPECT_EQ(Error({{"run_id", 1}, {"filter", {{"state", "done"}}}}, schema), "");
  EXPECT_EQ(Error({{"run_id", 1}, {"tags", {{"a", "x"}, {"b", 2}}}}, schema),
            "arguments.tags.b: expected a string, got 2");
  // Without additionalProperties:false, unknown fields pass.
  EXPECT_EQ(Error({{"x", 1}}, R"({"type": "object", "properties": {"y": {}}})"), "");
  EXPECT_EQ(Error({{"x", 1}}, R"({"type": "object", "additionalProperties": false})"),
            "arguments.x: unknown field (this takes no fields)");
}

TEST(ValidateJsonTest, NumbersAndStrings) {
  const char* range = R"({"type": "number", "minimum": 0.5, "maximum": 2})";
  EXPECT_EQ(Error(0.4, range), "arguments: must be at least 0.5, got 0.4");
  EXPECT_EQ(Error(3, range), "arguments: must be at most 2, got 3");
  EXPECT_EQ(Error(2, range), "");
  const char* exclusive = R"({"exclusiveMinimum": 0, "exclusiveMaximum": 1})";
  EXPECT_EQ(Error(0, exclusive), "arguments: must be greater than 0, got 0");
  EXPECT_EQ(Error(1, exclusive), "arguments: must be less than 1, got 1");
  EXPECT_EQ(Error(0.5, exclusive), "");
  EXPECT_EQ(Error("", R"({"minLength": 1})"), "arguments: must not be empty");
  EXPECT_EQ(Error("ab", R"({"minLength": 3})"),
            "arguments: must be at least 3 characters long, got 2");
  EXPECT_EQ(Error("abcd", R"({"maxLength": 3})"),
            "arguments: must be at most 3 characters long, got 4");
  EXPECT_EQ(Error("\xc3\xa9\xc3\xa9\xc3\xa9", R"({"maxLength": 3})"), "");  // characters, not bytes
  EXPECT_EQ(Error(5, R"({"minLength": 3})"), "");  // string keywords apply to strings only
  EXPECT_EQ(Error(2, R"({"const": 3})"), "arguments: must be 3, got 2");
  EXPECT_EQ(Error(1.0, R"({"enum": [1, 2]})"), "");  // 1.0 equals 1
  // Keywords built in C++ are signed integers; they count all the same.
  Json schema = {{"type", "string"}, {"minLength", 2}};
  EXPECT_FALSE(ValidateJson("a", schema).ok());
}

TEST(ValidateJsonTest, Arrays) {
  const char* schema =
      R"({"type": "array", "items": {"type": "integer"}, "minItems": 1, "maxItems": 3})";
  EXPECT_EQ(Error(Json::array({1, 2}), schema), "");
  EXPECT_EQ(Error(Json::array(), schema), "arguments: needs at least 1 items, got 0");
  EXPECT_EQ(Error(Json::array({1, 2, 3, 4}), schema), "arguments: takes at most 3 items, got 4");
  EXPECT_EQ(Error(Json::array({1, "two"}), schema),
            "arguments[1]: expected an integer, got \"two\"");
  EXPECT_EQ(Error(Json::array({1, 2, 1}), R"({"uniqueItems": true})"),
            "arguments[2]: repeats item 0 (1)");
  const char* nested = R"({"type": "object", "properties": {"runs": {"type": "array",
      "items": {"type": "object", "properties": {"id": {"type": "integer"}},
                "required": ["id"]}}}})";
  EXPECT_EQ(Error({{"runs", {{{"id", 1}}, Json::object()}}}, nested),
            "arguments.runs[1].id: missing (it is required)");
}

TEST(ValidateJsonTest, PathIsTheCallersName) {
  Status st = ValidateJson({{"n", "x"}}, {{"properties", {{"n", {{"type", "integer"}}}}}}, "result");
  EXPECT_EQ(st.message(), "result.n: expected an integer, got \"x\"");
  EXPECT_EQ(st.code(), Code::kInvalidArgument);
}

TEST(CheckSchemaSupportedTest, RefusesKeywordsTheValidatorIgnores) {
  EXPECT_TRUE(CheckSchemaSupported(Json::parse(R"({
    "type": "object", "description": "x", "$schema": "https://json-schema.org/draft/2020-12/schema",
    "properties": {"a": {"type": ["string", "null"], "default": null, "format": "date-time"},
                   "b": {"type": "array", "items": {"type": "integer", "minimum": 0}}},
    "required": ["a"], "additionalProperties": false})"))
                  .ok());
  Status st = CheckSchemaSupported(Json::parse(
      R"({"type": "object", "properties": {"name": {"type": "string", "pattern": "^a"}}})"));
  EXPECT_EQ(st.message().substr(0, 40), "schema.name: keyword \"pattern\" is not en");
  st = CheckSchemaSupported(Json::parse(R"({"anyOf": [{"type": "string"}]})"));
  EXPECT_FALSE(st.ok());
  st = CheckSchemaSupported(Json::parse(R"({"type": "int"})"));
  EXPECT_EQ(st.message(), "schema: unknown type \"int\"");
  st = CheckSchemaSupported(Json::parse(
      R"({"type": "object", "properties": {}, "required": ["x"], "additionalProperties": false})"));
  EXPECT_NE(st.message().find("\"x\" is required"), std::string::npos);
  st = CheckSchemaSupported(
      Json::parse(R"({"type": "array", "items": {"type": "object", "oneOf": []}})"));
  EXPECT_NE(st.message().find("schema[]"), std::string::npos) << st.message();
}

}  // namespace
}  // namespace drover::mcp
