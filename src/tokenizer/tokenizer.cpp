#include "tokenizer/tokenizer.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <optional>
#include <queue>

#include "core/error.h"
#include "gguf/gguf.h"
#include "tokenizer/pretokenizer.h"
#include "tokenizer/unicode.h"

namespace tt {

namespace {

constexpr std::string_view kSpace = "\xe2\x96\x81";  // "▁"

void warn(const std::string& msg) { fmt::print(stderr, "warning: {}\n", msg); }

// A non-negative integer metadata value, whatever its stored integer type; nullopt when absent or negative.
std::optional<uint64_t> get_id(const GgufFile& f, std::string_view key) {
  const GgufValue* v = f.find(key);
  if (!v) return std::nullopt;
  if (!v->is_integer())
    fail("{}: metadata key '{}' has type {}, expected an integer", f.path(), key, value_type_name(v->type));
  if (v->is_signed()) return v->i < 0 ? std::nullopt : std::optional<uint64_t>(static_cast<uint64_t>(v->i));
  return v->u;
}

std::string replace_all(std::string_view s, std::string_view from, std::string_view to) {
  std::string out;
  out.reserve(s.size());
  size_t pos = 0;
  while (true) {
    const size_t m = s.find(from, pos);
    if (m == std::string_view::npos) break;
    out.append(s.substr(pos, m - pos));
    out.append(to);
    pos = m + from.size();
  }
  out.append(s.substr(pos));
  return out;
}

bool c_isspace(char c) { return c == ' ' || (c >= '\t' && c <= '\r'); }

bool is_special_type(TokenType t) {
  return t == TokenType::CONTROL || t == TokenType::USER_DEFINED || t == TokenType::UNKNOWN;
}

// llama.cpp's llama_decode_text: GPT-2 byte characters back to bytes; other characters are flagged inline.
std::string decode_byte_text(std::string_view text) {
  std::string out;
  for (uint32_t cpt : unicode::decode_utf8(text)) {
    const int b = unicode::utf8_cpt_to_byte(cpt);
    if (b >= 0) {
      out += static_cast<char>(b);
      continue;
    }
    std::string utf8;
    unicode::append_utf8(utf8, cpt);
    out += "[UNK_BYTE_0x";
    for (char c : utf8) out += fmt::format("{:02x}", static_cast<uint8_t>(c));
    out += text;
    out += "]";
  }
  return out;
}

// A piece of the input during special-token partitioning: raw text [off, off+len) or one token.
struct Fragment {
  int32_t token;  // -1 for raw text
  size_t off, len;
};

}  // namespace

Tokenizer::Tokenizer() = default;
Tokenizer::~Tokenizer() = default;

std::unique_ptr<Tokenizer> Tokenizer::from_gguf(const GgufFile& f) {
  std::unique_ptr<Tokenizer> t(new Tokenizer());
  const std::string& path = f.path();

  const auto model = f.get_string("tokenizer.ggml.model");
  if (!model) fail("{}: no tokenizer.ggml.model in the metadata", path);
  t->model_ = *model;
  if (*model == "llama") {
    t->kind_ = Kind::SPM;
  } else if (*model == "gpt2") {
    t->kind_ = Kind::BPE;
  } else {
    fail("{}: tokenizer model '{}' is not supported (supported: llama, gpt2)", path, *model);
  }

  // Vocabulary.
  const auto* tokens = f.get_array("tokenizer.ggml.tokens", GgufValueType::STRING);
  if (!tokens || tokens->empty()) fail("{}: no tokenizer.ggml.tokens in the metadata", path);
  const size_t n = tokens->size();
  if (n > static_cast<size_t>(INT32_MAX)) fail("{}: vocabulary of {} tokens is too large", path, n);
  const auto* scores = f.get_array("tokenizer.ggml.scores", GgufValueType::FLOAT32);
  if (scores && scores->size() != n)
    fail("{}: tokenizer.ggml.scores has {} entries for {} tokens", path, scores->size(), n);
  const GgufValue* types = f.find("tokenizer.ggml.token_type");
  if (types) {
    GgufValue element;
    element.type = types->element_type;
    if (types->type != GgufValueType::ARRAY || !element.is_integer())
      fail("{}: tokenizer.ggml.token_type has type {}, expected an ARRAY of integers", path, types->to_string(0));
    if (types->array.size() != n)
      fail("{}: tokenizer.ggml.token_type has {} entries for {} tokens", path, types->array.size(), n);
  }
  t->tokens_.resize(n);
  t->token_to_id_.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    Token& tok = t->tokens_[i];
    tok.text = (*tokens)[i].str;
    if (scores) tok.score = static_cast<float>((*scores)[i].f);
    if (types) {
      const GgufValue& v = types->array[i];
      const int64_t ty = v.is_signed() ? v.i : static_cast<int64_t>(v.u);
      tok.type = (ty >= 0 && ty <= 6) ? static_cast<TokenType>(ty) : TokenType::UNDEFINED;
    }
    t->token_to_id_.insert(tok.text, static_cast<int32_t>(i),
                           /*overwrite=*/true);  // a repeated text maps to its last id, as in llama.cpp
  }

