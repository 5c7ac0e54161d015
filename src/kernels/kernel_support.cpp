#include "kernel_support.hpp"

#include <algorithm>
#include <bit>
#include <limits>

namespace wgsl_forge::kernels::support {

std::uint32_t float_bits(float value) { return std::bit_cast<std::uint32_t>(value); }
float bits_float(std::uint32_t bits) { return std::bit_cast<float>(bits); }

std::uint64_t round_up(std::uint64_t value, std::uint64_t multiple) {
  return ceil_div(value, multiple) * multiple;
}
std::uint64_t ceil_div(std::uint64_t value, std::uint64_t divisor) {
  return (value + divisor - 1) / divisor;
}
std::uint64_t vec4_buffer_bytes(std::uint64_t n) {
  return std::max<std::uint64_t>(16, round_up(n, 4) * 4);
}

std::vector<float> random_floats(std::size_t count, const std::string& profile,
                                 std::mt19937_64& random) {
  std::vector<float> values(count);
  std::uniform_real_distribution<float> uniform(-1000.0f, 1000.0f);
  std::uniform_real_distribution<float> small(-1.0f, 1.0f);
  std::uniform_real_distribution<float> positive(0.0f, 1e6f);
  const float constant = uniform(random);
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
  for (float& value : values) {
    if (profile == "small") {
      value = small(random);
    } else if (profile == "positive") {
      value = positive(random);
    } else if (profile == "constant") {
      value = constant;
    } else if (profile == "specials" && random() % 4 == 0) {
      value = kSpecials[random() % std::size(kSpecials)];
    } else {
      value = uniform(random);
    }
  }
  return values;
}

std::vector<std::uint32_t> random_u32(std::size_t count, const std::string& profile,
                                      std::mt19937_64& random) {
  std::vector<std::uint32_t> values(count);
  const auto constant = static_cast<std::uint32_t>(random());
  for (auto& value : values) {
    auto bits = static_cast<std::uint32_t>(random());
    if (profile == "small") {
      value = bits % 1000;
    } else if (profile == "equal") {
      value = constant;
    } else if (profile == "top-bits") {
      value = (bits & 0xff000000u) | (constant & 0x00ffffffu);
    } else {
      value = bits;
    }
  }
  if (profile == "sorted") std::sort(values.begin(), values.end());
  if (profile == "reversed") std::sort(values.begin(), values.end(), std::greater<>());
  return values;
}

CaseInputs random_u32_column_inputs(const CaseSpec& spec, std::uint64_t seed) {
  std::mt19937_64 random(seed);
  CaseInputs inputs;
  inputs.problem = spec.problem;
  inputs.buffers["x"] = to_bytes(random_u32(spec.problem.elements, spec.value_profile, random));
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

ComparisonReport compare_exact(std::span<const std::uint32_t> expected,
                               std::span<const std::uint32_t> actual) {
  ComparisonReport report;
  report.compared = expected.size();
  for (std::size_t i = 0; i < expected.size(); ++i) {
    std::uint32_t got = i < actual.size() ? actual[i] : 0;
    if (got != expected[i]) {
      record_mismatch(report, i, expected[i], got);
      record_error(report, expected[i], got);
    }
  }
  if (actual.size() < expected.size() && report.mismatch_count == 0) {
    record_mismatch(report, actual.size(), 0, 0);
  }
  return report;
}

ComparisonReport compare_bitwise(std::span<const float> expected, std::span<const float> actual) {
  ComparisonReport report;
  report.compared = expected.size();
  for (std::size_t i = 0; i < expected.size(); ++i) {
    float got = actual[i];
    bool same =
        (std::isnan(expected[i]) && std::isnan(got)) || float_bits(expected[i]) == float_bits(got);
    if (!same) {
      record_mismatch(report, i, expected[i], got);
      record_error(report, expected[i], got);
    }
  }
  return report;
}

ComparisonReport compare_within(std::span<const double> expected, std::span<const float> actual,
                                std::span<const double> allowed_absolute) {
  ComparisonReport report;
  report.compared = expected.size();
  for (std::size_t i = 0; i < expected.size(); ++i) {
    double got = actual[i];
    bool ok;
    if (std::isnan(expected[i]) || std::isinf(expected[i])) {
      ok = (std::isnan(expected[i]) && std::isnan(got)) || expected[i] == got;
    } else {
      ok = std::isfinite(got) && std::abs(got - expected[i]) <= allowed_absolute[i];
    }
    record_error(report, expected[i], got);
    if (!ok) record_mismatch(report, i, expected[i], got);
  }
  return report;
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
  return {binding, kind, std::move(name), std::move(type), false, ""};
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

namespace {

std::string declaration(const WgslBinding& row) {
  const std::string head = "@group(0) @binding(" + std::to_string(row.binding) + ") ";
  switch (row.kind) {
    case BindingKind::kUniform:
      return head + "var<uniform> " + row.name + ": " + row.type + ";";
    case BindingKind::kStorageRead:
      return head + "var<storage, read> " + row.name + ": array<" + row.type + ">;";
    case BindingKind::kStorageReadWrite:
      return head + "var<storage, read_write> " + row.name + ": array<" + row.type + ">;";
  }
  return "";
}

}  // namespace

std::string binding_declarations(const std::vector<WgslBinding>& table) {
  std::string wgsl;
  for (const WgslBinding& row : table) {
    wgsl += declaration(row) + (row.comment.empty() ? "" : "  // " + row.comment) + "\n";
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
