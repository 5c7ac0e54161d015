// group_by_sum_f32: GROUP BY key, SUM(value), COUNT(*) over n rows of u32 keys and f32 values:
// each distinct key once, with the sum of its values and its row count, in no particular order,
// and the number of distinct keys.
//
// Passes: "clear" empties an open-addressing table of `capacity` slots (the smallest power of two
// at least table_factor * max_groups, at least 2; max_groups is the caller's bound on distinct
// keys, n when not given), "aggregate" adds every row to its key's slot, "emit" appends every
// occupied slot to the outputs. A slot is three words, key, sum (f32 bits) and count; the empty
// key is 0xffffffff, so the key 0xffffffff has one extra slot (index capacity), and a slot is
// occupied when its count is not 0. Keys claim slots by compare-exchange on the key word,
// searched from fmix32(key) in triangular steps (1, 2, 3, ...: every slot of a power-of-two
// table). WebGPU has no f32 atomics, so a sum is added by a compare-exchange loop on its bits:
// lock-free (an exchange fails only when another invocation's succeeded), never a wait on another
// workgroup.
//
// A key's slot is found by loading its key word first: only a key not yet in the table (a load
// that finds the empty key) tries the exchange. A row of a key already in its slot then costs a
// load of the key word, an atomic add to the count (first: nothing waits for its result) and the
// sum's loop: a load and one exchange unless another invocation's came first.
//
// "aggregate" cuts the rows into tiles of workgroup_size * rows_per_invocation rows. With
// persistent_workgroups 0 it runs one workgroup per tile; with P > 0 it runs at most P workgroups,
// each taking tiles P apart (a grid-stride loop), so that each workgroup's table is cleared and
// added to the global one once for many tiles rather than once per tile.
//
// With local_slots > 0 each workgroup first aggregates its rows in a table of that many slots in
// workgroup memory (the histogram's workgroup-private path: with a few thousand groups most rows
// never touch global memory). A row searches at most params.local_probes slots there: every slot
// when max_groups <= local_slots (each key then finds room in every workgroup, so no row goes to
// the contended global slots of few groups; only with more keys than max_groups, the error, does
// a row search all local_slots slots in vain), else LOCAL_PROBES (so that with many groups a row
// whose key finds no room wastes few steps); a row whose key finds no room goes to the global
// table at once. At the end the workgroup adds each occupied local slot to the global table with
// one exchange loop and one atomic add, starting at a slot drawn from its workgroup index so that
// workgroups that finish together add to different global slots. With local_slots 0 every row
// goes to the global table.
//
// More distinct keys than max_groups is an error the caller sees: groups[0] then exceeds
// max_groups (only the first max_groups are written), or groups[1] counts the rows that found no
// room in the table. The order in which f32 additions happen depends on scheduling, so results
// differ between runs in their last bits: deterministic() is false.
//
// Error bound: a group's f32 sum is a sum of its m values in some order and grouping, each
// addition rounded once, so |sum - exact| <= gamma(m) * sum(|value|) with gamma(m) = m u / (1 - m
// u), u = 2^-24 (Higham, Accuracy and Stability of Numerical Algorithms, 2nd ed., section 4.2),
// plus m * 2^-126 for an adapter that flushes subnormal partial sums to zero. The oracle sums in
// double precision and checks that bound per group; keys and counts exact, compared after sorting
// by key. Values are finite (a NaN or an infinity makes its group's sum NaN or infinite, as f32
// additions do). Bytes moved: 8 n; rate: rows.

#include <algorithm>
#include <bit>
#include <cmath>
#include <unordered_map>
#include <unordered_set>

#include "kernel_support.hpp"
#include "util/try.hpp"

