#include "mcp/sessions.h"

#include <gtest/gtest.h>

#include <atomic>
#include <set>
#include <thread>
#include <vector>

namespace drover::mcp {
namespace {

TEST(SessionStoreTest, CreateFindRemove) {
  SessionStore store;
  auto a = store.Create();
  auto b = store.Create();
  ASSERT_TRUE(a && b);
  EXPECT_NE(a->id, b->id);
  EXPECT_EQ(store.size(), 2u);
  EXPECT_EQ(store.Find(a->id), a);
  EXPECT_EQ(store.Find("nope"), nullptr);
  EXPECT_TRUE(store.Remove(a->id));
  EXPECT_FALSE(store.Remove(a->id));
  EXPECT_EQ(store.Find(a->id), nullptr);
  EXPECT_EQ(store.Find(b->id), b);
  EXPECT_EQ(store.size(), 1u);
  // A removed entry stays usable by whoever still holds it.
  a->session.initialized = true;
  EXPECT_TRUE(a->session.initialized);
}

TEST(SessionStoreTest, IdsAre128RandomBitsOfVisibleAscii) {
  std::set<std::string> ids;
  for (int i = 0; i < 1000; ++i) {
    std::string id = NewSessionId();
    ASSERT_EQ(id.size(), 32u);
    for (char c : id) {
      EXPECT_TRUE((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f')) << id;
      EXPECT_TRUE(c >= 0x21 && c <= 0x7E);
    }
    ids.insert(id);
  }
  EXPECT_EQ(ids.size(), 1000u);
}

TEST(SessionStoreTest, EvictsTheLeastRecentlyUsedAtTheCap) {
  SessionStore store(3);
  auto a = store.Create();
  auto b = store.Create();
  auto c = store.Create();
  EXPECT_TRUE(store.Find(a->id));  // a is now the most recently used; b the least
  auto d = store.Create();
  EXPECT_EQ(store.size(), 3u);
  EXPECT_EQ(store.Find(b->id), nullptr);
  EXPECT_TRUE(store.Find(a->id));
  EXPECT_TRUE(store.Find(c->id));
  EXPECT_TRUE(store.Find(d->id));
  // Order now (most recent first): d, c, a; the next one evicts a.
  store.Create();
  EXPECT_EQ(store.Find(a->id), nullptr);
  EXPECT_EQ(store.size(), 3u);
}

TEST(SessionStoreTest, ConcurrentUse) {
  SessionStore store(64);
  ToolRegistry tools;
  McpServer server({.name = "drover", .version = "0.1.0"}, tools, "");
  auto shared = store.Create();
  std::atomic<int> pings{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 300; ++i) {
        auto mine = store.Create();
        EXPECT_LE(store.size(), 64u);
        {
          std::lock_guard lock(mine->mu);
          server.Handle({{"jsonrpc", "2.0"},
                         {"id", i},
                         {"method", "initialize"},
                         {"params", {{"protocolVersion", "2025-06-18"}}}},
                        mine->session);
        }
        if (i % 3 == 0) store.Remove(mine->id);
        // Every thread also uses one session that stays alive (it is touched often).
        if (auto s = store.Find(shared->id)) {
          std::lock_guard lock(s->mu);
          if (!s->session.initialized) {
            server.Handle({{"jsonrpc", "2.0"},
                           {"id", 0},
                           {"method", "initialize"},
                           {"params", {{"protocolVersion", "2025-11-25"}}}},
                          s->session);
          }
          auto r = server.Handle({{"jsonrpc", "2.0"}, {"id", t}, {"method", "ping"}}, s->session);
          if (r && (*r)["id"] == t) ++pings;
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_LE(store.size(), 64u);
  EXPECT_GT(pings.load(), 0);
  EXPECT_TRUE(shared->session.initialized);
  EXPECT_EQ(shared->session.protocol_version, "2025-11-25");
}

TEST(ProtocolVersionHeaderTest, MissingMeans20250326) {
  EXPECT_EQ(CheckProtocolVersionHeader(""), std::nullopt);
  EXPECT_EQ(ProtocolVersionFromHeader(""), "2025-03-26");
  EXPECT_EQ(ProtocolVersionFromHeader(" 2025-06-18 "), "2025-06-18");
}

TEST(ProtocolVersionHeaderTest, SupportedVersionsPassOthersAre400) {
  for (const auto& v : SupportedProtocolVersions()) {
    EXPECT_EQ(CheckProtocolVersionHeader(v), std::nullopt) << v;
  }
  auto err = CheckProtocolVersionHeader("1900-01-01");
  ASSERT_TRUE(err);
  EXPECT_EQ(*err,
            "unsupported MCP-Protocol-Version \"1900-01-01\" (supported: 2025-11-25, 2025-06-18, "
            "2025-03-26, 2024-11-05)");
  EXPECT_TRUE(CheckProtocolVersionHeader("not-a-version"));
}

}  // namespace
}  // namespace drover::mcp
