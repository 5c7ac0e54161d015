#include "wgsl_forge/error.hpp"

namespace wgsl_forge {

const char* error_kind_name(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::kInvalidInput:
      return "invalid input";
    case ErrorKind::kInvalidKey:
      return "invalid key";
    case ErrorKind::kCollision:
      return "collision";
    case ErrorKind::kCorruption:
      return "corruption";
    case ErrorKind::kSerialization:
      return "serialization";
    case ErrorKind::kIo:
      return "I/O";
    case ErrorKind::kCompilation:
      return "compilation";
    case ErrorKind::kValidation:
      return "validation";
    case ErrorKind::kRuntime:
      return "runtime";
  }
  return "unknown";
}

std::string Error::to_string() const {
  std::string text = message_;
  for (const std::string& line : context_) {
    text += "\n - While ";
    text += line;
  }
  return text;
}

}  // namespace wgsl_forge
