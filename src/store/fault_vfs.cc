#include "store/fault_vfs.h"

#include <sqlite3.h>

#include <atomic>
#include <cstring>
#include <mutex>

namespace drover::store {
namespace {

std::atomic<int> g_code{0};
std::atomic<int64_t> g_after{0};
std::atomic<int64_t> g_left{0};  // failures still to inject; negative: unbounded
std::atomic<int64_t> g_injected{0};

sqlite3_vfs* g_real = nullptr;
sqlite3_vfs g_vfs;
sqlite3_io_methods g_methods;

// Our file: the real VFS's file follows it in the same allocation (szOsFile covers both).
struct FaultFile {
  sqlite3_file base;
  sqlite3_file* real;
};

sqlite3_file* Real(sqlite3_file* f) { return reinterpret_cast<FaultFile*>(f)->real; }

// Whether this write fails, and with what.
int NextWrite() {
  int code = g_code.load();
  if (code == 0) return SQLITE_OK;
  if (g_after.load() > 0 && g_after.fetch_sub(1) > 0) return SQLITE_OK;
  int64_t left = g_left.load();
  if (left == 0) return SQLITE_OK;
  if (left > 0 && g_left.fetch_sub(1) <= 0) return SQLITE_OK;
  g_injected.fetch_add(1);
  return code;
}

int Close(sqlite3_file* f) {
  int rc = Real(f)->pMethods ? Real(f)->pMethods->xClose(Real(f)) : SQLITE_OK;
  f->pMethods = nullptr;
  return rc;
}
int Read(sqlite3_file* f, void* buf, int n, sqlite3_int64 off) {
  return Real(f)->pMethods->xRead(Real(f), buf, n, off);
}
int Write(sqlite3_file* f, const void* buf, int n, sqlite3_int64 off) {
  if (int rc = NextWrite(); rc != SQLITE_OK) return rc;
  return Real(f)->pMethods->xWrite(Real(f), buf, n, off);
}
int Truncate(sqlite3_file* f, sqlite3_int64 size) {
  return Real(f)->pMethods->xTruncate(Real(f), size);
}
int Sync(sqlite3_file* f, int flags) { return Real(f)->pMethods->xSync(Real(f), flags); }
int FileSize(sqlite3_file* f, sqlite3_int64* size) {
  return Real(f)->pMethods->xFileSize(Real(f), size);
}
int Lock(sqlite3_file* f, int l) { return Real(f)->pMethods->xLock(Real(f), l); }
int Unlock(sqlite3_file* f, int l) { return Real(f)->pMethods->xUnlock(Real(f), l); }
int CheckReservedLock(sqlite3_file* f, int* out) {
  return Real(f)->pMethods->xCheckReservedLock(Real(f), out);
}
int FileControl(sqlite3_file* f, int op, void* arg) {
  return Real(f)->pMethods->xFileControl(Real(f), op, arg);
}
int SectorSize(sqlite3_file* f) { return Real(f)->pMethods->xSectorSize(Real(f)); }
int DeviceCharacteristics(sqlite3_file* f) {
  return Real(f)->pMethods->xDeviceCharacteristics(Real(f));
}
int ShmMap(sqlite3_file* f, int region, int size, int extend, void volatile** out) {
  return Real(f)->pMethods->xShmMap(Real(f), region, size, extend, out);
}
int ShmLock(sqlite3_file* f, int offset, int n, int flags) {
  return Real(f)->pMethods->xShmLock(Real(f), offset, n, flags);
}
void ShmBarrier(sqlite3_file* f) { Real(f)->pMethods->xShmBarrier(Real(f)); }
int ShmUnmap(sqlite3_file* f, int del) { return Real(f)->pMethods->xShmUnmap(Real(f), del); }
int Fetch(sqlite3_file* f, sqlite3_int64 off, int n, void** out) {
  return Real(f)->pMethods->xFetch(Real(f), off, n, out);
}
int Unfetch(sqlite3_file* f, sqlite3_int64 off, void* p) {
  return Real(f)->pMethods->xUnfetch(Real(f), off, p);
}

int Open(sqlite3_vfs*, sqlite3_filename name, sqlite3_file* file, int flags, int* out_flags) {
  auto* ours = reinterpret_cast<FaultFile*>(file);
  ours->real = reinterpret_cast<sqlite3_file*>(ours + 1);
  ours->base.pMethods = nullptr;
  int rc = g_real->xOpen(g_real, name, ours->real, flags, out_flags);
  if (rc != SQLITE_OK || ours->real->pMethods == nullptr) return rc;
  // The real file's methods decide the version (3 on unix: shared memory and memory mapping).
  g_methods.iVersion = std::min(ours->real->pMethods->iVersion, 3);
  ours->base.pMethods = &g_methods;
  return SQLITE_OK;
}

void Register() {
  g_real = sqlite3_vfs_find(nullptr);
  g_vfs = *g_real;
  g_vfs.szOsFile = static_cast<int>(sizeof(FaultFile)) + g_real->szOsFile;
  g_vfs.zName = "drover-faults";
  g_vfs.pNext = nullptr;
  g_vfs.xOpen = Open;
  std::memset(&g_methods, 0, sizeof g_methods);
  g_methods.iVersion = 3;
  g_methods.xClose = Close;
  g_methods.xRead = Read;
  g_methods.xWrite = Write;
  g_methods.xTruncate = Truncate;
  g_methods.xSync = Sync;
  g_methods.xFileSize = FileSize;
  g_methods.xLock = Lock;
  g_methods.xUnlock = Unlock;
  g_methods.xCheckReservedLock = CheckReservedLock;
  g_methods.xFileControl = FileControl;
  g_methods.xSectorSize = SectorSize;
  g_methods.xDeviceCharacteristics = DeviceCharacteristics;
  g_methods.xShmMap = ShmMap;
  g_methods.xShmLock = ShmLock;
  g_methods.xShmBarrier = ShmBarrier;
  g_methods.xShmUnmap = ShmUnmap;
  g_methods.xFetch = Fetch;
  g_methods.xUnfetch = Unfetch;
  sqlite3_vfs_register(&g_vfs, /*makeDflt=*/0);
}

}  // namespace

const char* FaultVfsName() {
  static std::once_flag once;
  std::call_once(once, Register);
  return g_vfs.zName;
}

void ArmWriteFaults(const WriteFaults& faults) {
  g_code.store(0);
  g_after.store(faults.after);
  g_left.store(faults.count);
  g_code.store(faults.code);
}

void DisarmWriteFaults() { g_code.store(0); }

int64_t InjectedWriteFaults() { return g_injected.load(); }

}  // namespace drover::store