namespace wgsl_forge::kernels {
namespace {

using namespace support;

constexpr std::uint32_t kEmptyKey = 0xffffffffu;
// Slots a row searches in its workgroup's table before it goes to the global one, when there may
// be more groups than the table has slots.
constexpr std::uint32_t kLocalProbes = 8;

const KnobSpec kWorkgroupSize{
    "workgroup_size", "invocations per workgroup", {64, 128, 256, 512}, 256};
const KnobSpec kRowsPerInvocation{
    "rows_per_invocation", "rows per invocation, workgroup_size apart", {1, 4, 16}, 1};
const KnobSpec kLocalSlots{"local_slots",
                           "slots of each workgroup's table in workgroup memory (0: none)",
                           {0, 1024, 2048, 4096},
                           1024};
const KnobSpec kTableFactor{
    "table_factor", "global table slots per group, at least (load at most 1/factor)", {2, 4}, 2};
// WebGPU does not tell how many compute units an adapter has, so the grid is a knob: a few
// workgroups per unit of a large GPU (the H200 has 132).
const KnobSpec kPersistentWorkgroups{
    "persistent_workgroups",
    "most workgroups of the aggregate pass, each looping over tiles (0: one per tile)",
    {0, 256, 512, 1024, 2048},
    0};

const char* const kParamsWgsl = R"(
struct Params { n: u32, capacity: u32, max_groups: u32, local_probes: u32 }
)";

// The global table, its clearing and emitting, and the adding of a partial sum to a key's slot.
const char* const kTableWgsl = R"(
const EMPTY: u32 = 0xffffffffu;
const NO_SLOT: u32 = 0xffffffffu;
// MurmurHash3's 32-bit finaliser: every input bit moves every output bit.
fn hash(key: u32) -> u32 {
  var h = key;
  h ^= h >> 16u;
  h *= 0x85ebca6bu;
  h ^= h >> 13u;
  h *= 0xc2b2ae35u;
  h ^= h >> 16u;
  return h;
}
fn key_word(slot: u32) -> u32 { return 3u * slot; }
fn sum_word(slot: u32) -> u32 { return 3u * slot + 1u; }
fn count_word(slot: u32) -> u32 { return 3u * slot + 2u; }

// The slot of `key`, claimed when the key is new; NO_SLOT when the table has no room. A failed
// exchange that leaves the slot empty (a spurious failure of the weak exchange) tries the same
// slot again; it counts as a step, so the search stays bounded.
fn global_slot(key: u32) -> u32 {
  if (key == EMPTY) { return params.capacity; }
  let mask = params.capacity - 1u;
  var slot = hash(key) & mask;
  for (var step = 1u; step <= params.capacity; step++) {
    var found = atomicLoad(&table[key_word(slot)]);
    if (found == EMPTY) {
      let claimed = atomicCompareExchangeWeak(&table[key_word(slot)], EMPTY, key);
      if (claimed.exchanged) { return slot; }
      found = claimed.old_value;
    }
    if (found == key) { return slot; }
    if (found != EMPTY) { slot = (slot + step) & mask; }
  }
  return NO_SLOT;
}

// Tiles of TILE rows, the last one partial (written so that n + TILE cannot overflow).
fn tile_count() -> u32 {
  return params.n / TILE + select(0u, 1u, params.n % TILE != 0u);
}

fn add_global(key: u32, sum: f32, count: u32) {
  let slot = global_slot(key);
  if (slot == NO_SLOT) {
    atomicAdd(&groups[1], count);
    return;
  }
  // The count first: its result is not used, so it need not be waited for before the sum's
  // exchange loop starts.
  atomicAdd(&table[count_word(slot)], count);
  let word = sum_word(slot);
  var old = atomicLoad(&table[word]);
  loop {
    let swapped =
        atomicCompareExchangeWeak(&table[word], old, bitcast<u32>(bitcast<f32>(old) + sum));
    if (swapped.exchanged) { break; }
    old = swapped.old_value;
  }
}

@compute @workgroup_size(WG)
fn clear(@builtin(workgroup_id) group: vec3u, @builtin(num_workgroups) groups_grid: vec3u,
         @builtin(local_invocation_index) local: u32) {
  let slot = linear_workgroup(group, groups_grid) * WG + local;
  if (slot <= params.capacity) {
    atomicStore(&table[key_word(slot)], EMPTY);  // slot capacity: the key 0xffffffff's own
    atomicStore(&table[sum_word(slot)], 0u);
    atomicStore(&table[count_word(slot)], 0u);
  }
  if (slot == 0u) {
    atomicStore(&groups[0], 0u);
    atomicStore(&groups[1], 0u);
  }
}

@compute @workgroup_size(WG)
fn emit(@builtin(workgroup_id) group: vec3u, @builtin(num_workgroups) groups_grid: vec3u,
        @builtin(local_invocation_index) local: u32) {
  let slot = linear_workgroup(group, groups_grid) * WG + local;
  if (slot > params.capacity) { return; }
  let count = atomicLoad(&table[count_word(slot)]);
  if (count == 0u) { return; }
  let at = atomicAdd(&groups[0], 1u);
  if (at < params.max_groups) {
    group_keys[at] = atomicLoad(&table[key_word(slot)]);
    group_sums[at] = bitcast<f32>(atomicLoad(&table[sum_word(slot)]));
    group_counts[at] = count;
  }
}
)";

