#include "slurm/jobs.h"

#include <fmt/format.h>

#include <charconv>
#include <ctime>
#include <map>
#include <nlohmann/json.hpp>

#include "common/strings.h"

namespace drover::slurm {
namespace {

using Json = nlohmann::json;

struct Named {
  std::string_view text;
  JobState state;
};
constexpr Named kStates[] = {
    {"PENDING", JobState::kPending},         {"RUNNING", JobState::kRunning},
    {"COMPLETING", JobState::kCompleting},   {"SUSPENDED", JobState::kSuspended},
    {"COMPLETED", JobState::kCompleted},     {"FAILED", JobState::kFailed},
    {"TIMEOUT", JobState::kTimeout},         {"CANCELLED", JobState::kCancelled},
    {"PREEMPTED", JobState::kPreempted},     {"NODE_FAIL", JobState::kNodeFail},
    {"OUT_OF_MEMORY", JobState::kOutOfMemory}, {"BOOT_FAIL", JobState::kBootFail},
    {"DEADLINE", JobState::kDeadline},       {"REQUEUED", JobState::kRequeued},
    {"REQUEUE_FED", JobState::kRequeued},    {"REQUEUE_HOLD", JobState::kRequeued},
    {"UNKNOWN", JobState::kUnknown},
};

std::optional<int64_t> ToInt(std::string_view s) {
  int64_t v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size()) return std::nullopt;
  return v;
}

// sacct's times: "2026-12-03T16:39:10" in the cluster's local time; "Unknown", "None": 0.
int64_t ParseTime(const std::string& s) {
  std::tm tm{};
  if (strptime(s.c_str(), "%Y-%m-%dT%H:%M:%S", &tm) == nullptr) return 0;
  tm.tm_isdst = -1;
  const std::time_t t = std::mktime(&tm);
  return t < 0 ? 0 : static_cast<int64_t>(t);
}

// A raw wait status (squeue's exit_code): an exit code, or a signal.
void FromWaitStatus(int64_t status, Job& job) {
  if ((status & 0x7f) == 0) {
    job.exit_code = static_cast<int>((status >> 8) & 0xff);
  } else {
    job.signal = static_cast<int>(status & 0x7f);
  }
}

}  // namespace

std::string_view ToString(JobState s) {
  for (const Named& n : kStates) {
    if (n.state == s) return n.text;
  }
  return "UNKNOWN";
}

JobState ParseJobState(std::string_view text) {
  const size_t space = text.find(' ');  // "CANCELLED by 0"
  if (space != std::string_view::npos) text = text.substr(0, space);
  for (const Named& n : kStates) {
    if (n.text == text) return n.state;
  }
  return JobState::kUnknown;
}

Result<std::vector<Job>> ParseSqueueJson(std::string_view text) {
  Json doc = Json::parse(text, nullptr, false);
  if (doc.is_discarded() || !doc.is_object()) {
    return InvalidArgument("squeue --json answered with something that is not a JSON object");
  }
  if (!doc.contains("jobs") || !doc["jobs"].is_array()) {
    return InvalidArgument("squeue --json answered without a \"jobs\" list");
  }
  std::vector<Job> jobs;
  for (const Json& j : doc["jobs"]) {
    if (!j.is_object() || !j.contains("job_id") || !j["job_id"].is_number_integer() ||
        !j.contains("job_state") || !j["job_state"].is_string()) {
      return InvalidArgument("squeue --json listed a job without a job_id or job_state");
    }
    Job job;
    job.id = j["job_id"].get<int64_t>();
    job.name = j.value("name", "");
    job.state = ParseJobState(j["job_state"].get<std::string>());
    job.reason = j.value("state_reason", "");
    job.partition = j.value("partition", "");
    job.nodes = j.value("nodes", "");
    if (j.contains("restart_cnt") && j["restart_cnt"].is_number_integer()) {
      job.restarts = j["restart_cnt"].get<int>();
    }
    if (j.contains("start_time") && j["start_time"].is_number_integer()) {
      job.start_s = j["start_time"].get<int64_t>();
    }
    if (j.contains("end_time") && j["end_time"].is_number_integer()) {
      job.end_s = j["end_time"].get<int64_t>();
    }
    // Meaningful once it ended; 0 before.
    if (j.contains("exit_code") && j["exit_code"].is_number_integer() &&
        job.state != JobState::kPending && job.state != JobState::kRunning) {
      FromWaitStatus(j["exit_code"].get<int64_t>(), job);
    }
    jobs.push_back(std::move(job));
  }
  return jobs;
}

