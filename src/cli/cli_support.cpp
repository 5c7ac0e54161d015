#include "cli_support.hpp"
#include "util/try.hpp"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <future>
#include <iostream>
#include <thread>

namespace wgsl_forge::cli {

namespace {

std::atomic<bool> abandoned_teardown{false};

}  // namespace

void BoundedTeardown::operator()(gpu::Device* device) const {
  if (!device->has_unfinished_work()) {
    delete device;
    return;
  }
  auto finished = std::make_shared<std::promise<void>>();
  std::future<void> done = finished->get_future();
  std::thread teardown([device, finished] {
    delete device;
    finished->set_value();
  });
  if (done.wait_for(kTeardownGrace) == std::future_status::ready) {
    teardown.join();
    return;
  }
  teardown.detach();  // it ends with the process (std::_Exit in main)
  abandoned_teardown = true;
}

bool teardown_abandoned() { return abandoned_teardown; }

gpu::RuntimeOptions runtime_options(const GlobalOptions& options) {
  gpu::RuntimeOptions runtime;
  runtime.library_path = options.webgpu_library;
  runtime.backend = options.backend;
  runtime.bounds_checks = options.bounds_checks;
  runtime.adapter_index = options.adapter_index;
  if (options.timeout) runtime.wait_timeout = *options.timeout;
  return runtime;
}

Result<OpenDevice> open_device(const GlobalOptions& options) {
  WF_TRY_ASSIGN(std::unique_ptr<gpu::Device> device, gpu::Device::open(runtime_options(options)));
  return OpenDevice(device.release());
}

Status check_cache_writable(const ManifestCache& cache) {
  Status writable = cache.check_writable();
  if (writable) return writable;
  Error advised(writable.error().kind(),
                writable.error().message() + " Pass --cache DIR or set WGSL_FORGE_CACHE.");
  for (const std::string& line : writable.error().context()) advised.with_context(line);
  return advised;
}

Result<ManifestCache> open_cache(const GlobalOptions& options, CacheUse use) {
  WF_TRY_ASSIGN(std::filesystem::path root, resolve_cache_root(options.cache_dir));
  ManifestCache cache(root);
  if (options.remote) {
    Result<RemoteAddress> address = RemoteAddress::parse(*options.remote);
    if (!address) return std::move(address).error().with_context("reading --remote");
    cache.set_remote(RemoteStore::connect(std::move(*address)));
  } else {
    WF_TRY_ASSIGN(std::shared_ptr<RemoteStore> remote, RemoteStore::from_environment());
    cache.set_remote(std::move(remote));
  }
  if (use == CacheUse::kWrite) WF_TRY(check_cache_writable(cache));
  return cache;
}

std::string one_line(std::string text) {
  while (!text.empty() && text.back() == '\n') text.pop_back();
  std::replace(text.begin(), text.end(), '\n', ' ');
  return text;
}

int report_error(const Error& error) {
  std::cerr << "wgsl-forge: error: " << one_line(error.to_string()) << "\n";
  switch (error.kind()) {
    case ErrorKind::kInvalidInput:
    case ErrorKind::kInvalidKey:
      return kExitBadInput;
    case ErrorKind::kCollision:
    case ErrorKind::kCorruption:
    case ErrorKind::kSerialization:
    case ErrorKind::kIo:
    case ErrorKind::kCompilation:
    case ErrorKind::kValidation:
    case ErrorKind::kRuntime:
    case ErrorKind::kTimeout:
    case ErrorKind::kDeviceLost:
      return kExitRuntime;
  }
  return kExitRuntime;
}

std::string format_time(double ns) {
  char text[32];
  if (ns >= 1e6)
    std::snprintf(text, sizeof text, "%.2f ms", ns / 1e6);
  else
    std::snprintf(text, sizeof text, "%.1f us", ns / 1e3);
  return text;
}

void TextTable::add_row(std::vector<std::string> cells) {
  cells.resize(columns_.size());
  lines_.push_back({std::move(cells), ""});
}

void TextTable::add_note(std::string line) { lines_.push_back({{}, std::move(line)}); }

std::string TextTable::to_string() const {
  std::vector<std::size_t> widths;
  for (const Column& column : columns_) widths.push_back(column.header.size());
  for (const Line& line : lines_) {
    for (std::size_t i = 0; i < line.cells.size(); ++i)
      widths[i] = std::max(widths[i], line.cells[i].size());
  }
  auto row_text = [&](const std::vector<std::string>& cells) {
    std::string text;
    for (std::size_t i = 0; i < cells.size(); ++i) {
      const std::string padding(widths[i] - cells[i].size(), ' ');
      const bool last = i + 1 == cells.size();
      text += columns_[i].align == Align::kRight ? padding + cells[i]
                                                 : cells[i] + (last ? "" : padding);
      if (!last) text += "  ";
    }
    while (!text.empty() && text.back() == ' ') text.pop_back();
    return text + "\n";
  };
  std::vector<std::string> headers;
  for (const Column& column : columns_) headers.push_back(column.header);
  std::string text = row_text(headers);
  for (const Line& line : lines_)
    text += line.cells.empty() ? "  " + line.note + "\n" : row_text(line.cells);
  return text;
}

}  // namespace wgsl_forge::cli