const char* const kGlobalAggregateWgsl = R"(
@compute @workgroup_size(WG)
fn aggregate(@builtin(workgroup_id) group: vec3u, @builtin(num_workgroups) groups_grid: vec3u,
             @builtin(local_invocation_index) local: u32) {
  let tiles = tile_count();
  let stride = groups_grid.x * groups_grid.y;
  for (var tile = linear_workgroup(group, groups_grid); tile < tiles; tile += stride) {
    // The tile's rows are loaded before any is added, so that their loads are in flight together
    // (loops of ROWS steps: unrolled, the arrays stay in registers).
    var row_keys = array<u32, ROWS>();
    var row_values = array<f32, ROWS>();
    for (var r = 0u; r < ROWS; r++) {
      let row = tile * TILE + r * WG + local;
      if (row < params.n) {
        row_keys[r] = keys[row];
        row_values[r] = values[row];
      }
    }
    for (var r = 0u; r < ROWS; r++) {
      if (tile * TILE + r * WG + local < params.n) {
        add_global(row_keys[r], row_values[r], 1u);
      }
    }
  }
}
)";

// The workgroup's own table: LOCAL_SLOTS slots of three words, laid out as the global one.
const char* const kLocalAggregateWgsl = R"(
var<workgroup> local_table: array<atomic<u32>, 3u * LOCAL_SLOTS>;

// Adds a row to the workgroup's table; false when its key finds no room there within
// params.local_probes slots (the key 0xffffffff, the empty key, never does).
fn add_local(key: u32, value: f32) -> bool {
  if (key == EMPTY) { return false; }
  let mask = LOCAL_SLOTS - 1u;
  var slot = hash(key) & mask;
  for (var step = 1u; step <= params.local_probes; step++) {
    var found = atomicLoad(&local_table[key_word(slot)]);
    if (found == EMPTY) {
      let claimed = atomicCompareExchangeWeak(&local_table[key_word(slot)], EMPTY, key);
      found = select(claimed.old_value, key, claimed.exchanged);
    }
    if (found == key) {
      atomicAdd(&local_table[count_word(slot)], 1u);
      let word = sum_word(slot);
      var old = atomicLoad(&local_table[word]);
      loop {
        let swapped = atomicCompareExchangeWeak(&local_table[word], old,
                                                bitcast<u32>(bitcast<f32>(old) + value));
        if (swapped.exchanged) { break; }
        old = swapped.old_value;
      }
      return true;
    }
    if (found != EMPTY) { slot = (slot + step) & mask; }
  }
  return false;
}

