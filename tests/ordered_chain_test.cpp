#include "core/ordered_chain.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <thread>
#include <vector>

namespace tt {

// Every part's action runs once, in part order, whatever order and threads the parts finish on.
TEST(OrderedChain, RunsEachPartOnceInOrderAcrossThreads) {
  OrderedChain chain;
  for (int round = 0; round < 200; ++round) {
    const size_t n_parts = 1 + static_cast<size_t>(round % 23);
    std::vector<size_t> order(n_parts);
    for (size_t i = 0; i < n_parts; ++i) order[i] = i;
    std::shuffle(order.begin(), order.end(), std::mt19937(round));
    chain.begin(n_parts);
    std::vector<size_t> ran;  // written only under the chain
    std::atomic<size_t> next{0};
    auto worker = [&] {
      for (size_t k; (k = next.fetch_add(1)) < n_parts;) chain.part_done(order[k], [&](size_t i) { ran.push_back(i); });
    };
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t) threads.emplace_back(worker);
    for (std::thread& t : threads) t.join();
    ASSERT_TRUE(chain.all_completed()) << "round " << round << ": " << chain.completed() << " of " << n_parts;
    ASSERT_EQ(ran.size(), n_parts) << "round " << round;
    for (size_t i = 0; i < n_parts; ++i) ASSERT_EQ(ran[i], i) << "round " << round;
  }
}

// A part done ahead of the ones before it waits for them; the chain stops short until they are done.
TEST(OrderedChain, StopsAtTheFirstPartNotDone) {
  OrderedChain chain;
  chain.begin(4);
  std::vector<size_t> ran;
  auto record = [&](size_t i) { ran.push_back(i); };
  chain.part_done(2, record);
  chain.part_done(1, record);
  EXPECT_TRUE(ran.empty());
  EXPECT_EQ(chain.completed(), 0u);
  chain.part_done(0, record);
  EXPECT_EQ(ran, (std::vector<size_t>{0, 1, 2}));
  EXPECT_FALSE(chain.all_completed());
  chain.part_done(3, record);
  EXPECT_TRUE(chain.all_completed());
  EXPECT_THROW(chain.part_done(4, record), std::exception);
}

}  // namespace tt
