#include "kernel_support.hpp"

#include <algorithm>
#include <bit>
#include <limits>
#include <thread>
#include <utility>

namespace wgsl_forge::kernels::support {

std::uint32_t float_bits(float value) { return std::bit_cast<std::uint32_t>(value); }
float bits_float(std::uint32_t bits) { return std::bit_cast<float>(bits); }

void for_each_chunk(std::size_t count,
                    const std::function<void(std::size_t, std::size_t, std::size_t)>& work) {
  const std::size_t chunks = (count + kChunkElements - 1) / kChunkElements;
  const std::size_t threads =
      std::min<std::size_t>(chunks, std::max(1u, std::thread::hardware_concurrency()));
  auto run_from = [&](std::size_t first) {
    for (std::size_t chunk = first; chunk < chunks; chunk += threads) {
      work(chunk * kChunkElements, std::min(count, (chunk + 1) * kChunkElements), chunk);
    }
  };
  if (threads <= 1) {
    run_from(0);
    return;
  }
  std::vector<std::jthread> workers;
  for (std::size_t first = 1; first < threads; ++first) workers.emplace_back(run_from, first);
  run_from(0);
}

std::vector<std::uint64_t> chunk_seeds(std::size_t count, std::mt19937_64& random) {
  std::vector<std::uint64_t> seeds((count + kChunkElements - 1) / kChunkElements);
  for (std::uint64_t& seed : seeds) seed = random();
  return seeds;
}

void copy_bytes(void* to, const void* from, std::size_t bytes) {
  // Chunks of kChunkElements 4-byte words.
  for_each_chunk((bytes + 3) / 4, [&](std::size_t begin, std::size_t end, std::size_t) {
    const std::size_t first = 4 * begin;
    const std::size_t last = std::min(bytes, 4 * end);
    std::memcpy(static_cast<std::byte*>(to) + first, static_cast<const std::byte*>(from) + first,
                last - first);
  });
}

void sort_u64(std::vector<std::uint64_t>& values) {
  constexpr std::size_t kRadixFrom = std::size_t{1} << 16;
  if (values.size() < kRadixFrom) {
    std::sort(values.begin(), values.end());
    return;
  }
  std::vector<std::uint64_t> sorted(values.size());
  std::vector<std::size_t> offsets(std::size_t{1} << 16);
  for (unsigned shift = 0; shift < 64; shift += 16) {
    std::fill(offsets.begin(), offsets.end(), 0);
    for (std::uint64_t value : values) ++offsets[(value >> shift) & 0xffff];
    std::size_t start = 0;
    for (std::size_t& offset : offsets) start += std::exchange(offset, start);
    for (std::uint64_t value : values) sorted[offsets[(value >> shift) & 0xffff]++] = value;
    values.swap(sorted);
  }
}

std::uint64_t round_up(std::uint64_t value, std::uint64_t multiple) {
  return ceil_div(value, multiple) * multiple;
}
std::uint64_t ceil_div(std::uint64_t value, std::uint64_t divisor) {
  return (value + divisor - 1) / divisor;
}
std::uint64_t vec4_buffer_bytes(std::uint64_t n) {
  return std::max<std::uint64_t>(16, round_up(n, 4) * 4);
}

namespace {

enum class FloatProfile { kUniform, kSmall, kPositive, kConstant, kSpecials };

FloatProfile float_profile(const std::string& name) {
  if (name == "small") return FloatProfile::kSmall;
  if (name == "positive") return FloatProfile::kPositive;
  if (name == "constant") return FloatProfile::kConstant;
  if (name == "specials") return FloatProfile::kSpecials;
  return FloatProfile::kUniform;
}

enum class U32Profile { kUniform, kSmall, kEqual, kTopBits, kSorted, kReversed };

U32Profile u32_profile(const std::string& name) {
  if (name == "small") return U32Profile::kSmall;
  if (name == "equal") return U32Profile::kEqual;
  if (name == "top-bits") return U32Profile::kTopBits;
  if (name == "sorted") return U32Profile::kSorted;
  if (name == "reversed") return U32Profile::kReversed;
  return U32Profile::kUniform;
}

}  // namespace

namespace {

// One f32 of a profile at a time, from a chunk's generator.
class FloatDraw {
 public:
  FloatDraw(const std::string& profile, std::mt19937_64& random)
      : kind_(float_profile(profile)),
        constant_(std::uniform_real_distribution<float>(-1000.0f, 1000.0f)(random)) {}