@compute @workgroup_size(WG)
fn aggregate(@builtin(workgroup_id) group: vec3u, @builtin(num_workgroups) groups_grid: vec3u,
             @builtin(local_invocation_index) local: u32) {
  for (var slot = local; slot < LOCAL_SLOTS; slot += WG) {
    atomicStore(&local_table[key_word(slot)], EMPTY);
    atomicStore(&local_table[sum_word(slot)], 0u);
    atomicStore(&local_table[count_word(slot)], 0u);
  }
  workgroupBarrier();
  let workgroup = linear_workgroup(group, groups_grid);
  let tiles = tile_count();
  let stride = groups_grid.x * groups_grid.y;
  for (var tile = workgroup; tile < tiles; tile += stride) {
    // The tile's rows are loaded before any is added, so that their loads are in flight together
    // (loops of ROWS steps: unrolled, the arrays stay in registers).
    var row_keys = array<u32, ROWS>();
    var row_values = array<f32, ROWS>();
    for (var r = 0u; r < ROWS; r++) {
      let row = tile * TILE + r * WG + local;
      if (row < params.n) {
        row_keys[r] = keys[row];
        row_values[r] = values[row];
      }
    }
    for (var r = 0u; r < ROWS; r++) {
      if (tile * TILE + r * WG + local < params.n &&
          !add_local(row_keys[r], row_values[r])) {
        add_global(row_keys[r], row_values[r], 1u);
      }
    }
  }
  workgroupBarrier();
  let first_slot = hash(workgroup);
  for (var i = local; i < LOCAL_SLOTS; i += WG) {
    let slot = (first_slot + i) & (LOCAL_SLOTS - 1u);
    let count = atomicLoad(&local_table[count_word(slot)]);
    if (count != 0u) {
      add_global(atomicLoad(&local_table[key_word(slot)]),
                 bitcast<f32>(atomicLoad(&local_table[sum_word(slot)])), count);
    }
  }
}
)";

std::uint64_t effective_max_groups(const Problem& problem) {
  return problem.max_groups != 0 ? problem.max_groups
                                 : std::max<std::uint64_t>(1, problem.elements);
}

std::uint64_t table_capacity(std::uint64_t max_groups, std::uint64_t factor) {
  return std::max<std::uint64_t>(2, std::bit_ceil(max_groups * factor));
}

std::uint64_t tile_rows(const Schedule& schedule) {
  return std::uint64_t{knob(schedule, kWorkgroupSize)} * knob(schedule, kRowsPerInvocation);
}

// One per tile, at most persistent_workgroups when that is not 0.
std::uint64_t aggregate_workgroups(const Schedule& schedule, std::uint64_t n) {
  const std::uint64_t tiles = ceil_div(n, tile_rows(schedule));
  const std::uint64_t most = knob(schedule, kPersistentWorkgroups);
  return most == 0 ? tiles : std::min(tiles, most);
}

// `count` distinct keys, 0 and 0xffffffff (the empty slot's key) among them when count >= 2.
std::vector<std::uint32_t> distinct_keys(std::size_t count, std::mt19937_64& random) {
  std::unordered_set<std::uint32_t> seen;
  std::vector<std::uint32_t> keys;
  if (count >= 2) keys = {0u, kEmptyKey};
  seen.insert(keys.begin(), keys.end());
  while (keys.size() < count) {
    const auto key = static_cast<std::uint32_t>(random());
    if (seen.insert(key).second) keys.push_back(key);
  }
  std::shuffle(keys.begin(), keys.end(), random);
  return keys;
}

// What the oracle knows of one group.
struct ExactGroup {
  double sum = 0;
  double magnitude = 0;  // the sum of |value|
  std::uint32_t count = 0;
};

class GroupBySumF32 final : public KernelDefinition {
 public:
  std::string_view id() const override { return "group_by_sum_f32"; }
  std::uint32_t revision() const override { return 2; }
  std::string_view summary() const override {
    return "distinct u32 keys with the f32 sum and count of their rows";
  }

  std::vector<KnobSpec> knobs() const override {
    return {kWorkgroupSize, kRowsPerInvocation, kLocalSlots, kTableFactor, kPersistentWorkgroups};
  }