  // Type-specific defaults.
  if (t->kind_ == Kind::SPM) {
    t->bos_ = 1;
    t->eos_ = 2;
    t->unk_ = 0;
    t->add_space_prefix_ = true;
    t->add_bos_ = true;
    t->add_eos_ = false;
    t->pre_ = f.get_string("tokenizer.ggml.pre").value_or("default");
  } else {
    t->bos_ = 11;
    t->eos_ = 11;
    const auto* merges = f.get_array("tokenizer.ggml.merges", GgufValueType::STRING);
    if (!merges) fail("{}: gpt2 tokenizer without tokenizer.ggml.merges", path);
    t->merge_rank_.reserve(merges->size());
    std::string key;
    for (size_t i = 0; i < merges->size(); ++i) {
      const std::string& m = (*merges)[i].str;
      const size_t pos = m.find(' ', 1);
      if (pos == std::string::npos) continue;
      const uint32_t llen = static_cast<uint32_t>(pos);
      key.assign(reinterpret_cast<const char*>(&llen), 4);
      key.append(m, 0, pos);
      key.append(m, pos + 1);
      t->merge_rank_.insert(key, static_cast<int32_t>(i), /*overwrite=*/false);  // first rank wins
    }
    auto pre = f.get_string("tokenizer.ggml.pre");
    if (!pre) {
      warn(fmt::format("{}: no tokenizer.ggml.pre; using the default pre-tokenizer (tokenization may be off)", path));
      pre = "default";
    }
    t->pre_ = *pre;
    const PreTokenizerConfig* cfg = find_pre_tokenizer(*pre);
    if (!cfg) {
      std::string known;
      for (auto k : known_pre_tokenizers()) known += (known.empty() ? "" : ", ") + std::string(k);
      fail("{}: unknown pre-tokenizer type: '{}' (known: {})", path, *pre, known);
    }
    t->ignore_merges_ = cfg->ignore_merges;
    t->add_bos_ = cfg->add_bos;
    t->pre_tokenizer_ = std::make_unique<PreTokenizer>(*cfg);
  }
  if (auto v = f.get_bool("tokenizer.ggml.add_space_prefix")) t->add_space_prefix_ = *v;
  if (auto v = f.get_bool("tokenizer.ggml.add_bos_token")) t->add_bos_ = *v;
  if (auto v = f.get_bool("tokenizer.ggml.add_eos_token")) t->add_eos_ = *v;

  // Special token ids from the metadata; out-of-range values keep the default.
  const std::pair<const char*, int32_t*> id_keys[] = {
      {"tokenizer.ggml.bos_token_id", &t->bos_},     {"tokenizer.ggml.eos_token_id", &t->eos_},
      {"tokenizer.ggml.eot_token_id", &t->eot_},     {"tokenizer.ggml.eom_token_id", &t->eom_},
      {"tokenizer.ggml.unknown_token_id", &t->unk_}, {"tokenizer.ggml.padding_token_id", &t->pad_},
  };
  for (const auto& [key, dst] : id_keys) {
    const GgufValue* v = f.find(key);
    if (!v) continue;
    const auto id = get_id(f, key);
    if (!id || *id >= n) {
      warn(fmt::format("{}: bad special token: '{}' = {}, using default id {}", path, key, v->to_string(), *dst));
      continue;
    }
    *dst = static_cast<int32_t>(*id);
  }
  for (int32_t* id : {&t->bos_, &t->eos_, &t->unk_})
    if (*id >= static_cast<int32_t>(n)) *id = -1;

