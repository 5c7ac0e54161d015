#include "adapter_workers.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "util/try.hpp"

namespace wgsl_forge::cli {

namespace {

namespace fs = std::filesystem;

// One worker: its adapter, process, and the files its stdout and stderr went to.
struct Worker {
  std::size_t adapter = 0;
  pid_t pid = -1;
  fs::path output;
  fs::path errors;
  int exit_code = 0;
  std::string how_it_ended;  // "exit status 3", "killed by signal 9"
};

Error system_error(const std::string& what) {
  return Error(ErrorKind::kRuntime, "Cannot " + what + " (" + std::strerror(errno) + ").");
}

// A new empty file for a worker's output, in the temporary directory.
Result<fs::path> temporary_file(const std::string& what) {
  std::error_code error;
  std::string pattern =
      (fs::temp_directory_path(error) / ("wgsl-forge-worker-" + what + "-XXXXXX")).string();
  if (error) pattern = "/tmp/wgsl-forge-worker-" + what + "-XXXXXX";
  const int fd = ::mkstemp(pattern.data());
  if (fd < 0) return system_error("create a file for a worker's " + what);
  ::close(fd);
  return fs::path(pattern);
}

std::string read_all(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// This binary, to run again as the workers.
Result<fs::path> own_executable() {
  std::error_code error;
  fs::path path = fs::read_symlink("/proc/self/exe", error);
  if (error) {
    return Error(ErrorKind::kRuntime,
                 "Cannot find this program's file to start workers (/proc/self/exe: " +
                     error.message() + ").");
  }
  return path;
}

// Starts one worker; it dies with its parent (PR_SET_PDEATHSIG), so a killed run leaves no
// worker behind, only leases that expire.
Status start_worker(Worker& worker, const fs::path& executable,
                    const std::vector<std::string>& arguments) {
  WF_TRY_ASSIGN(worker.output, temporary_file("output"));
  WF_TRY_ASSIGN(worker.errors, temporary_file("errors"));
  std::vector<char*> argv;
  std::vector<std::string> owned = arguments;
  owned.insert(owned.begin(), executable.string());
  for (std::string& argument : owned) argv.push_back(argument.data());
  argv.push_back(nullptr);
  const pid_t parent = ::getpid();
  worker.pid = ::fork();
  if (worker.pid < 0) return system_error("start a worker");
  if (worker.pid == 0) {
    // Only async-signal-safe calls between fork and exec.
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(127);
    const int out = ::open(worker.output.c_str(), O_WRONLY | O_TRUNC | O_CLOEXEC);
    const int err = ::open(worker.errors.c_str(), O_WRONLY | O_TRUNC | O_CLOEXEC);
    if (out < 0 || err < 0 || ::dup2(out, STDOUT_FILENO) < 0 || ::dup2(err, STDERR_FILENO) < 0) {
      ::_exit(127);
    }
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  return Ok{};
}

void wait_for(Worker& worker) {
  int status = 0;
  while (::waitpid(worker.pid, &status, 0) < 0) {
    if (errno != EINTR) {
      worker.exit_code = kExitRuntime;
      worker.how_it_ended = std::string("lost (") + std::strerror(errno) + ")";
      return;
    }
  }
  if (WIFEXITED(status)) {
    worker.exit_code = WEXITSTATUS(status);
    worker.how_it_ended = "exit status " + std::to_string(worker.exit_code);
  } else {
    worker.exit_code = kExitRuntime;
    worker.how_it_ended = "killed by signal " + std::to_string(WTERMSIG(status));
  }
}

// The schedule of a JSON row as the tables print it: "k=v,k=v".
std::string schedule_text(const nlohmann::json& schedule) {
  std::string text;
  for (const auto& [knob, value] : schedule.items()) {
    text += (text.empty() ? "" : ",") + knob + "=" +
            (value.is_string() ? value.get<std::string>() : value.dump());
  }
  return text.empty() ? "default" : text;
}

std::string median_text(const nlohmann::json& row) {
  if (!row.contains("tuned_median_ns")) return "-";
  return format_time(row.at("tuned_median_ns").get<double>());
}

// The status column: the worker's status, with "other" for one tuned by another process.
std::string status_text(const std::string& status) {
  if (status == "tuned by another process") return "other";
  if (status == "failed") return "FAILED";
  return status;
}

// The worker's last error line (what it printed as "wgsl-forge: error: ..."), else its last line.
std::string last_error(const std::string& errors) {
  std::istringstream lines(errors);
  std::string line;
  std::string last;
  std::string last_error_line;
  while (std::getline(lines, line)) {
    if (line.empty()) continue;
    last = line;
    if (line.starts_with("wgsl-forge: error: ")) last_error_line = line.substr(19);
  }
  return last_error_line.empty() ? last : last_error_line;
}

}  // namespace

Result<std::vector<std::size_t>> parse_adapter_list(const GlobalOptions& options,
                                                    const std::string& text) {
  std::vector<std::size_t> adapters;
  if (text == "all") {
    WF_TRY_ASSIGN(std::size_t count, gpu::count_adapters(runtime_options(options)));
    for (std::size_t index = 0; index < count; ++index) adapters.push_back(index);
    if (adapters.empty()) {
      return Error(ErrorKind::kRuntime,
                   "--adapters all: the " + options.backend + " backend has no adapter.");
    }
    return adapters;
  }
  std::istringstream items(text);
  std::string item;
  while (std::getline(items, item, ',')) {
    std::size_t index = 0;
    const bool digits = !item.empty() && item.size() <= 6 &&
                        item.find_first_not_of("0123456789") == std::string::npos;
    if (digits) index = std::stoul(item);
    if (!digits) {
      return Error(ErrorKind::kInvalidInput,
                   "--adapters (" + text +
                       ") is not 'all' or adapter indices separated by commas, such as 0,2 "
                       "(wgsl-forge adapters numbers them): '" +
                       item + "' is not an index.");
    }
    adapters.push_back(index);
  }
  if (adapters.empty() || text.back() == ',') {
    return Error(ErrorKind::kInvalidInput,
                 "--adapters (" + text + ") is not 'all' or adapter indices such as 0,2.");
  }
  return adapters;
}

int run_adapter_workers(const GlobalOptions& options, const fs::path& cache_root,
                        const std::vector<std::size_t>& adapters,
                        const std::vector<std::string>& worker_arguments, bool json) {
  Result<fs::path> executable = own_executable();
  if (!executable) return report_error(executable.error());
  std::vector<std::string> common = {"--cache", cache_root.string(), "--backend", options.backend};
  if (options.remote) common.insert(common.end(), {"--remote", *options.remote});
  if (options.webgpu_library) {
    common.insert(common.end(), {"--webgpu-lib", options.webgpu_library->string()});
  }
  if (options.timeout) {
    char seconds[32];
    std::snprintf(seconds, sizeof seconds, "%.3f",
                  std::chrono::duration<double>(*options.timeout).count());
    common.insert(common.end(), {"--timeout", seconds});
  }
  if (!options.bounds_checks) common.push_back("--no-bounds-checks");

  std::vector<Worker> workers(adapters.size());
  for (std::size_t i = 0; i < adapters.size(); ++i) {
    workers[i].adapter = adapters[i];
    std::vector<std::string> arguments = common;
    arguments.insert(arguments.end(), {"--adapter", std::to_string(adapters[i])});
    arguments.insert(arguments.end(), worker_arguments.begin(), worker_arguments.end());
    if (Status started = start_worker(workers[i], *executable, arguments); !started) {
      for (std::size_t j = 0; j < i; ++j) ::kill(workers[j].pid, SIGKILL);
      for (std::size_t j = 0; j < i; ++j) wait_for(workers[j]);
      return report_error(started.error());
    }
  }
  for (Worker& worker : workers) wait_for(worker);

  using Align = TextTable::Align;
  TextTable table({{"worker", Align::kRight},
                   {"adapter", Align::kRight},
                   {"kernel"},
                   {"size", Align::kRight},
                   {"status"},
                   {"winner schedule"},
                   {"median", Align::kRight},
                   {"cases", Align::kRight}});
  nlohmann::json all_rows = nlohmann::json::array();
  nlohmann::json worker_list = nlohmann::json::array();
  std::vector<std::string> failures;
  int exit_code = kExitOk;
  for (std::size_t i = 0; i < workers.size(); ++i) {
    Worker& worker = workers[i];
    const std::string name =
        "worker " + std::to_string(i) + " (adapter " + std::to_string(worker.adapter) + ")";
    const std::string errors = read_all(worker.errors);
    std::istringstream error_lines(errors);
    for (std::string line; std::getline(error_lines, line);) {
      std::fprintf(stderr, "[%s] %s\n", name.c_str(), line.c_str());
    }
    nlohmann::json output;
    try {
      output = nlohmann::json::parse(read_all(worker.output));
    } catch (const nlohmann::json::exception&) {
      output = nlohmann::json::object();  // it printed no result: its error says why
    }
    nlohmann::json entry = {{"worker", i},
                            {"adapter", worker.adapter},
                            {"exit_code", worker.exit_code},
                            {"adapter_name", output.value("adapter", "")},
                            {"topology_hash", output.value("topology_hash", "")}};
    if (worker.exit_code != kExitOk) {
      const std::string why = last_error(errors);
      entry["error"] = why.empty() ? worker.how_it_ended : why;
      failures.push_back(name + " failed (" + worker.how_it_ended +
                         "): " + entry["error"].get<std::string>());
      if (exit_code == kExitOk) {
        exit_code = worker.exit_code >= kExitRejected && worker.exit_code <= kExitRuntime
                        ? worker.exit_code
                        : kExitRuntime;
      }
    }
    worker_list.push_back(entry);
    if (output.contains("kernels") && output.at("kernels").is_array()) {
      for (nlohmann::json row : output.at("kernels")) {
        const std::string status = row.value("status", "");
        table.add_row(
            {std::to_string(i), std::to_string(worker.adapter), row.value("kernel", ""),
             row.value("bucket", ""), status_text(status),
             row.contains("tuned_schedule") ? schedule_text(row.at("tuned_schedule")) : "-",
             median_text(row), std::to_string(row.value("certified_cases", 0))});
        if (row.contains("error")) {
          table.add_note(row.value("kernel", "") + " " + row.value("bucket", "") + ": " +
                         row.at("error").get<std::string>());
        }
        row["worker"] = i;
        row["adapter"] = worker.adapter;
        all_rows.push_back(std::move(row));
      }
    }
    std::error_code ignored;
    fs::remove(worker.output, ignored);
    fs::remove(worker.errors, ignored);
  }
  if (json) {
    std::cout << nlohmann::json{{"cache", cache_root.string()},
                                {"workers", worker_list},
                                {"kernels", all_rows}}
                     .dump(2)
              << "\n";
  } else {
    std::printf("%zu worker%s, cache %s\n", workers.size(), workers.size() == 1 ? "" : "s",
                cache_root.c_str());
    for (const nlohmann::json& entry : worker_list) {
      std::printf("worker %zu: adapter %zu %s, topology %s\n",
                  entry.at("worker").get<std::size_t>(), entry.at("adapter").get<std::size_t>(),
                  entry.at("adapter_name").get<std::string>().c_str(),
                  entry.at("topology_hash").get<std::string>().substr(0, 16).c_str());
    }
    std::printf("%s", table.to_string().c_str());
  }
  for (const std::string& failure : failures) {
    std::fprintf(stderr, "wgsl-forge: error: %s\n", failure.c_str());
  }
  return exit_code;
}

}  // namespace wgsl_forge::cli