  Status check_resources(const Schedule& schedule,
                         const DeviceCapabilities& device) const override {
    const std::uint64_t bytes = std::uint64_t{knob(schedule, kLocalSlots)} * 12;
    if (bytes > device.max_workgroup_storage_size) {
      return Error(ErrorKind::kInvalidInput,
                   "Knob local_slots (" + std::to_string(knob(schedule, kLocalSlots)) + ") needs " +
                       std::to_string(bytes) +
                       " bytes of workgroup memory, more than maxComputeWorkgroupStorageSize (" +
                       std::to_string(device.max_workgroup_storage_size) + ").");
    }
    return Ok{};
  }

  std::vector<WgslBinding> wgsl_bindings(const Schedule&) const override {
    return {params_binding("Params"),
            storage_read(1, "keys", "u32"),
            storage_read(2, "values", "f32"),
            storage_read_write(3, "table", "atomic<u32>"),
            storage_read_write(4, "group_keys", "u32"),
            storage_read_write(5, "group_sums", "f32"),
            storage_read_write(6, "group_counts", "u32"),
            storage_read_write(7, "groups", "atomic<u32>")};
  }

  std::vector<BufferSpec> buffer_specs() const override {
    return {{"keys", ElementType::kU32, BufferRole::kInput, "n elements, at least 1"},
            {"values", ElementType::kF32, BufferRole::kInput, "n elements, at least 1"},
            {"group_keys", ElementType::kU32, BufferRole::kOutput,
             "max_groups elements (n when not given)"},
            {"group_sums", ElementType::kF32, BufferRole::kOutput,
             "max_groups elements (n when not given)"},
            {"group_counts", ElementType::kU32, BufferRole::kOutput,
             "max_groups elements (n when not given)"},
            {"groups", ElementType::kU32, BufferRole::kOutput,
             "2 elements: distinct keys, rows without room"},
            {"table", ElementType::kU32, BufferRole::kScratch,
             "3 (capacity + 1) elements, capacity the power of two at least table_factor "
             "max_groups"}};
  }

  std::vector<std::string> entry_points(const Schedule&) const override {
    return {"clear", "aggregate", "emit"};
  }

  std::string generate_wgsl(const Schedule& schedule) const override {
    const std::uint32_t local_slots = knob(schedule, kLocalSlots);
    const std::uint32_t wg = knob(schedule, kWorkgroupSize);
    const std::uint32_t rows = knob(schedule, kRowsPerInvocation);
    std::vector<WgslConstant> constants = {{"WG", wg, "invocations per workgroup"},
                                           {"ROWS", rows, "rows per invocation"},
                                           {"TILE", wg * rows, "rows per tile"}};
    if (local_slots != 0) {
      constants.push_back({"LOCAL_SLOTS", local_slots, "slots of the workgroup's table"});
    }
    return std::string(kLinearWorkgroupWgsl) + kParamsWgsl +
           binding_declarations(wgsl_bindings(schedule)) + "\n" + constant_declarations(constants) +
           kTableWgsl + (local_slots != 0 ? kLocalAggregateWgsl : kGlobalAggregateWgsl);
  }

  Status check_problem(const Problem& problem) const override {
    WF_TRY(KernelDefinition::check_problem(problem));
    // The table's word indices, 3 capacity + 2, stay u32 at either factor.
    constexpr std::uint64_t kLargestGroups = std::uint64_t{1} << 28;
    if (problem.max_groups > kLargestGroups) {
      return Error(ErrorKind::kInvalidInput,
                   "Problem size max_groups (" + std::to_string(problem.max_groups) +
                       ") exceeds the most groups of group_by_sum_f32 (" +
                       std::to_string(kLargestGroups) + ": its table's word indices are u32).");
    }
    return Ok{};
  }

