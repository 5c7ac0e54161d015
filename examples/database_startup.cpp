// What a GPU database does at start-up with wgsl-forge: open the adapter, ask the manifest cache
// for the kernels tuned on this exact hardware, and run one on its own buffers. When the cache has
// no tuning yet (no `wgsl-forge auto-tune-all` on this machine), the default schedule runs, and
// the program says so.
//
//   database_startup [--cache DIR] [--elements N]
//
// Exit code 0 when every output element is right.

#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "wgsl_forge/forge.hpp"

using namespace wgsl_forge;

namespace {

int fail(const Error& error) {
  std::fprintf(stderr, "database_startup: %s\n", error.to_string().c_str());
  return 3;
}

}  // namespace

int main(int argc, char** argv) {
  std::optional<std::filesystem::path> cache_dir;
  std::uint64_t elements = 1'000'003;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--cache") == 0) cache_dir = argv[i + 1];
    if (std::strcmp(argv[i], "--elements") == 0) elements = std::strtoull(argv[i + 1], nullptr, 10);
  }

  // 1. The adapter and the cache.
  auto device = gpu::Device::open(gpu::RuntimeOptions{});
  if (!device) return fail(device.error());
  auto root = resolve_cache_root(cache_dir);
  if (!root) return fail(root.error());
  forge::KernelLibrary library(**device, ManifestCache(*root));

  // 2. The tuned kernel (or the default schedule, with the reason).
  auto affine = library.load("affine_f32");
  if (!affine) return fail(affine.error());
  std::printf("affine_f32 %s: %s\n", affine->prepared.generated().schedule.to_string().c_str(),
              affine->origin.c_str());

  // 3. The database's own buffers: a column of floats, and room for the result.
  std::vector<float> column(elements);
  for (std::uint64_t i = 0; i < elements; ++i) column[i] = static_cast<float>(i % 977) - 488.0f;
  kernels::Problem problem;
  problem.elements = elements;
  problem.a = 1.5f;
  problem.b = -2.0f;
  auto plan = affine->definition->plan(affine->prepared.generated().schedule, problem,
                                       forge::capabilities_of((*device)->adapter()));
  if (!plan) return fail(plan.error());
  auto x = (*device)->create_buffer(plan->find("x")->bytes, gpu::BufferUsage::kStorage, "column");
  auto y = (*device)->create_buffer(plan->find("y")->bytes, gpu::BufferUsage::kStorage, "result");
  if (!x) return fail(x.error());
  if (!y) return fail(y.error());
  if (auto written = (*device)->write_buffer(*x, 0, std::as_bytes(std::span(column))); !written) {
    return fail(written.error());
  }

  // 4. Bind them and run.
  auto bound = affine->prepared.bind(problem, {{"x", &*x}, {"y", &*y}});
  if (!bound) return fail(bound.error());
  if (auto ran = affine->prepared.execute(**bound); !ran) return fail(ran.error());

  auto bytes = (*device)->read_buffer(*y, 0, elements * sizeof(float));
  if (!bytes) return fail(bytes.error());
  std::vector<float> result(elements);
  std::memcpy(result.data(), bytes->data(), elements * sizeof(float));
  for (std::uint64_t i = 0; i < elements; ++i) {
    const float expected = 1.5f * column[i] - 2.0f;
    if (std::abs(result[i] - expected) > 1e-4f * (1.0f + std::abs(expected))) {
      std::fprintf(stderr, "database_startup: element %llu is %g, expected %g\n",
                   static_cast<unsigned long long>(i), result[i], expected);
      return 1;
    }
  }
  std::printf("ran affine_f32 over %llu elements on %s: all results correct\n",
              static_cast<unsigned long long>(elements),
              (*device)->adapter().identity.name.c_str());
  return 0;
}
