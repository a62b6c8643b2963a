#define PCRE2_CODE_UNIT_WIDTH 8
#include "tokenizer/pretokenizer.h"

#include <pcre2.h>

#include <array>

#include "core/error.h"
#include "tokenizer/unicode.h"

namespace tt {

namespace {

// Regex lists, in llama.cpp's syntax and order (deepseek-llm's letter class is spelled with \x{} escapes so
// no editor can NFC-normalise its singleton code points such as U+2126 and break the ranges). \s means llama.cpp's
// whitespace set (see kWhitespace).
const std::string kGpt2 = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S))";
const std::string kLlama3 =
    R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
const std::string kQwen2 =
    R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
const std::string kCjk = "[一-龥ࠀ-一가-퟿]+";
const std::string kBloom = " ?[^(\\s|.,!?…。，、।۔،)]+";

enum RegexSet {
  kSetDefault,
  kSetLlama3,
  kSetDeepseekLlm,
  kSetDeepseekCoder,
  kSetFalcon,
  kSetStarcoder,
  kSetGpt2,
  kSetQwen2,
  kSetBloom,
  kSetViking,
  kSetCount,
};

const std::vector<std::string>& regex_set(int set) {
  static const std::array<std::vector<std::string>, kSetCount> sets = {{
      // kSetDefault
      {R"([\p{P}\$\+<=>\^~\|]+)", kGpt2, R"(\p{N}+)", "[0-9][0-9][0-9]"},
      // kSetLlama3
      {kLlama3},
      // kSetDeepseekLlm
      {"[\r\n]",
       "\\s?[\\x{41}-\\x{5A}\\x{61}-\\x{7A}\\x{B5}\\x{C0}-\\x{D6}\\x{D8}-\\x{F6}\\x{F8}-\\x{1BA}"
       "\\x{1BC}-\\x{1BF}\\x{1C4}-\\x{293}\\x{295}-\\x{2AF}\\x{370}-\\x{373}\\x{376}\\x{377}"
       "\\x{37B}-\\x{37D}\\x{37F}\\x{386}\\x{388}-\\x{38A}\\x{38C}\\x{38E}-\\x{3A1}"
       "\\x{3A3}-\\x{3F5}\\x{3F7}-\\x{481}\\x{48A}-\\x{52F}\\x{531}-\\x{556}\\x{10A0}-\\x{10C5}"
       "\\x{13A0}-\\x{13F5}\\x{13F8}-\\x{13FD}\\x{1C90}-\\x{1CBA}\\x{1CBD}-\\x{1CBF}"
       "\\x{1D00}-\\x{1D2B}\\x{1D6B}-\\x{1D77}\\x{1D79}-\\x{1D9A}\\x{1E00}-\\x{1F15}"
       "\\x{1F18}-\\x{1F1D}\\x{1F20}-\\x{1F45}\\x{1F48}-\\x{1F4D}\\x{1F50}-\\x{1F57}\\x{1F59}"
       "\\x{1F5B}\\x{1F5D}\\x{1F5F}-\\x{1F7D}\\x{1F80}-\\x{1FB4}\\x{1FB6}-\\x{1FBC}\\x{1FBE}"
       "\\x{1FC2}-\\x{1FC4}\\x{1FC6}-\\x{1FCC}\\x{1FD0}-\\x{1FD3}\\x{1FD6}-\\x{1FDB}"
       "\\x{1FE0}-\\x{1FEC}\\x{1FF2}-\\x{1FF4}\\x{1FF6}-\\x{1FFC}\\x{2102}\\x{2107}"
       "\\x{210A}-\\x{2113}\\x{2115}\\x{2119}-\\x{211D}\\x{2124}\\x{2126}\\x{2128}"
       "\\x{212A}-\\x{212D}\\x{212F}-\\x{2134}\\x{2139}\\x{213C}-\\x{213F}\\x{2145}-\\x{2149}"
       "\\x{214E}\\x{2183}\\x{2184}\\x{2C00}-\\x{2C7B}\\x{2C7E}-\\x{2CE4}\\x{2CEB}-\\x{2CEE}"
       "\\x{2CF2}\\x{2CF3}\\x{A640}-\\x{A66D}\\x{A680}-\\x{A69B}\\x{A722}-\\x{A76F}"
       "\\x{A771}-\\x{A787}\\x{A78B}-\\x{A78E}\\x{AB70}-\\x{ABBF}\\x{FB00}-\\x{FB06}"
       "\\x{FB13}-\\x{FB17}\\x{FF21}-\\x{FF3A}\\x{FF41}-\\x{FF5A}\\x{10400}-\\x{1044F}"
       "\\x{104B0}-\\x{104D3}\\x{104D8}-\\x{104FB}\\x{10C80}-\\x{10CB2}\\x{10CC0}-\\x{10CF2}"
       "\\x{118A0}-\\x{118DF}\\x{1E900}-\\x{1E943}]+",
       "\\s?[!-/:-~！-／：-～‘-‟　-。]+", R"(\s+$)", kCjk, R"(\p{N}+)"},
      // kSetDeepseekCoder
      {"[\r\n]", R"(\s?\p{L}+)", R"(\s?\p{P}+)", kCjk, R"(\p{N})"},
      // kSetFalcon
      {R"([\p{P}\$\+<=>\^~\|`]+)", kGpt2, "[0-9][0-9][0-9]"},
      // kSetStarcoder
      {R"(\p{N})", kGpt2},
      // kSetGpt2
      {kGpt2},
      // kSetQwen2
      {kQwen2},
      // kSetBloom
      {kBloom},
      // kSetViking
      {kBloom, R"(\p{N})"},
  }};
  return sets.at(static_cast<size_t>(set));
}

