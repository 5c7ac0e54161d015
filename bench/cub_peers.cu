// The same operations as `wgsl-forge bench`, with CUB's device-wide primitives and cuBLAS on the
// same GPU, at the same sizes (built with nvcc by scripts/gpu-machine/performance.sh):
//
//   cub_peers [--size N] [--gemm N] [--bins B] [--segment L] [--repeats R] [KERNEL...]
//
// Each operation runs 3 times unmeasured, then R times between CUDA events; the median is
// reported. Temporary storage is allocated once per operation, outside the timed part, as a
// database keeps it. Every result is then checked on the host (sorted and a permutation, the
// exact count, sums within a bound, sampled elements), so a peer that did no work cannot report
// a time. Prints JSON in bench/peers.py's shape:
//   {"device", "cub", "size", "gemm", "bins", "segment", "kernels": {kernel_id: {"op",
//   "median_ns"}}}
// Bytes and FLOPs are counted by wgsl-forge's rules (bench/compare.py), so rates compare.

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cub/cub.cuh>
#include <functional>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

namespace {

void check_cuda(cudaError_t status, const char* what) {
  if (status != cudaSuccess) {
    std::fprintf(stderr, "cub_peers: %s: %s\n", what, cudaGetErrorString(status));
    std::exit(3);
  }
}

void fail(const std::string& kernel, const std::string& why) {
  std::fprintf(stderr, "cub_peers: %s gave a wrong result: %s\n", kernel.c_str(), why.c_str());
  std::exit(4);
}

template <typename T>
struct DeviceArray {
  T* data = nullptr;
  std::size_t size = 0;
  explicit DeviceArray(std::size_t n) : size(n) {
    check_cuda(cudaMalloc(&data, std::max<std::size_t>(1, n) * sizeof(T)), "cudaMalloc");
  }
  DeviceArray(const std::vector<T>& host) : DeviceArray(host.size()) {
    check_cuda(cudaMemcpy(data, host.data(), size * sizeof(T), cudaMemcpyHostToDevice), "upload");
  }
  ~DeviceArray() { cudaFree(data); }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;
  std::vector<T> download(std::size_t count) const {
    std::vector<T> host(count);
    check_cuda(cudaMemcpy(host.data(), data, count * sizeof(T), cudaMemcpyDeviceToHost),
               "download");
    return host;
  }
};

// Temporary storage a CUB call asks for in its sizing call.
struct Scratch {
  void* data = nullptr;
  std::size_t bytes = 0;
  ~Scratch() { cudaFree(data); }
  void reserve() { check_cuda(cudaMalloc(&data, std::max<std::size_t>(1, bytes)), "scratch"); }
};

double median_ns(const std::function<void()>& run, int repeats) {
  for (int i = 0; i < 3; ++i) run();
  check_cuda(cudaDeviceSynchronize(), "warm-up");
  cudaEvent_t start, end;
  cudaEventCreate(&start);
  cudaEventCreate(&end);
  std::vector<double> times;
  for (int i = 0; i < repeats; ++i) {
    cudaEventRecord(start);
    run();
    cudaEventRecord(end);
    check_cuda(cudaEventSynchronize(end), "timed run");
    float ms = 0;
    cudaEventElapsedTime(&ms, start, end);
    times.push_back(ms * 1e6);
  }
  cudaEventDestroy(start);
  cudaEventDestroy(end);
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

__global__ void copy_float4(const float4* x, float4* y, std::size_t vectors) {
  for (std::size_t i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x; i < vectors;
       i += std::size_t{gridDim.x} * blockDim.x) {
    y[i] = x[i];
  }
}

__global__ void affine_float4(const float4* x, float4* y, std::size_t vectors, float a, float b) {
  for (std::size_t i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x; i < vectors;
       i += std::size_t{gridDim.x} * blockDim.x) {
    const float4 v = x[i];
    y[i] = make_float4(fmaf(a, v.x, b), fmaf(a, v.y, b), fmaf(a, v.z, b), fmaf(a, v.w, b));
  }
}

__global__ void gather(const float* x, const std::uint32_t* idx, float* y, std::size_t n) {
  for (std::size_t i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x; i < n;
       i += std::size_t{gridDim.x} * blockDim.x) {
    y[i] = x[idx[i]];
  }
}

// Sums of the values, their squares and their cubes (mod 2^64): equal for a permutation, and
// different for anything a wrong sort plausibly gives (a lost, doubled or altered key). A full
// host sort of 2^28 keys would take longer than the GPU work measured.
std::array<std::uint64_t, 3> fingerprint(const std::vector<std::uint32_t>& values) {
  std::array<std::uint64_t, 3> sums{};
  for (std::uint64_t v : values) {
    sums[0] += v;
    sums[1] += v * v;
    sums[2] += v * v * v;
  }
  return sums;
}

struct Positive {
  __device__ bool operator()(float value) const { return value > 0.0f; }
};

int grid_for(std::size_t items) {
  int device = 0, processors = 0;
  cudaGetDevice(&device);
  cudaDeviceGetAttribute(&processors, cudaDevAttrMultiProcessorCount, device);
  return static_cast<int>(
      std::min<std::size_t>((items + 255) / 256, static_cast<std::size_t>(processors) * 8));
}

struct Options {
  std::size_t size = std::size_t{1} << 28;
  int gemm = 4096;
  int bins = 256;
  std::size_t segment = 256;  // segmented_reduce_sum_f32: size / segment even segments
  int repeats = 20;
  std::set<std::string> kernels;  // empty: all
};

Options parse(int argc, char** argv) {
  Options options;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&] {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "cub_peers: %s needs a value\n", arg.c_str());
        std::exit(2);
      }
      return std::strtoull(argv[++i], nullptr, 10);
    };
    if (arg == "--help") {
      std::printf(
          "cub_peers [--size N] [--gemm N] [--bins B] [--segment L] [--repeats R] [KERNEL...]\n");
      std::exit(0);
    } else if (arg == "--size") {
      options.size = value();
    } else if (arg == "--gemm") {
      options.gemm = static_cast<int>(value());
    } else if (arg == "--bins") {
      options.bins = static_cast<int>(value());
    } else if (arg == "--segment") {
      options.segment = std::max<std::size_t>(1, value());
    } else if (arg == "--repeats") {
      options.repeats = static_cast<int>(value());
    } else {
      options.kernels.insert(arg);
    }
  }
  return options;
}

}  // namespace

