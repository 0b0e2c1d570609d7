#include "watch/alert_budget.h"

namespace drover::watch {

AlertBudget::Window& AlertBudget::Current(Window& w, Millis now, Millis length) {
  if (w.sent == 0 && w.suppressed == 0) w.start = now;
  if (now - w.start >= length) w = Window{now, 0, 0};
  return w;
}

void AlertBudget::Prune(Millis now, Millis length) {
  constexpr size_t kPruneAbove = 4096;
  if (runs_.size() > kPruneAbove) {
    std::erase_if(runs_, [&](const auto& e) { return now - e.second.start >= length; });
  }
  if (users_.size() > kPruneAbove) {
    std::erase_if(users_, [&](const auto& e) { return now - e.second.start >= length; });
  }
}

AlertAdmission AlertBudget::Take(const AlertBudgetConfig& config, int64_t run_id,
                                 const std::string& user, Millis now) {
  Prune(now, config.window_ms);
  Window& run = Current(runs_[run_id], now, config.window_ms);
  Window& mine = Current(users_[user], now, config.window_ms);
  AlertAdmission a;
  Window* over = nullptr;
  if (run.sent >= config.per_run) {
    a.over = "run";
    over = &run;
  } else if (mine.sent >= config.per_user) {
    a.over = "user";
    over = &mine;
  }
  if (over) {
    a.send = false;
    a.suppressed = ++over->suppressed;
    a.first_over = a.suppressed == 1;
    return a;
  }
  run.sent += 1;
  mine.sent += 1;
  return a;
}

}  // namespace drover::watch
