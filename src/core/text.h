// Small text helpers shared by the exporters and the server.
#pragma once

#include <cctype>
#include <string>

namespace tt {

// ASCII lower case ("Q4_K" -> "q4_k"); other bytes unchanged.
inline std::string ascii_lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

}  // namespace tt
