#include "spec/executor_section.h"

#include <fmt/format.h>

#include <algorithm>

namespace drover {

using yaml::Describe;
using yaml::Field;
using yaml::Find;

const std::vector<std::string>& ExecutorKeys(bool daemon) {
  static const std::vector<std::string> spec = {"kind", "partition", "account", "qos", "sbatch"};
  static const std::vector<std::string> config = {"kind",     "partition",  "account",
                                                  "qos",      "sbatch",     "max_jobs",
                                                  "accounting", "shared_dir"};
  return daemon ? config : spec;
}

Status CheckSbatchFlag(const std::string& flag) {
  if (flag.empty() || flag[0] != '-') {
    return InvalidArgument(fmt::format(
        "sbatch flag '{}' does not start with '-'; write each flag whole, such as "
        "--constraint=a100 or --nodelist=node3",
        flag.substr(0, 80)));
  }
  if (flag.size() > kMaxSbatchFlagBytes) {
    return InvalidArgument(fmt::format("an sbatch flag is {} bytes; at most {} are taken",
                                       flag.size(), kMaxSbatchFlagBytes));
  }
  if (flag.find('\0') != std::string::npos || flag.find('\n') != std::string::npos) {
    return InvalidArgument("an sbatch flag holds a NUL or a newline");
  }
  // What drover sets itself: each attempt's job is found by its name, writes its logs where
  // drover reads them, gets drover's environment and folder, and ends when preempted.
  static const std::vector<std::pair<std::string, std::string>> kOwn = {
      {"--job-name", "drover names each attempt's job to find it again"},
      {"-J", "drover names each attempt's job to find it again"},
      {"--output", "drover reads the attempt's logs where it puts them"},
      {"-o", "drover reads the attempt's logs where it puts them"},
      {"--error", "drover reads the attempt's logs where it puts them"},
      {"-e", "drover reads the attempt's logs where it puts them"},
      {"--export", "the job's environment is the run's, set by drover"},
      {"--chdir", "the job runs in the run's working copy"},
      {"-D", "the job runs in the run's working copy"},
      {"--requeue", "a preempted job ends and drover submits the next attempt as a new job"},
      {"--parsable", "drover reads the job id sbatch prints"},
      {"--wrap", "drover writes the job's script"},
      {"--array", "each attempt is one job"},
      {"-a", "each attempt is one job"},
      {"--wait", "drover follows the job without waiting for it"},
      {"-W", "drover follows the job without waiting for it"}};
  for (const auto& [own, why] : kOwn) {
    const bool long_form = own.size() > 2;
    const bool same = flag == own || (long_form && flag.rfind(own + "=", 0) == 0) ||
                      (!long_form && flag.rfind(own, 0) == 0);
    if (same) {
      return InvalidArgument(
          fmt::format("sbatch flag '{}' is drover's to set ({}); leave it out", own, why));
    }
  }
  return Status::Ok();
}

Status ParseExecutorSection(const yaml::Reader& r, const Field& f, bool daemon,
                            ExecutorConfig* out) {
  if (f.value.IsNull()) return Status::Ok();
  yaml::MapRules rules;
  rules.valid = &ExecutorKeys(daemon);
  rules.example = "executor: {kind: slurm, partition: gpu}";
  DROVER_ASSIGN_OR_RETURN(std::vector<Field> fields, r.ReadMap(f.at(), f.value, f.path, rules));
  ExecutorSpec& e = out->spec;
  e.given = true;
  if (const Field* k = Find(fields, "kind")) {
    DROVER_ASSIGN_OR_RETURN(std::string kind, r.Choice(*k, ExecutorKindNames()));
    e.kind = ParseExecutorKind(kind).value_or(ExecutorKind::kLocal);
  }
  auto text = [&](const char* key, std::string* to, std::string_view hint) -> Status {
    const Field* t = Find(fields, key);
    if (!t) return Status::Ok();
    DROVER_ASSIGN_OR_RETURN(*to, r.Text(*t, hint));
    const bool plain = std::all_of(to->begin(), to->end(), [](char c) {
      return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.' ||
             c == ',';
    });
    if (to->empty() || to->size() > 256 || !plain) {
      return r.Err(t->at(), fmt::format("{} must be a Slurm name (letters, digits, '_', '-', "
                                        "'.', ','), got '{}'; {}",
                                        t->path, to->substr(0, 80), hint));
    }
    return Status::Ok();
  };
  DROVER_RETURN_IF_ERROR(text("partition", &e.partition, "write a partition sinfo lists"));
  DROVER_RETURN_IF_ERROR(text("account", &e.account, "write an account sacctmgr knows"));
  DROVER_RETURN_IF_ERROR(text("qos", &e.qos, "write a QOS sacctmgr knows"));
  if (const Field* s = Find(fields, "sbatch")) {
    if (!s->value.IsSequence()) {
      return r.Err(s->at(), fmt::format("{} must be a list of sbatch flags, got {}; write e.g. "
                                        "sbatch: [--constraint=a100]",
                                        s->path, Describe(s->value)));
    }
    if (s->value.size() > kMaxSbatchFlags) {
      return r.Err(s->at(), fmt::format("{} has {} flags; at most {} are taken", s->path,
                                        s->value.size(), kMaxSbatchFlags));
    }
    for (const YAML::Node& n : s->value) {
      if (!n.IsScalar()) {
        return r.Err(n, fmt::format("each of {} must be one flag as text, got {}", s->path,
                                    Describe(n)));
      }
      const std::string flag = n.Scalar();
      if (Status st = CheckSbatchFlag(flag); !st.ok()) return r.Err(n, st.message());
      e.sbatch.push_back(flag);
    }
  }
  if (const Field* m = Find(fields, "max_jobs")) {
    DROVER_ASSIGN_OR_RETURN(int64_t n, r.Int(*m, 1, 100'000, "an integer from 1 to 100000",
                                             "write how many attempts may be in Slurm at once"));
    out->max_jobs = static_cast<int>(n);
  }
  if (const Field* a = Find(fields, "accounting")) {
    DROVER_ASSIGN_OR_RETURN(out->accounting, r.Choice(*a, {"auto", "database", "jobcomp"}));
  }
  if (const Field* d = Find(fields, "shared_dir")) {
    DROVER_ASSIGN_OR_RETURN(out->shared_dir,
                            r.Text(*d, "write a folder every node sees at the same path"));
    if (out->shared_dir.empty() || out->shared_dir[0] != '/' || out->shared_dir.size() > 1024) {
      return r.Err(d->at(), fmt::format("{} must be an absolute path, got '{}'; write the folder "
                                        "every node sees, such as /shared/drover",
                                        d->path, out->shared_dir.substr(0, 80)));
    }
  }
  if (e.kind == ExecutorKind::kLocal && (!e.partition.empty() || !e.account.empty() ||
                                         !e.qos.empty() || !e.sbatch.empty() ||
                                         !out->shared_dir.empty())) {
    return r.Err(f.at(), fmt::format("{} sets Slurm's partition, account, qos, sbatch or "
                                     "shared_dir with "
                                     "kind local; write kind: slurm to run attempts as Slurm jobs",
                                     f.path.empty() ? "executor" : f.path));
  }
  return Status::Ok();
}

}  // namespace drover
