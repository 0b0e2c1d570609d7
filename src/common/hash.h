#pragma once
// SHA-256 (OpenSSL EVP) for fingerprints and content-addressed snapshots; HMAC-SHA256 for the
// web UI's session cookies.
#include <memory>
#include <string>
#include <string_view>

namespace drover {

class Sha256 {
 public:
  Sha256();
  ~Sha256();
  Sha256(const Sha256&) = delete;
  Sha256& operator=(const Sha256&) = delete;
  void Update(std::string_view data);
  std::string HexDigest();  // finishes the hash; call once

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

std::string Sha256Hex(std::string_view data);
// HMAC-SHA256 of data under key, as 64 lowercase hex digits.
// A short id of a store for the names it gives outside itself (Slurm jobs and containers:
// drover-<id>-<run>-<attempt>): the first 8 hex digits of the SHA-256 of its absolute path, so
// two stores on one cluster or one container runtime never read each other's.
std::string StoreId(const std::string& store_dir);
std::string HmacSha256Hex(std::string_view key, std::string_view data);

}  // namespace drover
