// Pre-tokenizers of byte-level BPE vocabularies: the text is cut into words by a list of regexes applied one after
// another (each regex splits every piece the previous ones left, keeping unmatched stretches as pieces), then
// every word is mapped to the GPT-2 byte alphabet. The regexes and the order are llama.cpp's; matching uses PCRE2
// in UTF + UCP mode, with \s and \S replaced by llama.cpp's whitespace set.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace tt {

// Settings llama.cpp attaches to a pre-tokenizer name (tokenizer.ggml.pre).
struct PreTokenizerConfig {
  std::string_view name;       // canonical type name ("llama3", "gpt2", "qwen2" ...)
  int regex_set = 0;           // index into the internal regex table
  bool ignore_merges = false;  // a word that is itself a vocabulary entry becomes one token without merging
  bool add_bos = false;        // default for add_bos before tokenizer.ggml.add_bos_token is read
  bool clean_spaces = true;
};

// The configuration for a tokenizer.ggml.pre value, or nullptr for an unknown name.
const PreTokenizerConfig* find_pre_tokenizer(std::string_view pre_name);
// All tokenizer.ggml.pre values accepted, for messages and docs.
std::vector<std::string_view> known_pre_tokenizers();

class PreTokenizer {
 public:
  explicit PreTokenizer(const PreTokenizerConfig& config);
  // Compile an explicit regex list (llama.cpp syntax: \s, \S, \p{L}, \p{N}, \p{P} ...).
  explicit PreTokenizer(const std::vector<std::string>& regexes);
  ~PreTokenizer();
  PreTokenizer(const PreTokenizer&) = delete;
  PreTokenizer& operator=(const PreTokenizer&) = delete;

  // Split text into words. Invalid UTF-8 bytes become U+FFFD first, as in llama.cpp.
  std::vector<std::string> split_words(std::string_view text) const;
  // The same words mapped byte by byte to the GPT-2 alphabet (what the BPE merges operate on).
  std::vector<std::string> split(std::string_view text) const;

 private:
  struct Regex;
  std::vector<std::unique_ptr<Regex>> regexes_;
  // Lengths, in code points, of the consecutive words of cpts.
  std::vector<size_t> split_offsets(const std::vector<uint32_t>& cpts) const;
};

}  // namespace tt
