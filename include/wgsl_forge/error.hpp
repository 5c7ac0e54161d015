#pragma once
// Errors are values: every fallible library call returns Result<T>, never throws across the API.
//
// The message follows Dawn's style (docs/dawn/errors.md): present tense, the given value and the
// limit in parentheses, then the context each caller added on the way up, all on one line (a
// command prints exactly one line per error), e.g.
//   Cache key (abc) is not 64 hexadecimal characters (it has 3). (while loading a tuning manifest)

#include <cassert>
#include <string>
#include <utility>
#include <variant>
#include <vector>

namespace wgsl_forge {

enum class ErrorKind {
  kInvalidInput,   // a caller gave a bad value (kernel name, schedule, flag, file)
  kInvalidKey,     // a cache key that is not 64 hexadecimal characters
  kCollision,      // an immutable cache entry exists with different bytes
  kCorruption,     // a stored file does not parse or does not belong to its key
  kSerialization,  // a value cannot be written or read as a manifest
  kIo,             // the operating system refused a file operation
  kCompilation,    // WGSL that does not compile (the message has line and column)
  kValidation,     // WebGPU refused an operation (a limit, a binding, a dispatch)
  kRuntime,        // the GPU runtime failed (library, adapter, pipeline creation)
  kTimeout,        // the GPU did not answer a wait within its watchdog (a kernel that hangs)
  kDeviceLost,     // the GPU device is lost: nothing more runs on it; open a new one
};

class Error {
 public:
  Error(ErrorKind kind, std::string message) : kind_(kind), message_(std::move(message)) {}

  ErrorKind kind() const { return kind_; }
  const std::string& message() const { return message_; }
  const std::vector<std::string>& context() const { return context_; }

  // Adds a line that says what the caller was doing; returns *this for chaining.
  Error& with_context(std::string line) & {
    context_.push_back(std::move(line));
    return *this;
  }
  Error&& with_context(std::string line) && {
    context_.push_back(std::move(line));
    return std::move(*this);
  }

  // One line: the message, then "(while A; while B)" with the context entries, innermost first.
  std::string to_string() const;

 private:
  ErrorKind kind_;
  std::string message_;
  std::vector<std::string> context_;
};

template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value)
      : state_(std::in_place_index<0>, std::move(value)) {}  // NOLINT: implicit by design
  Result(Error error) : state_(std::in_place_index<1>, std::move(error)) {}  // NOLINT

  bool ok() const { return state_.index() == 0; }
  explicit operator bool() const { return ok(); }

  T& value() & {
    assert(ok());
    return std::get<0>(state_);
  }
  const T& value() const& {
    assert(ok());
    return std::get<0>(state_);
  }
  T&& value() && {
    assert(ok());
    return std::get<0>(std::move(state_));
  }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

  const Error& error() const& {
    assert(!ok());
    return std::get<1>(state_);
  }
  Error&& error() && {
    assert(!ok());
    return std::get<1>(std::move(state_));
  }

 private:
  std::variant<T, Error> state_;
};

// Result of an operation that produces nothing but can fail.
struct Ok {};
using Status = Result<Ok>;

}  // namespace wgsl_forge
