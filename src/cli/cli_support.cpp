#include "cli_support.hpp"

#include <iostream>

namespace wgsl_forge::cli {

int report_error(const Error& error) {
  std::cerr << "wgsl-forge: error: " << error.to_string() << "\n";
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
      return kExitRuntime;
  }
  return kExitRuntime;
}

}  // namespace wgsl_forge::cli
