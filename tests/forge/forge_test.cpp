// The forge end to end on the real adapter: certification of hand-broken WGSL, tuning, and
// auto-tune-all twice through the command line, a damaged cache entry, and the start-up entry
// point a database calls.

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <sstream>
#include <thread>

#include "gpu/gpu_test_support.hpp"
#include "support/delegating_kernel.hpp"
#include "support/temp_dir.hpp"
#include "support/test_manifests.hpp"
#include "wgsl_forge/forge.hpp"
#include "wgsl_forge/primitives.hpp"

namespace wgsl_forge {
namespace {

namespace fs = std::filesystem;

struct CommandResult {
  int exit_code = -1;
  std::string output;  // stdout and stderr together
};

// Runs a shell command line and captures what it writes to its standard output.
CommandResult run_shell(const std::string& command) {
  FILE* pipe = ::popen(command.c_str(), "r");
  CommandResult result;
  if (pipe == nullptr) return result;
  char buffer[4096];
  while (std::size_t count = std::fread(buffer, 1, sizeof buffer, pipe))
    result.output.append(buffer, count);
  int status = ::pclose(pipe);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return result;
}

CommandResult run_cli(const std::string& arguments) {
  return run_shell(std::string(WGSL_FORGE_CLI_PATH) + " " + arguments + " 2>&1");
}

// The CLI with its standard output on /dev/full, where every write fails with ENOSPC; the result
// holds what it wrote to stderr.
CommandResult run_cli_onto_a_full_disk(const std::string& arguments) {
  return run_shell(std::string(WGSL_FORGE_CLI_PATH) + " " + arguments + " 2>&1 >/dev/full");
}

// The CLI in a child process with its stdout and stderr in `output`; the child's pid.
pid_t spawn_cli(const std::string& arguments, const fs::path& output) {
  const std::string command = "exec " + std::string(WGSL_FORGE_CLI_PATH) + " " + arguments + " > " +
                              output.string() + " 2>&1";
  pid_t child = ::fork();
  if (child == 0) {
    ::execl("/bin/sh", "sh", "-c", command.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  return child;
}

// Waits for `child` until `ready()` or its exit, for at most `limit`; kills it when it overruns,
// so that a test of a hang can never hang. The exit code, or nullopt when it was still running.
std::optional<int> wait_bounded(
    pid_t child, std::chrono::seconds limit,
    const std::function<bool()>& ready = [] { return false; }) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < deadline) {
    int status = 0;
    if (::waitpid(child, &status, WNOHANG) == child) {
      return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    }
    if (ready()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ::kill(child, SIGKILL);
  ::waitpid(child, nullptr, 0);
  return std::nullopt;
}

// The label of `kernel_id`'s size bucket nearest to n elements on the test adapter, and of its
// main bucket: the CLI's tables and the cache's keys name them.
std::string bucket_near(std::string_view kernel_id, std::uint64_t n) {
  const std::vector<kernels::SizeBucket> buckets =
      forge::size_buckets(testing::shared_device(), *kernels::find_kernel(kernel_id).value());
  kernels::Problem problem;
  problem.elements = n;
  return buckets[kernels::nearest_bucket(buckets, problem)].label;
}
std::string main_bucket_of(std::string_view kernel_id) {
  return forge::main_bucket(testing::shared_device(), *kernels::find_kernel(kernel_id).value())
      .label;
}

std::string replace_once(std::string text, const std::string& from, const std::string& to) {
  std::size_t at = text.find(from);
  EXPECT_NE(at, std::string::npos) << "the generated WGSL no longer contains '" << from << "'";
  if (at != std::string::npos) text.replace(at, from.size(), to);
  return text;
}

std::string default_affine_wgsl() {
  const kernels::KernelDefinition& affine = *kernels::find_kernel("affine_f32").value();
  return affine.generate_wgsl(affine.default_schedule());
}

// Tuning of `budget` candidates at `elements` elements, with the test's seed.
forge::TuneOptions tune_options(std::uint32_t budget, std::uint64_t elements) {
  forge::TuneOptions options;
  options.budget = budget;
  options.seed = testing::test_seed();
  kernels::Problem problem;
  problem.elements = elements;
  options.problem = problem;
  return options;
}

class ForgeCliTest : public ::testing::Test {
 protected:
  std::string cache_flag() const { return "--cache " + (temp_.path() / "cache").string(); }
  fs::path write(const std::string& name, const std::string& text) const {
    fs::path path = temp_.path() / name;
    testing::write_text(path, text);
    return path;
  }
  testing::TempDir temp_;
};

TEST_F(ForgeCliTest, CertifyAcceptsTheGeneratedSourceAndStoresEvidence) {
  fs::path source = write("affine.wgsl", default_affine_wgsl());
  CommandResult result =
      run_cli("certify affine_f32 --source " + source.string() + " " + cache_flag());
  EXPECT_EQ(result.exit_code, 0) << result.output;
  EXPECT_NE(result.output.find(": certified ("), std::string::npos) << result.output;
  CommandResult listed = run_cli("cache list " + cache_flag());
  EXPECT_NE(listed.output.find("certification  "), std::string::npos) << listed.output;
}

TEST_F(ForgeCliTest, TuneTracePrintsEveryCandidatesOutcome) {
  CommandResult tuned = run_cli("tune affine_f32 --budget 3 --trace --size 4099 --seed " +
                                std::to_string(testing::test_seed()) + " " + cache_flag());
  ASSERT_EQ(tuned.exit_code, 0) << tuned.output;
  for (int candidate = 1; candidate <= 3; ++candidate) {
    const std::string head = "trace: affine_f32 candidate " + std::to_string(candidate) + "/3 {";
    const std::size_t at = tuned.output.find(head);
    ASSERT_NE(at, std::string::npos) << tuned.output;
    const std::string line = tuned.output.substr(at, tuned.output.find('\n', at) - at);
    EXPECT_NE(line.find("}: median "), std::string::npos) << line;
    EXPECT_NE(line.find(" samples)"), std::string::npos) << line;
  }
  EXPECT_EQ(tuned.output.find("candidate 4/"), std::string::npos) << tuned.output;
  // Without the flag there is no trace.
  CommandResult quiet = run_cli("tune affine_f32 --budget 2 --size 4099 " + cache_flag());
  ASSERT_EQ(quiet.exit_code, 0) << quiet.output;
  EXPECT_EQ(quiet.output.find("trace:"), std::string::npos) << quiet.output;
}

TEST_F(ForgeCliTest, BenchTimesTunedDefaultCopyCeilingAndEachPass) {
  ASSERT_EQ(run_cli("tune affine_f32 --budget 2 --size 5000 " + cache_flag()).exit_code, 0);
  CommandResult bench =
      run_cli("bench affine_f32 scan_exclusive_u32 --size 5000 --samples 3 --passes --json " +
              cache_flag());
  ASSERT_EQ(bench.exit_code, 0) << bench.output;
  const nlohmann::json report = nlohmann::json::parse(bench.output);
  const nlohmann::json& rows = report.at("kernels");
  ASSERT_EQ(rows.size(), 2u);
  const nlohmann::json affine = rows.at(0);
  const nlohmann::json scan = rows.at(1);
  EXPECT_EQ(affine.at("kernel"), "affine_f32");
  EXPECT_TRUE(affine.contains("tuned_schedule"));
  EXPECT_GT(affine.at("tuned_median_ns").get<double>(), 0);
  EXPECT_GT(affine.at("copy_ceiling_gbps").get<double>(), 0);
  EXPECT_GT(affine.at("fraction_of_copy_ceiling").get<double>(), 0);
  EXPECT_EQ(affine.at("passes_schedule"), "tuned");
  EXPECT_EQ(affine.at("passes").size(), 1u);
  // Not tuned: the default schedule, whose plan is the chain's clear pass and the tiles (1024
  // elements each).
  EXPECT_FALSE(scan.contains("tuned_schedule"));
  EXPECT_EQ(scan.at("passes_schedule"), "default");
  const nlohmann::json& passes = scan.at("passes");
  ASSERT_EQ(passes.size(), 2u);
  EXPECT_EQ(passes.at(0).at("entry_point"), "scan_clear");
  EXPECT_EQ(passes.at(0).at("workgroups"), 1);
  EXPECT_EQ(passes.at(1).at("entry_point"), "scan_tiles");
  EXPECT_EQ(passes.at(1).at("workgroups"), 5);
  for (const nlohmann::json& pass : passes) EXPECT_GE(pass.at("median_ns").get<double>(), 0);
  EXPECT_GT(passes.at(1).at("cumulative_median_ns").get<double>(), 0);

  CommandResult plain = run_cli("bench affine_f32 --size 5000 --samples 3 --json " + cache_flag());
  ASSERT_EQ(plain.exit_code, 0) << plain.output;
  EXPECT_FALSE(nlohmann::json::parse(plain.output).at("kernels").at(0).contains("passes"));

  // The table's columns are as wide as their cells: every row ends its "of copy" cell (right
  // aligned, "NN%") where the header ends that column; rates carry their units.
  CommandResult text =
      run_cli("bench affine_f32 radix_sort_u32 --size 5000 --samples 3 " + cache_flag());
  ASSERT_EQ(text.exit_code, 0) << text.output;
  std::vector<std::string> lines;
  std::istringstream in(text.output);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  auto header = std::find_if(lines.begin(), lines.end(),
                             [](const std::string& line) { return line.starts_with("kernel "); });
  ASSERT_NE(header, lines.end()) << text.output;
  const std::size_t of_copy_end = header->find("of copy") + std::string("of copy").size();
  for (const char* kernel : {"affine_f32 ", "radix_sort_u32 "}) {
    auto row = std::find_if(lines.begin(), lines.end(),
                            [&](const std::string& line) { return line.starts_with(kernel); });
    ASSERT_NE(row, lines.end()) << text.output;
    EXPECT_EQ(row->at(of_copy_end - 1), '%') << *row << "\n" << *header;
  }
  EXPECT_NE(text.output.find(" GB/s"), std::string::npos) << text.output;
  EXPECT_NE(text.output.find(" G keys/s"), std::string::npos) << text.output;

  // --bins sets histogram_u32's bin count (the problem says so) and is range-checked.
  CommandResult bins = run_cli(
      "bench histogram_u32 affine_f32 --size 5000 --bins 4096 --samples 3 --json " + cache_flag());
  ASSERT_EQ(bins.exit_code, 0) << bins.output;
  const nlohmann::json bins_rows = nlohmann::json::parse(bins.output).at("kernels");
  EXPECT_EQ(bins_rows.at(0).at("problem"), "n=5000 bins=4096");
  EXPECT_EQ(bins_rows.at(1).at("problem"), "n=5000");
  EXPECT_EQ(run_cli("bench histogram_u32 --bins 4097 " + cache_flag()).exit_code, 2);

  // --schedule times the given knobs in place of the tuned schedule, for one kernel only.
  CommandResult given =
      run_cli("bench affine_f32 --size 5000 --samples 3 --json --schedule items_per_invocation=4 " +
              cache_flag());
  ASSERT_EQ(given.exit_code, 0) << given.output;
  const nlohmann::json given_row = nlohmann::json::parse(given.output).at("kernels").at(0);
  EXPECT_EQ(given_row.at("tuned_source"), "given");
  EXPECT_EQ(given_row.at("tuned_schedule").at("items_per_invocation"), 4);
  EXPECT_EQ(given_row.at("default_schedule").at("workgroup_size"), 256);
  EXPECT_EQ(affine.at("tuned_source"), "cache");
  // --source times the user's WGSL with the given schedule's plan.
  CommandResult sourced = run_cli(
      "bench affine_f32 --size 5000 --samples 3 --json --schedule workgroup_size=256 --source " +
      write("affine.wgsl", default_affine_wgsl()).string() + " " + cache_flag());
  ASSERT_EQ(sourced.exit_code, 0) << sourced.output;
  EXPECT_EQ(nlohmann::json::parse(sourced.output).at("kernels").at(0).at("tuned_source"),
            "given source");
  for (const std::string bad : {"bench affine_f32 gemm_f32 --schedule workgroup_size=64",
                                "bench affine_f32 --schedule tile_k=8",
                                "bench affine_f32 --schedule workgroup_size=4096"}) {
    CommandResult refused = run_cli(bad + " " + cache_flag());
    EXPECT_EQ(refused.exit_code, 2) << bad << ": " << refused.output;
    EXPECT_EQ(refused.output.rfind("wgsl-forge: error: ", 0), 0u) << refused.output;
  }
}

// --no-bounds-checks opens the device without Dawn's clamps; the toggle is part of the adapter's
// key, so what is tuned that way is found only by commands run the same way.
TEST_F(ForgeCliTest, KernelsTunedWithoutBoundsChecksAreCachedApart) {
  CommandResult adapter = run_cli("--no-bounds-checks adapters --json " + cache_flag());
  ASSERT_EQ(adapter.exit_code, 0) << adapter.output;
  const nlohmann::json unchecked = nlohmann::json::parse(adapter.output);
  const nlohmann::json toggles = unchecked.at("toggles");
  EXPECT_NE(std::find(toggles.begin(), toggles.end(), "enabled:disable_robustness"), toggles.end())
      << adapter.output;
  CommandResult checked = run_cli("adapters --json " + cache_flag());
  ASSERT_EQ(checked.exit_code, 0) << checked.output;
  EXPECT_NE(nlohmann::json::parse(checked.output).at("topology_hash"),
            unchecked.at("topology_hash"));

  ASSERT_EQ(run_cli("tune affine_f32 --budget 1 --size 5000 --no-bounds-checks " + cache_flag())
                .exit_code,
            0);
  auto tuned_in = [&](const std::string& flags) {
    CommandResult bench =
        run_cli("bench affine_f32 --size 5000 --samples 3 --json " + flags + cache_flag());
    EXPECT_EQ(bench.exit_code, 0) << bench.output;
    return nlohmann::json::parse(bench.output).at("kernels").at(0).contains("tuned_schedule");
  };
  EXPECT_TRUE(tuned_in("--no-bounds-checks "));
  EXPECT_FALSE(tuned_in(""));
}

TEST_F(ForgeCliTest, HandBrokenSourcesAreRejectedWithTheirFirstMismatch) {
  // An off-by-one bound (the last vector is never written) and a wrong constant.
  const std::string off_by_one = replace_once(default_affine_wgsl(), "if (i < params.vectors)",
                                              "if (i + 1u < params.vectors)");
  const std::string wrong_constant = replace_once(
      default_affine_wgsl(), "params.a * x[i] + params.b", "params.a * x[i] + params.b + 0.5");
  for (const std::string& broken : {off_by_one, wrong_constant}) {
    fs::path source = write("broken.wgsl", broken);
    CommandResult result =
        run_cli("certify affine_f32 --seed 7 --source " + source.string() + " " + cache_flag());
    EXPECT_EQ(result.exit_code, 1) << result.output;
    EXPECT_NE(result.output.find(": rejected ("), std::string::npos) << result.output;
    EXPECT_NE(result.output.find("first mismatch: case 'n="), std::string::npos) << result.output;
    EXPECT_NE(result.output.find(", expected "), std::string::npos) << result.output;
  }
}

// A write one element past the output (issue 29's affine mutant), which the padding of y hid:
// the guard after y sees it, and the rejection names the kernel, the buffer, the offset and the
// bytes found.
TEST_F(ForgeCliTest, AWritePastTheOutputIsRejectedWithTheGuardsBytes) {
  fs::path source = write(
      "stray.wgsl",
      replace_once(default_affine_wgsl(), "if (i < params.vectors)", "if (i <= params.vectors)"));
  CommandResult result =
      run_cli("certify affine_f32 --seed " + std::to_string(testing::test_seed()) + " --source " +
              source.string() + " " + cache_flag());
  EXPECT_EQ(result.exit_code, 1) << result.output;
  EXPECT_NE(result.output.find(": rejected ("), std::string::npos) << result.output;
  for (const char* expected :
       {"first mismatch: case 'n=", "affine_f32 writes past the end of output y (",
        " bytes): its guard holds ", " changed bytes, the first at byte offset ", ": found ",
        ", poison "}) {
    EXPECT_NE(result.output.find(expected), std::string::npos) << expected << "\n" << result.output;
  }
}

// Issue 29's mutants, each accepted by certification while padding hid it, applied to the
// generated WGSL of the default schedule and certified as a user's source: writes one past an
// output or a scratch buffer (the guard after it changes), reads one past an input (the poison
// after it changes the result), a second pass of reduce_sum_f32 that skips partial sums, and a
// radix sort's counts spine that drops its carry from step to step. The quick cases (what screens
// a tuning candidate) catch all but the first second-pass one, whose case (257 partial sums:
// 65537 elements) only the full certification has; on a smaller schedule (64 invocations of 2
// items: 8193 elements) the quick cases have it too.
TEST(CertifyTest, SourcesThatStrayPastTheirBuffersOrSkipASecondLevelAreRejected) {
  struct Mutant {
    std::string kernel;
    std::string schedule;
    std::string from;
    std::string to;
    std::string expected;  // in the first failure
    bool quick = true;
  };
  const std::vector<Mutant> mutants = {
      {"affine_f32", "", "if (i < params.vectors)", "if (i <= params.vectors)",
       "affine_f32 writes past the end of output y"},
      {"gather_f32", "", "if (i < params.n)", "if (i <= params.n)",
       "gather_f32 writes past the end of output y"},
      {"histogram_u32", "", "if (b < params.bins) { atomicStore",
       "if (b <= params.bins) { atomicStore", "histogram_u32 writes past the end of output counts"},
      {"radix_sort_u32", "", "if (t < tiles) {\n      counts", "if (t <= tiles) {\n      counts",
       "radix_sort_u32 writes past the end of scratch counts"},
      {"reduce_sum_f32", "", "if (i < vectors)", "if (i <= vectors)", ", expected "},
      {"reduce_max_f32", "", "if (i < vectors)", "if (i <= vectors)", ", expected "},
      {"reduce_sum_u32", "", "if (i < vectors)", "if (i <= vectors)", ", expected "},
      {"gather_f32", "", "if (j < params.source_length)", "if (j <= params.source_length)",
       ", expected 0 ("},
      {"reduce_sum_f32", "", "i += WG) { acc += partials[i]; }",
       "i += 257u) { acc += partials[i]; }", "case 'second-pass n=65537 heavy-last'", false},
      {"reduce_sum_f32", "workgroup_size=64,items_per_invocation=2",
       "i += WG) { acc += partials[i]; }", "i += WG + 1u) { acc += partials[i]; }",
       "case 'second-pass n=8193 heavy-last'"},
      // The counts' spine without the carry between its steps: only the case that narrows the
      // scan to 5 counts a step runs more than one (the schedule's full width would need
      // 8388609 keys), with 4 tiles of the default schedule, or 2 of a wider one.
      {"radix_sort_u32", "", "    carry += scanned.y;\n", "",
       "case 'counts-spine n=2047 width=5 uniform'"},
      {"radix_sort_pairs_u32", "digit_bits=8,keys_per_invocation=16,use_subgroups=1",
       "    carry += scanned.y;\n", "", "case 'counts-spine n=4095 width=5 uniform'"},
  };
  gpu::Device& device = testing::shared_device();
  const std::uint64_t seed = testing::test_seed();
  SCOPED_TRACE("seed " + std::to_string(seed) + " (rerun with WGSL_FORGE_TEST_SEED)");
  for (const Mutant& mutant : mutants) {
    SCOPED_TRACE(mutant.kernel + ": " + mutant.to);
    const kernels::KernelDefinition& kernel = *kernels::find_kernel(mutant.kernel).value();
    const Schedule schedule = kernels::parse_schedule_overrides(kernel, mutant.schedule).value();
    const std::string generated_source = kernel.generate_wgsl(schedule);
    forge::CertifyOptions options;
    options.quick = mutant.quick;
    options.seed = seed;
    options.source = replace_once(generated_source, mutant.from, mutant.to);
    ASSERT_NE(*options.source, generated_source) << "the mutation did not apply";
    Result<CertificationManifest> manifest = forge::certify(device, kernel, schedule, options);
    ASSERT_TRUE(manifest.ok()) << manifest.error().to_string();
    EXPECT_EQ(manifest->verdict, Verdict::kRejected);
    const std::string failure = forge::first_failure(*manifest);
    EXPECT_NE(failure.find(mutant.expected), std::string::npos) << failure;
    // The generated source passes the same cases: only the mutation is rejected. (The default
    // schedule's full certification is KernelOnAdapterTest's.)
    if (!mutant.quick) continue;
    options.source.reset();
    Result<CertificationManifest> generated = forge::certify(device, kernel, schedule, options);
    ASSERT_TRUE(generated.ok()) << generated.error().to_string();
    EXPECT_EQ(generated->verdict, Verdict::kCertified) << forge::first_failure(*generated);
  }
}

// Each run of a certification case starts from the same bytes, though the case is bound and its
// inputs loaded once: a kernel that reads its output (here it flips a bit of the poison it
// finds) gives the same result in both runs, which the oracle rejects, but no run differs.
TEST(CertifyTest, EveryRunOfACaseStartsFromFreshPoison) {
  gpu::Device& device = testing::shared_device();
  const kernels::KernelDefinition& affine = *kernels::find_kernel("affine_f32").value();
  const Schedule schedule = affine.default_schedule();
  const std::string generated = affine.generate_wgsl(schedule);
  forge::CertifyOptions options;
  options.quick = true;
  options.seed = testing::test_seed();
  options.runs_per_case = 2;
  options.source = replace_once(generated, "y[i] = params.a * x[i] + params.b;",
                                "y[i] = bitcast<f32>(bitcast<u32>(y[i]) ^ 1u);");
  ASSERT_NE(*options.source, generated) << "the mutation did not apply";
  Result<CertificationManifest> manifest = forge::certify(device, affine, schedule, options);
  ASSERT_TRUE(manifest.ok()) << manifest.error().to_string();
  EXPECT_EQ(manifest->verdict, Verdict::kRejected);
  std::size_t mismatched = 0;
  for (const CertificationCase& one : manifest->cases) {
    SCOPED_TRACE(one.name + " seed " + std::to_string(one.seed));
    EXPECT_EQ(one.runs, 2u);
    if (one.element_count > 0) mismatched += one.report.mismatch_count > 0;
    for (const std::string& check : one.failed_checks) {
      EXPECT_EQ(check.find("not reproducible"), std::string::npos) << check;
    }
  }
  EXPECT_GT(mismatched, 0u);
}

// A later run of a bound case is compared with the first where its outputs are mapped, not
// copied out: the same outputs give nothing, a difference one violation naming the run, the
// output, the byte and the element.
TEST(CertifyTest, ALaterRunThatDiffersFromTheFirstIsOneViolationNamingTheByte) {
  gpu::Device& device = testing::shared_device();
  const std::uint64_t seed = testing::test_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  const kernels::KernelDefinition& affine = *kernels::find_kernel("affine_f32").value();
  const GeneratedKernel generated =
      kernels::generate_builtin(affine, affine.default_schedule(), TargetBackend::kWgsl,
                                forge::capabilities_of(device.adapter()))
          .value();
  forge::PreparedKernel prepared =
      forge::PreparedKernel::prepare(device, affine, generated).value();
  kernels::Problem problem;
  problem.elements = 1000;
  const kernels::CaseInputs inputs =
      affine.make_inputs({"n=1000 uniform", problem, "uniform"}, seed);
  std::unique_ptr<forge::GuardedCase> bound =
      prepared.bind_guarded(inputs, forge::CaseGuards{seed, 0}).value();
  const forge::GuardedOutputs first = bound->run().value();
  EXPECT_TRUE(first.violations.empty());
  ASSERT_EQ(first.outputs.count("y"), 1u);
  const forge::GuardedOutputs same = bound->run(&first.outputs).value();
  EXPECT_TRUE(same.violations.empty()) << same.violations.front();
  EXPECT_TRUE(same.outputs.empty());
  forge::BufferContents changed = first.outputs;
  changed.at("y").at(4 * 37 + 2) ^= std::byte{1};
  const forge::GuardedOutputs differs = bound->run(&changed).value();
  ASSERT_EQ(differs.violations.size(), 1u);
  EXPECT_EQ(differs.violations.front(),
            "run 3 of the same inputs differs from run 1 in output y at byte offset 150 (element "
            "37): the kernel's result is not reproducible");
}

// The inputs auto_tune_all draws ahead, on their own thread and one after another, are those a
// tune draws itself from the same seed, and only the kernel and problem they were drawn for take
// them, once.
TEST(TuneTest, TimingInputsDrawnAheadAreThoseDrawnInPlace) {
  const std::uint64_t seed = testing::test_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  const kernels::KernelDefinition& gather = *kernels::find_kernel("gather_f32").value();
  const kernels::KernelDefinition& scan = *kernels::find_kernel("scan_exclusive_u32").value();
  kernels::Problem problem;
  problem.elements = 50001;
  kernels::Problem other = problem;
  other.elements = 50002;
  std::shared_ptr<forge::TimingInputs> first =
      forge::TimingInputs::draw_ahead(gather, problem, seed);
  std::shared_ptr<forge::TimingInputs> second =
      forge::TimingInputs::draw_ahead(scan, other, seed + 1, first.get());
  EXPECT_FALSE(second->fits(gather, other));
  EXPECT_FALSE(second->fits(scan, problem));
  ASSERT_TRUE(second->fits(scan, other));
  ASSERT_TRUE(first->fits(gather, problem));
  const kernels::CaseInputs drawn_second = second->take();
  const kernels::CaseInputs drawn_first = first->take();
  EXPECT_FALSE(first->fits(gather, problem)) << "taken already";
  const kernels::CaseInputs in_place = forge::TimingInputs::draw(gather, problem, seed);
  ASSERT_FALSE(in_place.buffers.empty());
  EXPECT_EQ(drawn_first.buffers, in_place.buffers);
  EXPECT_EQ(drawn_second.buffers, forge::TimingInputs::draw(scan, other, seed + 1).buffers);
  EXPECT_NE(drawn_first.buffers, forge::TimingInputs::draw(gather, problem, seed + 1).buffers);
}

// Where a path no user can write to (root ignores file modes) is needed: sysfs refuses new files.
fs::path unwritable_directory(const fs::path& scratch) {
  if (::geteuid() == 0) return "/sys";
  fs::path directory = scratch / "read-only";
  fs::create_directories(directory);
  fs::permissions(directory, fs::perms::owner_read | fs::perms::owner_exec);
  return directory;
}

TEST_F(ForgeCliTest, BadInputEverywhereIsOneClearLineAndExitCode2Or3) {
  struct Case {
    std::string arguments;
    int exit_code;
    std::string message;
  };
  const fs::path not_a_directory = write("cache-file", "I am a file");
  const std::vector<Case> cases = {
      {"certify affine_f32 --source " + (temp_.path() / "missing.wgsl").string(), 2,
       "does not exist"},
      {"certify affine_f32 --source " + write("empty.wgsl", "  \n").string(), 2, "is empty"},
      {"certify affine_f32 --source " + write("binary.wgsl", std::string("fn\0main", 7)).string(),
       2, "is not WGSL text"},
      {"certify affine_f32 --source " + write("invalid.wgsl", "fn main( {\n").string(), 2,
       "does not compile"},
      {"bench affine_f32 --json --schedule workgroup_size=256 --source " +
           write("invalid-bench.wgsl", "fn main( {\n").string(),
       2, "does not compile"},
      {"bench affine_f32 --source " + write("unplanned.wgsl", "fn main() {}\n").string(), 2,
       "--source needs --schedule"},
      {"certify affine_f32 --schedule workgroup_size=3", 2,
       "Knob workgroup_size (3) is not one of"},
      {"certify affine_f32 --schedule no_such_knob=1", 2, "Unknown knob 'no_such_knob'"},
      {"certify affine_f32 --schedule workgroup_size", 2, "is not knob=value"},
      {"certify affine_f32 --schedule workgroup_size=big", 2, "workgroup_size"},
      {"certify no_such_kernel", 2, "Unknown kernel 'no_such_kernel'"},
      {"certify afine_f32", 2, "Unknown kernel 'afine_f32'; did you mean 'affine_f32'?"},
      {"tunee affine_f32", 2, "did you mean 'tune'?"},
      {"cache lst", 2, "did you mean 'list'?"},
      {"tune no_such_kernel", 2, "Unknown kernel 'no_such_kernel'"},
      {"generate no_such_kernel", 2, "Unknown kernel 'no_such_kernel'"},
      {"tune affine_f32 --budget 0", 2, "--budget"},
      {"cache show 1234", 2, "is not exactly 64 hexadecimal characters"},
      {"cache prune --older-than -1", 2, "--older-than (-1) must be from 0 to 9223372036 seconds"},
      {"cache prune --older-than 9300000000", 2,
       "--older-than (9300000000) must be from 0 to 9223372036 seconds"},
      {"--webgpu-lib " + (temp_.path() / "libmissing.so").string() + " certify affine_f32", 2,
       "libmissing.so (from --webgpu-lib) does not exist"},
      {"--webgpu-lib " + write("libnot.so", "not a library").string() + " adapters", 3,
       "libnot.so"},
      {"--backend metal adapters", 2, "Unknown backend 'metal'"},
      // Sizes are checked before anything is allocated, never truncated (issue 22, point 5).
      {"tune reduce_sum_f32 --size -1", 2, "--size"},
      {"tune reduce_sum_f32 --size 1099511627776", 2,
       "Problem size n (1099511627776) exceeds the largest that reduce_sum_f32 indexes"},
      {"bench reduce_sum_f32 --size 4294967295", 2,
       "(17179869184 bytes) exceeds the adapter's max"},
      {"tune gemm_f32 --size 65536", 2,
       "Matrix A (m * k) of gemm_f32 has 4294967296 elements, more than its u32 indices reach"},
      {"tune gemm_f32 --size 4294967296", 2,
       "--size (4294967296) exceeds the largest m = n = k of gemm_f32 (4294967295"},
      {"tune gemm_f32 --size 40000", 2, "exceeds the adapter's max"},
      {"--timeout 0 adapters", 2, "--timeout"},
  };
  const std::vector<Case> cache_cases = {
      {"--cache " + not_a_directory.string() + " certify affine_f32", 3,
       "Cannot use " + not_a_directory.string() + " as the cache directory (Not a directory)"},
      {"--cache " + (not_a_directory / "sub").string() + " tune affine_f32 --budget 1", 3,
       "as the cache directory (Not a directory)"},
      {"--cache " + not_a_directory.string() + " cache verify", 3, "Cannot list cache directory"},
      {"--cache " + unwritable_directory(temp_.path()).string() + " auto-tune-all", 3,
       "Cannot write in the cache directory"},
  };
  auto check = [](const Case& one, const CommandResult& result) {
    EXPECT_EQ(result.exit_code, one.exit_code) << one.arguments << "\n" << result.output;
    EXPECT_NE(result.output.find(one.message), std::string::npos) << one.arguments << "\n"
                                                                  << result.output;
    EXPECT_EQ(std::count(result.output.begin(), result.output.end(), '\n'), 1)
        << one.arguments << ": not one line\n"
        << result.output;
    EXPECT_TRUE(result.output.starts_with("wgsl-forge: error: ")) << result.output;
  };
  for (const Case& one : cases) check(one, run_cli(one.arguments + " " + cache_flag()));
  for (const Case& one : cache_cases) check(one, run_cli(one.arguments));
  // The compile error of a user's WGSL points at the line and column.
  CommandResult invalid =
      run_cli("certify affine_f32 --source " +
              write("invalid.wgsl", "fn main() {\n  let x = ;\n}\n").string() + " " + cache_flag());
  EXPECT_NE(invalid.output.find("affine_f32.affine:2:11: error:"), std::string::npos)
      << invalid.output;
}

TEST(TuneTest, StoresAManifestWhoseWinnerIsCertified) {
  gpu::Device& device = testing::shared_device();
  testing::TempDir temp;
  ManifestCache cache(temp.path());
  const kernels::KernelDefinition& gather = *kernels::find_kernel("gather_f32").value();
  forge::TuneOptions options = tune_options(3, 50000);
  Result<forge::TuneOutcome> outcome = forge::tune(device, gather, options);
  ASSERT_TRUE(outcome.ok()) << outcome.error().to_string();
  const TuningManifest& manifest = outcome->manifest;
  EXPECT_EQ(manifest.result.evaluated_candidates(), 3u);
  EXPECT_GT(manifest.result.winner.oracle.compared, 0u);
  EXPECT_EQ(manifest.result.winner.oracle.mismatch_count, 0u);
  EXPECT_EQ(outcome->certification.verdict, Verdict::kCertified);
  EXPECT_EQ(outcome->certification.schedule, manifest.result.winner.schedule);
  EXPECT_EQ(manifest.context.problem_size, 50000u);
  EXPECT_EQ(manifest.context.topology_hash, device.adapter().topology_hash);
  ASSERT_TRUE(manifest.context.baseline.has_value());
  EXPECT_EQ(manifest.context.baseline->schedule, gather.default_schedule());
  EXPECT_EQ(manifest.result.winner.timing.source, TimingSource::kGpuTimestamp);
  // Each phase is the tune's own time (what the worker threads do meanwhile counts only while the
  // tune waits for it), so the phases never add up to more than the tune's wall time.
  const forge::TimeBreakdown& time = outcome->breakdown;
  for (double phase : {time.inputs, time.oracle, time.compile, time.gpu_runs, time.upload,
                       time.bind, time.warmup, time.timing, time.bookkeeping})
    EXPECT_GE(phase, 0.0);
  EXPECT_GT(time.gpu_runs, 0.0);
  EXPECT_GT(time.timing, 0.0);
  EXPECT_GE(time.unattributed(), 0.0) << "phases add up to more than the total " << time.total;
  ASSERT_TRUE(cache.store_certification(outcome->certification).ok());
  ASSERT_TRUE(
      cache.store_tuning_for_topology(device.adapter().topology_hash, "gather_f32", manifest).ok());
  EXPECT_EQ(cache.load_tuning_for_topology(device.adapter().topology_hash, "gather_f32").value(),
            std::optional(manifest));
}

// The finals' rounds compare finalists; a lone one (a budget of one) keeps its first timing.
TEST(TuneTest, ALoneFinalistKeepsItsFirstTiming) {
  gpu::Device& device = testing::shared_device();
  const kernels::KernelDefinition& affine = *kernels::find_kernel("affine_f32").value();
  forge::TuneOptions options = tune_options(1, 4099);
  std::optional<TimingSummary> first;
  options.progress = [&first](const forge::TuneProgress& step) {
    if (step.stage == "timed") first = step.timing;
  };
  Result<forge::TuneOutcome> outcome = forge::tune(device, affine, options);
  ASSERT_TRUE(outcome.ok()) << outcome.error().to_string();
  ASSERT_TRUE(first.has_value());
  const CandidateResult& winner = outcome->manifest.result.winner;
  EXPECT_EQ(winner.schedule, affine.default_schedule());
  EXPECT_EQ(winner.timing.sample_count, first->sample_count) << "re-timed alone";
  EXPECT_EQ(winner.timing.median_ns, first->median_ns);
}

// A small budget starts from the kernel's starting points: the default first, then each one that
// fits the adapter, before the random sample (the order in which they are certified).
TEST(TuneTest, TimesTheStartingPointsRightAfterTheDefault) {
  gpu::Device& device = testing::shared_device();
  const kernels::KernelDefinition& affine = *kernels::find_kernel("affine_f32").value();
  ASSERT_EQ(affine.starting_points().size(), 1u);
  const Schedule start =
      kernels::parse_schedule_overrides(affine, affine.starting_points().front()).value();
  const std::vector<Schedule> space =
      affine.schedule_space(forge::capabilities_of(device.adapter()));
  ASSERT_NE(std::find(space.begin(), space.end(), start), space.end()) << start.to_string();
  forge::TuneOptions options = tune_options(3, 4099);
  std::vector<Schedule> tried;
  options.progress = [&tried](const forge::TuneProgress& step) {
    if (step.stage == "certifying") tried.push_back(*step.schedule);
  };
  Result<forge::TuneOutcome> outcome = forge::tune(device, affine, options);
  ASSERT_TRUE(outcome.ok()) << outcome.error().to_string();
  ASSERT_EQ(tried.size(), 3u);
  EXPECT_EQ(tried[0], affine.default_schedule());
  EXPECT_EQ(tried[1], start) << "seed " << options.seed;
  EXPECT_NE(tried[2], tried[0]);
  EXPECT_NE(tried[2], tried[1]);
}

// The starting points come in the order the kernel gives for the problem tuned at
// (starting_points_for): affine here, whose order flips above 5000 elements.
class ProblemOrderedAffine final : public testing::DelegatingKernel {
 public:
  ProblemOrderedAffine() : DelegatingKernel("affine_f32") {}
  std::string_view id() const override { return "problem_ordered_affine"; }
  std::uint32_t revision() const override { return 1; }
  std::string_view summary() const override { return "affine_f32, starting points by size"; }
  std::vector<std::string> starting_points() const override {
    return {"workgroup_size=64", "workgroup_size=128"};
  }
  std::vector<std::string> starting_points_for(const kernels::Problem& problem) const override {
    std::vector<std::string> points = starting_points();
    if (problem.elements > 5000) std::reverse(points.begin(), points.end());
    return points;
  }
};

TEST(TuneTest, TimesTheStartingPointsInTheOrderForItsProblem) {
  gpu::Device& device = testing::shared_device();
  const ProblemOrderedAffine kernel;
  for (const auto& [elements, first] : std::vector<std::pair<std::uint64_t, std::string>>{
           {4099, "workgroup_size=64"}, {9001, "workgroup_size=128"}}) {
    forge::TuneOptions options = tune_options(2, elements);
    std::vector<Schedule> tried;
    options.progress = [&tried](const forge::TuneProgress& step) {
      if (step.stage == "certifying") tried.push_back(*step.schedule);
    };
    Result<forge::TuneOutcome> outcome = forge::tune(device, kernel, options);
    ASSERT_TRUE(outcome.ok()) << outcome.error().to_string();
    ASSERT_EQ(tried.size(), 2u) << elements;
    EXPECT_EQ(tried[0], kernel.default_schedule());
    EXPECT_EQ(tried[1], kernels::parse_schedule_overrides(kernel, first).value())
        << elements << " elements, seed " << options.seed;
  }
}

// Sixteen tuners of one kernel started together into one cache (two databases starting on one
// machine, many times over): one stores its result, the others find it or lose the race with a
// collision error; nothing is half-written and `cache verify` is clean.
TEST_F(ForgeCliTest, EveryCommandWhoseOutputCannotBeWrittenExits3WithOneLine) {
  ASSERT_EQ(run_cli("tune affine_f32 --budget 1 --size 5000 " + cache_flag()).exit_code, 0);
  const std::string key =
      nlohmann::json::parse(run_cli("cache list --json " + cache_flag()).output)[0]["key"];
  for (const std::string& arguments : std::vector<std::string>{
           "generate affine_f32", "generate affine_f32 --offline", "kernels",
           "info " + cache_flag(),
           "auto-tune-all affine_f32 --sizes " + bucket_near("affine_f32", 5000) + " " +
               cache_flag(),
           "cache list --json " + cache_flag(), "cache show " + key + " " + cache_flag(),
           "cache verify " + cache_flag(), "cache prune " + cache_flag(), "adapters --json",
           "--help"}) {
    CommandResult result = run_cli_onto_a_full_disk(arguments);
    EXPECT_EQ(result.exit_code, 3) << arguments << ": " << result.output;
    EXPECT_EQ(result.output,
              "wgsl-forge: error: Cannot write the output (No space left on device).\n")
        << arguments;
  }
}

// Tests run as root, where permission bits stop no write, so the cache is made read-only the way
// a read-only medium is: a read-only bind mount in a private mount namespace (unshare -rm). Each
// run first proves that writing there fails (touch: "Read-only file system").
TEST_F(ForgeCliTest, CommandsThatOnlyReadServeAReadOnlyCache) {
  if (std::system("unshare -rm true 2>/dev/null") != 0) {
    GTEST_SKIP() << "unshare -rm is not permitted here: no read-only mount to test with";
  }
  ASSERT_EQ(run_cli("auto-tune-all affine_f32 --budget 1 --sizes main " + cache_flag()).exit_code,
            0);
  const std::string cache = (temp_.path() / "cache").string();
  auto on_read_only_cache = [&](const std::string& arguments) {
    return run_shell("unshare -rm sh -c 'mount --bind " + cache + " " + cache +
                     " && mount -o remount,bind,ro " + cache + " && { touch " + cache +
                     "/probe || true; } && exec " + WGSL_FORGE_CLI_PATH + " " + arguments +
                     " --cache " + cache + "' 2>&1");
  };
  for (const std::string arguments : {"auto-tune-all affine_f32 --sizes main", "cache verify"}) {
    CommandResult result = on_read_only_cache(arguments);
    EXPECT_NE(result.output.find("Read-only file system"), std::string::npos) << result.output;
    EXPECT_EQ(result.exit_code, 0) << arguments << "\n" << result.output;
  }
  EXPECT_NE(on_read_only_cache("auto-tune-all affine_f32 --sizes main")
                .output.find("affine_f32  " + main_bucket_of("affine_f32") + "  cached"),
            std::string::npos);
  // A kernel that would be tuned still fails before any GPU work, naming the directory.
  CommandResult untuned = on_read_only_cache("auto-tune-all gather_f32 --budget 1 --sizes main");
  EXPECT_EQ(untuned.exit_code, 3) << untuned.output;
  EXPECT_NE(untuned.output.find("Cannot write in the cache directory " + cache), std::string::npos)
      << untuned.output;
}

// The host-memory check of --size (issue 22, point 5), on a host that says it has 64 MiB
// available: the CLI runs in a private mount namespace where /proc/meminfo is a bind-mounted copy
// with MemAvailable replaced. A size that fits that is allowed; one that does not is exit 2.
TEST_F(ForgeCliTest, ASizeBeyondTheHostsAvailableMemoryIsRefusedBeforeAllocation) {
  if (std::system("unshare -rm true 2>/dev/null") != 0) {
    GTEST_SKIP() << "unshare -rm is not permitted here: no private /proc/meminfo to test with";
  }
  std::istringstream real(testing::read_text("/proc/meminfo"));
  std::string meminfo;
  for (std::string line; std::getline(real, line);) {
    meminfo += (line.starts_with("MemAvailable:") ? "MemAvailable:      65536 kB" : line) + "\n";
  }
  const fs::path fake = write("meminfo", meminfo);
  auto on_small_host = [&](const std::string& arguments) {
    return run_shell("unshare -rm sh -c 'mount --bind " + fake.string() +
                     " /proc/meminfo && exec " + WGSL_FORGE_CLI_PATH + " " + arguments + " " +
                     cache_flag() + "' 2>&1");
  };
  // 2^24 floats in and out: 128 MiB of buffers, twice that on a CPU adapter.
  CommandResult refused = on_small_host("bench affine_f32 --size 16777216 --samples 1");
  EXPECT_EQ(refused.exit_code, 2) << refused.output;
  EXPECT_NE(refused.output.find("more than the host has available (67108864 bytes, MemAvailable)"),
            std::string::npos)
      << refused.output;
  CommandResult allowed = on_small_host("bench affine_f32 --size 65536 --samples 1");
  EXPECT_EQ(allowed.exit_code, 0) << allowed.output;
}

// A re-tune killed in the middle of its search leaves the stored entry byte for byte (the old
// `tune` deleted it before searching); --force replaces it and says so (issue 22, point 3).
TEST_F(ForgeCliTest, AKilledRetuneLeavesTheStoredEntryByteForByte) {
  ASSERT_EQ(run_cli("tune affine_f32 --budget 1 --size 4099 " + cache_flag()).exit_code, 0);
  gpu::Device& device = testing::shared_device();
  // --size 4099 tunes the bucket nearest to it, at 4099.
  const std::string bucket = bucket_near("affine_f32", 4099);
  ASSERT_NE(bucket, main_bucket_of("affine_f32"));
  const fs::path entry =
      temp_.path() / "cache" /
      ("tuning-" + ManifestCache::bucket_key(device.adapter().topology_hash, "affine_f32", bucket) +
       ".json");
  const std::string stored = testing::read_text(entry);
  const fs::path output = temp_.path() / "retune.out";
  pid_t child =
      spawn_cli("tune affine_f32 --budget 12 --size 4099 --trace " + cache_flag(), output);
  // Killed once its search is under way: the first candidate's outcome is printed.
  std::optional<int> ended = wait_bounded(child, std::chrono::seconds(120), [&] {
    return fs::exists(output) && testing::read_text(output).find("trace: ") != std::string::npos;
  });
  ASSERT_FALSE(ended.has_value()) << "the re-tune ended before it could be killed: "
                                  << testing::read_text(output);
  EXPECT_EQ(testing::read_text(entry), stored);

  CommandResult forced = run_cli("tune affine_f32 --budget 1 --size 4099 --force " + cache_flag());
  EXPECT_EQ(forced.exit_code, 0) << forced.output;
  EXPECT_NE(forced.output.find("affine_f32 " + bucket + ": replaced the stored winner"),
            std::string::npos)
      << forced.output;
  EXPECT_NE(forced.output.find("without comparing, as forced"), std::string::npos) << forced.output;
}

// A kernel that never finishes (the blind mutant `stride >= 0u` of reduce_max_f32) gets the
// watchdog line and the command exits with its code in bounded time, although lavapipe never
// gives the device back (issue 22, point 4). The test bounds its own wait and kills an overrun.
TEST_F(ForgeCliTest, AKernelThatNeverFinishesEndsTheCommandAfterTheTimeout) {
  const kernels::KernelDefinition& reduce = *kernels::find_kernel("reduce_max_f32").value();
  const fs::path hang = write(
      "hang.wgsl",
      replace_once(reduce.generate_wgsl(reduce.default_schedule()), "stride > 0u", "stride >= 0u"));
  struct Case {
    std::string arguments;
    int exit_code;
  };
  for (const Case& one : {Case{"certify reduce_max_f32 --source " + hang.string(), 1},
                          Case{"bench reduce_max_f32 --samples 1 --schedule workgroup_size=256 "
                               "--source " +
                                   hang.string(),
                               3}}) {
    const fs::path output = temp_.path() / "hang.out";
    const auto start = std::chrono::steady_clock::now();
    std::optional<int> code =
        wait_bounded(spawn_cli("--timeout 1 " + one.arguments + " " + cache_flag(), output),
                     std::chrono::seconds(90));
    const std::string printed = testing::read_text(output);
    ASSERT_TRUE(code.has_value()) << one.arguments << ": still running after 90 s\n" << printed;
    EXPECT_EQ(*code, one.exit_code) << one.arguments << "\n" << printed;
    EXPECT_NE(printed.find("wgsl-forge: error: Timed out after 1000 ms waiting for"),
              std::string::npos)
        << printed;
    EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(60)) << printed;
  }
}

TEST_F(ForgeCliTest, SixteenConcurrentTunersLeaveOneWinnerAndACleanCache) {
  constexpr int kTuners = 16;
  std::string script;
  for (int i = 0; i < kTuners; ++i) {
    const std::string out = (temp_.path() / ("tuner-" + std::to_string(i))).string();
    script += "(" + std::string(WGSL_FORGE_CLI_PATH) +
              " auto-tune-all affine_f32 --budget 1 --sizes main " + cache_flag() + " > " + out +
              ".out 2>&1; echo $? > " + out + ".code) & ";
  }
  script += "wait";
  ASSERT_EQ(std::system(script.c_str()), 0);
  // Losing the race to another tuner's valid entry is success (issue 22, point 7).
  int tuned = 0, cached = 0, raced = 0;
  const std::string row = "affine_f32  " + main_bucket_of("affine_f32") + "  ";
  for (int i = 0; i < kTuners; ++i) {
    const fs::path base = temp_.path() / ("tuner-" + std::to_string(i));
    const std::string output = testing::read_text(base.string() + ".out");
    const int code = std::stoi(testing::read_text(base.string() + ".code"));
    EXPECT_EQ(code, 0) << output;
    if (output.find(row + "tuned ") != std::string::npos) {
      ++tuned;
    } else if (output.find(row + "cached ") != std::string::npos) {
      ++cached;
    } else {
      EXPECT_NE(output.find(row + "other "), std::string::npos) << output;
      EXPECT_NE(
          output.find("affine_f32 " + main_bucket_of("affine_f32") + ": tuned by another process"),
          std::string::npos)
          << output;
      ++raced;
    }
  }
  EXPECT_EQ(tuned, 1) << cached << " found it cached, " << raced << " lost the race";
  EXPECT_EQ(tuned + cached + raced, kTuners);
  CommandResult verify = run_cli("cache verify " + cache_flag());
  EXPECT_EQ(verify.exit_code, 0) << verify.output;
  EXPECT_NE(verify.output.find("0 other files"), std::string::npos) << verify.output;
  CommandResult again = run_cli("auto-tune-all affine_f32 --sizes main " + cache_flag());
  EXPECT_EQ(again.exit_code, 0) << again.output;
  EXPECT_NE(again.output.find(" cached "), std::string::npos) << again.output;
}

// auto-tune-all twice, then once more over a damaged entry, and the start-up entry point on
// the tuned cache. One test, because tuning the whole catalog (every size bucket) is the
// expensive part.
TEST_F(ForgeCliTest, AutoTuneAllTwiceThenADamagedEntryThenStartUp) {
  gpu::Device& device = testing::shared_device();
  CommandResult first = run_cli("auto-tune-all --budget 1 --json " + cache_flag());
  ASSERT_EQ(first.exit_code, 0) << first.output;
  nlohmann::json report = nlohmann::json::parse(first.output);
  std::set<std::pair<std::string, std::string>> expected_rows;
  for (const kernels::KernelDefinition* kernel : kernels::builtin_kernels()) {
    for (const kernels::SizeBucket& bucket : forge::size_buckets(device, *kernel)) {
      expected_rows.emplace(kernel->id(), bucket.label);
    }
  }
  std::set<std::pair<std::string, std::string>> rows;
  for (const auto& row : report["kernels"]) {
    rows.emplace(row["kernel"], row["bucket"]);
    EXPECT_EQ(row["status"], "tuned") << row.dump();
    EXPECT_GT(row["certified_cases"].get<int>(), 0) << row.dump();
    // The fields and units of bench --json, schedules as objects.
    EXPECT_TRUE(row["tuned_schedule"].is_object()) << row.dump();
    EXPECT_TRUE(row["default_schedule"].is_object()) << row.dump();
    EXPECT_GT(row["tuned_median_ns"].get<double>(), 0) << row.dump();
    EXPECT_GT(row["tuned_rate"].get<double>(), 0) << row.dump();
    EXPECT_GT(row["default_rate"].get<double>(), 0) << row.dump();
    EXPECT_FALSE(row["problem"].get<std::string>().empty()) << row.dump();
    EXPECT_FALSE(row["unit"].get<std::string>().empty()) << row.dump();
  }
  EXPECT_EQ(rows, expected_rows) << "one row per (kernel, size bucket)";
  ASSERT_EQ(report["kernels"].size(), expected_rows.size());

  CommandResult second = run_cli("auto-tune-all --budget 1 --json " + cache_flag());
  ASSERT_EQ(second.exit_code, 0) << second.output;
  const nlohmann::json second_report = nlohmann::json::parse(second.output);
  for (const auto& row : second_report["kernels"]) {
    EXPECT_EQ(row["status"], "cached") << "the second run tuned " << row.dump();
  }

  // Damage gather_f32's tuning entry: verify names it, auto-tune-all tunes it again and replaces
  // it, and keeps every other entry.
  const std::string main_label =
      forge::main_bucket(device, *kernels::find_kernel("gather_f32").value()).label;
  const std::string key = ManifestCache::topology_key(device.adapter().topology_hash, "gather_f32");
  const fs::path entry = temp_.path() / "cache" / ("tuning-" + key + ".json");
  ASSERT_TRUE(fs::exists(entry));
  std::string bytes = testing::read_text(entry);
  testing::write_text(entry, bytes.substr(0, bytes.size() / 2));
  CommandResult verify = run_cli("cache verify " + cache_flag());
  EXPECT_EQ(verify.exit_code, 1) << verify.output;
  EXPECT_NE(verify.output.find("corrupt  " + entry.string()), std::string::npos) << verify.output;
  EXPECT_NE(verify.output.find("(wgsl-forge auto-tune-all tunes it again and replaces it)"),
            std::string::npos)
      << verify.output;
  CommandResult third = run_cli("auto-tune-all --budget 1 --json " + cache_flag());
  ASSERT_EQ(third.exit_code, 0) << third.output;
  for (const auto& row : nlohmann::json::parse(third.output)["kernels"]) {
    if (row["kernel"] == "gather_f32" && row["bucket"] == main_label) {
      EXPECT_EQ(row["status"], "tuned") << row.dump();
      EXPECT_NE(row["decision"].get<std::string>().find("replaced the damaged entry (Cache entry " +
                                                        entry.string() + " is corrupt"),
                std::string::npos)
          << row.dump();
    } else {
      EXPECT_EQ(row["status"], "cached") << row.dump();
    }
  }
  EXPECT_EQ(run_cli("cache verify " + cache_flag()).exit_code, 0);

  // Start-up: the library hands out the tuned schedule and runs it on the caller's buffers.
  ManifestCache cache(temp_.path() / "cache");
  forge::KernelLibrary library(device, cache);
  Result<forge::KernelLibrary::ReadyKernel> ready = library.load("affine_f32");
  ASSERT_TRUE(ready.ok()) << ready.error().to_string();
  EXPECT_TRUE(ready->tuned) << ready->origin;
  auto stored =
      cache.load_tuning_for_topology(device.adapter().topology_hash, "affine_f32").value();
  ASSERT_TRUE(stored.has_value());
  EXPECT_EQ(ready->prepared.generated().schedule, stored->result.winner.schedule);
  // A call far below the main size takes the smallest bucket's tuning.
  const kernels::SizeBucket smallest =
      forge::size_buckets(device, *kernels::find_kernel("affine_f32").value()).front();
  ASSERT_FALSE(smallest.main);
  kernels::Problem small;
  small.elements = 4099;
  Result<forge::KernelLibrary::ReadyKernel> small_ready = library.load("affine_f32", small);
  ASSERT_TRUE(small_ready.ok()) << small_ready.error().to_string();
  EXPECT_NE(small_ready->origin.find("tuned for bucket " + smallest.label), std::string::npos)
      << small_ready->origin;
  auto stored_small =
      cache.load_tuning_for_topology(device.adapter().topology_hash, "affine_f32", smallest.label)
          .value();
  ASSERT_TRUE(stored_small.has_value());
  EXPECT_EQ(stored_small->context.bucket, std::optional(smallest.label));
  EXPECT_EQ(stored_small->context.problem_size, smallest.problem.elements);
  EXPECT_EQ(small_ready->prepared.generated().schedule, stored_small->result.winner.schedule);
  // Every bucket of every kernel is tuned, so the typed primitives say so for each.
  forge::Primitives primitives(device, cache);
  ASSERT_TRUE(primitives.load_all().ok());
  for (const kernels::KernelDefinition* kernel : kernels::builtin_kernels()) {
    const std::string origins = primitives.origin(kernel->id()).value();
    for (const kernels::SizeBucket& bucket : forge::size_buckets(device, *kernel)) {
      EXPECT_NE(origins.find(bucket.label + ": tuned for bucket " + bucket.label),
                std::string::npos)
          << kernel->id() << ":\n"
          << origins;
    }
  }

  std::mt19937_64 random(testing::test_seed());
  kernels::Problem problem;
  problem.elements = 4099;
  problem.a = -3.0f;
  problem.b = 0.25f;
  std::vector<float> x(problem.elements);
  for (float& value : x) value = std::uniform_real_distribution<float>(-10, 10)(random);
  auto x_buffer = device.create_buffer(4112 * 4, gpu::BufferUsage::kStorage, "caller x").value();
  auto y_buffer = device.create_buffer(4112 * 4, gpu::BufferUsage::kStorage, "caller y").value();
  ASSERT_TRUE(device.write_buffer(x_buffer, 0, testing::as_bytes_of(x)).ok());
  auto bound = ready->prepared.bind(problem, {{"x", &x_buffer}, {"y", &y_buffer}});
  ASSERT_TRUE(bound.ok()) << bound.error().to_string();
  ASSERT_TRUE(ready->prepared.execute(**bound).ok());
  auto y = testing::values_from_bytes<float>(device.read_buffer(y_buffer, 0, 4099 * 4).value());
  for (std::size_t i = 0; i < x.size(); ++i) {
    EXPECT_NEAR(y[i], -3.0f * x[i] + 0.25f, 1e-5f * (1 + std::abs(x[i]))) << i;
  }
}

// affine_f32 whose certification draw carries a threshold its plan refuses, as compact_f32's
// draw may carry one that keeps nothing: bench must time the problem it was given.
class DrawnThresholdAffine final : public testing::DelegatingKernel {
 public:
  DrawnThresholdAffine() : DelegatingKernel("affine_f32") {}
  std::string_view id() const override { return "drawn_threshold_affine"; }
  std::uint32_t revision() const override { return 1; }
  std::string_view summary() const override { return "affine_f32 with a drawn threshold"; }
  Result<kernels::DispatchPlan> plan(const Schedule& schedule, const kernels::Problem& problem,
                                     const kernels::DeviceCapabilities& device) const override {
    if (problem.threshold == kDrawn) {
      return Error(ErrorKind::kInvalidInput, "the certification draw's problem was bound");
    }
    return base_.plan(schedule, problem, device);
  }
  kernels::CaseInputs make_inputs(const kernels::CaseSpec& spec,
                                  std::uint64_t seed) const override {
    kernels::CaseInputs inputs = base_.make_inputs(spec, seed);
    inputs.problem.threshold = kDrawn;
    return inputs;
  }

 private:
  static constexpr float kDrawn = 123.5f;
};

TEST(BenchTest, TimesTheProblemAsGivenNotTheCertificationDraws) {
  testing::TempDir temp;
  DrawnThresholdAffine kernel;
  kernels::Problem problem;
  problem.elements = 4099;
  gpu::TimingOptions timing;
  timing.samples = 3;
  Result<forge::BenchRow> row = forge::bench_kernel(
      testing::shared_device(), ManifestCache(temp.path()), kernel, problem, timing);
  ASSERT_TRUE(row.ok()) << row.error().to_string();
  EXPECT_GT(row->default_timing.median_ns, 0);
}

// Only the main bucket tuned: a call of a small size takes the nearest tuned bucket's schedule
// (the main one) and says why; the main size its own.
TEST(KernelLibraryTest, ABucketWithoutTuningTakesTheNearestTunedBucketsSchedule) {
  testing::TempDir temp;
  gpu::Device& device = testing::shared_device();
  ManifestCache cache(temp.path());
  const kernels::KernelDefinition& affine = *kernels::find_kernel("affine_f32").value();
  forge::AutoTuneOptions options;
  options.tune.budget = 1;
  options.tune.seed = testing::test_seed();
  const forge::AutoTuneRow row = forge::tune_and_store(device, cache, affine, options);
  ASSERT_EQ(row.status, forge::AutoTuneRow::Status::kTuned) << row.message;
  const kernels::SizeBucket main = forge::main_bucket(device, affine);
  EXPECT_EQ(row.bucket, main.label);
  EXPECT_EQ(row.manifest->context.bucket, std::nullopt) << "the main bucket stays at the seed key";
  const std::vector<kernels::SizeBucket> buckets = forge::size_buckets(device, affine);
  ASSERT_GE(buckets.size(), 2u);
  const kernels::SizeBucket& smallest = buckets.front();
  EXPECT_EQ(
      cache.load_tuning_for_topology(device.adapter().topology_hash, "affine_f32", smallest.label)
          .value(),
      std::nullopt);

  forge::KernelLibrary library(device, cache);
  kernels::Problem small;
  small.elements = 100;
  Result<forge::KernelLibrary::ReadyKernel> ready = library.load("affine_f32", small);
  ASSERT_TRUE(ready.ok()) << ready.error().to_string();
  EXPECT_TRUE(ready->tuned) << ready->origin;
  EXPECT_EQ(ready->prepared.generated().schedule, row.manifest->result.winner.schedule);
  EXPECT_EQ(ready->origin.rfind("tuned for bucket " + main.label + ": ", 0), 0u) << ready->origin;
  EXPECT_NE(ready->origin.find("; used for bucket " + smallest.label +
                               ", the nearest tuned to it, which has no usable tuning (default "
                               "schedule: size bucket " +
                               smallest.label + " is not tuned for this adapter yet)"),
            std::string::npos)
      << ready->origin;
  Result<forge::KernelLibrary::ReadyKernel> at_main = library.load("affine_f32", main.problem);
  ASSERT_TRUE(at_main.ok()) << at_main.error().to_string();
  EXPECT_EQ(at_main->origin.rfind("tuned for bucket " + main.label, 0), 0u) << at_main->origin;

  // The typed primitives say the same per bucket, and a small call runs and is right.
  forge::Primitives primitives(device, cache);
  auto x = device.create_buffer(256 * 4, gpu::BufferUsage::kStorage, "x").value();
  auto y = device.create_buffer(256 * 4, gpu::BufferUsage::kStorage, "y").value();
  std::mt19937_64 random(testing::test_seed());
  std::vector<float> values(100);
  for (float& value : values) value = std::uniform_real_distribution<float>(-4, 4)(random);
  ASSERT_TRUE(device.write_buffer(x, 0, testing::as_bytes_of(values)).ok());
  ASSERT_TRUE(
      primitives.affine_f32(forge::F32Column{&x}, 100, 2.0f, -1.0f, forge::F32Column{&y}).ok());
  const std::vector<float> out =
      testing::values_from_bytes<float>(device.read_buffer(y, 0, 100 * 4).value());
  for (std::size_t i = 0; i < values.size(); ++i) {
    EXPECT_NEAR(out[i], 2.0f * values[i] - 1.0f, 1e-5f * (1 + std::abs(values[i]))) << i;
  }
  const std::string origins = primitives.origin("affine_f32").value();
  EXPECT_NE(origins.find(smallest.label + ": tuned for bucket " + main.label), std::string::npos)
      << origins;
  EXPECT_NE(origins.find(main.label + ": tuned for bucket " + main.label), std::string::npos)
      << origins;
}

TEST_F(ForgeCliTest, SizesNameBucketsAndAMistypedOneIsRefusedWithTheBucketsThereAre) {
  CommandResult wrong = run_cli("auto-tune-all affine_f32 --sizes 2^2O " + cache_flag());
  EXPECT_EQ(wrong.exit_code, 2) << wrong.output;
  EXPECT_NE(wrong.output.find("--sizes: no kernel asked for has a size bucket '2^2O' (did you "
                              "mean '2^20'?)"),
            std::string::npos)
      << wrong.output;
  EXPECT_NE(wrong.output.find("the buckets on this adapter are: main, all, "), std::string::npos)
      << wrong.output;
  EXPECT_TRUE(fs::is_empty(temp_.path()) || !fs::exists(temp_.path() / "cache") ||
              fs::is_empty(temp_.path() / "cache"))
      << "nothing is tuned or stored";
  CommandResult listed = run_cli("kernels");
  EXPECT_NE(listed.output.find("size buckets (* main): 2^16 2^20 2^24 2^28*; on a CPU adapter "
                               "2^16 2^20*"),
            std::string::npos)
      << listed.output;
}

// `--sizes` takes one word (comma-separated labels) per occurrence: kernel ids after it are
// kernels, not sizes (session 28 lost a device call to "--sizes main hash_join_u32 ..."). The
// cheapest kernel to tune on lavapipe keeps this short; a mistyped second id shows that both words
// after the sizes are read as kernels.
TEST_F(ForgeCliTest, SizesTakesOneWordSoKernelsMayFollowIt) {
  const std::string smallest = bucket_near("histogram_u32", 1);
  const std::string main = main_bucket_of("histogram_u32");
  CommandResult repeated = run_cli("auto-tune-all --budget 1 --sizes " + smallest +
                                   " --sizes main histogram_u32 --json " + cache_flag());
  ASSERT_EQ(repeated.exit_code, 0) << repeated.output;
  const nlohmann::json table = nlohmann::json::parse(repeated.output);
  std::multiset<std::string> entries;
  for (const nlohmann::json& row : table["kernels"]) {
    entries.insert(row["kernel"].get<std::string>() + " " + row["bucket"].get<std::string>());
  }
  EXPECT_EQ(entries,
            (std::multiset<std::string>{"histogram_u32 " + smallest, "histogram_u32 " + main}))
      << repeated.output;

  CommandResult mistyped =
      run_cli("auto-tune-all --sizes " + smallest + " histogram_u32 histogram_u3 " + cache_flag());
  EXPECT_EQ(mistyped.exit_code, 2) << mistyped.output;
  EXPECT_NE(mistyped.output.find("Unknown kernel 'histogram_u3'; did you mean 'histogram_u32'?"),
            std::string::npos)
      << mistyped.output;
}

TEST(KernelLibraryTest, UntunedKernelsRunWithTheDefaultScheduleAndSaySo) {
  testing::TempDir temp;
  forge::KernelLibrary library(testing::shared_device(), ManifestCache(temp.path()));
  Result<forge::KernelLibrary::ReadyKernel> ready = library.load("scan_exclusive_u32");
  ASSERT_TRUE(ready.ok()) << ready.error().to_string();
  EXPECT_FALSE(ready->tuned);
  EXPECT_NE(ready->origin.find("not tuned for this adapter yet"), std::string::npos);
  EXPECT_EQ(ready->prepared.generated().schedule, ready->definition->default_schedule());
  EXPECT_EQ(library.load("no_such_kernel").error().kind(), ErrorKind::kInvalidInput);

  // A caller's buffer smaller than the plan needs is refused before anything runs.
  auto small =
      testing::shared_device().create_buffer(16, gpu::BufferUsage::kStorage, "small").value();
  kernels::Problem problem;
  problem.elements = 1000;
  auto bound = ready->prepared.bind(problem, {{"x", &small}});
  ASSERT_FALSE(bound.ok());
  EXPECT_NE(
      bound.error().message().find("Buffer x holds 16 bytes from offset 0; the plan needs 4000"),
      std::string::npos);
}

// Every builtin kernel loaded in one call, all pipelines compiled at once: each gives its
// oracle's results on its smallest certification case.
TEST(KernelLibraryTest, KernelsLoadedTogetherAllRunAndMatchTheirOracles) {
  testing::TempDir temp;
  forge::KernelLibrary library(testing::shared_device(), ManifestCache(temp.path()));
  std::vector<std::string_view> ids;
  for (const kernels::KernelDefinition* kernel : kernels::builtin_kernels())
    ids.push_back(kernel->id());
  Result<std::vector<forge::KernelLibrary::ReadyKernel>> ready = library.load(ids);
  ASSERT_TRUE(ready.ok()) << ready.error().to_string();
  ASSERT_EQ(ready->size(), ids.size());
  std::mt19937_64 seeds(testing::test_seed());
  for (std::size_t i = 0; i < ids.size(); ++i) {
    forge::KernelLibrary::ReadyKernel& one = (*ready)[i];
    ASSERT_EQ(one.definition->id(), ids[i]);
    EXPECT_FALSE(one.tuned) << one.origin;
    EXPECT_EQ(one.prepared.generated().schedule, one.definition->default_schedule());
    const std::vector<kernels::CaseSpec> cases = one.definition->certification_cases();
    auto size = [](const kernels::CaseSpec& spec) {
      return std::max<std::uint64_t>(spec.problem.elements,
                                     std::uint64_t{spec.problem.m} * spec.problem.n);
    };
    const kernels::CaseSpec& smallest =
        *std::min_element(cases.begin(), cases.end(),
                          [&](const auto& a, const auto& b) { return size(a) < size(b); });
    kernels::CaseInputs inputs = one.definition->make_inputs(smallest, seeds());
    Result<forge::BufferContents> outputs = one.prepared.run(inputs);
    ASSERT_TRUE(outputs.ok()) << outputs.error().to_string();
    kernels::CaseVerdict verdict = one.definition->check(inputs, *outputs);
    EXPECT_TRUE(verdict.report.matches() && verdict.failed_checks.empty())
        << ids[i] << " case " << smallest.name << ": " << verdict.report.mismatch_count
        << " mismatches";
  }
}

// Kernels prepared together where one does not compile: the one error of that kernel's entry
// point, and the kernels before and after it are not kept.
TEST(KernelLibraryTest, AKernelThatDoesNotCompileAmongOthersGivesTheErrorOfItsEntryPoint) {
  gpu::Device& device = testing::shared_device();
  const kernels::DeviceCapabilities capabilities = forge::capabilities_of(device.adapter());
  std::vector<const kernels::KernelDefinition*> definitions;
  std::vector<GeneratedKernel> generated;
  for (std::string_view id : {"scan_exclusive_u32", "radix_sort_u32", "affine_f32"}) {
    definitions.push_back(kernels::find_kernel(id).value());
    generated.push_back(kernels::generate_builtin(*definitions.back(),
                                                  definitions.back()->default_schedule(),
                                                  TargetBackend::kWgsl, capabilities)
                            .value());
  }
  GeneratedKernel& broken = generated[1];
  ASSERT_GT(broken.entry_points.size(), 1u);
  broken.source += "\nfn broken() -> u32 { return undefined_name; }\n";
  broken.seal();
  std::vector<forge::KernelToPrepare> kernels;
  for (std::size_t i = 0; i < generated.size(); ++i)
    kernels.push_back({definitions[i], &generated[i]});

  Result<std::vector<forge::PreparedKernel>> prepared =
      forge::PreparedKernel::prepare_all(device, kernels);
  ASSERT_FALSE(prepared.ok());
  const std::string text = prepared.error().to_string();
  const std::string label = broken.kernel_id + "." + broken.entry_points.front();
  EXPECT_EQ(prepared.error().kind(), ErrorKind::kCompilation) << text;
  EXPECT_NE(text.find("WGSL of " + label + " does not compile:"), std::string::npos) << text;
  EXPECT_NE(text.find("unresolved value 'undefined_name'"), std::string::npos) << text;
  EXPECT_NE(
      text.find("preparing " + broken.kernel_id + " with schedule " + broken.schedule.to_string()),
      std::string::npos)
      << text;
  EXPECT_EQ(text.find("scan_exclusive_u32"), std::string::npos) << text;
  EXPECT_EQ(text.find("affine_f32"), std::string::npos) << text;

  // One at a time, the same kernel gives the same error.
  Result<forge::PreparedKernel> alone =
      forge::PreparedKernel::prepare(device, *definitions[1], broken);
  ASSERT_FALSE(alone.ok());
  EXPECT_EQ(alone.error().to_string(), text);
}

}  // namespace
}  // namespace wgsl_forge
