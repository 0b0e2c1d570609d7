#include "spec/expand.h"

#include <limits>

#include <fmt/format.h>

#include <cctype>
#include <cstdint>

#include "common/hash.h"
#include "common/strings.h"

namespace drover {
namespace {

// A command word cut into literal text and {name} placeholders.
struct Piece {
  bool placeholder = false;
  std::string text;  // the literal text, or the parameter name
};

bool IsNameStart(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_'; }
bool IsNameChar(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-';
}

Result<std::vector<Piece>> Tokenize(std::string_view word) {
  std::vector<Piece> pieces;
  auto literal = [&](char c) {
    if (pieces.empty() || pieces.back().placeholder) pieces.push_back({false, ""});
    pieces.back().text += c;
  };
  for (size_t i = 0; i < word.size(); ++i) {
    char c = word[i];
    if (c == '{') {
      if (i + 1 < word.size() && word[i + 1] == '{') {
        literal('{');
        ++i;
        continue;
      }
      size_t close = word.find('}', i + 1);
      std::string_view name =
          close == std::string_view::npos ? std::string_view() : word.substr(i + 1, close - i - 1);
      if (close == std::string_view::npos || name.find('{') != std::string_view::npos) {
        return InvalidArgument(fmt::format(
            "unbalanced '{{' in '{}'; close the placeholder with '}}' or write '{{{{' for a "
            "literal brace",
            word));
      }
      if (name.empty()) {
        return InvalidArgument(fmt::format(
            "empty placeholder {{}} in '{}'; write {{name}} for a parameter or '{{{{}}}}' for "
            "literal braces",
            word));
      }
      bool valid = IsNameStart(name[0]);
      for (char n : name) valid = valid && IsNameChar(n);
      if (!valid) {
        return InvalidArgument(fmt::format(
            "'{{{}}}' in '{}' is not a placeholder (names hold letters, digits, '_' and '-'); "
            "write '{{{{' and '}}}}' for literal braces",
            name, word));
      }
      pieces.push_back({true, std::string(name)});
      i = close;
    } else if (c == '}') {
      if (i + 1 < word.size() && word[i + 1] == '}') {
        literal('}');
        ++i;
        continue;
      }
      return InvalidArgument(
          fmt::format("unmatched '}}' in '{}'; write '}}}}' for a literal brace", word));
    } else {
      literal(c);
    }
  }
  return pieces;
}

Result<std::string> FormatValue(const Json& params, const std::string& name) {
  auto it = params.find(name);
  if (it == params.end()) {
    return InvalidArgument(fmt::format(
        "command uses {{{}}} but the run has no parameter '{}'; add it under params", name, name));
  }
  const Json& v = *it;
  switch (v.type()) {
    case Json::value_t::string:
      return v.get<std::string>();
    case Json::value_t::boolean:
      return std::string(v.get<bool>() ? "true" : "false");
    case Json::value_t::number_integer:
    case Json::value_t::number_unsigned:
    case Json::value_t::number_float:
      // nlohmann prints floats in the shortest form that reads back to the same double.
      return v.dump();
    default:
      return InvalidArgument(fmt::format(
          "parameter '{}' is {} where one value is needed; expand the grid first (ExpandGrid)",
          name,
          v.is_array()    ? "a list"
          : v.is_object() ? "a mapping"
                          : "empty"));
  }
}

// Keeps integer and float types apart (a parse of the dump would turn 5 into an unsigned).
Json ToJson(const OrderedJson& o) {
  switch (o.type()) {
    case OrderedJson::value_t::object: {
      Json j = Json::object();
      for (const auto& [k, v] : o.items()) j[k] = ToJson(v);
      return j;
    }
    case OrderedJson::value_t::array: {
      Json j = Json::array();
      for (const auto& v : o) j.push_back(ToJson(v));
      return j;
    }
    case OrderedJson::value_t::string:
      return o.get<std::string>();
    case OrderedJson::value_t::boolean:
      return o.get<bool>();
    case OrderedJson::value_t::number_integer:
      return o.get<int64_t>();
    case OrderedJson::value_t::number_unsigned:
      return o.get<uint64_t>();
    case OrderedJson::value_t::number_float:
      return o.get<double>();
    default:
      return nullptr;
  }
}

Result<std::string> Substitute(std::string_view word, const Json& params, bool quote) {
  DROVER_ASSIGN_OR_RETURN(std::vector<Piece> pieces, Tokenize(word));
  std::string out;
  for (const Piece& p : pieces) {
    if (!p.placeholder) {
      out += p.text;
      continue;
    }
    DROVER_ASSIGN_OR_RETURN(std::string value, FormatValue(params, p.text));
    out += quote ? ShellQuote(value) : value;
  }
  return out;
}

}  // namespace

int64_t CountGrid(const Spec& spec) {
  int64_t runs = 1;
  for (const auto& [name, value] : spec.params.items()) {
    if (!value.is_array()) continue;
    const int64_t n = static_cast<int64_t>(value.size());
    if (n == 0) return 0;
    if (runs > std::numeric_limits<int64_t>::max() / n) return std::numeric_limits<int64_t>::max();
    runs *= n;
  }
  return runs;
}

std::vector<Json> ExpandGrid(const Spec& spec) {
  std::vector<Json> runs = {Json::object()};
  for (const auto& [name, value] : spec.params.items()) {
    if (value.is_object()) continue;  // a distribution: the search proposes its values
    if (!value.is_array()) {
      for (Json& run : runs) run[name] = ToJson(value);
      continue;
    }
    // Each new axis multiplies the runs so far; appending its values innermost makes the last
    // axis vary fastest.
    std::vector<Json> next;
    next.reserve(runs.size() * value.size());
    for (const Json& run : runs) {
      for (const auto& v : value) {
        Json r = run;
        r[name] = ToJson(v);
        next.push_back(std::move(r));
      }
    }
    runs = std::move(next);
  }
  return runs;
}

Result<std::vector<std::string>> RenderCommand(const Spec& spec, const Json& params) {
  if (spec.shell) {
    if (spec.command.size() != 1) {
      return InvalidArgument("shell: true needs the command as one script string; join the words");
    }
    DROVER_ASSIGN_OR_RETURN(std::string script, Substitute(spec.command[0], params, true));
    return std::vector<std::string>{"/bin/sh", "-c", std::move(script)};
  }
  std::vector<std::string> argv;
  argv.reserve(spec.command.size());
  for (const std::string& word : spec.command) {
    DROVER_ASSIGN_OR_RETURN(std::string w, Substitute(word, params, false));
    argv.push_back(std::move(w));
  }
  return argv;
}

Result<std::vector<std::string>> PlaceholderNames(const std::string& word) {
  DROVER_ASSIGN_OR_RETURN(std::vector<Piece> pieces, Tokenize(word));
  std::vector<std::string> names;
  for (const Piece& p : pieces) {
    if (p.placeholder) names.push_back(p.text);
  }
  return names;
}

std::string Fingerprint(const Spec& spec, const std::vector<std::string>& argv, const Json& params,
                        const std::string& snapshot_hash) {
  Json canonical = {{"argv", argv},
                    {"env", spec.env},
                    {"params", params},
                    {"shell", spec.shell},
                    {"snapshot", snapshot_hash}};
  // The image a container run runs in, what is mounted into it and whether it has a network are
  // part of what it computes (absent on the host).
  if (spec.container) {
    canonical["container"] = {{"image", spec.container->image_id},
                              {"mounts", spec.container->mounts},
                              {"network", spec.container->network}};
  }
  // What becomes the run's metrics is part of its result: a changed derived expression, or event
  // files read from another folder (or not at all), must not be served from an earlier run's
  // cache. Absent when unset, so fingerprints of specs without them stay as they were.
  if (!spec.metrics.empty()) {
    Json metrics = Json::array();
    for (const auto& m : spec.metrics) metrics.push_back({m.name, m.expression});
    canonical["metrics"] = std::move(metrics);
  }
  if (!spec.tensorboard.empty()) canonical["tensorboard"] = spec.tensorboard;
  if (spec.tensorboard_off) canonical["tensorboard_off"] = true;
  return Sha256Hex(canonical.dump());
}

std::string_view ToString(CacheBypass b) {
  switch (b) {
    case CacheBypass::kNone:
      return "none";
    case CacheBypass::kSearch:
      return "search";
    case CacheBypass::kRerun:
      return "rerun";
    case CacheBypass::kForced:
      return "forced";
    case CacheBypass::kData:
      return "data";
    case CacheBypass::kNoStage:
      return "no_stage";
  }
  return "?";
}

CacheBypass CacheBypassOf(const Spec& spec, const std::string& stage) {
  if (spec.search) return CacheBypass::kSearch;
  // rerun: every run runs (on a pipeline, every stage, as force: all).
  if (spec.rerun) return CacheBypass::kRerun;
  // A plain run: unless it reads data: folders (outside the snapshot, so outside its
  // fingerprint; a pipeline stage declares them as inputs, which are hashed).
  if (stage.empty()) return spec.data.empty() ? CacheBypass::kNone : CacheBypass::kData;
  const StageSpec* st = FindStage(spec, stage);
  if (!st) return CacheBypass::kNoStage;
  for (const std::string& f : spec.force) {
    if (f == "all" || f == st->name) return CacheBypass::kForced;
  }
  return CacheBypass::kNone;
}

std::string StageFingerprint(const std::string& base, const std::string& stage,
                             const std::map<std::string, std::string>& input_hashes,
                             const std::vector<NeedPrint>& needs) {
  Json j = {{"base", base},
            {"stage", stage},
            {"inputs", Json(input_hashes)},
            {"needs", Json::array()}};
  for (const NeedPrint& n : needs) {
    j["needs"].push_back({{"fingerprint", n.fingerprint}, {"outputs", n.outputs_hash}});
  }
  // Replaced, never thrown: a file name need not be UTF-8.
  return Sha256Hex(j.dump(-1, ' ', false, Json::error_handler_t::replace));
}

}  // namespace drover
