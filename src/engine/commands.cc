// The loop's inbox of commands (engine/commands.h).
#include "engine/commands.h"

#include "engine/pool.h"  // GpuView, complete for CommandReply

namespace drover {

CommandInbox::CommandInbox() = default;
CommandInbox::~CommandInbox() = default;

std::future<Result<CommandReply>> CommandInbox::Post(Command command) {
  PostedCommand posted{std::move(command), {}};
  auto reply = posted.reply.get_future();
  std::lock_guard<std::mutex> lock(mu_);
  posted_.push_back(std::move(posted));
  return reply;
}

std::vector<PostedCommand> CommandInbox::Take() {
  std::vector<PostedCommand> batch;
  std::lock_guard<std::mutex> lock(mu_);
  batch.swap(posted_);
  return batch;
}

}  // namespace drover
