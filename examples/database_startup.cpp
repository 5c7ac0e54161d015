// What a GPU database does at start-up with wgsl-forge: open the adapter, load the kernels tuned
// on this exact hardware from the manifest cache (the default schedules, said so, where
// `wgsl-forge auto-tune-all` has not run here yet), then run a small query on generated columns
// with the typed primitives, checking every result against the CPU:
//
//   SELECT sum(price), count(*) FROM orders WHERE price > 50;   (compaction, then a sum)
//   SELECT customer FROM orders ORDER BY customer;              (radix sort)
//   SELECT customer % 64, count(*) ... GROUP BY 1;              (histogram)
//
//   database_startup [--cache DIR] [--rows N]        exit 0 when every result is right
//   (with $WGSL_FORGE_REMOTE set, the fleet's shared store stands behind the cache)

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "wgsl_forge/primitives.hpp"

using namespace wgsl_forge;

namespace {

int fail(const Error& error) {
  std::fprintf(stderr, "database_startup: %s\n", error.to_string().c_str());
  return 3;
}

int wrong(const char* what) {
  std::fprintf(stderr, "database_startup: %s differs from the CPU's answer\n", what);
  return 1;
}

// A column on the device, padded to whole vec4s as vectorised kernels read them.
template <typename T>
Result<gpu::Buffer> upload(gpu::Device& device, const std::vector<T>& values, const char* name) {
  Result<gpu::Buffer> buffer =
      device.create_buffer((values.size() + 3) / 4 * 16, gpu::BufferUsage::kStorage, name);
  if (!buffer) return buffer;
  if (Status written = device.write_buffer(*buffer, 0, std::as_bytes(std::span(values)));
      !written) {
    return std::move(written).error();
  }
  return buffer;
}

template <typename T>
Result<std::vector<T>> download(gpu::Device& device, const gpu::Buffer& buffer, std::size_t n) {
  Result<std::vector<std::byte>> bytes = device.read_buffer(buffer, 0, n * sizeof(T));
  if (!bytes) return std::move(bytes).error();
  std::vector<T> values(n);
  std::memcpy(values.data(), bytes->data(), n * sizeof(T));
  return values;
}

}  // namespace

int main(int argc, char** argv) {
  std::optional<std::filesystem::path> cache_dir;
  std::size_t rows = 1'000'003;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--cache") == 0) cache_dir = argv[i + 1];
    if (std::strcmp(argv[i], "--rows") == 0) rows = std::strtoull(argv[i + 1], nullptr, 10);
  }

  // 1. The adapter, the cache, and every tuned kernel.
  auto device = gpu::Device::open(gpu::RuntimeOptions{});
  if (!device) return fail(device.error());
  auto root = resolve_cache_root(cache_dir);
  if (!root) return fail(root.error());
  ManifestCache cache(*root);
  // A fleet's shared store ($WGSL_FORGE_REMOTE, redis://HOST:PORT): what this machine has not
  // tuned yet comes from the nodes that have. Unreachable, it costs a warning, never the start.
  auto remote = RemoteStore::from_environment();
  if (!remote) return fail(remote.error());
  cache.set_remote(*remote);
  forge::Primitives primitives(**device, cache);
  // All kernels in one call: their pipelines compile side by side (Dawn's worker threads).
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  if (Status loaded = primitives.load_all(); !loaded) return fail(loaded.error());
  const double load_ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
  std::printf("loaded %zu kernels in %.1f ms on %s (all at once)\n",
              kernels::builtin_kernels().size(), load_ms,
              (*device)->adapter().identity.name.c_str());
  for (const char* kernel : {"compact_f32", "reduce_sum_f32", "radix_sort_u32", "histogram_u32"}) {
    std::printf("  %s: %s\n", kernel, primitives.origin(kernel).value().c_str());
  }

  // 2. The database's columns.
  std::mt19937_64 random(20261201);
  std::vector<float> price(rows);
  std::vector<std::uint32_t> customer(rows);
  for (std::size_t i = 0; i < rows; ++i) {
    price[i] = static_cast<float>(random() % 10000) / 100.0f;
    customer[i] = static_cast<std::uint32_t>(random() % 100000);
  }
  auto price_column = upload(**device, price, "price");
  auto customer_column = upload(**device, customer, "customer");
  auto expensive = upload(**device, std::vector<float>(rows), "expensive");
  auto total = upload(**device, std::vector<float>(1), "total");
  auto counts = upload(**device, std::vector<std::uint32_t>(64), "counts");
  for (const auto* column : {&price_column, &customer_column, &expensive, &total, &counts}) {
    if (!*column) return fail(column->error());
  }

  // 3. The query: the filter, its sum, the histogram and the sort in one submission.
  Result<std::uint64_t> kept = primitives.compact_f32({&*price_column}, rows, 50.0f, {&*expensive});
  if (!kept) return fail(kept.error());
  auto batch = primitives.begin_batch();
  if (!batch) return fail(batch.error());
  for (Status recorded :
       {primitives.sum_f32(*batch, {&*expensive}, *kept, {&*total}),
        primitives.histogram_u32({&*customer_column}, rows, 64, {&*counts}, &*batch),
        primitives.sort_u32({&*customer_column}, rows, &*batch)}) {
    if (!recorded) return fail(recorded.error());
  }
  if (Status ran = batch->submit_and_wait(); !ran) return fail(ran.error());

  // 4. Every answer against the CPU.
  std::vector<float> expected_kept;
  std::copy_if(price.begin(), price.end(), std::back_inserter(expected_kept),
               [](float value) { return value > 50.0f; });
  auto got_kept = download<float>(**device, *expensive, expected_kept.size());
  if (*kept != expected_kept.size() || !got_kept || *got_kept != expected_kept) {
    return wrong("the filter");
  }
  const double exact = std::accumulate(expected_kept.begin(), expected_kept.end(), 0.0);
  auto got_total = download<float>(**device, *total, 1);
  if (!got_total || std::abs((*got_total)[0] - exact) > 1e-5 * exact + 1e-3) return wrong("sum");
  std::vector<std::uint32_t> expected_counts(64);
  for (std::uint32_t value : customer) ++expected_counts[value % 64];
  auto got_counts = download<std::uint32_t>(**device, *counts, 64);
  if (!got_counts || *got_counts != expected_counts) return wrong("the histogram");
  std::sort(customer.begin(), customer.end());
  auto got_sorted = download<std::uint32_t>(**device, *customer_column, rows);
  if (!got_sorted || *got_sorted != customer) return wrong("the sort");

  std::printf(
      "query over %zu rows: %llu rows with price > 50, sum %.2f; sort and histogram of "
      "customer: all results correct\n",
      rows, static_cast<unsigned long long>(*kept), static_cast<double>((*got_total)[0]));
  return 0;
}
