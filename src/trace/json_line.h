// One JSON object written straight into a string, for the per-step lines of steps.jsonl: building an
// nlohmann::json tree per step (a map node and a heap string per field) and dumping it cost more than a traced
// step's whole budget. Keys are written in call order; non-finite numbers become null; strings that are not valid
// UTF-8 (token pieces of random models) get U+FFFD for each invalid byte, as nlohmann's `replace` handler does.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace tt {

class JsonLine {
 public:
  void clear() { out_.clear(), first_.assign(1, 1); }
  const std::string& str() const { return out_; }

  JsonLine& begin_object();
  JsonLine& end_object();
  JsonLine& begin_array(std::string_view key);
  JsonLine& begin_array();  // an array as an element of an array
  JsonLine& end_array();
  JsonLine& key(std::string_view k);  // inside an object: the key of the next value
  JsonLine& value(double v);
  JsonLine& value(int64_t v);
  JsonLine& value(uint64_t v);
  JsonLine& value(int32_t v) { return value(static_cast<int64_t>(v)); }
  JsonLine& value(uint32_t v) { return value(static_cast<uint64_t>(v)); }
  JsonLine& value(float v);  // the shortest text that reads back as this float (not as the double it widens to)
  JsonLine& value(bool v);
  JsonLine& value(std::string_view s);
  JsonLine& value(const char* s) { return value(std::string_view(s)); }
  JsonLine& null();
  template <typename T>
  JsonLine& field(std::string_view k, T v) {
    return key(k).value(v);
  }

 private:
  void separate();  // a comma before every element but the first of its container
  JsonLine& open(char bracket);
  JsonLine& close(char bracket);
  std::string out_;
  std::vector<uint8_t> first_ = {1};  // per open container: nothing written in it yet
  bool after_key_ = false;
};

// s as a JSON string literal (quotes included), appended to out.
void append_json_string(std::string& out, std::string_view s);

}  // namespace tt
