#pragma once
// Unix domain sockets for the daemon's local clients (docs/lab-server.md, "The socket"): listening
// with a stale socket file replaced safely, and connecting. Paths longer than sun_path allows
// (108 bytes) are reached through the folder's /proc/self/fd link.
#include <cstdint>
#include <string>

#include "common/status.h"

namespace drover {

// Listens on `path` with `mode` (0600: the owner and root; 0666: every local user). What is at
// the path: nothing, or a socket nobody listens on (a daemon that died) is replaced, atomically
// (bound under a temporary name, then renamed over it); a socket something answers on is
// refused (another daemon), and so is anything that is not a socket. The folder must not be
// writable by other users unless sticky. Returns the listening fd (close-on-exec) and the
// socket file's inode (RemoveUnixSocket removes only that one).
struct UnixListener {
  int fd = -1;
  int64_t inode = 0;
};
Result<UnixListener> ListenUnix(const std::string& path, int mode, int backlog);
// Removes the socket file when it is still the one with this inode.
void RemoveUnixSocket(const std::string& path, int64_t inode);

// Connects to the socket at `path` within timeout_ms; NotFound when nothing is there,
// Unavailable when nothing listens.
Result<int> ConnectUnix(const std::string& path, int timeout_ms);

}  // namespace drover
