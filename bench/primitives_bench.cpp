// Host-side cost of the typed primitives (Google Benchmark), on whatever adapter is open:
//   - record: one call recorded into a command encoder on a binding made by an earlier call
//     (the steady state of a database); no GPU work is in the measured part;
//   - first call: a fresh Primitives object loads (generates and compiles) the kernel, binds the
//     buffers and records the call;
//   - load all: a database's start-up, every builtin kernel loaded from the cache;
//   - load one, plain and recertified: KernelLibrary::load of each kernel, without and with
//     KernelLibraryOptions::recertify_winners (its tuned winner's quick certification cases run
//     again); the difference is that option's cost per kernel. The label says whether the cache
//     had a tuned winner (without one nothing is re-certified).
//
//   primitives_bench [--cache DIR] [google benchmark flags]   (docs/performance.md has results)

#include <benchmark/benchmark.h>

#include <chrono>
#include <cstring>
#include <optional>

#include "wgsl_forge/forge.hpp"
#include "wgsl_forge/primitives.hpp"

using namespace wgsl_forge;

namespace {

std::optional<std::filesystem::path> cache_flag;

gpu::Device& device() {
  static std::unique_ptr<gpu::Device> opened = [] {
    auto result = gpu::Device::open(gpu::RuntimeOptions{});
    if (!result) {
      std::fprintf(stderr, "primitives_bench: %s\n", result.error().to_string().c_str());
      std::exit(3);
    }
    return std::move(result).value();
  }();
  return *opened;
}

ManifestCache cache() { return ManifestCache(resolve_cache_root(cache_flag).value()); }

constexpr std::uint64_t kElements = 1u << 20;

gpu::Buffer column() {
  return device().create_buffer(kElements * 4, gpu::BufferUsage::kStorage, "column").value();
}

// Records `call(primitives, batch)` into a fresh encoder per iteration; only the recording is
// timed (manual time), not making and dropping the encoder.
template <typename Call>
void record(benchmark::State& state, const char* kernel, Call call) {
  forge::Primitives primitives(device(), cache());
  if (!primitives.load(kernel)) state.SkipWithError("load failed");
  {
    auto warm = primitives.begin_batch().value();
    if (!call(primitives, warm)) state.SkipWithError("first call failed");
  }
  for (auto _ : state) {
    gpu::CommandEncoder encoder = device().create_command_encoder().value();
    const auto start = std::chrono::steady_clock::now();
    forge::Batch batch = primitives.record_into(encoder.handle());
    benchmark::DoNotOptimize(call(primitives, batch).ok());
    state.SetIterationTime(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  state.SetLabel(primitives.origin(kernel).value().substr(0, 40));
}

void BM_RecordSortU32(benchmark::State& state) {
  gpu::Buffer keys = column();
  record(state, "radix_sort_u32", [&](forge::Primitives& p, forge::Batch& batch) {
    return p.sort_u32({&keys}, kElements, &batch);
  });
}

void BM_RecordSumF32(benchmark::State& state) {
  gpu::Buffer x = column();
  gpu::Buffer result = column();
  record(state, "reduce_sum_f32", [&](forge::Primitives& p, forge::Batch& batch) {
    return p.sum_f32(batch, {&x}, kElements, {&result});
  });
}

void BM_RecordAffineF32(benchmark::State& state) {
  gpu::Buffer x = column();
  gpu::Buffer y = column();
  record(state, "affine_f32", [&](forge::Primitives& p, forge::Batch& batch) {
    return p.affine_f32({&x}, kElements, 2.0f, 1.0f, {&y}, &batch);
  });
}

void BM_FirstCallSortU32(benchmark::State& state) {
  gpu::Buffer keys = column();
  for (auto _ : state) {
    forge::Primitives primitives(device(), cache());
    auto batch = primitives.begin_batch().value();
    benchmark::DoNotOptimize(primitives.sort_u32({&keys}, kElements, &batch).ok());
  }
}

void BM_LoadAllKernels(benchmark::State& state) {
  for (auto _ : state) {
    forge::Primitives primitives(device(), cache());
    if (Status loaded = primitives.load_all(); !loaded) {
      state.SkipWithError(loaded.error().to_string().c_str());
    }
  }
}

void BM_LoadKernel(benchmark::State& state, std::string kernel_id, bool recertify) {
  for (auto _ : state) {
    forge::KernelLibrary library(device(), cache(), {.recertify_winners = recertify});
    Result<forge::KernelLibrary::ReadyKernel> ready = library.load(kernel_id);
    if (!ready) {
      state.SkipWithError(ready.error().to_string().c_str());
      break;
    }
    state.SetLabel(ready->tuned ? "tuned" : ready->origin.substr(0, 60));
  }
}

void register_load_kernel_benchmarks() {
  for (const kernels::KernelDefinition* kernel : kernels::builtin_kernels()) {
    for (bool recertify : {false, true}) {
      const std::string name =
          "BM_LoadKernel/" + std::string(kernel->id()) + (recertify ? "/recertified" : "/plain");
      benchmark::RegisterBenchmark(name.c_str(), BM_LoadKernel, std::string(kernel->id()),
                                   recertify)
          ->Unit(benchmark::kMillisecond)
          ->Iterations(3);
    }
  }
}

BENCHMARK(BM_RecordSortU32)->Unit(benchmark::kMicrosecond)->UseManualTime();
BENCHMARK(BM_RecordSumF32)->Unit(benchmark::kMicrosecond)->UseManualTime();
BENCHMARK(BM_RecordAffineF32)->Unit(benchmark::kMicrosecond)->UseManualTime();
BENCHMARK(BM_FirstCallSortU32)->Unit(benchmark::kMillisecond)->Iterations(3);
BENCHMARK(BM_LoadAllKernels)->Unit(benchmark::kMillisecond)->Iterations(3);

}  // namespace

int main(int argc, char** argv) {
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::strcmp(argv[i], "--cache") == 0) {
      cache_flag = argv[i + 1];
      std::memmove(argv + i, argv + i + 2, sizeof(char*) * static_cast<std::size_t>(argc - i - 1));
      argc -= 2;
      break;
    }
  }
  benchmark::Initialize(&argc, argv);
  register_load_kernel_benchmarks();
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