  // llama.cpp finds end-of-turn tokens by their text and makes them CONTROL.
  auto make_control = [&](int32_t id) { t->tokens_[id].type = TokenType::CONTROL; };
  static constexpr std::string_view kEotTexts[] = {
      "<|eot_id|>",
      "<|im_end|>",
      "<|end|>",
      "<end_of_turn>",
      "<|endoftext|>",
      "<EOT>",
      "_<EOT>",
      "<\xef\xbd\x9c"
      "end\xe2\x96\x81of\xe2\x96\x81sentence\xef\xbd\x9c>",  // <｜end▁of▁sentence｜>
      "<end_of_utterance>"};
  static constexpr std::string_view kEogTexts[] = {"<|eot_id|>",      "<|im_end|>",        "<|end|>", "<end_of_turn>",
                                                   "<|endoftext|>",   "<|eom_id|>",        "<EOT>",   "_<EOT>",
                                                   "<|end_of_text|>", "<end_of_utterance>"};
  static constexpr std::string_view kFimEog[] = {"<|fim_pad|>",  "<fim-pad>",     "<fim_pad>",
                                                 "<|fim_repo|>", "<|repo_name|>", "<fim-repo>",
                                                 "<REPO>",       "<reponame>",    "<|file_sep|>"};
  auto in = [](std::string_view s, std::span<const std::string_view> list) {
    return std::find(list.begin(), list.end(), s) != list.end();
  };
  std::vector<int32_t> eog;
  for (int32_t id = 0; id < static_cast<int32_t>(n); ++id) {
    const std::string& text = t->tokens_[id].text;
    if (text.size() < 5 || text.size() > 30 || (text[0] != '<' && text[0] != '_')) continue;
    if (t->token_to_id_.find(text) != id) continue;  // only the id the text maps to, as llama.cpp
    if (t->eot_ < 0 && in(text, kEotTexts)) {
      t->eot_ = id;
      make_control(id);
    }
    if (t->eom_ < 0 && text == "<|eom_id|>") {
      t->eom_ = id;
      make_control(id);
    }
    if (in(text, kFimEog)) {
      make_control(id);
      eog.push_back(id);
    }
    if (in(text, kEogTexts)) {
      make_control(id);
      eog.push_back(id);
    }
  }
  for (int32_t id : {t->eos_, t->eot_, t->eom_})
    if (id >= 0) eog.push_back(id);
  std::sort(eog.begin(), eog.end());
  eog.erase(std::unique(eog.begin(), eog.end()), eog.end());
  t->eog_ = eog;
  t->is_eog_.assign(n, 0);
  for (int32_t id : eog) t->is_eog_[id] = 1;

  // Special tokens, longest text first.
  for (int32_t id = 0; id < static_cast<int32_t>(n); ++id)
    if (is_special_type(t->tokens_[id].type) && !t->tokens_[id].text.empty()) t->special_tokens_.push_back(id);
  std::stable_sort(t->special_tokens_.begin(), t->special_tokens_.end(),
                   [&](int32_t a, int32_t b) { return t->tokens_[a].text.size() > t->tokens_[b].text.size(); });

  // Phi-3: whitespace after special tokens is stripped (llama.cpp keys this on general.name).
  std::string name = f.get_string("general.name").value_or("");
  std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return std::tolower(c); });
  if (name.find("phi-3") != std::string::npos || name.find("phi3") != std::string::npos) {
    for (int32_t id : t->special_tokens_) t->tokens_[id].rstrip = true;
    if (int32_t id = t->text_to_token("</s>"); id >= 0) t->tokens_[id].rstrip = true;
    for (std::string_view s : {"<unk>", "<s>", "<|endoftext|>"})
      if (int32_t id = t->text_to_token(s); id >= 0) t->tokens_[id].rstrip = false;
  }

  t->pieces_.resize(n);
  for (int32_t id = 0; id < static_cast<int32_t>(n); ++id) t->pieces_[id] = t->compute_piece(id);
  return t;
}

