#pragma once
// Which store a command uses when none is named, and the stores this user has (drover stores).
//
// - The user's default store: `store: PATH` in $XDG_CONFIG_HOME/drover/config.yaml (default
//   ~/.config/drover/config.yaml), used by every folder that has no ./.drover of its own when
//   neither --store nor DROVER_HOME names one; a command that uses it says so once on stderr.
// - The stores' list: each store drover creates is added (its absolute path, one line) to
//   $XDG_STATE_HOME/drover/stores (default ~/.local/state/drover/stores); `drover stores` lists
//   those that still exist, with their daemons. Best effort: a list that cannot be written never
//   fails a command.
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"

namespace drover::cli {

// The user's config file and the stores' list (empty when neither XDG_* nor HOME is set).
std::string UserConfigPath();
std::string StoresListPath();

// The default store the user's config file names, absolute (nullopt: none, or no such file).
// A file that cannot be read or parsed is an error that says which file and what to write.
Result<std::optional<std::string>> UserDefaultStore();

// Adds a store to the list (no-op when it is listed already or the list cannot be written).
void RememberStore(const std::string& store_dir);

// The stores listed that still hold a drover.db, each once, in the order first listed.
std::vector<std::string> KnownStores();

}  // namespace drover::cli