Result<std::vector<Job>> ParseSqueueText(std::string_view text) {
  std::vector<std::string> lines = Split(std::string(text), '\n');
  if (lines.empty() || Trim(lines[0]).rfind("JOBID|", 0) != 0) {
    return InvalidArgument(fmt::format("squeue answered '{}', not its table (the header line "
                                       "JOBID|NAME|... first)",
                                       std::string(Trim(lines.empty() ? "" : lines[0])).substr(0, 80)));
  }
  std::vector<Job> jobs;
  for (size_t n = 1; n < lines.size(); ++n) {
    const std::string line(Trim(lines[n]));
    if (line.empty()) continue;
    std::vector<std::string> f = Split(line, '|');
    if (f.size() < 8) {
      return InvalidArgument(fmt::format("squeue's line {} has {} fields, not 8: {}", n + 1,
                                         f.size(), line.substr(0, 120)));
    }
    // A name with '|' in it: the fields after it are counted from the end.
    std::string name = f[1];
    for (size_t i = 2; i + 6 < f.size(); ++i) name += "|" + f[i];
    const size_t k = f.size() - 6;  // STATE
    std::optional<int64_t> id = ToInt(f[0]);
    if (!id) continue;  // an array's or a het job's id ("12_3", "12+1"): not drover's
    Job job;
    job.id = *id;
    job.name = name;
    job.state = ParseJobState(f[k]);
    job.reason = f[k + 1];
    job.partition = f[k + 2];
    job.nodes = f[k + 3];
    // A pending job's START_TIME is when Slurm expects to start it: not a start.
    if (job.state != JobState::kPending) job.start_s = ParseTime(f[k + 4]);
    job.end_s = ParseTime(f[k + 5]);
    if (job.state == JobState::kCompleted) job.exit_code = 0;  // every process exited 0
    jobs.push_back(std::move(job));
  }
  return jobs;
}

Result<std::vector<Job>> ParseSacctParsable(std::string_view text) {
  std::vector<std::string> lines = Split(std::string(text), '\n');
  if (lines.empty() || Trim(lines[0]).empty()) {
    return InvalidArgument("sacct answered nothing (not even its header line)");
  }
  std::map<std::string, size_t> col;
  const std::vector<std::string> header = Split(std::string(Trim(lines[0])), '|');
  for (size_t i = 0; i < header.size(); ++i) col[header[i]] = i;
  for (const char* need : {"JobID", "State", "ExitCode"}) {
    if (!col.count(need)) {
      return InvalidArgument(fmt::format("sacct's header has no {} column (ask for -P -o "
                                         "JobID,JobName,State,ExitCode,Start,End)",
                                         need));
    }
  }
  std::vector<Job> jobs;
  std::map<int64_t, size_t> at;  // a job's place in `jobs`: its last line wins
  for (size_t n = 1; n < lines.size(); ++n) {
    const std::string line(Trim(lines[n]));
    if (line.empty()) continue;
    const std::vector<std::string> f = Split(line, '|');
    auto field = [&](const char* name) -> std::string {
      auto it = col.find(name);
      return it != col.end() && it->second < f.size() ? f[it->second] : std::string();
    };
    const std::string id_text = field("JobID");
    if (id_text.find('.') != std::string::npos) continue;  // a step (12.batch, 12.0)
    std::optional<int64_t> id = ToInt(id_text);
    if (!id) continue;  // an array's or a het job's id ("12_3", "12+1"): not drover's
    Job job;
    job.id = *id;
    job.name = field("JobName");
    job.state = ParseJobState(field("State"));
    const std::string exit = field("ExitCode");  // "3:0": exit code 3, signal 0
    const size_t colon = exit.find(':');
    if (colon != std::string::npos) {
      std::optional<int64_t> code = ToInt(std::string_view(exit).substr(0, colon));
      std::optional<int64_t> sig = ToInt(std::string_view(exit).substr(colon + 1));
      if (sig && *sig > 0) {
        job.signal = static_cast<int>(*sig);
      } else if (code) {
        job.exit_code = static_cast<int>(*code);
      }
    }
    job.partition = field("Partition");
    job.nodes = field("NodeList");
    job.start_s = ParseTime(field("Start"));
    job.end_s = ParseTime(field("End"));
    auto it = at.find(job.id);
    if (it != at.end()) {
      job.restarts = jobs[it->second].restarts +
                     (jobs[it->second].state == JobState::kPreempted ||
                              jobs[it->second].state == JobState::kRequeued ||
                              jobs[it->second].state == JobState::kNodeFail
                          ? 1
                          : 0);
      jobs[it->second] = std::move(job);
    } else {
      at[job.id] = jobs.size();
      jobs.push_back(std::move(job));
    }
  }
  return jobs;
}