int32_t Tokenizer::text_to_token(std::string_view text) const { return token_to_id_.find(text); }

int32_t Tokenizer::token_id(std::string_view text) const { return text_to_token(text); }

std::string_view Tokenizer::token_text(int32_t id) const {
  if (id < 0 || id >= n_vocab()) fail("token id {} is out of range (vocabulary of {})", id, n_vocab());
  return tokens_[id].text;
}

TokenType Tokenizer::token_type(int32_t id) const {
  if (id < 0 || id >= n_vocab()) fail("token id {} is out of range (vocabulary of {})", id, n_vocab());
  return tokens_[id].type;
}

float Tokenizer::token_score(int32_t id) const {
  if (id < 0 || id >= n_vocab()) fail("token id {} is out of range (vocabulary of {})", id, n_vocab());
  return tokens_[id].score;
}

bool Tokenizer::is_eog(int32_t id) const { return id >= 0 && id < n_vocab() && is_eog_[id]; }

int32_t Tokenizer::byte_to_token(uint8_t byte) const {
  static constexpr char kHex[] = "0123456789ABCDEF";
  const char buf[6] = {'<', '0', 'x', kHex[byte >> 4], kHex[byte & 15], '>'};
  if (int32_t id = text_to_token(std::string_view(buf, 6)); id >= 0) return id;
  if (int32_t id = text_to_token(std::string_view(reinterpret_cast<const char*>(&byte), 1)); id >= 0) return id;
  if (unk_ >= 0) return unk_;
  fail("vocabulary has no token for byte 0x{:02X} and no unknown token", byte);
}

int Tokenizer::rank(std::string_view left, std::string_view right, std::string& key) const {
  const uint32_t llen = static_cast<uint32_t>(left.size());
  key.assign(reinterpret_cast<const char*>(&llen), 4);
  key.append(left);
  key.append(right);
  return merge_rank_.find(key);
}

// ---- SentencePiece-style BPE (llama.cpp's llm_tokenizer_spm) ----

namespace {

struct Symbol {
  int prev, next;
  const char* text;
  size_t n;
};

struct SpmBigram {
  int left, right;
  float score;
  size_t size;
};

struct SpmOrder {
  bool operator()(const SpmBigram& l, const SpmBigram& r) const {
    return l.score < r.score || (l.score == r.score && l.left > r.left);
  }
};

}  // namespace

void Tokenizer::tokenize_spm(const std::string& text, std::vector<int32_t>& out) const {
  std::vector<Symbol> symbols;
  symbols.reserve(text.size());
  for (size_t offs = 0; offs < text.size();) {
    const size_t len = std::min<size_t>(unicode::utf8_len(text[offs]), text.size() - offs);
    const int index = static_cast<int>(symbols.size());
    symbols.push_back({index - 1, offs + len == text.size() ? -1 : index + 1, text.data() + offs, len});
    offs += len;
  }
  std::priority_queue<SpmBigram, std::vector<SpmBigram>, SpmOrder> queue;
  std::unordered_map<std::string, std::pair<int, int>> rev_merge;
  auto try_add = [&](int left, int right) {
    if (left == -1 || right == -1) return;
    std::string s(symbols[left].text, symbols[left].n + symbols[right].n);
    const int32_t id = text_to_token(s);
    if (id < 0) return;
    queue.push({left, right, tokens_[id].score, s.size()});
    rev_merge[std::move(s)] = {left, right};
  };
  for (int i = 1; i < static_cast<int>(symbols.size()); ++i) try_add(i - 1, i);
  while (!queue.empty()) {
    const SpmBigram b = queue.top();
    queue.pop();
    Symbol& l = symbols[b.left];
    Symbol& r = symbols[b.right];
    if (l.n == 0 || r.n == 0 || l.n + r.n != b.size) continue;  // stale
    l.n += r.n;
    r.n = 0;
    l.next = r.next;
    if (r.next >= 0) symbols[r.next].prev = b.left;
    try_add(l.prev, b.left);
    try_add(b.left, l.next);
  }
  // Emit symbols; a symbol that is not a token is split back along its merges, then into bytes.
  auto resegment = [&](auto&& self, const Symbol& sym) -> void {
    const std::string_view s(sym.text, sym.n);
    if (int32_t id = text_to_token(s); id >= 0) {
      out.push_back(id);
      return;
    }
    const auto it = rev_merge.find(std::string(s));
    if (it == rev_merge.end()) {
      for (size_t j = 0; j < sym.n; ++j) out.push_back(byte_to_token(static_cast<uint8_t>(sym.text[j])));
      return;
    }
    const auto [a, c] = it->second;
    self(self, symbols[a]);
    self(self, symbols[c]);
  };
  if (symbols.empty()) return;
  for (int i = 0; i != -1; i = symbols[i].next) resegment(resegment, symbols[i]);
}

