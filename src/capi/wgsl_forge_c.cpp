// The C API (include/wgsl_forge/wgsl_forge.h) over forge::Primitives: opaque handles, integer
// statuses, and the message of the last failure kept in the context. Nothing throws out of here.

#include "wgsl_forge/wgsl_forge.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <exception>
#include <functional>
#include <mutex>
#include <new>
#include <optional>
#include <string>

#include "util/try.hpp"
#include "wgsl_forge/primitives.hpp"
#include "wgsl_forge/version.hpp"

using namespace wgsl_forge;

struct wf_context {
  std::mutex mutex;
  std::string error;
  std::string origin;  // the last wf_kernel_origin answer
  std::unique_ptr<gpu::Device> device;
  std::optional<ManifestCache> cache;
  std::unique_ptr<forge::Primitives> primitives;
};

struct wf_batch {
  wf_context* context;
  forge::Batch batch;
};

namespace {

int status_code(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::kInvalidInput:
    case ErrorKind::kInvalidKey:
      return WF_ERROR_INVALID_INPUT;
    case ErrorKind::kCollision:
    case ErrorKind::kCorruption:
    case ErrorKind::kSerialization:
    case ErrorKind::kIo:
      return WF_ERROR_CACHE;
    case ErrorKind::kCompilation:
    case ErrorKind::kValidation:
    case ErrorKind::kRuntime:
      return WF_ERROR_GPU;
    case ErrorKind::kTimeout:
      return WF_ERROR_TIMEOUT;
    case ErrorKind::kDeviceLost:
      return WF_ERROR_DEVICE_LOST;
  }
  return WF_ERROR_GPU;
}

int fail(wf_context& context, const Error& error) {
  context.error = error.to_string();
  return status_code(error.kind());
}

int fail(wf_context& context, const std::string& message) {
  context.error = message;
  return WF_ERROR_INVALID_INPUT;
}

// Runs `body` under the context's lock; a C++ exception (memory exhausted) becomes a status.
template <typename Body>
int guarded(wf_context* context, Body&& body) {
  if (context == nullptr) return WF_ERROR_INVALID_INPUT;
  std::lock_guard lock(context->mutex);
  context->error.clear();
  try {
    return body(*context);
  } catch (const std::bad_alloc&) {
    return fail(*context, Error(ErrorKind::kRuntime, "Out of host memory."));
  } catch (const std::exception& exception) {
    return fail(*context, Error(ErrorKind::kRuntime, exception.what()));
  }
}

int finish(wf_context& context, const Status& status) {
  return status ? WF_OK : fail(context, status.error());
}

int open_context(std::unique_ptr<gpu::Device> device, const char* cache_dir, wf_context& context) {
  std::optional<std::filesystem::path> explicit_root;
  if (cache_dir != nullptr) explicit_root = cache_dir;
  Result<std::filesystem::path> root = resolve_cache_root(explicit_root);
  if (!root) return fail(context, root.error());
  Result<std::shared_ptr<RemoteStore>> remote = RemoteStore::from_environment();
  if (!remote) return fail(context, remote.error());
  context.device = std::move(device);
  context.cache.emplace(*root);
  context.cache->set_remote(std::move(*remote));
  context.primitives = std::make_unique<forge::Primitives>(*context.device, *context.cache);
  return WF_OK;
}

int create(wf_context** out, const std::function<int(wf_context&)>& open) {
  if (out == nullptr) return WF_ERROR_INVALID_INPUT;
  *out = new (std::nothrow) wf_context();
  if (*out == nullptr) return WF_ERROR_GPU;
  return guarded(*out, open);
}

// A program's WGPUBuffer as a column of the context's device.
struct WrappedColumn {
  gpu::Buffer buffer;
  std::uint64_t offset = 0;
};

Result<WrappedColumn> wrap(wf_context& context, wf_column column, const char* name) {
  WF_TRY_ASSIGN(gpu::Buffer buffer, context.device->wrap_buffer(column.buffer, name));
  return WrappedColumn{std::move(buffer), column.offset};
}

template <typename T>
forge::Column<T> as(const WrappedColumn& wrapped) {
  return forge::Column<T>{&wrapped.buffer, wrapped.offset};
}

forge::Batch* batch_of(wf_batch* batch) { return batch == nullptr ? nullptr : &batch->batch; }

