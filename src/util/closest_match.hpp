#pragma once
// "Did you mean": the known name nearest to a mistyped one, for error messages.

#include <algorithm>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace wgsl_forge {

// Levenshtein distance: insertions, deletions and substitutions of one character each.
inline std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diagonal = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

// The name of `known` nearest to `given`, when it is near enough to be what was meant: at most
// a third of its length away (and at least 2), or `given` is a prefix of it.
inline std::optional<std::string> closest_match(std::string_view given,
                                                const std::vector<std::string_view>& known) {
  std::optional<std::string> best;
  std::size_t best_distance = 0;
  for (std::string_view name : known) {
    const std::size_t distance =
        name.starts_with(given) && !given.empty() ? 1 : edit_distance(given, name);
    if (distance > std::max<std::size_t>(2, name.size() / 3)) continue;
    if (!best || distance < best_distance) {
      best = std::string(name);
      best_distance = distance;
    }
  }
  return best;
}

}  // namespace wgsl_forge