  Result<DispatchPlan> plan(const Schedule& schedule, const Problem& problem,
                            const DeviceCapabilities& device) const override {
    const std::uint64_t n = problem.elements;
    const std::uint64_t max_groups = effective_max_groups(problem);
    const std::uint64_t capacity = table_capacity(max_groups, knob(schedule, kTableFactor));
    const std::uint64_t table_bytes = 12 * (capacity + 1);
    if (table_bytes > device.max_storage_binding_size) {
      return Error(ErrorKind::kInvalidInput, "The hash table of " + std::to_string(max_groups) +
                                                 " groups (" + std::to_string(table_bytes) +
                                                 " bytes) exceeds maxStorageBufferBindingSize (" +
                                                 std::to_string(device.max_storage_binding_size) +
                                                 ").");
    }
    const std::uint64_t wg = knob(schedule, kWorkgroupSize);
    const std::map<std::uint32_t, std::string> buffers = {
        {1, "keys"},       {2, "values"},       {3, "table"}, {4, "group_keys"},
        {5, "group_sums"}, {6, "group_counts"}, {7, "groups"}};
    const std::uint64_t local_slots = knob(schedule, kLocalSlots);
    const std::uint32_t local_probes = local_slots != 0 && max_groups <= local_slots
                                           ? static_cast<std::uint32_t>(local_slots)
                                           : kLocalProbes;
    const std::vector<std::uint32_t> params = {
        static_cast<std::uint32_t>(n), static_cast<std::uint32_t>(capacity),
        static_cast<std::uint32_t>(max_groups), local_probes};
    const std::uint64_t row_bytes = std::max<std::uint64_t>(4, 4 * n);
    DispatchPlan plan;
    plan.buffers = make_buffer_plans(buffer_specs(), {{"keys", row_bytes},
                                                      {"values", row_bytes},
                                                      {"group_keys", 4 * max_groups},
                                                      {"group_sums", 4 * max_groups},
                                                      {"group_counts", 4 * max_groups},
                                                      {"groups", 8},
                                                      {"table", table_bytes}});
    plan.passes = {{"clear", ceil_div(capacity + 1, wg), buffers, params},
                   {"aggregate", aggregate_workgroups(schedule, n), buffers, params},
                   {"emit", ceil_div(capacity + 1, wg), buffers, params}};
    return plan;
  }

  std::string tolerance() const override {
    return "keys and counts exact (as a set); each sum within gamma(m) * sum(|value|) + m * "
           "2^-126 of the exact sum, gamma(m) = m u / (1 - m u), u = 2^-24, m the group's rows";
  }

  std::vector<CaseSpec> certification_cases() const override {
    std::vector<CaseSpec> cases;
    auto add = [&](std::uint64_t n, std::uint64_t max_groups, const std::string& profile) {
      Problem problem;
      problem.elements = n;
      problem.max_groups = max_groups;
      cases.push_back(
          {"n=" + std::to_string(n) + " max_groups=" + std::to_string(max_groups) + " " + profile,
           problem, profile});
    };
    // The first profile is what the tuner and bench draw their inputs from.
    for (std::uint64_t n : edge_sizes(256, 1024)) add(n, 100, "groups");
    add(104729, 4096, "groups");
    add(104729, 5000, "groups");  // more groups than any workgroup table holds
    add(1, 1, "one-group");
    add(104729, 1, "one-group");
    add(7919, 0, "unique");
    add(104729, 0, "unique");
    add(1000, 10, "too-many-groups");
    add(104729, 4096, "too-many-groups");
    Problem many;
    many.elements = many_workgroups_size(256, 4, 128u << 20);
    many.max_groups = 4096;
    cases.push_back(
        {"many-workgroups max_groups=4096 n=" + std::to_string(many.elements), many, "groups"});
    return cases;
  }

