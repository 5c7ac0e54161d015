// A star-join query from end to end with wgsl-forge's typed primitives: a fact table (lineorder)
// and two dimension tables (customer, date) generated from a seed, and the query (the shape of
// the Star Schema Benchmark's Q3.1)
//
//   SELECT c_nation, SUM(lo_revenue), COUNT(*)
//   FROM lineorder, customer, date
//   WHERE lo_custkey = c_custkey AND lo_orderdate = d_datekey
//     AND c_region = 'ASIA' AND d_year BETWEEN 1993 AND 1995
//   GROUP BY c_nation;
//
// run on the GPU in four stages, each one submission, whose only host round trip is the row
// count the next stage is sized by:
//   1. filter the dimensions: a join of c_nation against ASIA's nations (probe payload c_custkey)
//      gives the qualifying (c_custkey, c_nation) pairs, a join of d_year against 1993-1995 the
//      qualifying d_datekeys;
//   2. join lo_orderdate with those dates (probe payload: the fact row id);
//   3. gather lo_custkey and lo_revenue of the joined rows and join them with the customers
//      (probe payload: the position among the joined rows), which gives each row's c_nation;
//   4. gather the revenue of the rows that remain and group it by c_nation.
// The answer is checked against a CPU evaluation of the same query (sums within the f32 bound
// of src/kernels/group_by_sum_f32.cpp, counts exact).
//
//   star_query [--cache DIR] [--rows N] [--seed S]     exit 0 when the answer is right

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <numeric>
#include <random>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "wgsl_forge/primitives.hpp"

using namespace wgsl_forge;

namespace {

constexpr std::uint32_t kNations = 25;      // nation n belongs to region n / 5
constexpr std::uint32_t kAsia = 2;          // the region the query keeps
constexpr std::uint32_t kFirstYear = 1992;  // the date dimension spans 1992-1998
constexpr std::uint32_t kYears = 7;
constexpr std::uint32_t kKeptYears[] = {1993, 1994, 1995};

int fail(const Error& error) {
  std::fprintf(stderr, "star_query: %s\n", error.to_string().c_str());
  return 3;
}

struct Schema {
  std::vector<std::uint32_t> c_custkey, c_nation;  // customer
  std::vector<std::uint32_t> d_datekey, d_year;    // date
  std::vector<std::uint32_t> lo_custkey, lo_orderdate;
  std::vector<float> lo_revenue;  // lineorder
};

// Unique random keys: a dimension's primary key, as a database that hashes them would see it.
std::vector<std::uint32_t> unique_keys(std::size_t count, std::mt19937_64& random) {
  std::unordered_set<std::uint32_t> seen;
  std::vector<std::uint32_t> keys;
  while (keys.size() < count) {
    const auto key = static_cast<std::uint32_t>(random());
    if (seen.insert(key).second) keys.push_back(key);
  }
  return keys;
}

Schema generate(std::size_t rows, std::uint64_t seed) {
  std::mt19937_64 random(seed);
  Schema schema;
  const std::size_t customers = 1000 + rows / 64;
  schema.c_custkey = unique_keys(customers, random);
  for (std::size_t i = 0; i < customers; ++i) {
    schema.c_nation.push_back(static_cast<std::uint32_t>(random() % kNations));
  }
  for (std::uint32_t year = kFirstYear; year < kFirstYear + kYears; ++year) {
    for (std::uint32_t day = 0; day < 365; ++day) {
      schema.d_datekey.push_back(year * 1000 + day);
      schema.d_year.push_back(year);
    }
  }
  for (std::size_t i = 0; i < rows; ++i) {
    schema.lo_custkey.push_back(schema.c_custkey[random() % customers]);
    schema.lo_orderdate.push_back(schema.d_datekey[random() % schema.d_datekey.size()]);
    schema.lo_revenue.push_back(static_cast<float>(random() % 1000000) / 100.0f);
  }
  return schema;
}

struct NationTotal {
  double revenue = 0;
  double magnitude = 0;
  std::uint32_t rows = 0;
};

std::map<std::uint32_t, NationTotal> evaluate_on_cpu(const Schema& schema) {
  std::unordered_map<std::uint32_t, std::uint32_t> asian_nation;
  for (std::size_t i = 0; i < schema.c_custkey.size(); ++i) {
    if (schema.c_nation[i] / 5 == kAsia) asian_nation[schema.c_custkey[i]] = schema.c_nation[i];
  }
  std::unordered_set<std::uint32_t> kept_dates;
  for (std::size_t i = 0; i < schema.d_datekey.size(); ++i) {
    if (std::find(std::begin(kKeptYears), std::end(kKeptYears), schema.d_year[i]) !=
        std::end(kKeptYears)) {
      kept_dates.insert(schema.d_datekey[i]);
    }
  }
  std::map<std::uint32_t, NationTotal> totals;
  for (std::size_t i = 0; i < schema.lo_custkey.size(); ++i) {
    auto nation = asian_nation.find(schema.lo_custkey[i]);
    if (nation == asian_nation.end() || !kept_dates.contains(schema.lo_orderdate[i])) continue;
    NationTotal& total = totals[nation->second];
    total.revenue += schema.lo_revenue[i];
    total.magnitude += std::abs(schema.lo_revenue[i]);
    ++total.rows;
  }
  return totals;
}

// The device's columns: uploaded ones, and empty ones of a given length.
class Columns {
 public:
  explicit Columns(gpu::Device& device) : device_(device) {}