int main(int argc, char** argv) {
  const Options options = parse(argc, argv);
  const std::size_t n = options.size;
  auto wanted = [&](const std::string& kernel) {
    return kernel == "copy" || options.kernels.empty() || options.kernels.count(kernel) != 0;
  };
  std::mt19937_64 random(1);
  std::vector<float> x_host(n);
  for (float& v : x_host) v = std::uniform_real_distribution<float>(-1000.0f, 1000.0f)(random);
  std::vector<std::uint32_t> keys_host(n);
  for (std::uint32_t& v : keys_host) v = static_cast<std::uint32_t>(random());
  DeviceArray<float> x(x_host), y(n);
  DeviceArray<std::uint32_t> keys(keys_host), keys_out(n);
  std::map<std::string, std::pair<std::string, double>> results;
  const std::size_t vectors = n / 4;
  const int grid = grid_for(vectors);

  results["copy"] = {"float4 copy kernel", median_ns(
                                               [&] {
                                                 copy_float4<<<grid, 256>>>(
                                                     reinterpret_cast<const float4*>(x.data),
                                                     reinterpret_cast<float4*>(y.data), vectors);
                                               },
                                               options.repeats)};
  if (y.download(n) != x_host) fail("copy", "y differs from x");

  if (wanted("affine_f32")) {
    results["affine_f32"] = {"float4 kernel y = 2x + 1",
                             median_ns(
                                 [&] {
                                   affine_float4<<<grid, 256>>>(
                                       reinterpret_cast<const float4*>(x.data),
                                       reinterpret_cast<float4*>(y.data), vectors, 2.0f, 1.0f);
                                 },
                                 options.repeats)};
    const std::vector<float> out = y.download(n);
    for (std::size_t i = 0; i < n; i += 4099) {
      if (out[i] != std::fmaf(2.0f, x_host[i], 1.0f))
        fail("affine_f32", "element " + std::to_string(i));
    }
  }

  // Reductions: the f32 sum within n 2^-24 sum|x| of the exact sum, min and max exact.
  auto reduce_f32 = [&](const std::string& kernel, const char* op, auto call, double expected,
                        double allowed) {
    if (!wanted(kernel)) return;
    DeviceArray<float> out(1);
    Scratch scratch;
    call(scratch.data, scratch.bytes, out.data);
    scratch.reserve();
    results[kernel] = {
        op, median_ns([&] { call(scratch.data, scratch.bytes, out.data); }, options.repeats)};
    const double got = out.download(1)[0];
    if (std::abs(got - expected) > allowed) {
      fail(kernel, std::to_string(got) + " instead of " + std::to_string(expected));
    }
  };
  long double exact = 0, magnitude = 0;
  for (float v : x_host) {
    exact += v;
    magnitude += std::abs(v);
  }
  reduce_f32(
      "reduce_sum_f32", "cub::DeviceReduce::Sum",
      [&](void* t, std::size_t& b, float* out) {
        cub::DeviceReduce::Sum(t, b, x.data, out, static_cast<int>(n));
      },
      static_cast<double>(exact),
      static_cast<double>(n) * std::ldexp(1.0, -24) * static_cast<double>(magnitude));
  reduce_f32(
      "reduce_min_f32", "cub::DeviceReduce::Min",
      [&](void* t, std::size_t& b, float* out) {
        cub::DeviceReduce::Min(t, b, x.data, out, static_cast<int>(n));
      },
      *std::min_element(x_host.begin(), x_host.end()), 0.0);
  reduce_f32(
      "reduce_max_f32", "cub::DeviceReduce::Max",
      [&](void* t, std::size_t& b, float* out) {
        cub::DeviceReduce::Max(t, b, x.data, out, static_cast<int>(n));
      },
      *std::max_element(x_host.begin(), x_host.end()), 0.0);

  if (wanted("reduce_sum_u32")) {
    DeviceArray<std::uint32_t> out(1);
    Scratch scratch;
    cub::DeviceReduce::Sum(scratch.data, scratch.bytes, keys.data, out.data, static_cast<int>(n));
    scratch.reserve();
    results["reduce_sum_u32"] = {"cub::DeviceReduce::Sum (u32)",
                                 median_ns(
                                     [&] {
                                       cub::DeviceReduce::Sum(scratch.data, scratch.bytes,
                                                              keys.data, out.data,
                                                              static_cast<int>(n));
                                     },
                                     options.repeats)};
    std::uint32_t sum = 0;
    for (std::uint32_t v : keys_host) sum += v;
    if (out.download(1)[0] != sum) fail("reduce_sum_u32", "wrong sum");
  }

  if (wanted("scan_exclusive_u32")) {
    Scratch scratch;
    cub::DeviceScan::ExclusiveSum(scratch.data, scratch.bytes, keys.data, keys_out.data,
                                  static_cast<int>(n));
    scratch.reserve();
    results["scan_exclusive_u32"] = {"cub::DeviceScan::ExclusiveSum (u32)",
                                     median_ns(
                                         [&] {
                                           cub::DeviceScan::ExclusiveSum(
                                               scratch.data, scratch.bytes, keys.data,
                                               keys_out.data, static_cast<int>(n));
                                         },
                                         options.repeats)};
    const std::vector<std::uint32_t> out = keys_out.download(n);
    std::uint32_t prefix = 0;
    for (std::size_t i = 0; i < n; ++i) {
      if (out[i] != prefix) fail("scan_exclusive_u32", "element " + std::to_string(i));
      prefix += keys_host[i];
    }
  }

  if (wanted("compact_f32")) {
    DeviceArray<int> kept(1);
    Scratch scratch;
    cub::DeviceSelect::If(scratch.data, scratch.bytes, x.data, y.data, kept.data,
                          static_cast<int>(n), Positive{});
    scratch.reserve();
    results["compact_f32"] = {"cub::DeviceSelect::If (x > 0)",
                              median_ns(
                                  [&] {
                                    cub::DeviceSelect::If(scratch.data, scratch.bytes, x.data,
                                                          y.data, kept.data, static_cast<int>(n),
                                                          Positive{});
                                  },
                                  options.repeats)};
    const auto expected =
        std::count_if(x_host.begin(), x_host.end(), [](float v) { return v > 0; });
    if (kept.download(1)[0] != expected) fail("compact_f32", "wrong count");
    const std::vector<float> out = y.download(static_cast<std::size_t>(expected));
    std::size_t next = 0;
    for (float v : x_host) {
      if (v > 0 && out[next++] != v) fail("compact_f32", "kept value " + std::to_string(next - 1));
    }
  }

  if (wanted("histogram_u32")) {
    std::vector<std::uint32_t> samples_host(n);
    for (std::uint32_t& v : samples_host) v = static_cast<std::uint32_t>(random() % options.bins);
    DeviceArray<std::uint32_t> samples(samples_host);
    DeviceArray<int> counts(static_cast<std::size_t>(options.bins));
    Scratch scratch;
    auto call = [&] {
      cub::DeviceHistogram::HistogramEven(
          scratch.data, scratch.bytes, samples.data, counts.data, options.bins + 1, 0u,
          static_cast<std::uint32_t>(options.bins), static_cast<int>(n));
    };
    call();
    scratch.reserve();
    results["histogram_u32"] = {
        "cub::DeviceHistogram::HistogramEven " + std::to_string(options.bins) + " bins",
        median_ns(call, options.repeats)};
    std::vector<int> expected(static_cast<std::size_t>(options.bins));
    for (std::uint32_t v : samples_host) ++expected[v];
    if (counts.download(expected.size()) != expected) fail("histogram_u32", "wrong counts");
  }

  if (wanted("radix_sort_u32")) {
    Scratch scratch;
    cub::DeviceRadixSort::SortKeys(scratch.data, scratch.bytes, keys.data, keys_out.data,
                                   static_cast<int>(n));
    scratch.reserve();
    results["radix_sort_u32"] = {"cub::DeviceRadixSort::SortKeys (u32)",
                                 median_ns(
                                     [&] {
                                       cub::DeviceRadixSort::SortKeys(scratch.data, scratch.bytes,
                                                                      keys.data, keys_out.data,
                                                                      static_cast<int>(n));
                                     },
                                     options.repeats)};
    const std::vector<std::uint32_t> sorted = keys_out.download(n);
    if (!std::is_sorted(sorted.begin(), sorted.end())) fail("radix_sort_u32", "not ascending");
    if (fingerprint(sorted) != fingerprint(keys_host)) {
      fail("radix_sort_u32", "not a permutation of the input");
    }
  }

  if (wanted("radix_sort_pairs_u32")) {
    std::vector<std::uint32_t> positions(n);
    for (std::size_t i = 0; i < n; ++i) positions[i] = static_cast<std::uint32_t>(i);
    DeviceArray<std::uint32_t> values(positions), values_out(n);
    Scratch scratch;
    cub::DeviceRadixSort::SortPairs(scratch.data, scratch.bytes, keys.data, keys_out.data,
                                    values.data, values_out.data, static_cast<int>(n));
    scratch.reserve();
    results["radix_sort_pairs_u32"] = {
        "cub::DeviceRadixSort::SortPairs (u32, u32)",
        median_ns(
            [&] {
              cub::DeviceRadixSort::SortPairs(scratch.data, scratch.bytes, keys.data, keys_out.data,
                                              values.data, values_out.data, static_cast<int>(n));
            },
            options.repeats)};
    const std::vector<std::uint32_t> sorted = keys_out.download(n);
    const std::vector<std::uint32_t> moved = values_out.download(n);
    if (fingerprint(moved) != fingerprint(positions)) {
      fail("radix_sort_pairs_u32", "the values are not a permutation of the input's");
    }
    for (std::size_t i = 0; i < n; ++i) {
      if (keys_host[moved[i]] != sorted[i] || (i > 0 && sorted[i - 1] > sorted[i]) ||
          (i > 0 && sorted[i - 1] == sorted[i] && moved[i - 1] > moved[i])) {
        fail("radix_sort_pairs_u32", "element " + std::to_string(i));
      }
    }
  }

  // u64 keys (random, all 64 bits) with u32 values: CUB sorts all 8 bytes, as the forge does.
  if (wanted("radix_sort_pairs_u64")) {
    std::vector<std::uint64_t> wide_host(n);
    for (std::uint64_t& v : wide_host) v = random();
    std::vector<std::uint32_t> positions(n);
    for (std::size_t i = 0; i < n; ++i) positions[i] = static_cast<std::uint32_t>(i);
    DeviceArray<std::uint64_t> wide(wide_host), wide_out(n);
    DeviceArray<std::uint32_t> values(positions), values_out(n);
    Scratch scratch;
    auto call = [&] {
      cub::DeviceRadixSort::SortPairs(scratch.data, scratch.bytes, wide.data, wide_out.data,
                                      values.data, values_out.data, static_cast<int>(n));
    };
    call();
    scratch.reserve();
    results["radix_sort_pairs_u64"] = {"cub::DeviceRadixSort::SortPairs (u64, u32)",
                                       median_ns(call, options.repeats)};
    const std::vector<std::uint64_t> sorted = wide_out.download(n);
    const std::vector<std::uint32_t> moved = values_out.download(n);
    if (fingerprint(moved) != fingerprint(positions)) {
      fail("radix_sort_pairs_u64", "the values are not a permutation of the input's");
    }
    for (std::size_t i = 0; i < n; ++i) {
      if (wide_host[moved[i]] != sorted[i] || (i > 0 && sorted[i - 1] > sorted[i]) ||
          (i > 0 && sorted[i - 1] == sorted[i] && moved[i - 1] > moved[i])) {
        fail("radix_sort_pairs_u64", "element " + std::to_string(i));
      }
    }
  }

  // size / segment even segments of x, as `wgsl-forge bench --segment L` draws them; each sum
  // within m 2^-24 sum|x| of the exact one (m = the segment's length).
  if (wanted("segmented_reduce_sum_f32")) {
    const std::size_t segments = n / options.segment;
    std::vector<int> offsets_host(segments + 1);
    for (std::size_t s = 0; s <= segments; ++s) {
      offsets_host[s] = static_cast<int>(s * options.segment);
    }
    DeviceArray<int> offsets(offsets_host);
    DeviceArray<float> sums(segments);
    Scratch scratch;
    auto call = [&] {
      cub::DeviceSegmentedReduce::Sum(scratch.data, scratch.bytes, x.data, sums.data,
                                      static_cast<int>(segments), offsets.data, offsets.data + 1);
    };
    call();
    scratch.reserve();
    results["segmented_reduce_sum_f32"] = {
        "cub::DeviceSegmentedReduce::Sum, segments of " + std::to_string(options.segment),
        median_ns(call, options.repeats)};
    const std::vector<float> out = sums.download(segments);
    for (std::size_t s = 0; s < segments; s += 1 + segments / 4099) {
      double exact_sum = 0, magnitude_sum = 0;
      for (std::size_t i = s * options.segment; i < (s + 1) * options.segment; ++i) {
        exact_sum += x_host[i];
        magnitude_sum += std::abs(x_host[i]);
      }
      const double allowed = static_cast<double>(options.segment) * std::ldexp(magnitude_sum, -24);
      if (std::abs(out[s] - exact_sum) > allowed) {
        fail("segmented_reduce_sum_f32", "segment " + std::to_string(s));
      }
    }
  }

  if (wanted("gather_f32")) {
    std::vector<std::uint32_t> idx_host(n);
    for (std::uint32_t& v : idx_host) v = static_cast<std::uint32_t>(random() % n);
    DeviceArray<std::uint32_t> idx(idx_host);
    const int gather_grid = grid_for(n);
    results["gather_f32"] = {
        "gather kernel (u32 indices)",
        median_ns([&] { gather<<<gather_grid, 256>>>(x.data, idx.data, y.data, n); },
                  options.repeats)};
    const std::vector<float> out = y.download(n);
    for (std::size_t i = 0; i < n; i += 4099) {
      if (out[i] != x_host[idx_host[i]]) fail("gather_f32", "element " + std::to_string(i));
    }
  }

  if (wanted("gemm_f32")) {
    const int g = options.gemm;
    const std::size_t cells = std::size_t(g) * g;
    std::vector<float> a_host(cells), b_host(cells);
    for (float& v : a_host) v = std::uniform_real_distribution<float>(-1.0f, 1.0f)(random);
    for (float& v : b_host) v = std::uniform_real_distribution<float>(-1.0f, 1.0f)(random);
    DeviceArray<float> a(a_host), b(b_host), c(cells);
    cublasHandle_t handle;
    if (cublasCreate(&handle) != CUBLAS_STATUS_SUCCESS) fail("gemm_f32", "no cuBLAS handle");
    cublasSetMathMode(handle, CUBLAS_DEFAULT_MATH);  // f32 FMA, no TF32
    const float one = 1.0f, zero = 0.0f;
    // Row-major C = A B is column-major C^T = B^T A^T: pass B first.
    results["gemm_f32"] = {"cublasSgemm, no TF32",
                           median_ns(
                               [&] {
                                 cublasSgemm(handle, CUBLAS_OP_N, CUBLAS_OP_N, g, g, g, &one,
                                             b.data, g, a.data, g, &zero, c.data, g);
                               },
                               options.repeats)};
    const std::vector<float> out = c.download(cells);
    for (int sample = 0; sample < 64; ++sample) {
      const int i = static_cast<int>(random() % g), j = static_cast<int>(random() % g);
      double sum = 0, bound = 0;
      for (int l = 0; l < g; ++l) {
        const double term = double(a_host[std::size_t(i) * g + l]) * b_host[std::size_t(l) * g + j];
        sum += term;
        bound += std::abs(term);
      }
      if (std::abs(out[std::size_t(i) * g + j] - sum) > g * std::ldexp(bound, -23)) {
        fail("gemm_f32", "element (" + std::to_string(i) + ", " + std::to_string(j) + ")");
      }
    }
    cublasDestroy(handle);
  }

  cudaDeviceProp properties;
  cudaGetDeviceProperties(&properties, 0);
  std::printf("{\n  \"device\": \"%s\",\n  \"cub\": \"CCCL %d.%d.%d, CUDA runtime %d\",\n",
              properties.name, CCCL_MAJOR_VERSION, CCCL_MINOR_VERSION, CCCL_PATCH_VERSION,
              CUDART_VERSION);
  std::printf("  \"size\": %zu,\n  \"gemm\": %d,\n  \"bins\": %d,\n  \"segment\": %zu,\n", n,
              options.gemm, options.bins, options.segment);
  std::printf("  \"kernels\": {\n");
  std::size_t index = 0;
  for (const auto& [kernel, result] : results) {
    std::printf("    \"%s\": {\"op\": \"%s\", \"median_ns\": %.1f}%s\n", kernel.c_str(),
                result.first.c_str(), result.second, ++index < results.size() ? "," : "");
  }
  std::printf("  }\n}\n");
  return 0;
}