Status check_batch(wf_context& context, wf_batch* batch) {
  if (batch != nullptr && batch->context != &context) {
    return Error(ErrorKind::kInvalidInput, "The batch belongs to another context.");
  }
  return Ok{};
}

// A device buffer holding `bytes` of host data, padded to a multiple of 16 bytes as every
// vectorised kernel needs.
Result<gpu::Buffer> upload(gpu::Device& device, const void* data, std::size_t bytes,
                           std::size_t capacity_bytes, const char* label) {
  const std::uint64_t size = std::max<std::uint64_t>(16, (capacity_bytes + 15) / 16 * 16);
  Result<gpu::Buffer> buffer = device.create_buffer(size, gpu::BufferUsage::kStorage, label);
  if (!buffer) return buffer;
  if (bytes != 0) {
    Status written =
        device.write_buffer(*buffer, 0, std::span(static_cast<const std::byte*>(data), bytes));
    if (!written) return std::move(written).error();
  }
  return buffer;
}

Status download(gpu::Device& device, const gpu::Buffer& buffer, void* data, std::size_t bytes) {
  WF_TRY_ASSIGN(std::vector<std::byte> read, device.read_buffer(buffer, 0, bytes));
  if (bytes != 0) std::memcpy(data, read.data(), bytes);
  return Ok{};
}

template <typename... Columns>
int with_columns(wf_context* context, wf_batch* batch,
                 const std::function<Status(wf_context&, const WrappedColumn* columns)>& call,
                 Columns... columns) {
  return guarded(context, [&](wf_context& c) {
    if (Status same = check_batch(c, batch); !same) return fail(c, same.error());
    const wf_column given[] = {columns.first...};
    const char* names[] = {columns.second...};
    std::vector<WrappedColumn> wrapped;
    for (std::size_t i = 0; i < sizeof...(Columns); ++i) {
      Result<WrappedColumn> one = wrap(c, given[i], names[i]);
      if (!one) return fail(c, one.error());
      wrapped.push_back(std::move(one).value());
    }
    return finish(c, call(c, wrapped.data()));
  });
}

std::pair<wf_column, const char*> named(wf_column column, const char* name) {
  return {column, name};
}

}  // namespace