  float operator()(std::mt19937_64& draw) {
    static const float kSpecials[] = {std::numeric_limits<float>::quiet_NaN(),
                                      std::numeric_limits<float>::infinity(),
                                      -std::numeric_limits<float>::infinity(),
                                      -0.0f,
                                      0.0f,
                                      std::numeric_limits<float>::denorm_min(),
                                      -std::numeric_limits<float>::denorm_min() * 77.0f,
                                      std::numeric_limits<float>::min() / 2.0f,
                                      std::numeric_limits<float>::max(),
                                      -3.0e38f,
                                      1.0e30f};
    switch (kind_) {
      case FloatProfile::kSmall:
        return small_(draw);
      case FloatProfile::kPositive:
        return positive_(draw);
      case FloatProfile::kConstant:
        return constant_;
      case FloatProfile::kSpecials:
        return draw() % 4 == 0 ? kSpecials[draw() % std::size(kSpecials)] : uniform_(draw);
      case FloatProfile::kUniform:
        break;
    }
    return uniform_(draw);
  }

 private:
  FloatProfile kind_;
  float constant_;
  std::uniform_real_distribution<float> uniform_{-1000.0f, 1000.0f};
  std::uniform_real_distribution<float> small_{-1.0f, 1.0f};
  std::uniform_real_distribution<float> positive_{0.0f, 1e6f};
};

// One u32 of an unordered profile at a time, from a chunk's generator.
class U32Draw {
 public:
  U32Draw(const std::string& profile, std::mt19937_64& random)
      : kind_(u32_profile(profile)), constant_(static_cast<std::uint32_t>(random())) {}

  std::uint32_t operator()(std::mt19937_64& draw) const {
    const auto bits = static_cast<std::uint32_t>(draw());
    switch (kind_) {
      case U32Profile::kSmall:
        return bits % 1000;
      case U32Profile::kEqual:
        return constant_;
      case U32Profile::kTopBits:
        return (bits & 0xff000000u) | (constant_ & 0x00ffffffu);
      default:
        return bits;
    }
  }

