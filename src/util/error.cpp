#include "wgsl_forge/error.hpp"

namespace wgsl_forge {

std::string Error::to_string() const {
  std::string text = message_;
  for (std::size_t i = 0; i < context_.size(); ++i) {
    text += i == 0 ? " (while " : "; while ";
    text += context_[i];
  }
  if (!context_.empty()) text += ")";
  return text;
}

}  // namespace wgsl_forge