  // With persistent_workgroups P the aggregate pass's loop over tiles comes into play past P
  // tiles: at n = P * TILE + 1 workgroup 0 takes tile P, its last row alone. The keys come from
  // local_slots groups (4096 without a local table): rows then may search the whole workgroup
  // table (local_probes = local_slots), and the tables fill as far as P * TILE + 1 rows fill
  // them. None when the input would pass the binding limit.
  std::vector<CaseSpec> schedule_cases(const Schedule& schedule,
                                       const DeviceCapabilities& device) const override {
    const std::uint64_t persistent = knob(schedule, kPersistentWorkgroups);
    if (persistent == 0) return {};
    const std::uint64_t n = persistent * tile_rows(schedule) + 1;
    if (4 * n > device.max_storage_binding_size) return {};
    const std::uint64_t local_slots = knob(schedule, kLocalSlots);
    Problem problem = elements_problem(n);
    problem.max_groups = local_slots != 0 ? local_slots : 4096;
    return {{"second tile n=" + std::to_string(n) +
                 " max_groups=" + std::to_string(problem.max_groups) + " groups",
             problem, "groups"}};
  }

  // Profiles: "groups" (keys drawn from max_groups distinct keys, 0 and 0xffffffff among them),
  // "unique" (every key distinct), "one-group" (one key), "too-many-groups" (max_groups + 1
  // distinct keys, each at least once: the error). Values uniform in [-1000, 1000].
  CaseInputs make_inputs(const CaseSpec& spec, std::uint64_t seed) const override {
    std::mt19937_64 random(seed);
    const std::size_t n = spec.problem.elements;
    const std::string& profile = spec.value_profile;
    std::size_t distinct = effective_max_groups(spec.problem);
    if (profile == "one-group") distinct = 1;
    if (profile == "unique") distinct = n;
    if (profile == "too-many-groups") distinct = effective_max_groups(spec.problem) + 1;
    const std::vector<std::uint32_t> pool =
        distinct_keys(std::max<std::size_t>(1, distinct), random);
    std::vector<std::uint32_t> keys(n);
    if (profile == "unique" || profile == "too-many-groups") {
      for (std::size_t i = 0; i < n; ++i) {
        keys[i] = i < pool.size() ? pool[i] : pool[random() % pool.size()];
      }
      std::shuffle(keys.begin(), keys.end(), random);
    } else {
      const std::vector<std::uint64_t> seeds = chunk_seeds(n, random);
      for_each_chunk(n, [&](std::size_t begin, std::size_t end, std::size_t chunk) {
        std::mt19937_64 draw(seeds[chunk]);
        for (std::size_t i = begin; i < end; ++i) keys[i] = pool[draw() % pool.size()];
      });
    }
    CaseInputs inputs;
    inputs.problem = spec.problem;
    inputs.buffers["keys"] = to_bytes(keys);
    inputs.buffers["values"] = to_bytes(random_floats(n, "uniform", random));
    return inputs;
  }

