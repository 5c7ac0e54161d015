// Re-tunes and tuning races (issue 22, points 3 and 7): a re-tune never loses or worsens the
// stored winner, a failed one leaves the entry byte for byte, --force replaces regardless, and
// losing the race to another writer's valid entry is success.

#include <gtest/gtest.h>
#include <sys/stat.h>

#include "gpu/gpu_test_support.hpp"
#include "support/delegating_kernel.hpp"
#include "support/temp_dir.hpp"
#include "support/test_manifests.hpp"
#include "wgsl_forge/forge.hpp"
#include "wgsl_forge/manifest_json.hpp"

namespace wgsl_forge {
namespace {

namespace fs = std::filesystem;

constexpr std::int64_t kSlowDefault = 0;
constexpr std::uint32_t kSlowPasses = 24;

// affine_f32 with its knobs pinned and one more, `speed`: the default (0) runs its pass 24 times
// (the same output, far slower), 1 and 2 run it once. So a search of budget 1 (the default and
// nothing else) can never find the winner of a search that saw all three.
class SlowDefaultAffine final : public testing::DelegatingKernel {
 public:
  SlowDefaultAffine() : DelegatingKernel("affine_f32") {}
  std::string_view id() const override { return "slow_default_affine"; }
  std::uint32_t revision() const override { return 1; }
  std::string_view summary() const override { return "affine_f32 with a slow default"; }
  std::vector<kernels::KnobSpec> knobs() const override {
    std::vector<kernels::KnobSpec> pinned;
    for (kernels::KnobSpec knob : base_.knobs()) {
      knob.values = {knob.default_value};
      pinned.push_back(knob);
    }
    pinned.push_back({"speed", "0: its pass 24 times, 1 and 2: once", {0, 1, 2}, kSlowDefault});
    return pinned;
  }
  std::vector<std::string> entry_points(const Schedule& schedule) const override {
    return base_.entry_points(without_speed(schedule));
  }
  std::string generate_wgsl(const Schedule& schedule) const override {
    const std::string wgsl = base_.generate_wgsl(without_speed(schedule));
    return broken ? wgsl + "\nfn broken( {\n" : wgsl;
  }
  Result<kernels::DispatchPlan> plan(const Schedule& schedule, const kernels::Problem& problem,
                                     const kernels::DeviceCapabilities& device) const override {
    Result<kernels::DispatchPlan> plan = base_.plan(without_speed(schedule), problem, device);
    if (plan && *schedule.get("speed") == kSlowDefault) {
      const std::vector<kernels::PassPlan> once = plan->passes;
      for (std::uint32_t i = 1; i < kSlowPasses; ++i)
        plan->passes.insert(plan->passes.end(), once.begin(), once.end());
    }
    return plan;
  }

  bool broken = false;  // every schedule's WGSL fails to compile

 private:
  static Schedule without_speed(const Schedule& schedule) {
    std::map<std::string, std::int64_t> knobs = schedule.knobs();
    knobs.erase("speed");
    return Schedule(knobs);
  }
};

forge::AutoTuneOptions options_of(std::uint32_t budget, bool retune) {
  forge::AutoTuneOptions options;
  options.retune = retune;
  options.tune.budget = budget;
  options.tune.seed = testing::test_seed();
  kernels::Problem problem;
  problem.elements = 4099;
  options.tune.problem = problem;
  return options;
}

class RetuneTest : public ::testing::Test {
 protected:
  fs::path entry(const ManifestCache& cache) const {
    return cache.path_for(
        ManifestKind::kTuning,
        ManifestCache::topology_key(device_.adapter().topology_hash, kernel_.id()));
  }
  // A first search that sees the whole space: its winner is a fast schedule.
  forge::AutoTuneRow tune_all_three(const ManifestCache& cache) {
    forge::AutoTuneRow row = forge::tune_and_store(device_, cache, kernel_, options_of(3, false));
    EXPECT_EQ(row.status, forge::AutoTuneRow::Status::kTuned) << row.message;
    if (row.manifest) {
      EXPECT_NE(*row.manifest->result.winner.schedule.get("speed"), kSlowDefault);
    }
    return row;
  }

