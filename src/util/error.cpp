#include "wgsl_forge/error.hpp"

namespace wgsl_forge {

std::string Error::to_string() const {
  std::string text = message_;
  for (const std::string& line : context_) {
    text += "\n - While ";
    text += line;
  }
  return text;
}

}  // namespace wgsl_forge
