#pragma once
// A test fixture whose random inputs come from one recorded seed (WGSL_FORGE_TEST_SEED replays
// it); trace() is the text to attach to a failure.

#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <string>

#include "support/test_manifests.hpp"

namespace wgsl_forge::testing {

class SeededTest : public ::testing::Test {
 protected:
  void SetUp() override {
    seed_ = test_seed();
    random_.seed(seed_);
    RecordProperty("seed", std::to_string(seed_));
  }
  std::string trace() const {
    return "seed " + std::to_string(seed_) + " (rerun with WGSL_FORGE_TEST_SEED)";
  }

  std::uint64_t seed_ = 0;
  std::mt19937_64 random_;
};

}  // namespace wgsl_forge::testing