 private:
  U32Profile kind_;
  std::uint32_t constant_;
};

// Stores `count` values of `value_of` into the 4-byte words at `out`, `out + stride`, ...:
// chunk by chunk on every core, each chunk from its own seed (chunk_seeds), so that what is
// drawn depends on `random` alone. Written straight into the bytes that are uploaded: at 2^28
// elements, a vector copied into them was a serial allocation and copy of a gigabyte or more.
template <typename Draw>
void draw_words(std::byte* out, std::size_t stride, std::size_t count, std::mt19937_64& random,
                const Draw& value_of) {
  const std::vector<std::uint64_t> seeds = chunk_seeds(count, random);
  for_each_chunk(count, [&](std::size_t begin, std::size_t end, std::size_t chunk) {
    std::mt19937_64 draw(seeds[chunk]);
    Draw local = value_of;
    for (std::size_t i = begin; i < end; ++i) {
      const auto value = local(draw);
      static_assert(sizeof(value) == 4);
      std::memcpy(out + i * stride, &value, 4);
    }
  });
}

}  // namespace

std::vector<float> random_floats(std::size_t count, const std::string& profile,
                                 std::mt19937_64& random) {
  std::vector<float> values(count);
  const FloatDraw value_of(profile, random);
  draw_words(reinterpret_cast<std::byte*>(values.data()), 4, count, random, value_of);
  return values;
}

std::vector<std::byte> random_float_bytes(std::size_t count, const std::string& profile,
                                          std::mt19937_64& random) {
  std::vector<std::byte> bytes(4 * count);
  const FloatDraw value_of(profile, random);
  draw_words(bytes.data(), 4, count, random, value_of);
  return bytes;
}

std::vector<std::uint32_t> random_u32(std::size_t count, const std::string& profile,
                                      std::mt19937_64& random) {
  std::vector<std::uint32_t> values(count);
  const U32Draw value_of(profile, random);
  draw_words(reinterpret_cast<std::byte*>(values.data()), 4, count, random, value_of);
  if (u32_profile(profile) == U32Profile::kSorted) std::sort(values.begin(), values.end());
  if (u32_profile(profile) == U32Profile::kReversed) {
    std::sort(values.begin(), values.end(), std::greater<>());
  }
  return values;
}

std::vector<std::byte> random_u32_bytes(std::size_t count, const std::string& profile,
                                        std::mt19937_64& random) {
  if (u32_profile(profile) == U32Profile::kSorted ||
      u32_profile(profile) == U32Profile::kReversed) {
    return to_bytes(random_u32(count, profile, random));
  }
  std::vector<std::byte> bytes(4 * count);
  draw_u32_words(bytes.data(), 4, count, profile, random);
  return bytes;
}

void draw_u32_words(std::byte* out, std::size_t stride, std::size_t count,
                    const std::string& profile, std::mt19937_64& random) {
  const U32Draw value_of(profile, random);
  draw_words(out, stride, count, random, value_of);
}

std::vector<std::byte> position_bytes(std::size_t count) {
  std::vector<std::byte> bytes(4 * count);
  for_each_chunk(count, [&](std::size_t begin, std::size_t end, std::size_t) {
    for (std::size_t i = begin; i < end; ++i) {
      const auto position = static_cast<std::uint32_t>(i);
      std::memcpy(bytes.data() + 4 * i, &position, 4);
    }
  });
  return bytes;
}

CaseInputs random_u32_column_inputs(const CaseSpec& spec, std::uint64_t seed) {
  std::mt19937_64 random(seed);
  CaseInputs inputs;
  inputs.problem = spec.problem;
  inputs.buffers["x"] = random_u32_bytes(spec.problem.elements, spec.value_profile, random);
  return inputs;
}

namespace {

void record_mismatch(ComparisonReport& report, std::uint64_t index, double expected,
                     double actual) {
  if (report.mismatch_count++ == 0) report.first_mismatch = Mismatch{index, expected, actual};
}

void record_error(ComparisonReport& report, double expected, double actual) {
  if (std::isnan(expected) || std::isnan(actual) || std::isinf(expected) || std::isinf(actual)) {
    return;
  }
  double absolute = std::abs(actual - expected);
  report.max_absolute_error = std::max(report.max_absolute_error, absolute);
  if (expected != 0) {
    report.max_relative_error = std::max(report.max_relative_error, absolute / std::abs(expected));
  }
}

}  // namespace

namespace {

// A comparison of [0, count) made chunk by chunk on several threads: `compare(i, report)` records
// element i into its chunk's report, and the chunks' reports are merged in order, so that the
// first mismatch is the lowest index whatever the threads did.
template <typename Compare>
ComparisonReport compare_in_chunks(std::size_t count, Compare compare) {
  std::vector<ComparisonReport> reports((count + kChunkElements - 1) / kChunkElements);
  for_each_chunk(count, [&](std::size_t begin, std::size_t end, std::size_t chunk) {
    for (std::size_t i = begin; i < end; ++i) compare(i, reports[chunk]);
  });
  ComparisonReport merged;
  merged.compared = count;
  for (const ComparisonReport& report : reports) {
    if (!merged.first_mismatch) merged.first_mismatch = report.first_mismatch;
    merged.mismatch_count += report.mismatch_count;
    merged.max_absolute_error = std::max(merged.max_absolute_error, report.max_absolute_error);
    merged.max_relative_error = std::max(merged.max_relative_error, report.max_relative_error);
  }
  return merged;
}

}  // namespace

ComparisonReport compare_exact(std::span<const std::uint32_t> expected,
                               std::span<const std::uint32_t> actual) {
  ComparisonReport report =
      compare_in_chunks(expected.size(), [&](std::size_t i, ComparisonReport& chunk) {
        const std::uint32_t got = i < actual.size() ? actual[i] : 0;
        if (got != expected[i]) {
          record_mismatch(chunk, i, expected[i], got);
          record_error(chunk, expected[i], got);
        }
      });
  if (actual.size() < expected.size() && report.mismatch_count == 0) {
    record_mismatch(report, actual.size(), 0, 0);
  }
  return report;
}

ComparisonReport compare_bitwise(std::span<const float> expected, std::span<const float> actual) {
  return compare_in_chunks(expected.size(), [&](std::size_t i, ComparisonReport& chunk) {
    const float got = actual[i];
    const bool same =
        (std::isnan(expected[i]) && std::isnan(got)) || float_bits(expected[i]) == float_bits(got);
    if (!same) {
      record_mismatch(chunk, i, expected[i], got);
      record_error(chunk, expected[i], got);
    }
  });
}

ComparisonReport compare_within(std::span<const double> expected, std::span<const float> actual,
                                std::span<const double> allowed_absolute) {
  return compare_in_chunks(expected.size(), [&](std::size_t i, ComparisonReport& chunk) {
    const double got = actual[i];
    bool ok;
    if (std::isnan(expected[i]) || std::isinf(expected[i])) {
      ok = (std::isnan(expected[i]) && std::isnan(got)) || expected[i] == got;
    } else {
      ok = std::isfinite(got) && std::abs(got - expected[i]) <= allowed_absolute[i];
    }
    record_error(chunk, expected[i], got);
    if (!ok) record_mismatch(chunk, i, expected[i], got);
  });
}

std::vector<std::uint64_t> edge_sizes(std::uint64_t workgroup, std::uint64_t tile) {
  // workgroup + 4: whole vec4s, but not whole workgroups; one element past such an n is past a
  // vec4-rounded buffer (not in its padding) and some invocation indexes it.
  std::vector<std::uint64_t> sizes = {
      0,        1,    workgroup - 1, workgroup,    workgroup + 1, workgroup + 4,
      tile - 1, tile, tile + 1,      3 * tile + 5, 7919,          104729};
  std::sort(sizes.begin(), sizes.end());
  sizes.erase(std::unique(sizes.begin(), sizes.end()), sizes.end());
  return sizes;
}

std::uint64_t many_workgroups_size(std::uint64_t tile, std::uint64_t element_bytes,
                                   std::uint64_t max_binding) {
  std::uint64_t wanted = 65536 * tile + 3;
  std::uint64_t fits = max_binding / element_bytes - 16;
  return std::min(wanted, fits);
}

std::vector<CaseSpec> element_cases(std::uint64_t workgroup, std::uint64_t tile,
                                    const std::vector<std::string>& profiles,
                                    std::uint64_t many_tile) {
  std::vector<CaseSpec> cases;
  for (std::uint64_t n : edge_sizes(workgroup, tile)) {
    for (const std::string& profile : profiles) {
      cases.push_back({"n=" + std::to_string(n) + " " + profile, elements_problem(n), profile});
    }
  }
  const std::uint64_t many = many_workgroups_size(many_tile, 4, 128u << 20);
  cases.push_back(
      {"many-workgroups n=" + std::to_string(many), elements_problem(many), profiles.front()});
  return cases;
}

Problem elements_problem(std::uint64_t n) {
  Problem problem;
  problem.elements = n;
  return problem;
}

std::uint64_t tuning_elements(bool cpu_adapter) {
  return cpu_adapter ? std::uint64_t{1} << 20 : std::uint64_t{1} << 28;
}

const char* const kLinearWorkgroupWgsl = R"(
fn linear_workgroup(id: vec3u, count: vec3u) -> u32 {
  return id.x + id.y * count.x;
}
)";

