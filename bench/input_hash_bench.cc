// Input hashing (bench/README.md, "Input hashing"): the time to hash a pipeline stage's declared
// input folder at a first submit (every byte read) and to know it unchanged at the next (a stat
// per file against <snapshots>/.hashes), as drover does at each submit (exec/file_hashes.h).
//   input_hash_bench DIR CACHE_DIR  ->  one JSON line: files, bytes, first_s, second_s, same
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>

#include "exec/file_hashes.h"

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: input_hash_bench DIR CACHE_DIR\n");
    return 2;
  }
  const std::string dir = argv[1];
  const std::string cache_dir = argv[2];
  std::filesystem::create_directories(cache_dir);
  std::filesystem::remove(cache_dir + "/.hashes");
  using Clock = std::chrono::steady_clock;
  auto pass = [&](std::string* hash, int64_t* files, int64_t* bytes) {
    const auto t0 = Clock::now();
    drover::HashCache cache(cache_dir);  // loaded from its file, as a submit does
    drover::Result<std::string> h = drover::HashTree(dir, &cache, files, bytes);
    if (!h.ok()) {
      std::fprintf(stderr, "%s\n", h.status().message().c_str());
      std::exit(1);
    }
    cache.Save();
    *hash = *h;
    return std::chrono::duration<double>(Clock::now() - t0).count();
  };
  std::string first_hash, second_hash;
  int64_t files = 0, bytes = 0;
  const double first = pass(&first_hash, &files, &bytes);
  const double second = pass(&second_hash, &files, &bytes);
  std::printf("{\"files\": %lld, \"bytes\": %lld, \"first_s\": %.3f, \"second_s\": %.3f, "
              "\"same\": %s}\n",
              static_cast<long long>(files), static_cast<long long>(bytes), first, second,
              first_hash == second_hash ? "true" : "false");
  return first_hash == second_hash ? 0 : 1;
}