  gpu::Device& device_ = testing::shared_device();
  SlowDefaultAffine kernel_;
  testing::TempDir temp_;
};

TEST_F(RetuneTest, ARetuneKeepsTheStoredWinnerUnlessBeatenAndAFailedOneChangesNothing) {
  ManifestCache cache(temp_.path() / "cache");
  ASSERT_EQ(tune_all_three(cache).status, forge::AutoTuneRow::Status::kTuned);
  const std::string stored = testing::read_text(entry(cache));

  // A smaller budget cannot reach the winner, but the winner competes and stays.
  forge::AutoTuneRow kept = forge::tune_and_store(device_, cache, kernel_, options_of(1, true));
  EXPECT_EQ(kept.status, forge::AutoTuneRow::Status::kKept) << kept.message << kept.decision;
  EXPECT_NE(kept.decision.find("kept the stored winner"), std::string::npos) << kept.decision;
  EXPECT_NE(kept.decision.find("larger of the two MADs"), std::string::npos) << kept.decision;
  EXPECT_EQ(testing::read_text(entry(cache)), stored);

  // A re-tune whose search fails leaves the entry byte for byte.
  kernel_.broken = true;
  forge::AutoTuneRow failed = forge::tune_and_store(device_, cache, kernel_, options_of(1, true));
  kernel_.broken = false;
  EXPECT_EQ(failed.status, forge::AutoTuneRow::Status::kFailed);
  EXPECT_NE(failed.message.find("was certified"), std::string::npos) << failed.message;
  EXPECT_EQ(testing::read_text(entry(cache)), stored);

  // --force replaces it with whatever this search found (here the slow default), and says so.
  forge::AutoTuneOptions force = options_of(1, true);
  force.force = true;
  forge::AutoTuneRow forced = forge::tune_and_store(device_, cache, kernel_, force);
  EXPECT_EQ(forced.status, forge::AutoTuneRow::Status::kTuned) << forced.message;
  EXPECT_NE(forced.decision.find("without comparing, as forced"), std::string::npos)
      << forced.decision;
  auto now = cache.load_tuning_for_topology(device_.adapter().topology_hash, kernel_.id()).value();
  ASSERT_TRUE(now.has_value());
  EXPECT_EQ(now->result.winner.schedule, kernel_.default_schedule());

  // The default stored, a re-tune that sees everything replaces it and says by how much.
  forge::AutoTuneRow replaced = forge::tune_and_store(device_, cache, kernel_, options_of(3, true));
  EXPECT_EQ(replaced.status, forge::AutoTuneRow::Status::kTuned) << replaced.message;
  EXPECT_NE(replaced.decision.find("replaced the stored winner " +
                                   kernel_.default_schedule().to_string() + " (median "),
            std::string::npos)
      << replaced.decision;
  EXPECT_EQ(testing::read_text(entry(cache)), serialize_manifest(*replaced.manifest).value());
}

TEST_F(RetuneTest, LosingTheRaceToAnotherWritersValidEntryIsSuccess) {
  // The other process's entry, tuned in its own cache.
  ManifestCache elsewhere(temp_.path() / "elsewhere");
  forge::AutoTuneRow other = tune_all_three(elsewhere);
  ASSERT_TRUE(other.manifest.has_value());
  const std::string others_bytes = testing::read_text(entry(elsewhere));

  // It lands in this cache while this search runs, first where there was no entry, then during
  // a re-tune.
  ManifestCache cache(temp_.path() / "cache");
  for (bool retune : {false, true}) {
    if (retune) {
      fs::remove(entry(cache));
      ASSERT_EQ(tune_all_three(cache).status, forge::AutoTuneRow::Status::kTuned);
    }
    forge::AutoTuneOptions options = options_of(2, retune);
    bool landed = false;
    options.tune.progress = [&](const forge::TuneProgress&) {
      if (landed) return;
      landed = true;
      ASSERT_TRUE(cache
                      .replace_tuning_for_topology(device_.adapter().topology_hash, kernel_.id(),
                                                   *other.manifest, std::nullopt)
                      .ok());
    };
    forge::AutoTuneRow row = forge::tune_and_store(device_, cache, kernel_, options);
    ASSERT_TRUE(landed);
    EXPECT_EQ(row.status, forge::AutoTuneRow::Status::kTunedElsewhere)
        << (retune ? "re-tune: " : "first tune: ") << row.message << row.decision;
    EXPECT_STREQ(forge::auto_tune_status_name(row.status), "tuned by another process");
    EXPECT_EQ(row.manifest, other.manifest);
    EXPECT_EQ(testing::read_text(entry(cache)), others_bytes);
  }
}

// A damaged entry holds nothing worth keeping: auto-tune-all (no --retune) searches again and
// replaces it, whether its bytes are cut short or the name is a FIFO (issue 22, point 2). A name
// that cannot be replaced (a directory) is one clear failure and stays as it was.
TEST_F(RetuneTest, ADamagedEntryIsTunedAgainAndReplacedWithoutRetune) {
  ManifestCache cache(temp_.path() / "cache");
  ASSERT_EQ(tune_all_three(cache).status, forge::AutoTuneRow::Status::kTuned);
  const std::string stored = testing::read_text(entry(cache));

  testing::write_text(entry(cache), stored.substr(0, stored.size() / 2));
  forge::AutoTuneRow truncated =
      forge::tune_and_store(device_, cache, kernel_, options_of(1, false));
  EXPECT_EQ(truncated.status, forge::AutoTuneRow::Status::kTuned) << truncated.message;
  EXPECT_NE(truncated.decision.find("replaced the damaged entry (Cache entry " +
                                    entry(cache).string() + " is corrupt"),
            std::string::npos)
      << truncated.decision;
  EXPECT_EQ(testing::read_text(entry(cache)), serialize_manifest(*truncated.manifest).value());

  fs::remove(entry(cache));
  ASSERT_EQ(::mkfifo(entry(cache).c_str(), 0644), 0);
  forge::AutoTuneRow fifo = forge::tune_and_store(device_, cache, kernel_, options_of(1, false));
  EXPECT_EQ(fifo.status, forge::AutoTuneRow::Status::kTuned) << fifo.message;
  EXPECT_NE(fifo.decision.find("is a FIFO, not a regular file"), std::string::npos)
      << fifo.decision;
  EXPECT_TRUE(fs::is_regular_file(entry(cache)));
  EXPECT_TRUE(cache.load_tuning_for_topology(device_.adapter().topology_hash, kernel_.id())
                  .value()
                  .has_value());

  fs::remove(entry(cache));
  fs::create_directory(entry(cache));
  forge::AutoTuneRow directory =
      forge::tune_and_store(device_, cache, kernel_, options_of(1, false));
  EXPECT_EQ(directory.status, forge::AutoTuneRow::Status::kFailed);
  EXPECT_NE(directory.message.find(entry(cache).string()), std::string::npos) << directory.message;
  EXPECT_TRUE(fs::is_directory(entry(cache)));
}

}  // namespace
}  // namespace wgsl_forge