// name, canonical type, regex set, ignore_merges, add_bos, clean_spaces
const PreTokenizerConfig kConfigs[] = {
    {"default", kSetDefault, false, false, true},
    {"llama3", kSetLlama3, true, true, true},
    {"dbrx", kSetLlama3, false, false, true},
    {"smaug", kSetLlama3, false, false, true},
    {"deepseek-llm", kSetDeepseekLlm, false, false, false},
    {"deepseek-coder", kSetDeepseekCoder, false, false, false},
    {"falcon", kSetFalcon, false, false, true},
    {"mpt", kSetGpt2, false, false, true},
    {"starcoder", kSetStarcoder, false, false, true},
    {"gpt2", kSetGpt2, false, false, true},
    {"refact", kSetStarcoder, false, false, true},
    {"command-r", kSetStarcoder, false, false, false},
    {"qwen2", kSetQwen2, false, false, false},
    {"stablelm2", kSetQwen2, false, false, true},
    {"olmo", kSetGpt2, false, false, true},
    {"jais", kSetGpt2, false, false, true},
    {"smollm", kSetStarcoder, false, false, false},
    {"codeshell", kSetStarcoder, false, false, true},
    {"exaone", kSetStarcoder, false, false, true},
    {"minerva", kSetStarcoder, false, false, true},
    {"poro", kSetBloom, false, false, false},
    {"bloom", kSetBloom, false, false, true},
    {"gpt3-finnish", kSetBloom, false, false, true},
    {"viking", kSetViking, false, false, false},
};

// tokenizer.ggml.pre value -> canonical type name.
const std::pair<std::string_view, std::string_view> kNames[] = {
    {"default", "default"},
    {"llama3", "llama3"},
    {"llama-v3", "llama3"},
    {"llama-bpe", "llama3"},
    {"falcon3", "llama3"},
    {"pixtral", "llama3"},
    {"dbrx", "dbrx"},
    {"smaug-bpe", "smaug"},
    {"deepseek-llm", "deepseek-llm"},
    {"deepseek-coder", "deepseek-coder"},
    {"falcon", "falcon"},
    {"mpt", "mpt"},
    {"starcoder", "starcoder"},
    {"gpt-2", "gpt2"},
    {"phi-2", "gpt2"},
    {"refact", "refact"},
    {"command-r", "command-r"},
    {"qwen2", "qwen2"},
    {"deepseek-r1-qwen", "qwen2"},
    {"megrez", "qwen2"},
    {"stablelm2", "stablelm2"},
    {"olmo", "olmo"},
    {"jais", "jais"},
    {"smollm", "smollm"},
    {"codeshell", "codeshell"},
    {"exaone", "exaone"},
    {"minerva-7b", "minerva"},
    {"poro-chat", "poro"},
    {"bloom", "bloom"},
    {"gpt3-finnish", "gpt3-finnish"},
    {"viking", "viking"},
};

// llama.cpp's whitespace set (Unicode White_Space), as the inside of a character class.
constexpr std::string_view kWhitespace =
    R"(\t-\r\x{20}\x{85}\x{A0}\x{1680}\x{2000}-\x{200A}\x{2028}\x{2029}\x{202F}\x{205F}\x{3000})";

// Rewrite \s and \S into explicit classes so PCRE2's own notion of whitespace plays no part.
std::string to_pcre2(const std::string& re) {
  std::string out;
  bool in_class = false;
  for (size_t i = 0; i < re.size(); ++i) {
    const char c = re[i];
    if (c == '\\' && i + 1 < re.size()) {
      const char e = re[i + 1];
      ++i;
      if (e == 's') {
        if (in_class) {
          out += kWhitespace;
        } else {
          out += '[';
          out += kWhitespace;
          out += ']';
        }
      } else if (e == 'S') {
        if (in_class) fail("pre-tokenizer regex '{}': \\S inside a character class is not supported", re);
        out += "[^";
        out += kWhitespace;
        out += ']';
      } else {
        out += c;
        out += e;
      }
      continue;
    }
    if (c == '[' && !in_class)
      in_class = true;
    else if (c == ']' && in_class)
      in_class = false;
    out += c;
  }
  return out;
}

}  // namespace

const PreTokenizerConfig* find_pre_tokenizer(std::string_view pre_name) {
  for (const auto& [alias, canonical] : kNames) {
    if (alias != pre_name) continue;
    for (const auto& cfg : kConfigs)
      if (cfg.name == canonical) return &cfg;
  }
  return nullptr;
}

