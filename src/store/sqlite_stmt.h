#pragma once
// Inside the store only: the prepared-statement helper and the connection state shared by the
// store's source files (store.cc: runs and their records; watch_store.cc: alerts and GPU
// samples).
#include <fmt/format.h>
#include <sqlite3.h>

#include <cmath>
#include <concepts>
#include <functional>
#include <limits>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "common/status.h"
#include "store/migrations.h"
#include "store/store.h"

namespace drover::store {

// Invalid UTF-8 (a parameter taken from a file name, say) is replaced rather than thrown on.
inline std::string DumpJson(const Json& j) {
  return j.dump(-1, ' ', false, Json::error_handler_t::replace);
}

inline Status CorruptColumn(std::string_view what, std::string_view why) {
  return Internal(fmt::format(
      "{} {}; the store may have been edited by hand or by a newer drover (inspect it with "
      "sqlite3)",
      what, why));
}

inline Status ParseJson(const std::string& text, std::string_view what, Json* out) {
  *out = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (out->is_discarded()) return CorruptColumn(what, "is not valid JSON");
  return Status::Ok();
}

template <typename T>
Status ParseJsonArray(const std::string& text, std::string_view what, std::vector<T>* out) {
  Json j;
  DROVER_RETURN_IF_ERROR(ParseJson(text, what, &j));
  if (!j.is_array()) return CorruptColumn(what, "is not a JSON array");
  try {
    *out = j.get<std::vector<T>>();
  } catch (const Json::exception& e) {
    return CorruptColumn(what, fmt::format("has an element of the wrong type ({})", e.what()));
  }
  return Status::Ok();
}

// A value bound to a statement, kept to replay the statement (Store::Begin after a failed commit).
struct Bound {
  enum class Kind { kInt, kReal, kNull, kText } kind;
  int64_t i = 0;
  double d = 0;
  std::string text;
};
// One write statement of the open transaction and its values, in binding order.
struct JournalEntry {
  sqlite3_stmt* stmt;
  std::vector<Bound> values;
};
using Journal = std::vector<JournalEntry>;

// A cached statement borrowed for one call. Bind() fills parameters left to right; on scope
// exit the statement is reset and its bindings cleared, so the next user finds it clean.
class Stmt {
 public:
  // With `journal`, each write Step() first appends the statement and its values to it.
  Stmt(sqlite3_stmt* s, std::string_view context, Journal* journal = nullptr)
      : s_(s), context_(context), journal_(journal && !sqlite3_stmt_readonly(s) ? journal : nullptr) {}
  Stmt(Stmt&& o) noexcept
      : s_(std::exchange(o.s_, nullptr)),
        context_(o.context_),
        next_(o.next_),
        bind_rc_(o.bind_rc_),
        journal_(o.journal_),
        values_(std::move(o.values_)),
        journaled_(o.journaled_) {}
  Stmt(const Stmt&) = delete;
  Stmt& operator=(const Stmt&) = delete;
  Stmt& operator=(Stmt&&) = delete;
  ~Stmt() {
    if (s_ != nullptr) {
      sqlite3_reset(s_);
      sqlite3_clear_bindings(s_);
    }
  }

  template <typename... Args>
  Stmt& Bind(const Args&... args) {
    (BindOne(args), ...);
    return *this;
  }

  // true: a row is ready; false: done.
  Result<bool> Step() {
    sqlite3* db = sqlite3_db_handle(s_);
    if (bind_rc_ != SQLITE_OK) return SqliteStatus(db, bind_rc_, context_);
    if (journal_ && !journaled_) {
      journal_->push_back({s_, values_});
      journaled_ = true;
    }
    int rc = sqlite3_step(s_);
    if (rc == SQLITE_ROW) return true;
    if (rc == SQLITE_DONE) return false;
    return SqliteStatus(db, rc, context_);
  }
  // For statements that return no rows.
  Status Run() {
    Result<bool> r = Step();
    return r.ok() ? Status::Ok() : r.status();
  }
  // Rewinds for another round of Bind() + Step() (InsertMetrics reuses one Stmt per batch).
  void Reset() {
    sqlite3_reset(s_);
    next_ = 0;
    values_.clear();
    journaled_ = false;
  }

