#pragma once
// Errors are values: every fallible call returns Status or Result<T>; the face (CLI, HTTP) turns
// the message into what the user sees. Messages say what went wrong and what to do about it.
#include <cerrno>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <variant>

namespace drover {

enum class Code {
  kOk = 0,
  kInvalidArgument,     // bad input from the user (spec, flag, id)
  kNotFound,            // no such run / experiment / file
  kFailedPrecondition,  // the world is not in the state the call needs (e.g. newer store schema)
  kIo,                  // the OS said no (errno)
  kInternal,            // a bug or a library error (SQLite)
  kUnavailable,         // a resource is missing (no GPU, no NVML)
  kCancelled,
  kPermissionDenied,    // the caller may not do this (another user's run; not an admin)
};

std::string_view CodeName(Code code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(Code code, std::string message) : code_(code), message_(std::move(message)) {}
  static Status Ok() { return Status(); }

  bool ok() const { return code_ == Code::kOk; }
  Code code() const { return code_; }
  const std::string& message() const { return message_; }
  std::string ToString() const;
  // Prefixes the message with context ("opening store: ...").
  Status WithContext(std::string_view context) const;
  // The errno the OS answered, for a kIo status made from one (ErrnoStatus, IoStatus); 0
  // otherwise. What a caller decides on ("no room: wait and try again") is this, never the
  // message's words, which may quote a user's file names.
  int os_error() const { return os_error_; }
  Status WithOsError(int err) && {
    os_error_ = err;
    return std::move(*this);
  }

 private:
  Code code_ = Code::kOk;
  std::string message_;
  int os_error_ = 0;
};

inline Status InvalidArgument(std::string m) {
  return Status(Code::kInvalidArgument, std::move(m));
}
inline Status NotFound(std::string m) { return Status(Code::kNotFound, std::move(m)); }
inline Status PermissionDenied(std::string m) {
  return Status(Code::kPermissionDenied, std::move(m));
}
inline Status FailedPrecondition(std::string m) {
  return Status(Code::kFailedPrecondition, std::move(m));
}
inline Status Internal(std::string m) { return Status(Code::kInternal, std::move(m)); }
inline Status Unavailable(std::string m) { return Status(Code::kUnavailable, std::move(m)); }
// The one place errno becomes text: the error's description ("No space left on device"), from
// strerrordesc_np (no locale lock, the same words in every locale); "unknown error N" for a
// number the C library does not know. A forked child, which must not allocate, calls
// strerrordesc_np itself (exec/shim.cc, exec/working_copy.cc).
std::string ErrnoText(int err = errno);
// The one place errno becomes a Status: "what: ErrnoText(err)", with os_error() = err; kIo, or
// the code given (a daemon that does not answer is kUnavailable, a missing file kNotFound).
Status ErrnoStatus(std::string_view what, int err = errno);
Status ErrnoStatus(Code code, std::string_view what, int err = errno);
// The same for a std::error_code of the system category ("what: message").
Status IoStatus(std::string_view what, const std::error_code& ec);

template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}         // NOLINT: implicit by design
  Result(Status status) : v_(std::move(status)) {}  // NOLINT: must not be ok
  bool ok() const { return std::holds_alternative<T>(v_); }
  const Status& status() const {
    static const Status kOk;
    return ok() ? kOk : std::get<Status>(v_);
  }
  T& value() & { return std::get<T>(v_); }
  const T& value() const& { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

 private:
  std::variant<T, Status> v_;
};

}  // namespace drover

#define DROVER_CONCAT_INNER(a, b) a##b
#define DROVER_CONCAT(a, b) DROVER_CONCAT_INNER(a, b)

#define DROVER_RETURN_IF_ERROR(expr) \
  do {                               \
    ::drover::Status _st = (expr);   \
    if (!_st.ok()) return _st;       \
  } while (0)

#define DROVER_ASSIGN_OR_RETURN(lhs, expr) \
  DROVER_ASSIGN_OR_RETURN_IMPL(DROVER_CONCAT(_res_, __LINE__), lhs, expr)
#define DROVER_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                                 \
  if (!tmp.ok()) return tmp.status();                \
  lhs = std::move(tmp).value()