Verdict Judge(const Job& job, bool cancel_requested) {
  Verdict v;
  v.exit_code = job.exit_code;
  v.signal = job.signal;
  v.why = std::string(ToString(job.state));
  auto ended = [&](AttemptOutcome o) {
    v.phase = Phase::kEnded;
    v.outcome = o;
  };
  switch (job.state) {
    case JobState::kPending:
      // Back in the queue after it ran (a requeue or a preemption): the next start is another
      // attempt.
      v.phase = job.restarts > 0 ? Phase::kRequeued : Phase::kWaiting;
      v.why = job.reason.empty() || job.reason == "None" ? v.why : v.why + " (" + job.reason + ")";
      break;
    case JobState::kRunning:
    case JobState::kCompleting:
    case JobState::kSuspended:
      v.phase = Phase::kRunning;
      break;
    case JobState::kCompleted:
      ended(job.exit_code == 0 || job.exit_code < 0 ? AttemptOutcome::kSucceeded
                                                    : AttemptOutcome::kExitCode);
      if (v.outcome == AttemptOutcome::kSucceeded) v.exit_code = 0;
      break;
    case JobState::kFailed:
      if (job.start_s == 0 || job.nodes.empty()) {
        ended(AttemptOutcome::kLaunchError);  // never started: bad constraints, a launch error
        v.why += job.reason.empty() ? "" : " (" + job.reason + ")";
      } else {
        ended(job.signal > 0 ? AttemptOutcome::kSignal : AttemptOutcome::kExitCode);
      }
      break;
    case JobState::kTimeout:
    case JobState::kDeadline:
      ended(AttemptOutcome::kTimeout);
      break;
    case JobState::kCancelled:
      if (cancel_requested) {
        ended(AttemptOutcome::kCancelled);
      } else {
        ended(AttemptOutcome::kSignal);  // scancel by someone else, or an admin
        v.why = "CANCELLED outside drover";
        if (v.signal == 0) v.signal = 15;
      }
      break;
    case JobState::kOutOfMemory:
      ended(AttemptOutcome::kSignal);
      v.why = "OUT_OF_MEMORY: the job went past its memory (--mem)";
      if (v.signal == 0) v.signal = 9;
      break;
    case JobState::kPreempted:
    case JobState::kNodeFail:
    case JobState::kBootFail:
    case JobState::kRequeued:
      v.phase = Phase::kRequeued;
      break;
    case JobState::kUnknown:
      v.phase = Phase::kLost;
      break;
  }
  return v;
}

std::string JobName(std::string_view store_id, int64_t run_id, int attempt) {
  return fmt::format("drover-{}-{}-{}", store_id, run_id, attempt);
}

std::optional<JobIdentity> ParseJobName(std::string_view name) {
  constexpr std::string_view kPrefix = "drover-";
  if (!name.starts_with(kPrefix)) return std::nullopt;
  name.remove_prefix(kPrefix.size());
  const size_t last = name.rfind('-');
  if (last == std::string_view::npos || last == 0) return std::nullopt;
  const size_t middle = name.rfind('-', last - 1);
  if (middle == std::string_view::npos || middle == 0) return std::nullopt;
  std::optional<int64_t> attempt = ToInt(name.substr(last + 1));
  std::optional<int64_t> run = ToInt(name.substr(middle + 1, last - middle - 1));
  if (!attempt || !run || *attempt <= 0 || *run <= 0 || *attempt > 1'000'000) return std::nullopt;
  JobIdentity id;
  id.store_id = std::string(name.substr(0, middle));
  id.run_id = *run;
  id.attempt = static_cast<int>(*attempt);
  return id;
}

}  // namespace drover::slurm
