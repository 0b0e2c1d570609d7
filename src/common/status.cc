#include "common/status.h"

#include <cstring>

namespace drover {

std::string_view CodeName(Code code) {
  switch (code) {
    case Code::kOk:
      return "ok";
    case Code::kInvalidArgument:
      return "invalid_argument";
    case Code::kNotFound:
      return "not_found";
    case Code::kFailedPrecondition:
      return "failed_precondition";
    case Code::kIo:
      return "io";
    case Code::kInternal:
      return "internal";
    case Code::kUnavailable:
      return "unavailable";
    case Code::kCancelled:
      return "cancelled";
    case Code::kPermissionDenied:
      return "permission_denied";
  }
  return "unknown";
}

std::string Status::ToString() const {
  if (ok()) return "ok";
  return message_;
}

Status Status::WithContext(std::string_view context) const {
  if (ok()) return *this;
  return Status(code_, std::string(context) + ": " + message_).WithOsError(os_error_);
}

std::string ErrnoText(int err) {
  const char* text = strerrordesc_np(err);
  return text ? std::string(text) : "unknown error " + std::to_string(err);
}

Status ErrnoStatus(std::string_view what, int err) { return ErrnoStatus(Code::kIo, what, err); }

Status ErrnoStatus(Code code, std::string_view what, int err) {
  return Status(code, std::string(what) + ": " + ErrnoText(err)).WithOsError(err);
}

Status IoStatus(std::string_view what, const std::error_code& ec) {
  Status s(Code::kIo, std::string(what) + ": " + ec.message());
  if (ec.category() == std::system_category() || ec.category() == std::generic_category()) {
    return std::move(s).WithOsError(ec.value());
  }
  return s;
}

}  // namespace drover
