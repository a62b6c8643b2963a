// Tokenizers built from GGUF metadata, reproducing llama.cpp's tokenization and detokenization exactly:
//   "llama": SentencePiece-style BPE over scores (llm_tokenizer_spm), byte fallback <0xXX>, "▁" for spaces;
//   "gpt2":  byte-level BPE over ranked merges with a regex pre-tokenizer chosen by tokenizer.ggml.pre.
// Special tokens (CONTROL / USER_DEFINED / UNKNOWN types) are cut out of the text first, as llama.cpp does.
// See docs/tokenizer.md.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/string_table.h"

namespace tt {

class GgufFile;
class PreTokenizer;

// tokenizer.ggml.token_type values.
enum class TokenType : int32_t {
  UNDEFINED = 0,
  NORMAL = 1,
  UNKNOWN = 2,
  CONTROL = 3,
  USER_DEFINED = 4,
  UNUSED = 5,
  BYTE = 6,
};

class Tokenizer {
 public:
  enum class Kind { SPM, BPE };

  // Build from tokenizer.ggml.* metadata. Throws tt::Error when the vocabulary is missing or inconsistent, the
  // model is not "llama"/"gpt2", or tokenizer.ggml.pre names a pre-tokenizer llama.cpp would not know.
  static std::unique_ptr<Tokenizer> from_gguf(const GgufFile& gguf);
  ~Tokenizer();

  // Token ids of text. add_special: BOS/EOS as the metadata says (add_bos()/add_eos()). parse_special: the text
  // of CONTROL tokens (e.g. "<s>", "<|endoftext|>") becomes those tokens; USER_DEFINED tokens are matched whole
  // either way, as in llama.cpp.
  std::vector<int32_t> encode(std::string_view text, bool add_special, bool parse_special = false) const;

  // The bytes a token contributes to output, as llama.cpp's llama_token_to_piece (lstrip 0): byte tokens give
  // their byte, "▁" becomes " " (SPM), GPT-2 byte characters map back to bytes (BPE). CONTROL and UNKNOWN tokens
  // give "" unless special is true, then their text. The leading space of a piece is kept.
  std::string token_to_piece(int32_t id, bool special = false) const;
  // The same bytes without a copy, valid as long as the tokenizer.
  std::string_view piece_view(int32_t id, bool special = false) const;
  // Starts bringing token id's entry toward the cache (no effect for an id out of range): a caller that knows
  // which pieces it will read soon, e.g. the tracer, which writes each step's top tokens' texts a few microseconds
  // after it has ranked them, saves piece_view two memory latencies each in a large vocabulary.
  void prefetch_piece(int32_t id) const {
    if (id < 0 || id >= n_vocab()) return;
    __builtin_prefetch(&tokens_[static_cast<size_t>(id)].type);
    __builtin_prefetch(&pieces_[static_cast<size_t>(id)]);
  }
  // Concatenation of token_to_piece(id, special) over ids: the text llama.cpp prints for generated tokens.
  std::string decode(std::span<const int32_t> ids, bool special = false) const;

  int32_t n_vocab() const { return static_cast<int32_t>(tokens_.size()); }
  int32_t bos() const { return bos_; }  // -1 when the vocabulary has none
  int32_t eos() const { return eos_; }
  int32_t eot() const { return eot_; }
  int32_t unk() const { return unk_; }
  int32_t pad() const { return pad_; }
  bool is_eog(int32_t id) const;  // end of generation: EOS, EOT, EOM and llama.cpp's list of end texts
  const std::vector<int32_t>& eog_ids() const { return eog_; }
  bool add_bos() const { return add_bos_; }
  bool add_eos() const { return add_eos_; }
  bool add_space_prefix() const { return add_space_prefix_; }

  std::string_view token_text(int32_t id) const;  // raw vocabulary string; throws on an out-of-range id
  TokenType token_type(int32_t id) const;
  float token_score(int32_t id) const;
  int32_t token_id(std::string_view text) const;  // exact vocabulary lookup, -1 if absent

  Kind kind() const { return kind_; }
  std::string_view model() const { return model_; }  // "llama" or "gpt2"
  std::string_view pre() const { return pre_; }      // tokenizer.ggml.pre ("default" when absent)

 private:
  Tokenizer();

  int32_t text_to_token(std::string_view text) const;
  int32_t byte_to_token(uint8_t byte) const;
  int rank(std::string_view left, std::string_view right, std::string& scratch) const;
  void tokenize_spm(const std::string& text, std::vector<int32_t>& out) const;
  void tokenize_bpe(std::string_view text, std::vector<int32_t>& out) const;
  std::string compute_piece(int32_t id) const;

  struct Token {
    std::string text;
    float score = 0;
    TokenType type = TokenType::NORMAL;
    bool lstrip = false, rstrip = false;
  };

  Kind kind_ = Kind::SPM;
  std::string model_, pre_;
  std::vector<Token> tokens_;
  StringTable token_to_id_;
  StringTable merge_rank_;  // key: 4-byte length of left, left, right
  std::unique_ptr<PreTokenizer> pre_tokenizer_;
  bool ignore_merges_ = false;
  std::vector<int32_t> special_tokens_;  // CONTROL/USER_DEFINED/UNKNOWN, longest text first
  std::vector<std::string> pieces_;      // token_to_piece with special = true
  std::vector<int32_t> eog_;
  std::vector<uint8_t> is_eog_;
  int32_t bos_ = -1, eos_ = -1, eot_ = -1, eom_ = -1, unk_ = -1, pad_ = -1;
  bool add_bos_ = false, add_eos_ = false, add_space_prefix_ = false;
};

}  // namespace tt