extern "C" {

const char* wf_version(void) { return kVersion; }

int wf_context_create(const char* cache_dir, wf_context** out) {
  return create(out, [&](wf_context& context) {
    Result<std::unique_ptr<gpu::Device>> device = gpu::Device::open(gpu::RuntimeOptions{});
    if (!device) return fail(context, device.error());
    return open_context(std::move(device).value(), cache_dir, context);
  });
}

int wf_context_create_with_device(const wf_device_desc* desc, const char* cache_dir,
                                  wf_context** out) {
  return create(out, [&](wf_context& context) {
    if (desc == nullptr) return fail(context, "The device description is NULL.");
    gpu::ExternalDevice external;
    if (desc->webgpu_library != nullptr) external.library_path = desc->webgpu_library;
    external.instance = desc->instance;
    external.adapter = desc->adapter;
    external.device = desc->device;
    external.bounds_checks = desc->bounds_checks != 0;
    Result<std::unique_ptr<gpu::Device>> device = gpu::Device::adopt(external);
    if (!device) return fail(context, device.error());
    return open_context(std::move(device).value(), cache_dir, context);
  });
}

void wf_context_destroy(wf_context* context) { delete context; }

const char* wf_context_error(const wf_context* context) {
  return context == nullptr ? "The context is NULL." : context->error.c_str();
}

const char* wf_context_adapter_name(const wf_context* context) {
  if (context == nullptr || context->device == nullptr) return "";
  return context->device->adapter().identity.name.c_str();
}

const char* wf_context_topology_hash(const wf_context* context) {
  if (context == nullptr || context->device == nullptr) return "";
  return context->device->adapter().topology_hash.c_str();
}

int wf_load_all(wf_context* context) {
  return guarded(context, [](wf_context& c) {
    if (!c.primitives) return fail(c, "The context failed to open.");
    return finish(c, c.primitives->load_all());
  });
}

int wf_kernel_origin(wf_context* context, const char* kernel_id, const char** origin) {
  return guarded(context, [&](wf_context& c) {
    if (!c.primitives) return fail(c, "The context failed to open.");
    if (kernel_id == nullptr || origin == nullptr) return fail(c, "kernel_id or origin is NULL.");
    Result<std::string> loaded = c.primitives->load(kernel_id);
    if (!loaded) return fail(c, loaded.error());
    c.origin = *loaded;
    *origin = c.origin.c_str();
    return WF_OK;
  });
}

int wf_auto_tune_all(wf_context* context, uint32_t budget, size_t* tuned, size_t* cached) {
  return guarded(context, [&](wf_context& c) {
    if (!c.primitives) return fail(c, "The context failed to open.");
    if (budget == 0) return fail(c, "The budget is 0; it must be at least 1.");
    forge::AutoTuneOptions options;
    options.tune.budget = budget;
    std::vector<forge::AutoTuneRow> rows = forge::auto_tune_all(*c.device, *c.cache, options);
    std::size_t tuned_count = 0;
    std::size_t cached_count = 0;
    int status = WF_OK;
    for (const forge::AutoTuneRow& row : rows) {
      if (row.status == forge::AutoTuneRow::Status::kTuned) ++tuned_count;
      // Tuned by another process while this one searched: the cache has it all the same.
      if (row.status == forge::AutoTuneRow::Status::kCached ||
          row.status == forge::AutoTuneRow::Status::kTunedElsewhere)
        ++cached_count;
      if (row.status == forge::AutoTuneRow::Status::kFailed && status == WF_OK) {
        c.error = row.kernel_id + " (size bucket " + row.bucket + "): " + row.message;
        status = WF_ERROR_REJECTED;
      }
    }
    if (tuned != nullptr) *tuned = tuned_count;
    if (cached != nullptr) *cached = cached_count;
    return status;
  });
}

int wf_tune_kernel(wf_context* context, const char* kernel_id, uint32_t budget, int* tuned_now) {
  return guarded(context, [&](wf_context& c) {
    if (!c.primitives) return fail(c, "The context failed to open.");
    if (kernel_id == nullptr) return fail(c, "kernel_id is NULL.");
    if (budget == 0) return fail(c, "The budget is 0; it must be at least 1.");
    Result<const kernels::KernelDefinition*> kernel = kernels::find_kernel(kernel_id);
    if (!kernel) return fail(c, kernel.error());
    forge::AutoTuneOptions options;
    options.tune.budget = budget;
    const std::vector<forge::AutoTuneRow> rows =
        forge::auto_tune_all(*c.device, *c.cache, std::span(&*kernel, 1), options);
    if (tuned_now != nullptr) {
      *tuned_now = std::any_of(rows.begin(), rows.end(), [](const forge::AutoTuneRow& row) {
        return row.status == forge::AutoTuneRow::Status::kTuned;
      });
    }
    for (const forge::AutoTuneRow& row : rows) {
      if (row.status != forge::AutoTuneRow::Status::kFailed) continue;
      c.error = row.kernel_id + " (size bucket " + row.bucket + "): " + row.message;
      return WF_ERROR_REJECTED;
    }
    return WF_OK;
  });
}

int wf_batch_begin(wf_context* context, void* wgpu_command_encoder, wf_batch** out) {
  return guarded(context, [&](wf_context& c) {
    if (!c.primitives) return fail(c, "The context failed to open.");
    if (out == nullptr) return fail(c, "out is NULL.");
    *out = nullptr;
    if (wgpu_command_encoder != nullptr) {
      *out = new wf_batch{&c, c.primitives->record_into(wgpu_command_encoder)};
      return WF_OK;
    }
    Result<forge::Batch> batch = c.primitives->begin_batch();
    if (!batch) return fail(c, batch.error());
    *out = new wf_batch{&c, std::move(batch).value()};
    return WF_OK;
  });
}

int wf_batch_submit(wf_batch* batch) {
  if (batch == nullptr) return WF_ERROR_INVALID_INPUT;
  return guarded(batch->context,
                 [&](wf_context& c) { return finish(c, batch->batch.submit_and_wait()); });
}

void wf_batch_destroy(wf_batch* batch) {
  if (batch == nullptr) return;
  std::lock_guard lock(batch->context->mutex);
  delete batch;
}

int wf_sort_u32(wf_context* context, wf_batch* batch, wf_column keys, uint64_t n) {
  return with_columns(
      context, batch,
      [&](wf_context& c, const WrappedColumn* col) {
        return c.primitives->sort_u32(as<std::uint32_t>(col[0]), n, batch_of(batch));
      },
      named(keys, "keys"));
}

int wf_sort_pairs_u32(wf_context* context, wf_batch* batch, wf_column keys, wf_column values,
                      uint64_t n) {
  return with_columns(
      context, batch,
      [&](wf_context& c, const WrappedColumn* col) {
        return c.primitives->sort_pairs_u32(as<std::uint32_t>(col[0]), as<std::uint32_t>(col[1]), n,
                                            batch_of(batch));
      },
      named(keys, "keys"), named(values, "values"));
}

int wf_exclusive_scan_u32(wf_context* context, wf_batch* batch, wf_column x, uint64_t n,
                          wf_column y) {
  return with_columns(
      context, batch,
      [&](wf_context& c, const WrappedColumn* col) {
        return c.primitives->exclusive_scan_u32(as<std::uint32_t>(col[0]), n,
                                                as<std::uint32_t>(col[1]), batch_of(batch));
      },
      named(x, "x"), named(y, "y"));
}

int wf_histogram_u32(wf_context* context, wf_batch* batch, wf_column x, uint64_t n, uint32_t bins,
                     wf_column counts) {
  return with_columns(
      context, batch,
      [&](wf_context& c, const WrappedColumn* col) {
        return c.primitives->histogram_u32(as<std::uint32_t>(col[0]), n, bins,
                                           as<std::uint32_t>(col[1]), batch_of(batch));
      },
      named(x, "x"), named(counts, "counts"));
}

int wf_gather_f32(wf_context* context, wf_batch* batch, wf_column x, uint64_t x_length,
                  wf_column idx, uint64_t n, wf_column y) {
  return with_columns(
      context, batch,
      [&](wf_context& c, const WrappedColumn* col) {
        return c.primitives->gather_f32(as<float>(col[0]), x_length, as<std::uint32_t>(col[1]), n,
                                        as<float>(col[2]), batch_of(batch));
      },
      named(x, "x"), named(idx, "idx"), named(y, "y"));
}

int wf_affine_f32(wf_context* context, wf_batch* batch, wf_column x, uint64_t n, float a, float b,
                  wf_column y) {
  return with_columns(
      context, batch,
      [&](wf_context& c, const WrappedColumn* col) {
        return c.primitives->affine_f32(as<float>(col[0]), n, a, b, as<float>(col[1]),
                                        batch_of(batch));
      },
      named(x, "x"), named(y, "y"));
}

int wf_gemm_f32(wf_context* context, wf_batch* batch, wf_column a, wf_column b, wf_column c_col,
                uint32_t m, uint32_t n, uint32_t k) {
  return with_columns(
      context, batch,
      [&](wf_context& c, const WrappedColumn* col) {
        return c.primitives->gemm_f32(as<float>(col[0]), as<float>(col[1]), as<float>(col[2]), m, n,
                                      k, batch_of(batch));
      },
      named(a, "a"), named(b, "b"), named(c_col, "c"));
}

int wf_sort_pairs_u64(wf_context* context, wf_batch* batch, wf_column keys, wf_column values,
                      uint64_t n, wf_column sorted_keys, wf_column sorted_values) {
  return with_columns(
      context, batch,
      [&](wf_context& c, const WrappedColumn* col) {
        return c.primitives->sort_pairs_u64(as<std::uint32_t>(col[0]), as<std::uint32_t>(col[1]), n,
                                            as<std::uint32_t>(col[2]), as<std::uint32_t>(col[3]),
                                            batch_of(batch));
      },
      named(keys, "keys"), named(values, "values"), named(sorted_keys, "sorted_keys"),
      named(sorted_values, "sorted_values"));
}

int wf_segmented_reduce_sum_f32(wf_context* context, wf_batch* batch, wf_column x, uint64_t n,
                                wf_column offsets, uint64_t segments, wf_column sums) {
  return with_columns(
      context, batch,
      [&](wf_context& c, const WrappedColumn* col) {
        return c.primitives->segmented_sum_f32(as<float>(col[0]), n, as<std::uint32_t>(col[1]),
                                               segments, as<float>(col[2]), batch_of(batch));
      },
      named(x, "x"), named(offsets, "offsets"), named(sums, "sums"));
}

namespace {

// A recorded reduction, or one that runs now and writes its value into result[0] too.
using RecordedReduction = Status (forge::Primitives::*)(forge::Batch&, forge::F32Column,
                                                        std::uint64_t, forge::F32Column);

int reduce(wf_context* context, wf_batch* batch, wf_column x, uint64_t n, wf_column result,
           RecordedReduction reduction) {
  return with_columns(
      context, batch,
      [&](wf_context& c, const WrappedColumn* col) -> Status {
        if (batch != nullptr) {
          return (c.primitives.get()->*reduction)(batch->batch, as<float>(col[0]), n,
                                                  as<float>(col[1]));
        }
        WF_TRY_ASSIGN(forge::Batch own, c.primitives->begin_batch());
        if (Status recorded =
                (c.primitives.get()->*reduction)(own, as<float>(col[0]), n, as<float>(col[1]));
            !recorded) {
          return recorded;
        }
        return own.submit_and_wait();
      },
      named(x, "x"), named(result, "result"));
}

}  // namespace

int wf_reduce_sum_f32(wf_context* context, wf_batch* batch, wf_column x, uint64_t n,
                      wf_column result) {
  return reduce(context, batch, x, n, result, &forge::Primitives::sum_f32);
}

int wf_reduce_min_f32(wf_context* context, wf_batch* batch, wf_column x, uint64_t n,
                      wf_column result) {
  return reduce(context, batch, x, n, result, &forge::Primitives::min_f32);
}

int wf_reduce_max_f32(wf_context* context, wf_batch* batch, wf_column x, uint64_t n,
                      wf_column result) {
  return reduce(context, batch, x, n, result, &forge::Primitives::max_f32);
}

int wf_compact_f32(wf_context* context, wf_batch* batch, wf_column x, uint64_t n, float threshold,
                   wf_column out, wf_column count) {
  return with_columns(
      context, batch,
      [&](wf_context& c, const WrappedColumn* col) -> Status {
        if (batch != nullptr) {
          return c.primitives->compact_f32(batch->batch, as<float>(col[0]), n, threshold,
                                           as<float>(col[1]), as<std::uint32_t>(col[2]));
        }
        WF_TRY_ASSIGN(forge::Batch own, c.primitives->begin_batch());
        if (Status recorded = c.primitives->compact_f32(
                own, as<float>(col[0]), n, threshold, as<float>(col[1]), as<std::uint32_t>(col[2]));
            !recorded) {
          return recorded;
        }
        return own.submit_and_wait();
      },
      named(x, "x"), named(out, "out"), named(count, "count"));
}

int wf_hash_join_u32(wf_context* context, wf_batch* batch, wf_column build_keys,
                     wf_column build_payloads, uint64_t build_n, wf_column probe_keys,
                     wf_column probe_payloads, uint64_t probe_n, wf_column pairs_probe,
                     wf_column pairs_build, wf_column status) {
  return with_columns(
      context, batch,
      [&](wf_context& c, const WrappedColumn* col) -> Status {
        auto record = [&](forge::Batch& into) {
          return c.primitives->hash_join_u32(
              into, as<std::uint32_t>(col[0]), as<std::uint32_t>(col[1]), build_n,
              as<std::uint32_t>(col[2]), as<std::uint32_t>(col[3]), probe_n,
              as<std::uint32_t>(col[4]), as<std::uint32_t>(col[5]), as<std::uint32_t>(col[6]));
        };
        if (batch != nullptr) return record(batch->batch);
        WF_TRY_ASSIGN(forge::Batch own, c.primitives->begin_batch());
        WF_TRY(record(own));
        return own.submit_and_wait();
      },
      named(build_keys, "build_keys"), named(build_payloads, "build_payloads"),
      named(probe_keys, "probe_keys"), named(probe_payloads, "probe_payloads"),
      named(pairs_probe, "pairs_probe"), named(pairs_build, "pairs_build"),
      named(status, "status"));
}

int wf_group_by_sum_f32(wf_context* context, wf_batch* batch, wf_column keys, wf_column values,
                        uint64_t n, uint64_t max_groups, wf_column group_keys, wf_column group_sums,
                        wf_column group_counts, wf_column groups) {
  return with_columns(
      context, batch,
      [&](wf_context& c, const WrappedColumn* col) -> Status {
        auto record = [&](forge::Batch& into) {
          return c.primitives->group_by_sum_f32(into, as<std::uint32_t>(col[0]), as<float>(col[1]),
                                                n, max_groups, as<std::uint32_t>(col[2]),
                                                as<float>(col[3]), as<std::uint32_t>(col[4]),
                                                as<std::uint32_t>(col[5]));
        };
        if (batch != nullptr) return record(batch->batch);
        WF_TRY_ASSIGN(forge::Batch own, c.primitives->begin_batch());
        WF_TRY(record(own));
        return own.submit_and_wait();
      },
      named(keys, "keys"), named(values, "values"), named(group_keys, "group_keys"),
      named(group_sums, "group_sums"), named(group_counts, "group_counts"),
      named(groups, "groups"));
}

// --- Host memory ---------------------------------------------------------------------------

int wf_sort_u32_host(wf_context* context, uint32_t* keys, size_t n) {
  return guarded(context, [&](wf_context& c) {
    if (!c.primitives) return fail(c, "The context failed to open.");
    if (n == 0) return WF_OK;
    if (keys == nullptr) return fail(c, "keys is NULL with n = " + std::to_string(n) + ".");
    Result<gpu::Buffer> buffer = upload(*c.device, keys, n * 4, n * 4, "keys");
    if (!buffer) return fail(c, buffer.error());
    if (Status sorted = c.primitives->sort_u32({&*buffer, 0}, n); !sorted) {
      return fail(c, sorted.error());
    }
    return finish(c, download(*c.device, *buffer, keys, n * 4));
  });
}

int wf_sort_pairs_u32_host(wf_context* context, uint32_t* keys, uint32_t* values, size_t n) {
  return guarded(context, [&](wf_context& c) {
    if (!c.primitives) return fail(c, "The context failed to open.");
    if (n == 0) return WF_OK;
    if (keys == nullptr || values == nullptr) {
      return fail(c, "keys or values is NULL with n = " + std::to_string(n) + ".");
    }
    Result<gpu::Buffer> key_buffer = upload(*c.device, keys, n * 4, n * 4, "keys");
    if (!key_buffer) return fail(c, key_buffer.error());
    Result<gpu::Buffer> value_buffer = upload(*c.device, values, n * 4, n * 4, "values");
    if (!value_buffer) return fail(c, value_buffer.error());
    Status sorted = c.primitives->sort_pairs_u32({&*key_buffer, 0}, {&*value_buffer, 0}, n);
    if (!sorted) return fail(c, sorted.error());
    if (Status read = download(*c.device, *key_buffer, keys, n * 4); !read) {
      return fail(c, read.error());
    }
    return finish(c, download(*c.device, *value_buffer, values, n * 4));
  });
}

int wf_reduce_sum_f32_host(wf_context* context, const float* x, size_t n, float* sum) {
  return guarded(context, [&](wf_context& c) {
    if (!c.primitives) return fail(c, "The context failed to open.");
    if (sum == nullptr) return fail(c, "sum is NULL.");
    if (n == 0) {
      *sum = 0.0f;
      return WF_OK;
    }
    if (x == nullptr) return fail(c, "x is NULL with n = " + std::to_string(n) + ".");
    Result<gpu::Buffer> buffer = upload(*c.device, x, n * 4, n * 4, "x");
    if (!buffer) return fail(c, buffer.error());
    Result<float> value = c.primitives->sum_f32({&*buffer, 0}, n);
    if (!value) return fail(c, value.error());
    *sum = *value;
    return WF_OK;
  });
}

int wf_compact_f32_host(wf_context* context, const float* x, size_t n, float threshold, float* out,
                        size_t* kept) {
  return guarded(context, [&](wf_context& c) {
    if (!c.primitives) return fail(c, "The context failed to open.");
    if (kept == nullptr) return fail(c, "kept is NULL.");
    *kept = 0;
    if (n == 0) return WF_OK;
    if (x == nullptr || out == nullptr) {
      return fail(c, "x or out is NULL with n = " + std::to_string(n) + ".");
    }
    Result<gpu::Buffer> input = upload(*c.device, x, n * 4, n * 4, "x");
    if (!input) return fail(c, input.error());
    Result<gpu::Buffer> output = upload(*c.device, nullptr, 0, n * 4, "out");
    if (!output) return fail(c, output.error());
    Result<std::uint64_t> count =
        c.primitives->compact_f32({&*input, 0}, n, threshold, {&*output, 0});
    if (!count) return fail(c, count.error());
    *kept = static_cast<std::size_t>(*count);
    return finish(c, download(*c.device, *output, out, *kept * 4));
  });
}

int wf_sort_pairs_u64_host(wf_context* context, uint64_t* keys, uint32_t* values, size_t n) {
  return guarded(context, [&](wf_context& c) {
    if (!c.primitives) return fail(c, "The context failed to open.");
    if (n == 0) return WF_OK;
    if (keys == nullptr || values == nullptr) {
      return fail(c, "keys or values is NULL with n = " + std::to_string(n) + ".");
    }
    // uint64_t in host memory is little-endian on every platform the library builds for: the
    // kernel's layout of low and high words.
    static_assert(std::endian::native == std::endian::little);
    Result<gpu::Buffer> key_buffer = upload(*c.device, keys, n * 8, n * 8, "keys");
    if (!key_buffer) return fail(c, key_buffer.error());
    Result<gpu::Buffer> value_buffer = upload(*c.device, values, n * 4, n * 4, "values");
    if (!value_buffer) return fail(c, value_buffer.error());
    Result<gpu::Buffer> sorted_keys = upload(*c.device, nullptr, 0, n * 8, "sorted_keys");
    if (!sorted_keys) return fail(c, sorted_keys.error());
    Result<gpu::Buffer> sorted_values = upload(*c.device, nullptr, 0, n * 4, "sorted_values");
    if (!sorted_values) return fail(c, sorted_values.error());
    Status sorted = c.primitives->sort_pairs_u64({&*key_buffer, 0}, {&*value_buffer, 0}, n,
                                                 {&*sorted_keys, 0}, {&*sorted_values, 0});
    if (!sorted) return fail(c, sorted.error());
    if (Status read = download(*c.device, *sorted_keys, keys, n * 8); !read) {
      return fail(c, read.error());
    }
    return finish(c, download(*c.device, *sorted_values, values, n * 4));
  });
}

int wf_segmented_reduce_sum_f32_host(wf_context* context, const float* x, size_t n,
                                     const uint32_t* offsets, size_t segments, float* sums) {
  return guarded(context, [&](wf_context& c) {
    if (!c.primitives) return fail(c, "The context failed to open.");
    if (offsets == nullptr) return fail(c, "offsets is NULL.");
    if (segments > 0 && sums == nullptr) {
      return fail(c, "sums is NULL with segments = " + std::to_string(segments) + ".");
    }
    if (n > 0 && x == nullptr) return fail(c, "x is NULL with n = " + std::to_string(n) + ".");
    if (segments == 0) return finish(c, kernels::check_segment_offsets({offsets, 1}, n));
    Result<gpu::Buffer> input = upload(*c.device, x, n * 4, n * 4, "x");
    if (!input) return fail(c, input.error());
    Result<gpu::Buffer> output = upload(*c.device, nullptr, 0, segments * 4, "sums");
    if (!output) return fail(c, output.error());
    Status summed = c.primitives->segmented_sum_f32(
        {&*input, 0}, n, std::span(offsets, segments + 1), {&*output, 0});
    if (!summed) return fail(c, summed.error());
    return finish(c, download(*c.device, *output, sums, segments * 4));
  });
}

int wf_histogram_u32_host(wf_context* context, const uint32_t* x, size_t n, uint32_t bins,
                          uint32_t* counts) {
  return guarded(context, [&](wf_context& c) {
    if (!c.primitives) return fail(c, "The context failed to open.");
    if (counts == nullptr) return fail(c, "counts is NULL.");
    if (n > 0 && x == nullptr) return fail(c, "x is NULL with n = " + std::to_string(n) + ".");
    if (bins == 0 || bins > 4096) {
      return fail(c, "Bin count (" + std::to_string(bins) + ") is outside 1..4096.");
    }
    Result<gpu::Buffer> input = upload(*c.device, x, n * 4, n * 4, "x");
    if (!input) return fail(c, input.error());
    Result<gpu::Buffer> output = upload(*c.device, nullptr, 0, std::size_t{bins} * 4, "counts");
    if (!output) return fail(c, output.error());
    Status counted = c.primitives->histogram_u32({&*input, 0}, n, bins, {&*output, 0});
    if (!counted) return fail(c, counted.error());
    return finish(c, download(*c.device, *output, counts, std::size_t{bins} * 4));
  });
}

int wf_hash_join_u32_host(wf_context* context, const uint32_t* build_keys,
                          const uint32_t* build_payloads, size_t build_n,
                          const uint32_t* probe_keys, const uint32_t* probe_payloads,
                          size_t probe_n, uint32_t* pairs_probe, uint32_t* pairs_build,
                          size_t* pairs) {
  return guarded(context, [&](wf_context& c) {
    if (!c.primitives) return fail(c, "The context failed to open.");
    if (pairs == nullptr) return fail(c, "pairs is NULL.");
    *pairs = 0;
    if (build_n > 0 && (build_keys == nullptr || build_payloads == nullptr)) {
      return fail(c, "build_keys or build_payloads is NULL with build_n = " +
                         std::to_string(build_n) + ".");
    }
    if (probe_n > 0 && (probe_keys == nullptr || probe_payloads == nullptr ||
                        pairs_probe == nullptr || pairs_build == nullptr)) {
      return fail(c,
                  "probe_keys, probe_payloads, pairs_probe or pairs_build is NULL with "
                  "probe_n = " +
                      std::to_string(probe_n) + ".");
    }
    Result<gpu::Buffer> buffers[6] = {
        upload(*c.device, build_keys, build_n * 4, build_n * 4, "build_keys"),
        upload(*c.device, build_payloads, build_n * 4, build_n * 4, "build_payloads"),
        upload(*c.device, probe_keys, probe_n * 4, probe_n * 4, "probe_keys"),
        upload(*c.device, probe_payloads, probe_n * 4, probe_n * 4, "probe_payloads"),
        upload(*c.device, nullptr, 0, probe_n * 4, "pairs_probe"),
        upload(*c.device, nullptr, 0, probe_n * 4, "pairs_build")};
    for (const Result<gpu::Buffer>& buffer : buffers) {
      if (!buffer) return fail(c, buffer.error());
    }
    Result<std::uint64_t> count = c.primitives->hash_join_u32(
        {&*buffers[0], 0}, {&*buffers[1], 0}, build_n, {&*buffers[2], 0}, {&*buffers[3], 0},
        probe_n, {&*buffers[4], 0}, {&*buffers[5], 0});
    if (!count) return fail(c, count.error());
    if (Status read = download(*c.device, *buffers[4], pairs_probe, *count * 4); !read) {
      return fail(c, read.error());
    }
    if (Status read = download(*c.device, *buffers[5], pairs_build, *count * 4); !read) {
      return fail(c, read.error());
    }
    *pairs = static_cast<std::size_t>(*count);
    return WF_OK;
  });
}

int wf_group_by_sum_f32_host(wf_context* context, const uint32_t* keys, const float* values,
                             size_t n, size_t max_groups, uint32_t* group_keys, float* group_sums,
                             uint32_t* group_counts, size_t* groups) {
  return guarded(context, [&](wf_context& c) {
    if (!c.primitives) return fail(c, "The context failed to open.");
    if (groups == nullptr) return fail(c, "groups is NULL.");
    *groups = 0;
    if (n == 0) return WF_OK;
    if (keys == nullptr || values == nullptr || group_keys == nullptr || group_sums == nullptr ||
        group_counts == nullptr) {
      return fail(c, "keys, values, group_keys, group_sums or group_counts is NULL with n = " +
                         std::to_string(n) + ".");
    }
    const std::size_t room = max_groups != 0 ? max_groups : n;
    Result<gpu::Buffer> buffers[5] = {upload(*c.device, keys, n * 4, n * 4, "keys"),
                                      upload(*c.device, values, n * 4, n * 4, "values"),
                                      upload(*c.device, nullptr, 0, room * 4, "group_keys"),
                                      upload(*c.device, nullptr, 0, room * 4, "group_sums"),
                                      upload(*c.device, nullptr, 0, room * 4, "group_counts")};
    for (const Result<gpu::Buffer>& buffer : buffers) {
      if (!buffer) return fail(c, buffer.error());
    }
    Result<std::uint64_t> count =
        c.primitives->group_by_sum_f32({&*buffers[0], 0}, {&*buffers[1], 0}, n, max_groups,
                                       {&*buffers[2], 0}, {&*buffers[3], 0}, {&*buffers[4], 0});
    if (!count) return fail(c, count.error());
    const std::size_t bytes = static_cast<std::size_t>(*count) * 4;
    for (auto [buffer, out] : {std::pair{&*buffers[2], static_cast<void*>(group_keys)},
                               std::pair{&*buffers[3], static_cast<void*>(group_sums)},
                               std::pair{&*buffers[4], static_cast<void*>(group_counts)}}) {
      if (Status read = download(*c.device, *buffer, out, bytes); !read) {
        return fail(c, read.error());
      }
    }
    *groups = static_cast<std::size_t>(*count);
    return WF_OK;
  });
}

}  // extern "C"