std::vector<std::string_view> known_pre_tokenizers() {
  std::vector<std::string_view> out;
  for (const auto& n : kNames) out.push_back(n.first);
  return out;
}

struct PreTokenizer::Regex {
  pcre2_code* code = nullptr;
  ~Regex() {
    if (code) pcre2_code_free(code);
  }
};

PreTokenizer::PreTokenizer(const PreTokenizerConfig& config) : PreTokenizer(regex_set(config.regex_set)) {}

PreTokenizer::PreTokenizer(const std::vector<std::string>& regexes) {
  for (const auto& re : regexes) {
    const std::string pattern = to_pcre2(re);
    int err = 0;
    PCRE2_SIZE err_off = 0;
    auto r = std::make_unique<Regex>();
    r->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                            PCRE2_UTF | PCRE2_UCP | PCRE2_DOLLAR_ENDONLY, &err, &err_off, nullptr);
    if (!r->code) {
      PCRE2_UCHAR msg[256];
      pcre2_get_error_message(err, msg, sizeof msg);
      fail("pre-tokenizer regex '{}' does not compile at offset {}: {}", re, err_off, reinterpret_cast<char*>(msg));
    }
    pcre2_jit_compile(r->code, PCRE2_JIT_COMPLETE);  // optional: falls back to the interpreter
    regexes_.push_back(std::move(r));
  }
}

PreTokenizer::~PreTokenizer() = default;

std::vector<size_t> PreTokenizer::split_offsets(const std::vector<uint32_t>& cpts) const {
  // The matching subject: valid UTF-8 with one character per code point. Code points PCRE2 cannot take
  // (surrogates, values past U+10FFFF, which llama.cpp's decoder lets through) stand in as a private-use
  // character: neither letter, number nor whitespace, as llama.cpp classifies them.
  std::string subject;
  subject.reserve(cpts.size() + 16);
  std::vector<size_t> cpt_byte(cpts.size() + 1);
  for (size_t i = 0; i < cpts.size(); ++i) {
    cpt_byte[i] = subject.size();
    uint32_t c = cpts[i];
    if ((c >= 0xD800 && c <= 0xDFFF) || c > 0x10FFFF) c = 0xE000;
    unicode::append_utf8(subject, c);
  }
  cpt_byte[cpts.size()] = subject.size();
  std::vector<uint32_t> byte_cpt(subject.size() + 1, 0);
  for (size_t i = 0; i <= cpts.size(); ++i) byte_cpt[cpt_byte[i]] = static_cast<uint32_t>(i);

  std::vector<size_t> offsets = {cpts.size()};
  if (cpts.empty()) return offsets;
  for (const auto& re : regexes_) {
    pcre2_match_data* md = pcre2_match_data_create_from_pattern(re->code, nullptr);
    std::vector<size_t> next;
    next.reserve(offsets.size() * 2);
    size_t start = 0;  // code point index of the current piece
    for (size_t len : offsets) {
      const size_t b0 = cpt_byte[start];
      const size_t blen = cpt_byte[start + len] - b0;
      const auto* subj = reinterpret_cast<PCRE2_SPTR>(subject.data() + b0);
      size_t last = 0;  // code points of this piece already emitted
      size_t pos = 0;   // byte position to search from
      while (pos <= blen) {
        const int rc = pcre2_match(re->code, subj, blen, pos, PCRE2_NO_UTF_CHECK, md, nullptr);
        if (rc < 0) {
          if (rc == PCRE2_ERROR_NOMATCH) break;
          pcre2_match_data_free(md);
          fail("pre-tokenizer regex match failed (PCRE2 error {})", rc);
        }
        const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
        const size_t m0 = byte_cpt[b0 + ov[0]] - start;
        const size_t m1 = byte_cpt[b0 + ov[1]] - start;
        if (m0 > last) next.push_back(m0 - last);
        if (m1 > m0) {
          next.push_back(m1 - m0);
          pos = ov[1];
        } else {
          // Empty match: it still cuts the unmatched stretch here; search on from the next character.
          if (ov[0] >= blen) {
            last = m0;
            break;
          }
          pos = ov[0] + unicode::utf8_len(subject[b0 + ov[0]]);
        }
        last = m1;
      }
      if (last < len) next.push_back(len - last);
      start += len;
    }
    pcre2_match_data_free(md);
    offsets = std::move(next);
  }
  return offsets;
}

std::vector<std::string> PreTokenizer::split_words(std::string_view text) const {
  const std::vector<uint32_t> cpts = unicode::decode_utf8(text);
  std::vector<std::string> words;
  size_t start = 0;
  for (size_t len : split_offsets(cpts)) {
    std::string w;
    for (size_t i = start; i < start + len; ++i) unicode::append_utf8(w, cpts[i]);
    words.push_back(std::move(w));
    start += len;
  }
  return words;
}

std::vector<std::string> PreTokenizer::split(std::string_view text) const {
  std::vector<std::string> words = split_words(text);
  for (auto& w : words) {
    std::string enc;
    enc.reserve(w.size() * 2);
    for (char c : w) enc += unicode::byte_to_utf8(static_cast<uint8_t>(c));
    w = std::move(enc);
  }
  return words;
}

}  // namespace tt