// ---- Byte-level BPE (llama.cpp's llm_tokenizer_bpe) ----

namespace {

struct BpeBigram {
  int left, right;
  std::string text;
  int rank;
};

struct BpeOrder {
  bool operator()(const BpeBigram& l, const BpeBigram& r) const {
    return l.rank > r.rank || (l.rank == r.rank && l.left > r.left);
  }
};

}  // namespace

void Tokenizer::tokenize_bpe(std::string_view text, std::vector<int32_t>& out) const {
  std::string key;
  std::vector<Symbol> symbols;
  for (const std::string& word : pre_tokenizer_->split(text)) {
    symbols.clear();
    std::priority_queue<BpeBigram, std::vector<BpeBigram>, BpeOrder> queue;
    size_t offset = 0;
    if (ignore_merges_ && text_to_token(word) >= 0) {
      symbols.push_back({-1, -1, word.data(), word.size()});
      offset = word.size();
    }
    while (offset < word.size()) {
      const size_t len = std::min<size_t>(unicode::utf8_len(word[offset]), word.size() - offset);
      const int index = static_cast<int>(symbols.size());
      symbols.push_back({index - 1, offset + len == word.size() ? -1 : index + 1, word.data() + offset, len});
      offset += len;
    }
    auto add = [&](int left, int right) {
      if (left == -1 || right == -1) return;
      const std::string_view ls(symbols[left].text, symbols[left].n);
      const std::string_view rs(symbols[right].text, symbols[right].n);
      const int r = rank(ls, rs, key);
      if (r < 0) return;
      std::string joined;
      joined.reserve(ls.size() + rs.size());
      joined.append(ls);
      joined.append(rs);
      queue.push({left, right, std::move(joined), r});
    };
    for (int i = 1; i < static_cast<int>(symbols.size()); ++i) add(i - 1, i);
    while (!queue.empty()) {
      const BpeBigram b = queue.top();
      queue.pop();
      Symbol& l = symbols[b.left];
      Symbol& r = symbols[b.right];
      if (l.n == 0 || r.n == 0) continue;
      // Stale when either side changed since the pair was queued.
      if (l.n + r.n != b.text.size() || std::string_view(l.text, l.n + r.n) != b.text) continue;
      l.n += r.n;
      r.n = 0;
      l.next = r.next;
      if (r.next >= 0) symbols[r.next].prev = b.left;
      add(l.prev, b.left);
      add(b.left, l.next);
    }
    for (const Symbol& sym : symbols) {
      if (sym.n == 0) continue;
      const std::string_view s(sym.text, sym.n);
      if (int32_t id = text_to_token(s); id >= 0) {
        out.push_back(id);
        continue;
      }
      for (char c : s)  // not in the vocabulary: single-byte entries where they exist, nothing otherwise
        if (int32_t id = text_to_token(std::string_view(&c, 1)); id >= 0) out.push_back(id);
    }
  }
}