  CaseVerdict check(const CaseInputs& inputs,
                    const std::map<std::string, std::vector<std::byte>>& outputs) const override {
    const std::size_t n = inputs.problem.elements;
    const std::uint64_t max_groups = effective_max_groups(inputs.problem);
    const auto keys = from_bytes<std::uint32_t>(inputs.buffers.at("keys"), n);
    const auto values = from_bytes<float>(inputs.buffers.at("values"), n);
    std::unordered_map<std::uint32_t, ExactGroup> exact;
    for (std::size_t i = 0; i < n; ++i) {
      ExactGroup& group = exact[keys[i]];
      group.sum += values[i];
      group.magnitude += std::abs(static_cast<double>(values[i]));
      ++group.count;
    }
    const auto groups = from_bytes<std::uint32_t>(outputs.at("groups"), 2);
    CaseVerdict verdict;
    if (exact.size() > max_groups) {
      // More distinct keys than the call allows: the outputs must say so.
      if (groups[0] <= max_groups && groups[1] == 0) {
        verdict.failed_checks.push_back(std::to_string(exact.size()) +
                                        " distinct keys exceed max_groups (" +
                                        std::to_string(max_groups) + ") but groups[0] is " +
                                        std::to_string(groups[0]) + " and groups[1] is 0");
      }
      verdict.report.compared = 1;
      return verdict;
    }
    if (groups[0] != exact.size() || groups[1] != 0) {
      verdict.failed_checks.push_back("groups is {" + std::to_string(groups[0]) + ", " +
                                      std::to_string(groups[1]) + "}, expected {" +
                                      std::to_string(exact.size()) + ", 0}");
    }
    // Both sides in key order: keys and counts exact, then each sum within its bound.
    const std::size_t got = std::min<std::size_t>(groups[0], max_groups);
    const auto group_keys = from_bytes<std::uint32_t>(outputs.at("group_keys"), got);
    const auto group_sums = from_bytes<float>(outputs.at("group_sums"), got);
    const auto group_counts = from_bytes<std::uint32_t>(outputs.at("group_counts"), got);
    std::vector<std::size_t> order(got);
    for (std::size_t i = 0; i < got; ++i) order[i] = i;
    std::sort(order.begin(), order.end(),
              [&](std::size_t a, std::size_t b) { return group_keys[a] < group_keys[b]; });
    std::vector<std::uint32_t> expected_keys;
    for (const auto& [key, group] : exact) expected_keys.push_back(key);
    std::sort(expected_keys.begin(), expected_keys.end());
    std::vector<std::uint32_t> expected_words, actual_words;
    std::vector<double> expected_sums, allowed;
    std::vector<float> actual_sums;
    for (std::uint32_t key : expected_keys) {
      const ExactGroup& group = exact.at(key);
      expected_words.insert(expected_words.end(), {key, group.count});
      expected_sums.push_back(group.sum);
      const double m = group.count;
      const double unit = m * 0x1p-24;
      const double gamma = unit < 0.5 ? unit / (1 - unit) : 2.0;
      allowed.push_back(gamma * group.magnitude + m * 0x1p-126);
    }
    for (std::size_t i : order) {
      actual_words.insert(actual_words.end(), {group_keys[i], group_counts[i]});
      actual_sums.push_back(group_sums[i]);
    }
    verdict.report = compare_exact(expected_words, actual_words);
    if (verdict.report.mismatch_count == 0 && actual_sums.size() == expected_sums.size()) {
      verdict.report = compare_within(expected_sums, actual_sums, allowed);
      for (double bound : allowed) {
        verdict.allowed_absolute_error = std::max(verdict.allowed_absolute_error, bound);
      }
    }
    return verdict;
  }

  WorkAmount work(const Problem& problem) const override {
    WorkAmount amount;
    amount.bytes = 8 * problem.elements;
    amount.items = problem.elements;
    amount.items_name = "rows";
    return amount;
  }

  bool deterministic() const override { return false; }

  // Not yet timed on the H200; argued from the earlier winner's flaw (one flush of up to
  // local_slots global exchange loops per 256 rows, all on the same few global words): 512
  // workgroups (about 4 per compute unit of 132, as many as its 48 KiB tables let run at once)
  // each aggregate 2^19 rows of 2^28 in a table of 4096 slots, which every key of up to 4096
  // groups finds, so the global table sees 512 additions per group. Two workgroup sizes: 256
  // invocations with 4 rows each, or 512 (the compute unit full) with 1.
  std::vector<std::string> starting_points() const override {
    return {"workgroup_size=256,rows_per_invocation=4,local_slots=4096,persistent_workgroups=512",
            "workgroup_size=512,rows_per_invocation=1,local_slots=4096,persistent_workgroups=512"};
  }

  // 4096 groups, the most the workgroup tables hold on the H200; bench --groups times others.
  Problem tuning_problem(bool cpu_adapter) const override {
    Problem problem = elements_problem(tuning_elements(cpu_adapter));
    problem.max_groups = 4096;
    return problem;
  }
};

}  // namespace

const KernelDefinition& group_by_sum_f32_kernel() {
  static const GroupBySumF32 kKernel;
  return kKernel;
}

}  // namespace wgsl_forge::kernels
