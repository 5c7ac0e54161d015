// The catalog's pure logic: golden WGSL, deterministic generation, schedule spaces and their
// filtering, and the errors a user sees for a bad kernel, schedule or problem.
//
// Golden files: tests/golden/<kernel>.wgsl hold the WGSL of each default schedule, so that any
// change to generated code shows in review. Regenerate them with
//   WGSL_FORGE_UPDATE_GOLDEN=1 build/ci/tests/wgsl_forge_tests --gtest_filter='*Golden*'

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <stdexcept>
#include <tuple>

#include "support/seeded_test.hpp"
#include "support/temp_dir.hpp"
#include "wgsl_forge/hash.hpp"
#include "wgsl_forge/kernels.hpp"

namespace wgsl_forge {
namespace {

using kernels::DeviceCapabilities;
using kernels::KernelDefinition;

// A large adapter (the H200's limits) and WebGPU's defaults.
DeviceCapabilities large_adapter() {
  DeviceCapabilities capabilities;
  capabilities.max_invocations_per_workgroup = 1024;
  capabilities.max_workgroup_size_x = 1024;
  capabilities.max_workgroup_storage_size = 49152;
  capabilities.max_storage_binding_size = 4294967295u;
  capabilities.subgroups = true;
  return capabilities;
}

// A problem every kernel plans (gemm_f32 reads m, n and k; the others n).
kernels::Problem planning_problem(const KernelDefinition& kernel) {
  kernels::Problem problem;
  problem.elements = 1000;
  problem.m = kernel.id() == "gemm_f32" ? 40 : 0;
  problem.n = problem.m;
  problem.k = problem.m;
  return problem;
}

// About 16 schedules of the kernel's space on the large adapter, the default first.
std::vector<Schedule> sampled_schedules(const KernelDefinition& kernel) {
  const std::vector<Schedule> space = kernel.schedule_space(large_adapter());
  std::vector<Schedule> sample;
  for (std::size_t i = 0; i < space.size(); i += std::max<std::size_t>(1, space.size() / 16)) {
    sample.push_back(space[i]);
  }
  return sample;
}

TEST(KernelCatalogGoldenTest, DefaultScheduleWgslMatchesGoldenFiles) {
  const std::filesystem::path golden_dir =
      std::filesystem::path(WGSL_FORGE_SOURCE_DIR) / "tests" / "golden";
  const bool update = std::getenv("WGSL_FORGE_UPDATE_GOLDEN") != nullptr;
  for (const KernelDefinition* kernel : kernels::builtin_kernels()) {
    const std::filesystem::path path = golden_dir / (std::string(kernel->id()) + ".wgsl");
    GeneratedKernel generated = kernels::generate_builtin(*kernel, kernel->default_schedule(),
                                                          TargetBackend::kWgsl, large_adapter())
                                    .value();
    if (update) testing::write_text(path, generated.source);
    EXPECT_EQ(testing::read_text(path), generated.source)
        << path
        << " differs from the generated WGSL; if the change is intended, regenerate with "
           "WGSL_FORGE_UPDATE_GOLDEN=1 and bump the kernel's revision";
  }
}

TEST(KernelCatalogTest, IdsAreUniqueAndGenerationIsDeterministic) {
  std::set<std::string> ids;
  for (const KernelDefinition* kernel : kernels::builtin_kernels()) {
    EXPECT_TRUE(ids.insert(std::string(kernel->id())).second) << kernel->id();
    EXPECT_GE(kernel->revision(), 1u);
    for (const Schedule& schedule : kernel->schedule_space(large_adapter())) {
      auto first =
          kernels::generate_builtin(*kernel, schedule, TargetBackend::kWgsl, large_adapter());
      auto second =
          kernels::generate_builtin(*kernel, schedule, TargetBackend::kWgsl, large_adapter());
      ASSERT_TRUE(first.ok()) << first.error().to_string();
      EXPECT_EQ(first->source, second->source);
      EXPECT_EQ(first->source_hash, blake3_hex(first->source));
      EXPECT_EQ(first->entry_points, kernel->entry_points(schedule));
      EXPECT_EQ(first->bindings, kernel->bindings());
    }
  }
  EXPECT_EQ(ids.size(), 16u);
}

// The tuner skips a starting point that does not parse or fit, so the catalog checks here that
// each one parses, fits the adapter it was measured on and adds something to the default.
TEST(KernelCatalogTest, StartingPointsAreLegalOnTheH200AndNotTheDefault) {
  std::size_t kernels_with_points = 0;
  for (const KernelDefinition* kernel : kernels::builtin_kernels()) {
    std::vector<Schedule> seen = {kernel->default_schedule()};
    for (const std::string& overrides : kernel->starting_points()) {
      SCOPED_TRACE(std::string(kernel->id()) + ": " + overrides);
      Result<Schedule> schedule = kernels::parse_schedule_overrides(*kernel, overrides);
      ASSERT_TRUE(schedule.ok()) << schedule.error().to_string();
      EXPECT_TRUE(kernel->check_schedule(*schedule, large_adapter()).ok());
      EXPECT_EQ(std::find(seen.begin(), seen.end(), *schedule), seen.end());
      seen.push_back(*schedule);
    }
    if (seen.size() > 1) ++kernels_with_points;
  }
  // All but gather_f32, whose default won (radix_sort_pairs_u64 borrows the u32 pairs' points;
  // group_by_sum_f32's are argued, segmented_reduce_sum_f32's designed per segment length and
  // hash_join_u32's for its revision 2 probe, none yet timed).
  EXPECT_EQ(kernels_with_points, 15u);
}

// A tune takes the starting points in the order the kernel gives for its problem: the same points
// at every size bucket, reordered only.
TEST(KernelCatalogTest, StartingPointsForABucketReorderTheStartingPoints) {
  for (const KernelDefinition* kernel : kernels::builtin_kernels()) {
    const std::vector<std::string> listed = kernel->starting_points();
    for (const bool cpu : {false, true}) {
      for (const kernels::SizeBucket& bucket : kernel->size_buckets(cpu)) {
        const std::vector<std::string> ordered = kernel->starting_points_for(bucket.problem);
        EXPECT_TRUE(
            std::is_permutation(ordered.begin(), ordered.end(), listed.begin(), listed.end()))
            << kernel->id() << " at " << bucket.label;
      }
    }
  }
}

// The buffer interface is the one table a kernel declares: every schedule's plan sizes exactly its
// buffers, with their roles, and every pass binds only buffers of the table.
TEST(KernelCatalogTest, PlansUseExactlyTheBuffersOfTheInterfaceTable) {
  for (const KernelDefinition* kernel : kernels::builtin_kernels()) {
    const std::vector<kernels::BufferSpec> specs = kernel->buffer_specs();
    std::set<std::string> names;
    for (const kernels::BufferSpec& spec : specs) {
      EXPECT_TRUE(names.insert(spec.name).second) << kernel->id() << " repeats " << spec.name;
      EXPECT_FALSE(spec.size_rule.empty()) << kernel->id() << " " << spec.name;
    }
    for (const Schedule& schedule : sampled_schedules(*kernel)) {
      SCOPED_TRACE(std::string(kernel->id()) + " " + schedule.to_string());
      Result<kernels::DispatchPlan> plan =
          kernel->plan(schedule, planning_problem(*kernel), large_adapter());
      ASSERT_TRUE(plan.ok()) << plan.error().to_string();
      ASSERT_EQ(plan->buffers.size(), specs.size());
      for (std::size_t b = 0; b < specs.size(); ++b) {
        EXPECT_EQ(plan->buffers[b].name, specs[b].name);
        EXPECT_EQ(plan->buffers[b].role, specs[b].role);
        EXPECT_GT(plan->buffers[b].bytes, 0u);
      }
      for (const kernels::PassPlan& pass : plan->passes) {
        for (const auto& [binding, name] : pass.buffers) EXPECT_EQ(names.count(name), 1u) << name;
      }
    }
    Result<kernels::BufferSpec> missing = kernel->find_buffer("no_such_buffer");
    ASSERT_FALSE(missing.ok());
    EXPECT_NE(missing.error().message().find(std::string(kernel->id())), std::string::npos);
    EXPECT_NE(missing.error().message().find(specs.front().name), std::string::npos);
  }
}

// The element type a buffer's caller sees through a WGSL binding: its array's word type, or f32
// where the kernel moves f32 values as u32 bits. Nullopt for a type this table does not know yet.
std::optional<kernels::ElementType> carried_element(const kernels::WgslBinding& row) {
  static const std::map<std::string, kernels::ElementType> kWordTypes = {
      {"f32", kernels::ElementType::kF32},         {"vec2f", kernels::ElementType::kF32},
      {"vec4f", kernels::ElementType::kF32},       {"vec4<f32>", kernels::ElementType::kF32},
      {"u32", kernels::ElementType::kU32},         {"vec2u", kernels::ElementType::kU32},
      {"vec4u", kernels::ElementType::kU32},       {"vec4<u32>", kernels::ElementType::kU32},
      {"atomic<u32>", kernels::ElementType::kU32}, {"ChainWord", kernels::ElementType::kU32}};
  auto word = kWordTypes.find(row.type);
  if (word == kWordTypes.end()) return std::nullopt;
  if (!row.f32_bits) return word->second;
  if (word->second != kernels::ElementType::kU32) return std::nullopt;  // bits are u32 words
  return kernels::ElementType::kF32;
}

std::string declaration_start(const kernels::WgslBinding& row) {
  const char* access = row.kind == BindingKind::kUniform       ? "var<uniform> "
                       : row.kind == BindingKind::kStorageRead ? "var<storage, read> "
                                                               : "var<storage, read_write> ";
  return "@group(0) @binding(" + std::to_string(row.binding) + ") " + access + row.name + ": ";
}

// A binding's access must suit the buffer: a kernel never writes its caller's inputs, and it
// writes its outputs and scratch.
void expect_binding_suits_buffer(const kernels::WgslBinding& row, const kernels::BufferSpec& spec,
                                 bool same_name) {
  SCOPED_TRACE("binding " + std::to_string(row.binding) + " (" + row.name + ": " + row.type +
               ") and buffer " + spec.name);
  const std::optional<kernels::ElementType> carried = carried_element(row);
  ASSERT_TRUE(carried.has_value()) << "unknown or contradictory WGSL element type";
  EXPECT_EQ(kernels::element_type_name(*carried),
            std::string(kernels::element_type_name(spec.element)));
  if (spec.role == kernels::BufferRole::kInput) {
    EXPECT_EQ(row.kind, BindingKind::kStorageRead);
  }
  if (same_name && spec.role != kernels::BufferRole::kInput) {
    EXPECT_EQ(row.kind, BindingKind::kStorageReadWrite);
  }
}

// The binding table is the one declaration of a module's bindings: the WGSL declares exactly its
// rows, each agrees with the buffer of its name, and each pass binds buffers that suit the rows.
// A row's views (WgslBinding::views) are its only other declarations: variables on the row's
// binding with its access and another element type (WGSL allows it where no entry point uses both).
TEST(KernelCatalogTest, BindingTablesAgreeWithTheWgslAndTheBufferInterface) {
  for (const KernelDefinition* kernel : kernels::builtin_kernels()) {
    for (const Schedule& schedule : sampled_schedules(*kernel)) {
      SCOPED_TRACE(std::string(kernel->id()) + " " + schedule.to_string());
      const std::vector<kernels::WgslBinding> table = kernel->wgsl_bindings(schedule);
      ASSERT_FALSE(table.empty());
      EXPECT_EQ(declaration_start(table.front()), "@group(0) @binding(0) var<uniform> params: ");
      const std::string wgsl = kernel->generate_wgsl(schedule);
      // Each declaration's binding and access ("var<...>").
      std::multimap<std::uint32_t, std::string> declared;
      for (std::size_t at = wgsl.find("@binding("); at != std::string::npos;
           at = wgsl.find("@binding(", at + 1)) {
        const std::size_t access = wgsl.find("var<", at);
        declared.emplace(static_cast<std::uint32_t>(std::stoul(wgsl.substr(at + 9))),
                         wgsl.substr(access, wgsl.find('>', access) + 1 - access));
      }
      std::set<std::uint32_t> declared_bindings;
      for (const auto& [binding, access] : declared) declared_bindings.insert(binding);
      EXPECT_EQ(declared_bindings.size(), table.size()) << wgsl;
      for (const kernels::WgslBinding& row : table) {
        const auto [first, last] = declared.equal_range(row.binding);
        EXPECT_EQ(static_cast<std::size_t>(std::distance(first, last)), 1 + row.views.size())
            << row.name << ": declarations of its binding";
        for (auto it = first; it != last; ++it) {
          EXPECT_NE(declaration_start(row).find(") " + it->second + " "), std::string::npos)
              << row.name << ": a view of another access, " << it->second;
        }
      }
      std::map<std::uint32_t, kernels::WgslBinding> rows;
      for (const kernels::WgslBinding& row : table) {
        EXPECT_NE(
            wgsl.find(declaration_start(row) +
                      (row.kind == BindingKind::kUniform ? row.type : "array<" + row.type + ">")),
            std::string::npos)
            << row.name;
        for (const kernels::WgslBindingView& view : row.views) {
          kernels::WgslBinding viewed = row;
          viewed.name = view.name;
          EXPECT_NE(wgsl.find(declaration_start(viewed) + "array<" + view.type + ">"),
                    std::string::npos)
              << view.name;
        }
        EXPECT_TRUE(rows.emplace(row.binding, row).second) << "binding " << row.binding;
        if (row.kind == BindingKind::kUniform) continue;
        if (auto spec = kernel->find_buffer(row.name); spec.ok()) {
          expect_binding_suits_buffer(row, *spec, true);
        }
      }
      Result<kernels::DispatchPlan> plan =
          kernel->plan(schedule, planning_problem(*kernel), large_adapter());
      ASSERT_TRUE(plan.ok()) << plan.error().to_string();
      for (const kernels::PassPlan& pass : plan->passes) {
        for (const auto& [binding, name] : pass.buffers) {
          auto row = rows.find(binding);
          ASSERT_NE(row, rows.end()) << pass.entry_point << " binds " << binding;
          EXPECT_NE(row->second.kind, BindingKind::kUniform);
          expect_binding_suits_buffer(row->second, kernel->find_buffer(name).value(), false);
        }
      }
    }
  }
}

TEST(KernelCatalogTest, ReadingAKnobTheScheduleLacksThrowsNamingIt) {
  const kernels::KnobSpec tile{"tile_size", "elements per tile", {64, 128}, 64};
  EXPECT_EQ(kernels::knob(Schedule({{"tile_size", 128}}), tile), 128u);
  try {
    kernels::knob(Schedule({{"tile_sise", 128}}), tile);
    ADD_FAILURE() << "an absent knob was read";
  } catch (const std::logic_error& error) {
    EXPECT_EQ(std::string(error.what()),
              "Knob tile_size is read but absent from schedule {tile_sise=128}.");
  }
}

// Every knob a kernel reads is one it declares: no schedule check admits reaches the throw above.
TEST(KernelCatalogTest, EveryScheduleOfEverySpaceGeneratesAndPlansReadingOnlyDeclaredKnobs) {
  for (const KernelDefinition* kernel : kernels::builtin_kernels()) {
    for (const Schedule& schedule : kernel->schedule_space(large_adapter())) {
      SCOPED_TRACE(std::string(kernel->id()) + " " + schedule.to_string());
      EXPECT_NO_THROW({
        EXPECT_TRUE(kernel->check_resources(schedule, large_adapter()).ok());
        EXPECT_FALSE(kernel->generate_wgsl(schedule).empty());
        EXPECT_FALSE(kernel->entry_points(schedule).empty());
        EXPECT_FALSE(kernel->wgsl_bindings(schedule).empty());
        EXPECT_TRUE(kernel->plan(schedule, planning_problem(*kernel), large_adapter()).ok());
      });
    }
  }
}

TEST(KernelCatalogTest, SpacesAreFilteredByTheAdapter) {
  const DeviceCapabilities defaults;  // WebGPU's default limits, no subgroups
  for (const KernelDefinition* kernel : kernels::builtin_kernels()) {
    std::vector<Schedule> large = kernel->schedule_space(large_adapter());
    std::vector<Schedule> small = kernel->schedule_space(defaults);
    ASSERT_FALSE(small.empty()) << kernel->id();
    EXPECT_EQ(small.front(), kernel->default_schedule()) << kernel->id();
    EXPECT_LE(small.size(), large.size());
    for (const Schedule& schedule : small) {
      EXPECT_TRUE(kernel->check_schedule(schedule, defaults).ok()) << schedule.to_string();
      EXPECT_LE(schedule.get("workgroup_size").value_or(0), 256);
      EXPECT_EQ(schedule.get("use_subgroups").value_or(0), 0);
    }
  }
  // Spaces are real choices, not a single point.
  EXPECT_GE(kernels::find_kernel("gemm_f32").value()->schedule_space(large_adapter()).size(), 20u);
  EXPECT_GE(kernels::find_kernel("affine_f32").value()->schedule_space(large_adapter()).size(),
            40u);
}

TEST(KernelCatalogTest, IllegalSchedulesNameTheKnobTheValueAndTheLimit) {
  const KernelDefinition& affine = *kernels::find_kernel("affine_f32").value();
  const DeviceCapabilities defaults;
  Schedule schedule = affine.default_schedule();
  schedule.set("workgroup_size", 1024);
  EXPECT_EQ(affine.check_schedule(schedule, defaults).error().to_string(),
            "Knob workgroup_size (1024) exceeds maxComputeInvocationsPerWorkgroup (256). (while "
            "checking schedule {items_per_invocation=1, vector_width=1, workgroup_size=1024} of "
            "affine_f32)");
  schedule.set("workgroup_size", 300);
  EXPECT_EQ(affine.check_schedule(schedule, large_adapter()).error().message(),
            "Knob workgroup_size (300) is not one of 64, 128, 256, 512, 1024.");
  schedule = affine.default_schedule();
  schedule.set("tile_k", 8);
  EXPECT_EQ(affine.check_schedule(schedule, large_adapter()).error().message(),
            "Unknown knob 'tile_k' for affine_f32 (knobs: workgroup_size, vector_width, "
            "items_per_invocation).");

  const KernelDefinition& reduce = *kernels::find_kernel("reduce_sum_f32").value();
  schedule = reduce.default_schedule();
  schedule.set("use_subgroups", 1);
  EXPECT_EQ(reduce.check_schedule(schedule, defaults).error().message(),
            "Knob use_subgroups (1) needs the subgroups feature, which the adapter does not have.");

  const KernelDefinition& gemm = *kernels::find_kernel("gemm_f32").value();
  schedule = gemm.default_schedule();
  schedule.set("tile_m", 128);
  schedule.set("tile_n", 128);
  schedule.set("tile_k", 32);
  schedule.set("thread_m", 8);
  schedule.set("thread_n", 8);
  EXPECT_EQ(gemm.check_schedule(schedule, defaults).error().message(),
            "Knobs tile_m, tile_n, tile_k and stages need 32768 bytes of workgroup memory, more "
            "than maxComputeWorkgroupStorageSize (16384).");
  // Two stages double it; 256 columns need enough depth and registers that every invocation
  // stages at least one vector of B.
  schedule = kernels::parse_schedule_overrides(
                 gemm, "tile_m=128,tile_n=256,tile_k=16,thread_m=8,thread_n=8,stages=2")
                 .value();
  EXPECT_TRUE(gemm.check_schedule(schedule, large_adapter()).ok());
  schedule.set("tile_k", 32);
  EXPECT_EQ(gemm.check_schedule(schedule, large_adapter()).error().message(),
            "Knobs tile_m, tile_n, tile_k and stages need 98304 bytes of workgroup memory, more "
            "than maxComputeWorkgroupStorageSize (49152).");
  schedule = kernels::parse_schedule_overrides(
                 gemm, "tile_m=128,tile_n=256,tile_k=8,thread_m=8,thread_n=8,vector_loads=1")
                 .value();
  EXPECT_EQ(gemm.check_schedule(schedule, large_adapter()).error().message(),
            "Knobs tile_k x thread_m x thread_n (512) are fewer than 4 x the larger of tile_m "
            "and tile_n (256): some invocations would stage no vector of A or B.");
  schedule = kernels::parse_schedule_overrides(
                 gemm, "tile_m=128,tile_n=128,tile_k=16,thread_m=8,thread_n=8,unroll_depth=1")
                 .value();
  EXPECT_EQ(gemm.check_schedule(schedule, large_adapter()).error().message(),
            "Knob unroll_depth (1) unrolls tile_k x thread_m x thread_n (1024) multiply-adds per "
            "k-tile, more than 512.");
  schedule.set("tile_k", 8);
  EXPECT_TRUE(gemm.check_schedule(schedule, large_adapter()).ok());

  // Radix sort: 8-bit digits need the subgroup ranking, which needs subgroups of 8 or more.
  const KernelDefinition& sort = *kernels::find_kernel("radix_sort_u32").value();
  schedule = kernels::parse_schedule_overrides(sort, "digit_bits=8").value();
  EXPECT_EQ(sort.check_schedule(schedule, large_adapter()).error().message(),
            "Knob digit_bits (8) needs use_subgroups (1): ranking without subgroups keeps a "
            "counter per digit and invocation, which fits up to 4 digit bits.");
  schedule = kernels::parse_schedule_overrides(sort, "digit_bits=8,use_subgroups=1").value();
  EXPECT_TRUE(sort.check_schedule(schedule, large_adapter()).ok());
  DeviceCapabilities small_subgroups = large_adapter();
  small_subgroups.subgroup_min_size = 4;
  EXPECT_EQ(sort.check_schedule(schedule, small_subgroups).error().message(),
            "Knob use_subgroups (1) needs subgroups of at least 8 invocations; the adapter's "
            "smallest has 4.");
  // The pairs stage their values where the keys were, and the u64 keys' direct rounds their other
  // words and values too: a tile of 512 x 16 fits 48 KiB, not lavapipe's 32 KiB.
  DeviceCapabilities lavapipe_memory = large_adapter();
  lavapipe_memory.max_workgroup_storage_size = 32768;
  const KernelDefinition& sort_pairs = *kernels::find_kernel("radix_sort_pairs_u32").value();
  schedule =
      kernels::parse_schedule_overrides(
          sort_pairs, "digit_bits=8,use_subgroups=1,workgroup_size=512,keys_per_invocation=16")
          .value();
  EXPECT_TRUE(sort_pairs.check_schedule(schedule, large_adapter()).ok());
  const KernelDefinition& sort_u64 = *kernels::find_kernel("radix_sort_pairs_u64").value();
  schedule = kernels::parse_schedule_overrides(sort_u64,
                                               "digit_bits=8,direct_rounds=1,use_subgroups=1,"
                                               "workgroup_size=512,keys_per_invocation=16")
                 .value();
  EXPECT_TRUE(sort_u64.check_schedule(schedule, large_adapter()).ok());
  EXPECT_EQ(sort_u64.check_schedule(schedule, lavapipe_memory).error().message(),
            "Knobs workgroup_size (512), keys_per_invocation (16), digit_bits (8) and "
            "use_subgroups (1) need 38144 bytes of workgroup memory, more than "
            "maxComputeWorkgroupStorageSize (32768).");

  // The chained scan's workgroup memory grows with the tile only where compaction stages it.
  const KernelDefinition& compact = *kernels::find_kernel("compact_f32").value();
  schedule = kernels::parse_schedule_overrides(
                 compact, "workgroup_size=256,vectors_per_invocation=16,use_subgroups=1")
                 .value();
  EXPECT_EQ(compact.check_schedule(schedule, large_adapter()).error().message(),
            "Knobs workgroup_size (256), vectors_per_invocation (16), use_subgroups (1) and "
            "passes (1) need 65800 bytes of workgroup memory, more than "
            "maxComputeWorkgroupStorageSize (49152).");
  schedule.set("stage_kept", 0);
  EXPECT_TRUE(compact.check_schedule(schedule, large_adapter()).ok());
  const KernelDefinition& scan = *kernels::find_kernel("scan_exclusive_u32").value();
  schedule = kernels::parse_schedule_overrides(
                 scan, "workgroup_size=1024,vectors_per_invocation=16,use_subgroups=0")
                 .value();
  DeviceCapabilities minimal = large_adapter();
  minimal.max_workgroup_storage_size = 4096;
  EXPECT_EQ(scan.check_schedule(schedule, minimal).error().message(),
            "Knobs workgroup_size (1024), vectors_per_invocation (16), use_subgroups (0) and "
            "passes (1) need 4120 bytes of workgroup memory, more than "
            "maxComputeWorkgroupStorageSize (4096).");
  schedule.set("use_subgroups", 1);
  EXPECT_TRUE(scan.check_schedule(schedule, minimal).ok());
  // Only the workgroup's own look-back has a window to choose.
  schedule.set("look_back_window", 256);
  EXPECT_EQ(scan.check_schedule(schedule, large_adapter()).error().message(),
            "Knob look_back_window (256) needs use_subgroups (0): with subgroups the first "
            "subgroup looks back, one predecessor per lane, and the knob keeps its default (32).");
  schedule.set("use_subgroups", 0);
  schedule.set("passes", 3);
  EXPECT_EQ(scan.check_schedule(schedule, large_adapter()).error().message(),
            "Knob look_back_window (256) needs passes (1): the three-pass scan does not look "
            "back, and the knob keeps its default (32).");
  schedule.set("look_back_window", 32);
  // Only the subgroup's look-back reads rows of predecessors.
  schedule.set("look_back_rows", 2);
  EXPECT_EQ(scan.check_schedule(schedule, large_adapter()).error().message(),
            "Knob look_back_rows (2) needs passes (1): the three-pass scan does not look back, "
            "and the knob keeps its default (1).");
  schedule.set("passes", 1);
  EXPECT_EQ(scan.check_schedule(schedule, large_adapter()).error().message(),
            "Knob look_back_rows (2) needs use_subgroups (1): without subgroups the workgroup "
            "looks back, look_back_window predecessors at once, and the knob keeps its default "
            "(1).");
  schedule.set("use_subgroups", 1);
  EXPECT_TRUE(scan.check_schedule(schedule, large_adapter()).ok());
  schedule.set("look_back_rows", 1);
  schedule.set("look_back_publishes", 1);
  EXPECT_TRUE(scan.check_schedule(schedule, large_adapter()).ok());
  schedule.set("use_subgroups", 0);
  EXPECT_EQ(scan.check_schedule(schedule, large_adapter()).error().message(),
            "Knob look_back_publishes (1) needs use_subgroups (1): without subgroups the "
            "workgroup looks back, look_back_window predecessors at once, and the knob keeps its "
            "default (0).");
  schedule.set("look_back_publishes", 0);
  schedule.set("use_subgroups", 0);
  schedule.set("passes", 3);
  // Only the single pass claims tiles.
  schedule.set("claim_tiles", 0);
  EXPECT_EQ(scan.check_schedule(schedule, large_adapter()).error().message(),
            "Knob claim_tiles (0) needs passes (1): the three-pass scan claims no tiles, and the "
            "knob keeps its default (1).");
  schedule.set("passes", 1);
  EXPECT_TRUE(scan.check_schedule(schedule, large_adapter()).ok());
  schedule.set("claim_tiles", 1);
  schedule.set("passes", 3);
  schedule.set("use_subgroups", 1);
  DeviceCapabilities narrow = large_adapter();
  narrow.subgroup_min_size = 2;
  EXPECT_EQ(scan.check_schedule(schedule, narrow).error().message(),
            "Knob use_subgroups (1) needs subgroups of at least 4 invocations; the adapter's "
            "smallest has 2.");
}

// Unstaged compaction stores every element of a vector that keeps any (compact_f32.cpp says
// why): its store branches once per vector, on a vector that keeps nothing, never per element.
TEST(KernelCatalogTest, UnstagedCompactionStoresWithoutAConditionPerElement) {
  const KernelDefinition& compact = *kernels::find_kernel("compact_f32").value();
  const Schedule schedule =
      kernels::parse_schedule_overrides(compact, "use_subgroups=1,stage_kept=0").value();
  const std::string wgsl = compact.generate_wgsl(schedule);
  const std::size_t begin = wgsl.find("fn scan_store(");
  ASSERT_NE(begin, std::string::npos) << wgsl;
  const std::string store = wgsl.substr(begin, wgsl.find("fn scan_finish_tile(", begin) - begin);
  EXPECT_NE(store.find("if (kept == 0u) { return; }"), std::string::npos) << store;
  std::size_t branches = 0;
  for (std::size_t at = store.find("if ("); at != std::string::npos;
       at = store.find("if (", at + 1)) {
    ++branches;
  }
  EXPECT_EQ(branches, 1u) << store;
}

TEST(KernelCatalogTest, SizeBucketsSpanTheSizesWithOneMainBucketAtTheTuningProblem) {
  for (const KernelDefinition* kernel : kernels::builtin_kernels()) {
    for (bool cpu : {false, true}) {
      SCOPED_TRACE(std::string(kernel->id()) + (cpu ? " on a CPU adapter" : " on a GPU"));
      const std::vector<kernels::SizeBucket> buckets = kernel->size_buckets(cpu);
      // group_by_sum_f32 has one more: the main row count with many groups.
      const std::size_t extra = kernel->id() == "group_by_sum_f32" ? 1 : 0;
      ASSERT_EQ(buckets.size(), extra + (cpu ? 2u : (kernel->id() == "gemm_f32" ? 3u : 4u)));
      // Smallest first: by measure, then (segmented_reduce_sum_f32) by average segment length,
      // then (group_by_sum_f32) by max_groups.
      auto position = [](const kernels::Problem& problem) {
        return std::tuple(kernels::bucket_measure(problem),
                          problem.segments == 0 ? 0.0
                                                : static_cast<double>(problem.elements) /
                                                      static_cast<double>(problem.segments),
                          problem.max_groups);
      };
      std::set<std::string> labels;
      int mains = 0;
      for (std::size_t i = 0; i < buckets.size(); ++i) {
        const kernels::SizeBucket& bucket = buckets[i];
        labels.insert(bucket.label);
        EXPECT_TRUE(kernel->check_problem(bucket.problem).ok()) << bucket.label;
        if (i > 0) {
          EXPECT_GT(position(bucket.problem), position(buckets[i - 1].problem));
        }
        if (!bucket.main) continue;
        ++mains;
        EXPECT_EQ(bucket.problem.to_string(), kernel->tuning_problem(cpu).to_string());
        EXPECT_EQ(kernels::bucket_measure(bucket.problem),
                  kernels::bucket_measure(buckets.back().problem))
            << "the main bucket has the most elements";
      }
      EXPECT_EQ(mains, 1);
      EXPECT_EQ(labels.size(), buckets.size()) << "labels are unique";
    }
  }
  const std::vector<kernels::SizeBucket> sort =
      kernels::find_kernel("radix_sort_u32").value()->size_buckets(false);
  std::vector<std::string> labels;
  for (const kernels::SizeBucket& bucket : sort) labels.push_back(bucket.label);
  EXPECT_EQ(labels, (std::vector<std::string>{"2^16", "2^20", "2^24", "2^28"}));
  const std::vector<kernels::SizeBucket> gemm =
      kernels::find_kernel("gemm_f32").value()->size_buckets(false);
  EXPECT_EQ(gemm.front().label, "1024^3");
  EXPECT_EQ(gemm.back().label, "4096^3");
}

TEST(KernelCatalogTest, ACallTakesTheBucketNearestToItsSizeByRatio) {
  const std::vector<kernels::SizeBucket> buckets =
      kernels::find_kernel("scan_exclusive_u32").value()->size_buckets(false);
  auto nearest = [&](std::uint64_t n) {
    kernels::Problem problem;
    problem.elements = n;
    return buckets[kernels::nearest_bucket(buckets, problem)].label;
  };
  EXPECT_EQ(nearest(0), "2^16");
  EXPECT_EQ(nearest(1), "2^16");
  EXPECT_EQ(nearest((1u << 18) - 1), "2^16");
  EXPECT_EQ(nearest(1u << 18), "2^20");  // equally near 2^16 and 2^20: the larger
  EXPECT_EQ(nearest(300000), "2^20");
  EXPECT_EQ(nearest((1u << 22) - 1), "2^20");
  EXPECT_EQ(nearest(1u << 22), "2^24");
  EXPECT_EQ(nearest(std::uint64_t{1} << 40), "2^28");
  kernels::Problem problem;
  problem.elements = 1u << 21;
  // The fallback order: nearest first, then outwards, the larger of two equally near first.
  const std::vector<std::size_t> order = kernels::nearest_buckets(buckets, problem);
  std::vector<std::string> labels;
  for (std::size_t index : order) labels.push_back(buckets[index].label);
  EXPECT_EQ(labels, (std::vector<std::string>{"2^20", "2^24", "2^16", "2^28"}));

  const std::vector<kernels::SizeBucket> gemm =
      kernels::find_kernel("gemm_f32").value()->size_buckets(false);
  kernels::Problem shape;
  shape.m = 1500;
  shape.n = 1500;
  shape.k = 1500;
  EXPECT_EQ(gemm[kernels::nearest_bucket(gemm, shape)].label, "2048^3");
  shape.m = shape.n = shape.k = 1400;
  EXPECT_EQ(gemm[kernels::nearest_bucket(gemm, shape)].label, "1024^3");
}

// segmented_reduce_sum_f32's buckets differ in segment length alone: a call takes the bucket
// whose segments are nearest to its average length by ratio, whatever its element count.
TEST(KernelCatalogTest, ASegmentedCallTakesTheBucketNearestToItsSegmentLength) {
  const kernels::KernelDefinition& kernel =
      *kernels::find_kernel("segmented_reduce_sum_f32").value();
  const std::vector<kernels::SizeBucket> buckets = kernel.size_buckets(false);
  std::vector<std::string> labels;
  for (const kernels::SizeBucket& bucket : buckets) labels.push_back(bucket.label);
  EXPECT_EQ(labels, (std::vector<std::string>{"2^28x32", "2^28x256", "2^28x1024", "2^28x8192"}));
  EXPECT_TRUE(buckets[1].main);
  EXPECT_EQ(buckets[1].key_label(), "");
  auto nearest = [&](std::uint64_t n, std::uint64_t segments) {
    kernels::Problem problem;
    problem.elements = n;
    problem.segments = segments;
    return buckets[kernels::nearest_bucket(buckets, problem)].label;
  };
  const std::uint64_t n = std::uint64_t{1} << 28;
  EXPECT_EQ(nearest(n, n / 32), "2^28x32");
  EXPECT_EQ(nearest(n, n / 1024), "2^28x1024");
  EXPECT_EQ(nearest(1u << 16, (1u << 16) / 32), "2^28x32");  // a small call of short segments
  EXPECT_EQ(nearest(1u << 20, (1u << 20) / 300), "2^28x256");
  EXPECT_EQ(nearest(1u << 20, (1u << 20) / 512), "2^28x1024");  // equally near: the longer
  EXPECT_EQ(nearest(1u << 20, 1), "2^28x8192");
  EXPECT_EQ(nearest(1000, 1000), "2^28x32");
  EXPECT_EQ(kernel.size_buckets(true).front().label, "2^20x32");
}

// A workgroup table's slot counts its rows in 24 bits: a plan whose workgroups would each add
// 2^24 rows or more is refused, naming the knob to raise.
TEST(KernelCatalogTest, AGroupByPlanRefusesWorkgroupsOfTooManyRows) {
  const kernels::KernelDefinition& kernel = *kernels::find_kernel("group_by_sum_f32").value();
  const auto schedule = [&](const char* overrides) {
    return kernels::parse_schedule_overrides(kernel, overrides).value();
  };
  kernels::Problem problem;
  problem.elements = 0xffffffffu;
  problem.max_groups = 4096;
  const auto refused = kernel.plan(
      schedule(
          "workgroup_size=64,rows_per_invocation=1,local_slots=1024,persistent_workgroups=256"),
      problem, large_adapter());
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.error().to_string().find("16777216 rows"), std::string::npos)
      << refused.error().to_string();
  EXPECT_NE(refused.error().to_string().find("persistent_workgroups"), std::string::npos);
  // One tile per workgroup, or no workgroup tables, count no rows there.
  EXPECT_TRUE(
      kernel.plan(schedule("local_slots=1024,persistent_workgroups=0"), problem, large_adapter())
          .ok());
  EXPECT_TRUE(
      kernel.plan(schedule("local_slots=0,persistent_workgroups=256"), problem, large_adapter())
          .ok());
}

// group_by_sum_f32's buckets differ in rows and in groups (max_groups, or n when not given):
// a call takes the bucket nearest in both by ratio; other kernels' buckets ignore max_groups.
TEST(KernelCatalogTest, AGroupByCallTakesTheBucketNearestInRowsAndGroups) {
  const kernels::KernelDefinition& kernel = *kernels::find_kernel("group_by_sum_f32").value();
  const std::vector<kernels::SizeBucket> buckets = kernel.size_buckets(false);
  std::vector<std::string> labels;
  for (const kernels::SizeBucket& bucket : buckets) labels.push_back(bucket.label);
  EXPECT_EQ(labels, (std::vector<std::string>{"2^16", "2^20", "2^24", "2^28", "2^28g2^20"}));
  EXPECT_TRUE(buckets[3].main);
  EXPECT_EQ(buckets[4].problem.max_groups, 1u << 20);
  EXPECT_EQ(buckets[4].problem.elements, std::uint64_t{1} << 28);
  auto nearest = [&](std::uint64_t n, std::uint64_t max_groups) {
    kernels::Problem problem;
    problem.elements = n;
    problem.max_groups = max_groups;
    return buckets[kernels::nearest_bucket(buckets, problem)].label;
  };
  const std::uint64_t n = std::uint64_t{1} << 28;
  EXPECT_EQ(nearest(n, 4096), "2^28");
  EXPECT_EQ(nearest(n, 1000), "2^28");
  EXPECT_EQ(nearest(n, 1u << 20), "2^28g2^20");
  EXPECT_EQ(nearest(n, 1u << 24), "2^28g2^20");
  EXPECT_EQ(nearest(n, 0), "2^28g2^20");         // up to n groups
  EXPECT_EQ(nearest(n, 1u << 16), "2^28g2^20");  // equally near: the more groups
  EXPECT_EQ(nearest(n, (1u << 16) - 1), "2^28");
  EXPECT_EQ(nearest(1u << 20, 4096), "2^20");
  EXPECT_EQ(nearest(1u << 20, 1u << 18), "2^20");
  EXPECT_EQ(nearest(1u << 20, 1u << 20), "2^28g2^20");  // equally near 2^20: the larger
  EXPECT_EQ(nearest(1u << 26, 1u << 20), "2^28g2^20");
  kernels::Problem wide;
  wide.elements = n;
  wide.max_groups = 1u << 22;
  const std::vector<std::size_t> order = kernels::nearest_buckets(buckets, wide);
  std::vector<std::string> fallback;
  for (std::size_t index : order) fallback.push_back(buckets[index].label);
  EXPECT_EQ(fallback, (std::vector<std::string>{"2^28g2^20", "2^28", "2^24", "2^20", "2^16"}));

  const std::vector<kernels::SizeBucket> cpu = kernel.size_buckets(true);
  EXPECT_EQ(cpu.back().label, "2^20g2^16");
  EXPECT_EQ(cpu.back().problem.max_groups, 1u << 16);

  // A scan call that states max_groups takes the same bucket as one that does not.
  const std::vector<kernels::SizeBucket> scan =
      kernels::find_kernel("scan_exclusive_u32").value()->size_buckets(false);
  kernels::Problem problem;
  problem.elements = 1u << 20;
  const std::size_t plain = kernels::nearest_bucket(scan, problem);
  problem.max_groups = 1u << 27;
  EXPECT_EQ(kernels::nearest_bucket(scan, problem), plain);
}

TEST(KernelCatalogTest, ScheduleOverridesParseOrSayWhatIsWrong) {
  const KernelDefinition& affine = *kernels::find_kernel("affine_f32").value();
  Schedule schedule =
      kernels::parse_schedule_overrides(affine, "vector_width=4,workgroup_size=128").value();
  EXPECT_EQ(schedule.get("vector_width"), 4);
  EXPECT_EQ(schedule.get("workgroup_size"), 128);
  EXPECT_EQ(schedule.get("items_per_invocation"), 1);
  EXPECT_EQ(kernels::parse_schedule_overrides(affine, "").value(), affine.default_schedule());
  EXPECT_EQ(kernels::parse_schedule_overrides(affine, "vector_width").error().message(),
            "Schedule piece 'vector_width' is not knob=value (expected e.g. "
            "workgroup_size=128,vector_width=4).");
  EXPECT_EQ(kernels::parse_schedule_overrides(affine, "vector_width=four").error().message(),
            "Schedule value 'four' of knob vector_width is not an integer.");
  EXPECT_FALSE(kernels::parse_schedule_overrides(affine, "=4").ok());
  EXPECT_EQ(kernels::find_kernel("sort").error().kind(), ErrorKind::kInvalidInput);
}

TEST(KernelCatalogTest, UndefinedProblemsAreErrorsTheCallerSees) {
  kernels::Problem empty;
  empty.elements = 0;
  for (const char* id : {"reduce_min_f32", "reduce_max_f32"}) {
    const KernelDefinition& kernel = *kernels::find_kernel(id).value();
    auto plan = kernel.plan(kernel.default_schedule(), empty, large_adapter());
    ASSERT_FALSE(plan.ok()) << id;
    EXPECT_NE(plan.error().message().find("of an empty input is undefined (n = 0)"),
              std::string::npos);
  }
  const KernelDefinition& histogram = *kernels::find_kernel("histogram_u32").value();
  kernels::Problem problem;
  problem.elements = 10;
  for (std::uint32_t bins : {0u, 4097u}) {
    problem.bins = bins;
    auto plan = histogram.plan(histogram.default_schedule(), problem, large_adapter());
    ASSERT_FALSE(plan.ok());
    EXPECT_EQ(plan.error().message(),
              "Bin count (" + std::to_string(bins) + ") is outside 1..4096.");
  }
}

// The largest grid of `kernel`'s plan for `spec` with `schedule`.
std::uint64_t largest_grid(const KernelDefinition& kernel, const Schedule& schedule,
                           const kernels::CaseSpec& spec) {
  auto plan = kernel.plan(schedule, spec.problem, large_adapter());
  EXPECT_TRUE(plan.ok()) << spec.name;
  std::uint64_t largest = 0;
  if (plan.ok()) {
    for (const kernels::PassPlan& pass : plan->passes) largest = std::max(largest, pass.workgroups);
  }
  return largest;
}

// Issue 29: each schedule of the space is certified just past its second level, computed from
// the schedule: reduce_sum_f32's second pass gets one partial sum more than its workgroup adds
// up in one step (an element the tolerance can see skipped: 2^24 below 2^23 elements, then an
// infinity), the chained scan one tile more than a look-back window, or than the spine's
// workgroup has invocations, GEMM one element past two tiles in m, one in n and two in k,
// group_by_sum_f32's persistent workgroups one tile more than there are workgroups.
TEST(KernelCatalogTest, ScheduleCasesGoJustPastEachSchedulesSecondLevel) {
  const KernelDefinition& sum = *kernels::find_kernel("reduce_sum_f32").value();
  for (const Schedule& schedule : sum.schedule_space(large_adapter())) {
    const std::uint64_t wg = static_cast<std::uint64_t>(*schedule.get("workgroup_size"));
    const std::uint64_t tile =
        wg * static_cast<std::uint64_t>(*schedule.get("items_per_invocation") *
                                        *schedule.get("vector_width"));
    const std::vector<kernels::CaseSpec> cases = sum.schedule_cases(schedule, large_adapter());
    ASSERT_EQ(cases.size(), 1u) << schedule.to_string();
    EXPECT_EQ(cases[0].problem.elements, wg * tile + 1);
    EXPECT_EQ(cases[0].value_profile, wg * tile + 1 < (1u << 23) ? "heavy-last" : "infinite-last");
    EXPECT_EQ(largest_grid(sum, schedule, cases[0]), wg + 1) << schedule.to_string();
  }
  for (const char* id : {"scan_exclusive_u32", "compact_f32"}) {
    const KernelDefinition& kernel = *kernels::find_kernel(id).value();
    for (const Schedule& schedule : kernel.schedule_space(large_adapter())) {
      const std::uint64_t wg = static_cast<std::uint64_t>(*schedule.get("workgroup_size"));
      const std::uint64_t window =
          *schedule.get("passes") == 3 ? wg
          : *schedule.get("use_subgroups") == 1
              ? 32 * static_cast<std::uint64_t>(*schedule.get("look_back_rows"))
              : std::min<std::uint64_t>(
                    wg, static_cast<std::uint64_t>(*schedule.get("look_back_window")));
      const std::vector<kernels::CaseSpec> cases = kernel.schedule_cases(schedule, large_adapter());
      ASSERT_EQ(cases.size(), 1u) << id << " " << schedule.to_string();
      EXPECT_EQ(largest_grid(kernel, schedule, cases[0]),
                window + (*schedule.get("passes") == 3 ? 1 : 2))
          << id << " " << schedule.to_string();
    }
  }
  // GEMM: 3 x 2 tiles of C and three k-tiles; with vector_loads the same again for gemm_vec4.
  const KernelDefinition& gemm = *kernels::find_kernel("gemm_f32").value();
  for (const Schedule& schedule : sampled_schedules(gemm)) {
    const std::vector<kernels::CaseSpec> cases = gemm.schedule_cases(schedule, large_adapter());
    const bool vectors = *schedule.get("vector_loads") == 1;
    ASSERT_EQ(cases.size(), vectors ? 2u : 1u) << schedule.to_string();
    for (const kernels::CaseSpec& spec : cases) {
      EXPECT_EQ(largest_grid(gemm, schedule, spec), 6u) << schedule.to_string();
      const auto plan = gemm.plan(schedule, spec.problem, large_adapter());
      ASSERT_TRUE(plan.ok());
      const bool whole_vectors = spec.problem.k % 4 == 0;
      EXPECT_EQ(plan->passes[0].entry_point, whole_vectors ? "gemm_vec4" : "gemm")
          << schedule.to_string();
      EXPECT_EQ(spec.problem.k, 2 * *schedule.get("tile_k") + (whole_vectors ? 4 : 1))
          << schedule.to_string();
    }
    EXPECT_EQ(cases.back().problem.k % 4 == 0, vectors) << schedule.to_string();
  }
  // group_by_sum_f32 with P persistent workgroups: one tile more than P, so that workgroup 0
  // loops to a second tile; with one workgroup per tile, a single level.
  const KernelDefinition& group_by = *kernels::find_kernel("group_by_sum_f32").value();
  for (const Schedule& schedule : group_by.schedule_space(large_adapter())) {
    const std::uint64_t persistent =
        static_cast<std::uint64_t>(*schedule.get("persistent_workgroups"));
    const std::uint64_t tile = static_cast<std::uint64_t>(*schedule.get("workgroup_size") *
                                                          *schedule.get("rows_per_invocation"));
    const std::vector<kernels::CaseSpec> cases = group_by.schedule_cases(schedule, large_adapter());
    if (persistent == 0) {
      EXPECT_TRUE(cases.empty()) << schedule.to_string();
      continue;
    }
    ASSERT_EQ(cases.size(), 1u) << schedule.to_string();
    EXPECT_EQ(cases[0].problem.elements, persistent * tile + 1) << schedule.to_string();
    const auto plan = group_by.plan(schedule, cases[0].problem, large_adapter()).value();
    // "scale" reads the rows over the same grid as "aggregate".
    ASSERT_EQ(plan.passes[1].entry_point, "scale");
    ASSERT_EQ(plan.passes[2].entry_point, "aggregate");
    EXPECT_EQ(plan.passes[1].workgroups, persistent) << schedule.to_string();
    EXPECT_EQ(plan.passes[2].workgroups, persistent) << schedule.to_string();
  }
}

// The counts_spine pass's uniform words of the first round: n, tiles, shift, count_length,
// count_blocks, scan_width.
std::vector<std::uint32_t> spine_words(const KernelDefinition& kernel, const Schedule& schedule,
                                       const kernels::Problem& problem) {
  auto plan = kernel.plan(schedule, problem, large_adapter());
  EXPECT_TRUE(plan.ok()) << plan.error().to_string();
  if (!plan.ok()) return {};
  for (const kernels::PassPlan& pass : plan->passes) {
    if (pass.entry_point == "counts_spine") return pass.params;
  }
  return {};
}

// The five-pass radix sorts' second level, the spine's second step, comes at the full width only
// past (workgroup_size * 4)^2 counts (8388609 keys for the default schedule): each five-pass
// schedule's case narrows the counts' scan to 5 counts a block and 5 blocks a spine step and takes
// at least two tiles and 2 * 5 + 1 blocks, so that the spine runs three steps or more, the last
// partial, with a few thousand keys (at most 13 tiles). Every call keeps the full width. One sweep
// has no spine, and no case.
TEST(KernelCatalogTest, RadixSortCasesRunTheCountsSpineInSeveralSteps) {
  for (const char* id : {"radix_sort_u32", "radix_sort_pairs_u32", "radix_sort_pairs_u64"}) {
    const KernelDefinition& sort = *kernels::find_kernel(id).value();
    for (const Schedule& schedule : sort.schedule_space(large_adapter())) {
      SCOPED_TRACE(std::string(id) + " " + schedule.to_string());
      const std::vector<kernels::CaseSpec> cases = sort.schedule_cases(schedule, large_adapter());
      if (*schedule.get("one_sweep") == 1) {
        EXPECT_TRUE(cases.empty());
        continue;
      }
      ASSERT_EQ(cases.size(), 1u);
      const std::uint64_t tile = static_cast<std::uint64_t>(*schedule.get("workgroup_size") *
                                                            *schedule.get("keys_per_invocation"));
      const std::uint64_t n = cases[0].problem.elements;
      EXPECT_EQ(n % tile, tile - 1);
      EXPECT_LE(n, 13 * tile);
      // The counted rounds' six words (the u64 keys' direct rounds add three).
      const std::vector<std::uint32_t> words = spine_words(sort, schedule, cases[0].problem);
      ASSERT_GE(words.size(), 6u);
      const std::uint32_t width = words[5];
      EXPECT_EQ(width, 5u);
      EXPECT_GE(words[1], 2u);             // tiles
      EXPECT_GE(words[4], 2 * width + 1);  // blocks: three spine steps or more
      EXPECT_NE(words[4] % width, 0u);     // the last step partial
      EXPECT_EQ(words[4], (words[3] + width - 1) / width);
      // A call of the same size scans at the full width, in one step.
      kernels::Problem call = cases[0].problem;
      call.counts_scan_width = 0;
      const std::vector<std::uint32_t> full = spine_words(sort, schedule, call);
      ASSERT_GE(full.size(), 6u);
      EXPECT_EQ(full[5], 4 * *schedule.get("workgroup_size"));
      EXPECT_LE(full[4], full[5]);
    }
  }
  // A width past what one workgroup takes is refused, naming the field and the limit.
  const KernelDefinition& sort = *kernels::find_kernel("radix_sort_u32").value();
  kernels::Problem problem;
  problem.elements = 1000;
  problem.counts_scan_width = 513;
  EXPECT_EQ(sort.plan(sort.default_schedule(), problem, large_adapter()).error().message(),
            "Problem counts_scan_width (513) exceeds the most counts one workgroup of the counts' "
            "scan takes, workgroup_size * 4 (512).");
}

// hash_join_u32's inputs (drawn on every core through a key permutation, no set) keep each
// profile's promise, the same seed draws the same inputs, and its oracle (a flat CPU table)
// accepts the join and rejects one wrong pair. CPU only.
class HashJoinInputsTest : public testing::SeededTest {
 protected:
  const KernelDefinition& kernel_ = *kernels::find_kernel("hash_join_u32").value();