// ---- Encode / decode ----

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool add_special, bool parse_special) const {
  // Cut special tokens out of the text: for each special token, longest first, split every raw fragment at its
  // occurrences. CONTROL and UNKNOWN tokens only when parse_special; USER_DEFINED always (llama.cpp).
  std::vector<Fragment> frags;
  if (!text.empty()) frags.push_back({-1, 0, text.size()});
  std::vector<Fragment> next;
  for (int32_t id : special_tokens_) {
    const Token& tok = tokens_[id];
    if (!parse_special && (tok.type == TokenType::CONTROL || tok.type == TokenType::UNKNOWN)) continue;
    const std::string_view st = tok.text;
    next.clear();
    bool changed = false;
    for (const Fragment& fr : frags) {
      if (fr.token >= 0) {
        next.push_back(fr);
        continue;
      }
      size_t base = fr.off, blen = fr.len;
      while (blen > 0) {
        const size_t m = text.substr(0, base + blen).find(st, base);
        if (m == std::string_view::npos) break;
        changed = true;
        if (m > base) {
          size_t llen = m - base;
          if (tok.lstrip)
            while (llen > 0 && c_isspace(text[base + llen - 1])) --llen;
          if (llen > 0) next.push_back({-1, base, llen});
        }
        next.push_back({id, m, st.size()});
        size_t roff = m + st.size();
        size_t rlen = base + blen - roff;
        if (tok.rstrip)
          while (rlen > 0 && c_isspace(text[roff])) ++roff, --rlen;
        base = roff;
        blen = rlen;
      }
      if (blen > 0) next.push_back({-1, base, blen});
    }
    if (changed) frags.swap(next);
  }

  std::vector<int32_t> out;
  const bool bos = add_special && add_bos_;
  const bool eos = add_special && add_eos_;
  if (bos && bos_ < 0) fail("the tokenizer adds BOS but the vocabulary has no BOS token");
  if (eos && eos_ < 0) fail("the tokenizer adds EOS but the vocabulary has no EOS token");
  if (bos) out.push_back(bos_);
  if (kind_ == Kind::SPM) {
    bool prev_special = true;  // a space is prefixed to the text at the start and after every special token
    for (const Fragment& fr : frags) {
      if (fr.token >= 0) {
        out.push_back(fr.token);
        prev_special = true;
        continue;
      }
      std::string s;
      if (add_space_prefix_ && prev_special) s = " ";
      s.append(text.substr(fr.off, fr.len));
      tokenize_spm(replace_all(s, " ", kSpace), out);
      prev_special = false;
    }
  } else {
    for (const Fragment& fr : frags) {
      if (fr.token >= 0) {
        out.push_back(fr.token);
        continue;
      }
      tokenize_bpe(text.substr(fr.off, fr.len), out);
    }
  }
  if (eos) out.push_back(eos_);
  return out;
}

std::string Tokenizer::compute_piece(int32_t id) const {
  const Token& tok = tokens_[id];
  if (is_special_type(tok.type)) return tok.text;
  if (tok.type == TokenType::NORMAL) {
    return kind_ == Kind::SPM ? replace_all(tok.text, kSpace, " ") : decode_byte_text(tok.text);
  }
  if (tok.type == TokenType::BYTE && kind_ == Kind::SPM) {
    // "<0xAB>": hex digits from the fourth character (strtol semantics: stop at the first non-digit).
    unsigned v = 0;
    for (size_t i = 3; i < tok.text.size(); ++i) {
      const char c = tok.text[i];
      int d = (c >= '0' && c <= '9')   ? c - '0'
              : (c >= 'a' && c <= 'f') ? c - 'a' + 10
              : (c >= 'A' && c <= 'F') ? c - 'A' + 10
                                       : -1;
      if (d < 0) break;
      v = v * 16 + d;
    }
    return std::string(1, static_cast<char>(v));
  }
  return {};  // UNUSED, UNDEFINED (and BYTE in a BPE vocabulary) produce nothing
}

std::string Tokenizer::token_to_piece(int32_t id, bool special) const { return std::string(piece_view(id, special)); }

std::string_view Tokenizer::piece_view(int32_t id, bool special) const {
  if (id < 0 || id >= n_vocab()) fail("token id {} is out of range (vocabulary of {})", id, n_vocab());
  const TokenType ty = tokens_[id].type;
  if (!special && (ty == TokenType::CONTROL || ty == TokenType::UNKNOWN)) return {};
  return pieces_[id];
}

std::string Tokenizer::decode(std::span<const int32_t> ids, bool special) const {
  std::string out;
  for (int32_t id : ids) out += piece_view(id, special);
  return out;
}

}  // namespace tt