namespace {

WgslBinding binding_row(std::uint32_t binding, BindingKind kind, std::string name,
                        std::string type) {
  return {binding, kind, std::move(name), std::move(type), false, "", {}};
}

}  // namespace

WgslBinding params_binding(std::string struct_name) {
  return binding_row(0, BindingKind::kUniform, "params", std::move(struct_name));
}

WgslBinding storage_read(std::uint32_t binding, std::string name, std::string type) {
  return binding_row(binding, BindingKind::kStorageRead, std::move(name), std::move(type));
}

WgslBinding storage_read_write(std::uint32_t binding, std::string name, std::string type) {
  return binding_row(binding, BindingKind::kStorageReadWrite, std::move(name), std::move(type));
}

WgslBinding as_f32_bits(WgslBinding row) {
  row.f32_bits = true;
  return row;
}

WgslBinding with_view(WgslBinding row, std::string name, std::string type) {
  row.views.push_back({std::move(name), std::move(type)});
  return row;
}

namespace {

std::string declaration(const WgslBinding& row, const std::string& name, const std::string& type) {
  const std::string head = "@group(0) @binding(" + std::to_string(row.binding) + ") ";
  switch (row.kind) {
    case BindingKind::kUniform:
      return head + "var<uniform> " + name + ": " + type + ";";
    case BindingKind::kStorageRead:
      return head + "var<storage, read> " + name + ": array<" + type + ">;";
    case BindingKind::kStorageReadWrite:
      return head + "var<storage, read_write> " + name + ": array<" + type + ">;";
  }
  return "";
}

}  // namespace