  template <typename T>
  Result<const gpu::Buffer*> upload(const std::vector<T>& values, const char* name) {
    auto buffer = make(values.size(), name);
    if (!buffer) return buffer;
    if (!values.empty()) {
      if (Status written = device_.write_buffer(**buffer, 0, std::as_bytes(std::span(values)));
          !written) {
        return std::move(written).error();
      }
    }
    return buffer;
  }

  Result<const gpu::Buffer*> make(std::size_t elements, const char* name) {
    Result<gpu::Buffer> buffer = device_.create_buffer(
        std::max<std::size_t>(16, (elements + 3) / 4 * 16), gpu::BufferUsage::kStorage, name);
    if (!buffer) return std::move(buffer).error();
    buffers_.push_back(std::make_unique<gpu::Buffer>(std::move(buffer).value()));
    return buffers_.back().get();
  }

  template <typename T>
  Result<std::vector<T>> download(const gpu::Buffer& buffer, std::size_t n) {
    Result<std::vector<std::byte>> bytes = device_.read_buffer(buffer, 0, n * sizeof(T));
    if (!bytes) return std::move(bytes).error();
    std::vector<T> values(n);
    if (n != 0) std::memcpy(values.data(), bytes->data(), n * sizeof(T));
    return values;
  }

 private:
  gpu::Device& device_;
  std::vector<std::unique_ptr<gpu::Buffer>> buffers_;
};

#define STAR_TRY(declaration, expression)                               \
  auto declaration##_result = (expression);                             \
  if (!declaration##_result) return fail(declaration##_result.error()); \
  auto declaration = std::move(declaration##_result).value()

#define STAR_CHECK(expression) \
  if (Status status_ = (expression); !status_) return fail(status_.error())

}  // namespace

int main(int argc, char** argv) {
  std::optional<std::filesystem::path> cache_dir;
  std::size_t rows = 1'000'003;
  std::uint64_t seed = 20261203;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--cache") == 0) cache_dir = argv[i + 1];
    if (std::strcmp(argv[i], "--rows") == 0) rows = std::strtoull(argv[i + 1], nullptr, 10);
    if (std::strcmp(argv[i], "--seed") == 0) seed = std::strtoull(argv[i + 1], nullptr, 10);
  }

  auto opened = gpu::Device::open(gpu::RuntimeOptions{});
  if (!opened) return fail(opened.error());
  gpu::Device& device = **opened;
  auto root = resolve_cache_root(cache_dir);
  if (!root) return fail(root.error());
  forge::Primitives primitives(device, ManifestCache(*root));
  for (const char* kernel : {"hash_join_u32", "gather_f32", "group_by_sum_f32"}) {
    STAR_TRY(origin, primitives.load(kernel));
    std::printf("%s: %s\n", kernel, origin.c_str());
  }

  const Schema schema = generate(rows, seed);
  std::vector<std::uint32_t> row_ids(rows);
  std::iota(row_ids.begin(), row_ids.end(), 0u);
  std::vector<std::uint32_t> asian_nations,
      kept_years(std::begin(kKeptYears), std::end(kKeptYears));
  for (std::uint32_t nation = 0; nation < kNations; ++nation) {
    if (nation / 5 == kAsia) asian_nations.push_back(nation);
  }
  Columns columns(device);
  STAR_TRY(c_custkey, columns.upload(schema.c_custkey, "c_custkey"));
  STAR_TRY(c_nation, columns.upload(schema.c_nation, "c_nation"));
  STAR_TRY(d_datekey, columns.upload(schema.d_datekey, "d_datekey"));
  STAR_TRY(d_year, columns.upload(schema.d_year, "d_year"));
  STAR_TRY(lo_custkey, columns.upload(schema.lo_custkey, "lo_custkey"));
  STAR_TRY(lo_orderdate, columns.upload(schema.lo_orderdate, "lo_orderdate"));
  STAR_TRY(lo_revenue, columns.upload(schema.lo_revenue, "lo_revenue"));
  STAR_TRY(row_id, columns.upload(row_ids, "row_id"));
  STAR_TRY(nation_list, columns.upload(asian_nations, "asian_nations"));
  STAR_TRY(year_list, columns.upload(kept_years, "kept_years"));
  const std::size_t customers = schema.c_custkey.size();
  const std::size_t dates = schema.d_datekey.size();
  STAR_TRY(asian_custkey, columns.make(customers, "asian_custkey"));
  STAR_TRY(asian_nation, columns.make(customers, "asian_nation"));
  STAR_TRY(kept_datekey, columns.make(dates, "kept_datekey"));
  STAR_TRY(kept_year, columns.make(dates, "kept_year"));
  STAR_TRY(customer_status, columns.make(3, "customer_status"));
  STAR_TRY(date_status, columns.make(3, "date_status"));
  STAR_TRY(dated_row, columns.make(rows, "dated_row"));
  STAR_TRY(dated_year, columns.make(rows, "dated_year"));
  STAR_TRY(dated_custkey, columns.make(rows, "dated_custkey"));
  STAR_TRY(dated_revenue, columns.make(rows, "dated_revenue"));
  STAR_TRY(joined_position, columns.make(rows, "joined_position"));
  STAR_TRY(joined_nation, columns.make(rows, "joined_nation"));
  STAR_TRY(joined_status, columns.make(3, "joined_status"));
  STAR_TRY(joined_revenue, columns.make(rows, "joined_revenue"));
  STAR_TRY(group_nation, columns.make(kNations, "group_nation"));
  STAR_TRY(group_revenue, columns.make(kNations, "group_revenue"));
  STAR_TRY(group_rows, columns.make(kNations, "group_rows"));
  STAR_TRY(group_status, columns.make(2, "group_status"));
  auto u32 = [](const gpu::Buffer* buffer) { return forge::U32Column{buffer}; };
  // gather_f32 moves raw bits, so it gathers u32 columns as well.
  auto bits = [](const gpu::Buffer* buffer) { return forge::F32Column{buffer}; };

  using Clock = std::chrono::steady_clock;
  const auto started = Clock::now();
  // 1. The dimensions filtered, both in one submission.
  STAR_TRY(filter, primitives.begin_batch());
  STAR_CHECK(primitives.hash_join_u32(
      filter, u32(nation_list), u32(nation_list), asian_nations.size(), u32(c_nation),
      u32(c_custkey), customers, u32(asian_custkey), u32(asian_nation), u32(customer_status)));
  STAR_CHECK(primitives.hash_join_u32(filter, u32(year_list), u32(year_list), kept_years.size(),
                                      u32(d_year), u32(d_datekey), dates, u32(kept_datekey),
                                      u32(kept_year), u32(date_status)));
  STAR_CHECK(filter.submit_and_wait());
  STAR_TRY(customer_counts, columns.download<std::uint32_t>(*customer_status, 3));
  STAR_TRY(date_counts, columns.download<std::uint32_t>(*date_status, 3));
  const std::uint32_t asian_customers = customer_counts[0];
  const std::uint32_t kept_dates = date_counts[0];

  // 2. The facts joined with the kept dates: (row id, year) of each row in 1993-1995. A repeated
  // date key would be an error naming it.
  STAR_TRY(dated_rows, primitives.hash_join_u32(u32(kept_datekey), u32(kept_year), kept_dates,
                                                u32(lo_orderdate), u32(row_id), rows,
                                                u32(dated_row), u32(dated_year)));

  // 3. Their customers and revenue gathered, and joined with the Asian customers: (position
  // among the dated rows, c_nation).
  STAR_TRY(by_customer, primitives.begin_batch());
  STAR_CHECK(primitives.gather_f32(bits(lo_custkey), rows, u32(dated_row), dated_rows,
                                   bits(dated_custkey), &by_customer));
  STAR_CHECK(primitives.gather_f32(bits(lo_revenue), rows, u32(dated_row), dated_rows,
                                   bits(dated_revenue), &by_customer));
  STAR_CHECK(primitives.hash_join_u32(
      by_customer, u32(asian_custkey), u32(asian_nation), asian_customers, u32(dated_custkey),
      u32(row_id), dated_rows, u32(joined_position), u32(joined_nation), u32(joined_status)));
  STAR_CHECK(by_customer.submit_and_wait());
  STAR_TRY(joined_counts, columns.download<std::uint32_t>(*joined_status, 3));
  const std::uint32_t joined_rows = joined_counts[0];

  // 4. Their revenue gathered and summed by nation.
  STAR_TRY(by_nation, primitives.begin_batch());
  STAR_CHECK(primitives.gather_f32(bits(dated_revenue), dated_rows, u32(joined_position),
                                   joined_rows, bits(joined_revenue), &by_nation));
  STAR_CHECK(primitives.group_by_sum_f32(by_nation, u32(joined_nation), bits(joined_revenue),
                                         joined_rows, kNations, u32(group_nation),
                                         bits(group_revenue), u32(group_rows), u32(group_status)));
  STAR_CHECK(by_nation.submit_and_wait());
  STAR_TRY(group_counts, columns.download<std::uint32_t>(*group_status, 2));
  if (group_counts[0] > kNations || group_counts[1] != 0) {
    std::fprintf(stderr, "star_query: more than %u nations among the joined rows\n", kNations);
    return 1;
  }
  const std::uint32_t nations = group_counts[0];
  const double query_ms = std::chrono::duration<double, std::milli>(Clock::now() - started).count();

  STAR_TRY(got_nation, columns.download<std::uint32_t>(*group_nation, nations));
  STAR_TRY(got_revenue, columns.download<float>(*group_revenue, nations));
  STAR_TRY(got_rows, columns.download<std::uint32_t>(*group_rows, nations));
  const std::map<std::uint32_t, NationTotal> expected = evaluate_on_cpu(schema);
  // 2^-(k+1), k = 150 - e with e the largest revenue's biased exponent: at least that of the
  // joined rows' scale, which is all the bound needs.
  const float largest_revenue =
      schema.lo_revenue.empty()
          ? 0.0f
          : *std::max_element(schema.lo_revenue.begin(), schema.lo_revenue.end());
  const double revenue_rounding =
      std::ldexp(1.0, std::max(1, std::ilogb(largest_revenue) + 127) - 151);
  bool right = nations == expected.size() && customer_counts[1] == 0 && date_counts[1] == 0 &&
               joined_counts[1] == 0;
  std::printf("c_nation  revenue          rows\n");
  for (std::size_t i = 0; i < nations; ++i) {
    auto exact = expected.find(got_nation[i]);
    const bool found = exact != expected.end();
    const double m = found ? exact->second.rows : 0;
    // group_by_sum_f32's bound: each revenue rounded to a multiple of 2^-k, its sum rounded
    // once to f32.
    const double rounding = m * revenue_rounding;
    const double bound = rounding +
                         0x1p-24 * ((found ? std::abs(exact->second.revenue) : 0) + rounding) +
                         0x1p-150 + m * 0x1p-52 * (found ? exact->second.magnitude : 0);
    const bool row_right = found && got_rows[i] == exact->second.rows &&
                           std::abs(got_revenue[i] - exact->second.revenue) <= bound;
    right = right && row_right;
    std::printf("%8u  %15.2f  %8u%s\n", got_nation[i], static_cast<double>(got_revenue[i]),
                got_rows[i], row_right ? "" : "  <- differs from the CPU's answer");
  }
  std::printf(
      "star query over %zu fact rows (%zu customers, %zu dates): %u Asian customers, %u dates "
      "kept, %llu rows dated, %u joined, %u nations; %.2f ms on %s in 4 submissions\n",
      rows, customers, dates, asian_customers, kept_dates,
      static_cast<unsigned long long>(dated_rows), joined_rows, nations, query_ms,
      device.adapter().identity.name.c_str());
  if (!right) {
    std::fprintf(stderr, "star_query: the answer differs from the CPU's (%zu nations expected)\n",
                 expected.size());
    return 1;
  }
  std::printf("the answer matches the CPU's\n");
  return 0;
}
