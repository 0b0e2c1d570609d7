#pragma once
// How many of the alerts a run raises itself (its `{"drover_alert": ...}` lines) reach the
// sinks: each distinct line was an alert, so one run printing 3,000 of them made 1,000 Slack
// posts in seconds and filled the webhook's queue so that real alerts were dropped (issue 39).
// A run may send `per_run` of them per window, and all of one user's runs `per_user`; beyond
// either the rest of the window's are counted on one "alerts suppressed" alert, sent once.
// Pure: the engine hands it the time.
#include <cstdint>
#include <map>
#include <string>

#include "common/clock.h"

namespace drover::watch {

struct AlertBudgetConfig {
  int per_run = 10;    // a run's own alerts sent per window
  int per_user = 30;   // one user's runs' own alerts sent per window, all runs together
  Millis window_ms = 60 * 60 * 1000;
};

struct AlertAdmission {
  bool send = true;
  // When not sent: which cap it is over ("run" or "user"), and whether it is the first alert
  // over it in this window (the one that raises the "alerts suppressed" alert).
  std::string over;
  bool first_over = false;
  int64_t suppressed = 0;  // alerts over that cap in this window, this one included
};

class AlertBudget {
 public:
  // Counts one alert of `run_id` (submitted by `user`) raised at `now`.
  AlertAdmission Take(const AlertBudgetConfig& config, int64_t run_id, const std::string& user,
                      Millis now);

 private:
  struct Window {
    Millis start = 0;
    int sent = 0;
    int64_t suppressed = 0;
  };
  // A window that has passed starts again at now.
  static Window& Current(Window& w, Millis now, Millis length);
  // Forgets windows that have passed, so a daemon that runs for months keeps only the last
  // hour's runs and users.
  void Prune(Millis now, Millis length);
  std::map<int64_t, Window> runs_;
  std::map<std::string, Window> users_;
};

}  // namespace drover::watch