std::string binding_declarations(const std::vector<WgslBinding>& table) {
  std::string wgsl;
  for (const WgslBinding& row : table) {
    wgsl += declaration(row, row.name, row.type) +
            (row.comment.empty() ? "" : "  // " + row.comment) + "\n";
  }
  for (const WgslBinding& row : table) {
    for (const WgslBindingView& view : row.views) {
      wgsl +=
          declaration(row, view.name, view.type) + "  // " + row.name + " as " + view.type + "\n";
    }
  }
  return wgsl;
}

std::string constant_declarations(const std::vector<WgslConstant>& constants) {
  std::string wgsl;
  for (const WgslConstant& constant : constants) {
    wgsl += "const " + constant.name + ": u32 = " + std::to_string(constant.value) + "u;";
    wgsl += constant.comment.empty() ? "\n" : "  // " + constant.comment + "\n";
  }
  return wgsl;
}

std::string unrolled_loop(const std::string& index, std::uint32_t count, const std::string& body) {
  std::string wgsl;
  for (std::uint32_t i = 0; i < count; ++i) {
    wgsl += "  {\n    const " + index + " = " + std::to_string(i) + "u;\n" + body + "  }\n";
  }
  return wgsl;
}

std::string indented(const std::string& wgsl, std::size_t depth) {
  WgslLines lines(depth);
  std::size_t begin = 0;
  while (begin < wgsl.size()) {
    const std::size_t end = std::min(wgsl.find('\n', begin), wgsl.size());
    lines.line(wgsl.substr(begin, end - begin));
    begin = end + 1;
  }
  return lines.text();
}

}  // namespace wgsl_forge::kernels::support

namespace wgsl_forge::kernels::support {

const char* const kWorkgroupScanWgsl = R"(var<workgroup> scan_scratch: array<u32, WG>;
fn workgroup_exclusive_scan(value: u32, local: u32) -> vec2u {
  scan_scratch[local] = value;
  workgroupBarrier();
  for (var offset = 1u; offset < WG; offset *= 2u) {
    var add = 0u;
    if (local >= offset) { add = scan_scratch[local - offset]; }
    workgroupBarrier();
    scan_scratch[local] += add;
    workgroupBarrier();
  }
  let inclusive = scan_scratch[local];
  let total = scan_scratch[WG - 1u];
  workgroupBarrier();
  return vec2u(inclusive - value, total);
}
)";

}  // namespace wgsl_forge::kernels::support