  kernels::CaseInputs draw(std::uint64_t build_n, std::uint64_t n, const std::string& profile,
                           std::uint64_t seed) const {
    kernels::Problem problem;
    problem.elements = n;
    problem.build_elements = build_n;
    return kernel_.make_inputs({profile, problem, profile}, seed);
  }
  static std::vector<std::uint32_t> words(const std::vector<std::byte>& bytes) {
    std::vector<std::uint32_t> values(bytes.size() / 4);
    std::memcpy(values.data(), bytes.data(), bytes.size());
    return values;
  }
};

TEST_F(HashJoinInputsTest, ProfilesKeepTheirPromisesAndTheOracleRejectsAWrongPair) {
  SCOPED_TRACE(trace());
  constexpr std::uint64_t kBuild = 65537, kProbe = 300007;
  const std::uint64_t seed = random_();
  const kernels::CaseInputs half = draw(kBuild, kProbe, "half-match", seed);
  EXPECT_EQ(half.buffers, draw(kBuild, kProbe, "half-match", seed).buffers);
  EXPECT_NE(half.buffers, draw(kBuild, kProbe, "half-match", seed + 1).buffers);

  const std::vector<std::uint32_t> build = words(half.buffers.at("build_keys"));
  const std::vector<std::uint32_t> build_payloads = words(half.buffers.at("build_payloads"));
  std::map<std::uint32_t, std::uint32_t> table;
  for (std::size_t i = 0; i < build.size(); ++i) table.emplace(build[i], build_payloads[i]);
  EXPECT_EQ(table.size(), kBuild) << "build keys must be unique";
  EXPECT_FALSE(table.contains(0u) || table.contains(0xffffffffu));
  const std::vector<std::uint32_t> probe = words(half.buffers.at("probe_keys"));
  const std::vector<std::uint32_t> probe_payloads = words(half.buffers.at("probe_payloads"));
  std::vector<std::uint32_t> pairs_probe, pairs_build;
  for (std::size_t j = 0; j < probe.size(); ++j) {
    if (auto hit = table.find(probe[j]); hit != table.end()) {
      pairs_probe.push_back(probe_payloads[j]);
      pairs_build.push_back(hit->second);
    }
  }
  EXPECT_GT(pairs_probe.size(), kProbe * 45 / 100);
  EXPECT_LT(pairs_probe.size(), kProbe * 55 / 100);

  const kernels::CaseInputs none = draw(kBuild, kProbe, "no-match", random_());
  const std::vector<std::uint32_t> none_build = words(none.buffers.at("build_keys"));
  const std::set<std::uint32_t> none_set(none_build.begin(), none_build.end());
  EXPECT_EQ(none_set.size(), kBuild);
  for (std::uint32_t key : words(none.buffers.at("probe_keys"))) {
    ASSERT_FALSE(none_set.contains(key)) << "no-match probes build key " << key;
  }

  // The oracle on the join in reverse order (the pairs are a multiset), then with one pair wrong.
  std::reverse(pairs_probe.begin(), pairs_probe.end());
  std::reverse(pairs_build.begin(), pairs_build.end());
  auto outputs_of = [&](const std::vector<std::uint32_t>& build_side,
                        const std::vector<std::uint32_t>& probe_side) {
    std::map<std::string, std::vector<std::byte>> outputs;
    const auto count = static_cast<std::uint32_t>(probe_side.size());
    for (const auto& [name, values] :
         {std::pair<std::string, std::vector<std::uint32_t>>{"pairs_probe", probe_side},
          {"pairs_build", build_side},
          {"status", {count, 0, 0}}}) {
      std::vector<std::byte> bytes(4 * values.size());
      std::memcpy(bytes.data(), values.data(), bytes.size());
      outputs[name] = std::move(bytes);
    }
    return outputs;
  };
  const kernels::CaseVerdict right = kernel_.check(half, outputs_of(pairs_build, pairs_probe));
  EXPECT_TRUE(right.report.matches() && right.failed_checks.empty());
  std::vector<std::uint32_t> wrong = pairs_build;
  wrong[wrong.size() / 2] ^= 1u << (random_() % 32);
  EXPECT_EQ(kernel_.check(half, outputs_of(wrong, pairs_probe)).report.mismatch_count, 1u);
  // The same count with one pair in place of another (the multiset differs, not the count),
  // and two build payloads swapped between pairs: the digests tell both apart.
  const std::size_t first = random_() % pairs_build.size();
  const std::size_t second =
      (first + 1 + random_() % (pairs_build.size() - 1)) % pairs_build.size();
  std::vector<std::uint32_t> duplicated_probe = pairs_probe;
  std::vector<std::uint32_t> duplicated_build = pairs_build;
  duplicated_probe[second] = duplicated_probe[first];
  duplicated_build[second] = duplicated_build[first];
  EXPECT_GT(
      kernel_.check(half, outputs_of(duplicated_build, duplicated_probe)).report.mismatch_count,
      0u);
  std::vector<std::uint32_t> swapped = pairs_build;
  std::swap(swapped[first], swapped[second]);
  if (pairs_probe[first] != pairs_probe[second] && pairs_build[first] != pairs_build[second]) {
    EXPECT_GT(kernel_.check(half, outputs_of(swapped, pairs_probe)).report.mismatch_count, 0u);
  }
}

}  // namespace
}  // namespace wgsl_forge
