#include "server/tokens.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "server/web_auth.h"

namespace drover::server {
namespace {

namespace fs = std::filesystem;

class TokenBookTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (fs::temp_directory_path() / "drover-tokens-XXXXXX").string();
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
    path_ = dir_ + "/tokens.json";
  }
  void TearDown() override { fs::remove_all(dir_); }
  UnixUser User(int64_t uid, const std::string& name) {
    UnixUser u;
    u.uid = uid;
    u.gid = uid;
    u.name = name;
    return u;
  }
  std::string dir_, path_;
};

TEST_F(TokenBookTest, ATokenActsAsItsUserUntilRevokedAndOnlyItsHashIsKept) {
  TokenBook book(path_);
  ASSERT_TRUE(book.Load().ok());
  auto made = book.Create(User(1001, "alice"), "laptop", 1000);
  ASSERT_TRUE(made.ok()) << made.status().ToString();
  const std::string secret = made->second;
  EXPECT_TRUE(secret.starts_with("drv_1_")) << secret;
  EXPECT_EQ(secret.size(), 6u + 64u);
  auto who = book.Check(secret, 2000);
  ASSERT_TRUE(who.has_value());
  EXPECT_EQ(who->user, "alice");
  EXPECT_EQ(who->uid, 1001);
  // Near misses are nobody.
  std::string wrong = secret;
  wrong.back() = wrong.back() == '0' ? '1' : '0';
  EXPECT_FALSE(book.Check(wrong, 2000));
  EXPECT_FALSE(book.Check("drv_2_" + secret.substr(6), 2000));
  EXPECT_FALSE(book.Check("drv_x_" + secret.substr(6), 2000));
  EXPECT_FALSE(book.Check("", 2000));
  // The file holds no secret, is the daemon's alone, and a new book reads it back.
  std::ifstream in(path_);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(text.find(secret.substr(6)), std::string::npos);
  struct stat st {};
  ASSERT_EQ(stat(path_.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  TokenBook again(path_);
  ASSERT_TRUE(again.Load().ok());
  EXPECT_TRUE(again.Check(secret, 3000));
  // Revoked: at once, and after a restart too.
  ASSERT_TRUE(again.Revoke(1, 4000).ok());
  EXPECT_FALSE(again.Check(secret, 5000));
  EXPECT_FALSE(again.Live(1));
  TokenBook after(path_);
  ASSERT_TRUE(after.Load().ok());
  EXPECT_FALSE(after.Check(secret, 6000));
  EXPECT_EQ(after.Revoke(99, 1).status().code(), Code::kNotFound);
  // Ids are never reused.
  auto next = after.Create(User(1001, "alice"), "", 7000);
  ASSERT_TRUE(next.ok());
  EXPECT_EQ(next->first.id, 2);
}

TEST_F(TokenBookTest, LimitsOnNamesTokensPerUserAndTheFile) {
  TokenBook book(path_);
  EXPECT_EQ(book.Create(User(1, "a"), std::string(65, 'x'), 0).status().code(),
            Code::kInvalidArgument);
  EXPECT_EQ(book.Create(User(1, "a"), "two\nlines", 0).status().code(), Code::kInvalidArgument);
  for (size_t i = 0; i < TokenBook::kMaxPerUser; ++i) {
    ASSERT_TRUE(book.Create(User(1, "a"), "", 0).ok());
  }
  auto refused = book.Create(User(1, "a"), "", 0);
  EXPECT_EQ(refused.status().code(), Code::kFailedPrecondition);
  EXPECT_NE(refused.status().message().find("revoke one first"), std::string::npos);
  EXPECT_TRUE(book.Create(User(2, "b"), "", 0).ok()) << "another user's are theirs";
  // A book drover did not write stops the daemon rather than forgetting who holds tokens.
  // Entries of another shape are left out, never thrown on.
  std::ofstream(path_) << R"({"next_id": "x", "tokens": [{"id": "1", "uid": 5, "hash": 3},
      {"id": 2, "uid": 5, "hash": "0000000000000000000000000000000000000000000000000000000000000000",
       "name": 7}, 12]})";
  TokenBook odd(path_);
  EXPECT_TRUE(odd.Load().ok());
  EXPECT_TRUE(odd.List().empty());
  std::ofstream(path_) << "not json";
  TokenBook broken(path_);
  EXPECT_EQ(broken.Load().code(), Code::kFailedPrecondition);
}

TEST(PersonSession, ACookieNamesItsTokenAndCannotBeForgedOrKeptForever) {
  const std::string key = "store-token";
  const std::string cookie = MakePersonSessionCookie(key, 7, 1'000'000);
  EXPECT_EQ(PersonSessionTokenId(key, cookie, 1'000'500), 7);
  EXPECT_TRUE(SessionValid(key, cookie, 1'000'500));
  EXPECT_EQ(PersonSessionTokenId("other-key", cookie, 1'000'500), 0);
  std::string forged = cookie;
  forged.replace(3, 1, "8");  // another token's id, same MAC
  EXPECT_EQ(PersonSessionTokenId(key, forged, 1'000'500), 0);
  EXPECT_EQ(PersonSessionTokenId(key, cookie, 1'000'000 + kSessionMaxAgeS * 1000 + 1), 0);
  EXPECT_EQ(PersonSessionTokenId(key, MakeSessionCookie(key, 1'000'000), 1'000'500), 0);
  EXPECT_EQ(PersonSessionTokenId(key, "p1.7.x.y", 1'000'500), 0);
}

}  // namespace
}  // namespace drover::server