  sqlite3_stmt* raw() const { return s_; }
  int64_t Int(int col) const { return sqlite3_column_int64(s_, col); }
  // SQLite stores NaN as NULL: read it back as NaN.
  double Real(int col) const {
    if (sqlite3_column_type(s_, col) == SQLITE_NULL)
      return std::numeric_limits<double>::quiet_NaN();
    return sqlite3_column_double(s_, col);
  }
  std::string Text(int col) const {
    const auto* p = reinterpret_cast<const char*>(sqlite3_column_text(s_, col));
    if (p == nullptr) return {};
    return std::string(p, static_cast<size_t>(sqlite3_column_bytes(s_, col)));
  }

 private:
  void Check(int rc) {
    if (rc != SQLITE_OK && bind_rc_ == SQLITE_OK) bind_rc_ = rc;
  }
  template <std::integral T>
  void BindOne(T v) {
    if (journal_) values_.push_back({Bound::Kind::kInt, static_cast<int64_t>(v)});
    Check(sqlite3_bind_int64(s_, ++next_, static_cast<sqlite3_int64>(v)));
  }
  void BindOne(double v) {
    if (std::isnan(v)) {
      if (journal_) values_.push_back({Bound::Kind::kNull});
      Check(sqlite3_bind_null(s_, ++next_));
    } else {
      if (journal_) values_.push_back({Bound::Kind::kReal, 0, v});
      Check(sqlite3_bind_double(s_, ++next_, v));
    }
  }
  void BindOne(std::string_view v) {
    if (journal_) values_.push_back({Bound::Kind::kText, 0, 0, std::string(v)});
    Check(sqlite3_bind_text64(s_, ++next_, v.data(), v.size(), SQLITE_TRANSIENT, SQLITE_UTF8));
  }
  void BindOne(const std::string& v) { BindOne(std::string_view(v)); }
  void BindOne(const char* v) { BindOne(std::string_view(v)); }

  sqlite3_stmt* s_;
  std::string_view context_;  // always a literal
  int next_ = 0;
  int bind_rc_ = SQLITE_OK;
  Journal* journal_ = nullptr;
  std::vector<Bound> values_;
  bool journaled_ = false;
};

struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};

}  // namespace drover::store

namespace drover {

struct Store::Impl {
  sqlite3* db = nullptr;
  std::string path;
  // Prepared statements by SQL text, prepared once and reused for the life of the connection.
  std::unordered_map<std::string, sqlite3_stmt*, store::StringHash, std::equal_to<>> cache;
  bool journaling = false;  // between Begin() and Commit()
  store::Journal journal;   // the open transaction's writes, or a failed commit's
  bool pending = false;     // a commit failed for want of room: `journal` must still land
  // Called once the connection is closed (Store::Open's count of this process's connections).
  std::function<void()> on_close;

  ~Impl() {
    for (auto& [sql, stmt] : cache) sqlite3_finalize(stmt);
    sqlite3_close_v2(db);
    if (on_close) on_close();
  }

  Result<store::Stmt> Use(std::string_view sql, std::string_view context) {
    auto it = cache.find(sql);
    if (it == cache.end()) {
      sqlite3_stmt* stmt = nullptr;
      int rc = sqlite3_prepare_v3(db, sql.data(), static_cast<int>(sql.size()),
                                  SQLITE_PREPARE_PERSISTENT, &stmt, nullptr);
      if (rc != SQLITE_OK) return store::SqliteStatus(db, rc, context);
      it = cache.emplace(std::string(sql), stmt).first;
    }
    return store::Stmt(it->second, context, journaling ? &journal : nullptr);
  }

  Status ExpectChanged(std::string_view what, int64_t id) {
    if (sqlite3_changes(db) == 0) return NotFound(fmt::format("no {} {} in the store", what, id));
    return Status::Ok();
  }
};

}  // namespace drover
