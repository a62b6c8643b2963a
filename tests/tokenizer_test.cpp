// Tokenizers against llama.cpp: its vocabulary test cases (shared/reference/tokenizer), the prompt tokens and
// generated text of every reference model (shared/reference/greedy), and the bundled models on their own.
#include "tokenizer/tokenizer.h"

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/error.h"
#include "gguf/gguf.h"
#include "gguf/writer.h"
#include "support/paths.h"
#include "tokenizer/pretokenizer.h"

namespace tt {
namespace {

std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

std::unique_ptr<Tokenizer> load(const std::string& path) {
  auto gguf = GgufFile::open(path);
  return Tokenizer::from_gguf(*gguf);
}

std::string ids_str(const std::vector<int32_t>& ids) {
  std::string s;
  for (int32_t id : ids) {
    if (!s.empty()) s += ' ';
    s += std::to_string(id);
  }
  return s;
}

std::string escaped(std::string_view s) {
  std::string out;
  for (char c : s) {
    if (c == '\n')
      out += "\\n";
    else if (c == '\t')
      out += "\\t";
    else
      out += c;
  }
  return out;
}

// llama.cpp's test format: inputs separated by "\n__ggml_vocab_test__\n", one line of expected ids per input.
struct VocabCase {
  std::string input;
  std::vector<int32_t> expected;
};

std::vector<VocabCase> read_cases(const std::string& base) {
  const std::string inp = read_file(base + ".inp");
  const std::string out = read_file(base + ".out");
  const std::string sep = "\n__ggml_vocab_test__\n";
  std::vector<std::string> inputs;
  for (size_t pos = 0;;) {
    const size_t m = inp.find(sep, pos);
    if (m == std::string::npos) {
      if (pos < inp.size()) inputs.push_back(inp.substr(pos));
      break;
    }
    inputs.push_back(inp.substr(pos, m - pos));
    pos = m + sep.size();
  }
  std::vector<std::string> lines;
  std::stringstream ls(out);
  for (std::string line; std::getline(ls, line);) lines.push_back(line);
  EXPECT_EQ(inputs.size(), lines.size()) << base;
  std::vector<VocabCase> cases;
  for (size_t i = 0; i < std::min(inputs.size(), lines.size()); ++i) {
    VocabCase c{inputs[i], {}};
    std::stringstream is(lines[i]);
    for (int32_t id; is >> id;) c.expected.push_back(id);
    cases.push_back(std::move(c));
  }
  return cases;
}

class TokenizerVocab : public ::testing::TestWithParam<std::string> {};

TEST_P(TokenizerVocab, MatchesLlamaCpp) {
  TT_REQUIRE_SHARED();
  const std::string base = test::shared_path("reference/tokenizer/ggml-vocab-" + GetParam() + ".gguf");
  const auto gguf = GgufFile::open(base);
  const auto t0 = std::chrono::steady_clock::now();
  auto tok = Tokenizer::from_gguf(*gguf);
  const double load_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  const auto cases = read_cases(base);
  ASSERT_FALSE(cases.empty());
  int pass = 0;
  for (const auto& c : cases) {
    const auto got = tok->encode(c.input, /*add_special=*/false, /*parse_special=*/false);
    if (got == c.expected) {
      ++pass;
    } else {
      ADD_FAILURE() << GetParam() << ": input '" << escaped(c.input) << "'\n  expected: " << ids_str(c.expected)
                    << "\n  got:      " << ids_str(got);
    }
  }
  std::printf("[ tokenizer ] %-15s %2d/%zu cases pass (vocab %d, built in %.1f ms)\n", GetParam().c_str(), pass,
              cases.size(), tok->n_vocab(), load_ms);
  EXPECT_EQ(pass, static_cast<int>(cases.size()));
}

// decode(encode(s)) gives s back: exactly for byte-level BPE; SPM adds its space prefix in front.
TEST_P(TokenizerVocab, RoundTrip) {
  TT_REQUIRE_SHARED();
  const std::string base = test::shared_path("reference/tokenizer/ggml-vocab-" + GetParam() + ".gguf");
  auto tok = load(base);
  auto cases = read_cases(base);
  cases.push_back({"Byte \xff\xfe mixed \xe2\x82 invalid", {}});
  for (const auto& c : cases) {
    const bool valid = c.input.find('\xff') == std::string::npos;
    const std::string back = tok->decode(tok->encode(c.input, false));
    if (tok->kind() == Tokenizer::Kind::SPM) {
      if (!valid) continue;  // see TokenizerSpm.InvalidUtf8 for what llama.cpp does there
      EXPECT_EQ(back, c.input.empty() ? "" : " " + c.input) << escaped(c.input);
    } else if (valid) {
      EXPECT_EQ(back, c.input) << escaped(c.input);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Tokenizer, TokenizerVocab,
                         ::testing::Values("llama-spm", "phi-3", "gpt-2", "falcon", "mpt", "starcoder", "refact",
                                           "deepseek-llm", "deepseek-coder"),
                         [](const auto& info) {
                           std::string n = info.param;
                           for (char& c : n)
                             if (c == '-') c = '_';
                           return n;
                         });

std::vector<uint8_t> from_hex(const std::string& hex) {
  std::vector<uint8_t> out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2)
    out.push_back(static_cast<uint8_t>(std::stoi(hex.substr(i, 2), nullptr, 16)));
  return out;
}

// Every reference model: prompt ids as llama.cpp tokenized them (BOS per metadata), generated text as it printed.
TEST(TokenizerGreedy, PromptsAndGeneratedText) {
  TT_REQUIRE_SHARED();
  const std::string dir = test::shared_path("reference/greedy");
  int models = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (!entry.is_directory()) continue;
    const std::string model = entry.path().filename().string();
    const std::string json_path = entry.path().string() + "/greedy.json";
    if (!std::filesystem::exists(json_path)) continue;
    SCOPED_TRACE(model);
    auto tok = load(test::shared_path("models/" + model + ".gguf"));
    const auto records = nlohmann::json::parse(read_file(json_path));
    int pass = 0;
    for (const auto& r : records) {
      const std::string prompt = r["prompt"];
      const auto expected = r["prompt_tokens"].get<std::vector<int32_t>>();
      const auto got = tok->encode(prompt, /*add_special=*/true);
      EXPECT_EQ(ids_str(got), ids_str(expected)) << "prompt '" << escaped(prompt) << "'";
      const auto gen = r["greedy_tokens"].get<std::vector<int32_t>>();
      const auto bytes = from_hex(r["greedy_text_hex"]);
      const std::string text = tok->decode(gen);
      EXPECT_EQ(text, std::string(bytes.begin(), bytes.end())) << "generated tokens of '" << escaped(prompt) << "'";
      if (got == expected && text == std::string(bytes.begin(), bytes.end())) ++pass;
    }
    std::printf("[ tokenizer ] %-24s %d/%zu prompts and texts match\n", model.c_str(), pass, records.size());
    ++models;
  }
  EXPECT_GT(models, 0);
}

// ---- Bundled models: no ../shared needed. Expected values are llama.cpp's (reference/greedy). ----

TEST(TokenizerBundled, Stories260K) {
  auto tok = load(test::repo_path("models/stories260K.gguf"));
  EXPECT_EQ(tok->model(), "llama");
  EXPECT_EQ(tok->n_vocab(), 512);
  EXPECT_EQ(tok->bos(), 1);
  EXPECT_EQ(tok->eos(), 2);
  EXPECT_TRUE(tok->add_bos());
  EXPECT_FALSE(tok->add_eos());
  EXPECT_TRUE(tok->is_eog(2));
  EXPECT_FALSE(tok->is_eog(1));
  EXPECT_EQ(tok->encode("Once upon a time", true), (std::vector<int32_t>{1, 403, 407, 261, 378}));
  EXPECT_EQ(tok->encode("Once upon a time", false), (std::vector<int32_t>{403, 407, 261, 378}));
  const std::vector<int32_t> gen = {432, 383, 286, 261, 376, 298, 315, 421, 395, 317, 426, 338};
  EXPECT_EQ(tok->decode(gen), ", there was a little girl named Lily. She");
  // Byte tokens and the leading space of a piece.
  EXPECT_EQ(tok->token_to_piece(13), "\n");  // <0x0A>
  EXPECT_EQ(tok->token_text(13), "<0x0A>");
  EXPECT_EQ(tok->token_to_piece(432), ",");
  EXPECT_EQ(tok->token_to_piece(383), " there");
  // CONTROL tokens print nothing unless asked.
  EXPECT_EQ(tok->token_to_piece(1), "");
  EXPECT_EQ(tok->token_to_piece(1, /*special=*/true), "<s>");
  // Special-token text is plain text unless parse_special.
  EXPECT_EQ(tok->encode("<s>", false, true), (std::vector<int32_t>{1}));
  EXPECT_NE(tok->encode("<s>", false, false), (std::vector<int32_t>{1}));
  EXPECT_EQ(tok->decode(tok->encode("<s>", false, false)), " <s>");
  // Characters outside the vocabulary fall back to bytes.
  const auto ids = tok->encode("\xe2\x82\xac 5", false);  // "€ 5"
  EXPECT_EQ(tok->decode(ids), " \xe2\x82\xac 5");
  EXPECT_TRUE(tok->encode("", true) == std::vector<int32_t>{1});
  EXPECT_TRUE(tok->encode("", false).empty());
  EXPECT_THROW(tok->token_to_piece(512), Error);
}

TEST(TokenizerBundled, TinyLlama) {
  auto tok = load(test::repo_path("models/TinyLLama-v0.Q4_0.gguf"));
  EXPECT_EQ(tok->n_vocab(), 32000);
  EXPECT_EQ(tok->encode("Once upon a time", true), (std::vector<int32_t>{1, 4612, 2619, 260, 647}));
  EXPECT_EQ(tok->encode("Hello world", true), (std::vector<int32_t>{1, 16644, 924}));
  EXPECT_EQ(ids_str(tok->encode("1 + 1 = 2, 2 + 2 =", true)).substr(0, 24), "1 31822 31853 1648 31822");
  for (std::string s : {"Hello world", " leading space and  double  spaces\nnew line",
                        "In 2024, the caf\xc3\xa9 served cr\xc3\xa8me br\xc3\xbbl\xc3\xa9"
                        "e \xe2\x80\x94 d\xc3\xa9licieux!"})
    EXPECT_EQ(tok->decode(tok->encode(s, false)), " " + s);
}

// ---- Hand-built vocabularies: the algorithms on cases small enough to check by hand. ----

std::unique_ptr<Tokenizer> from_writer(const GgufWriter& w, std::vector<uint8_t>& storage) {
  storage = w.bytes();
  auto gguf = GgufFile::parse(storage);
  return Tokenizer::from_gguf(*gguf);
}

TEST(TokenizerSpm, MergesByScoreWithByteFallback) {
  GgufWriter w;
  w.add_string("tokenizer.ggml.model", "llama");
  std::vector<std::string> tokens = {"<unk>", "<s>", "</s>"};
  std::vector<int32_t> types = {2, 3, 3};
  for (int b = 0; b < 256; ++b) {
    char buf[8];
    std::snprintf(buf, sizeof buf, "<0x%02X>", b);
    tokens.push_back(buf);
    types.push_back(6);
  }
  const std::vector<std::pair<std::string, float>> normal = {{"\xe2\x96\x81", -1},
                                                             {"a", -2},
                                                             {"b", -2},
                                                             {"c", -2},
                                                             {"ab", -3},
                                                             {"bc", -1},
                                                             {"\xe2\x96\x81"
                                                              "a",
                                                              -5},
                                                             {"<u>", 0}};
  std::vector<float> scores(tokens.size(), 0);
  for (const auto& [s, sc] : normal) {
    tokens.push_back(s);
    scores.push_back(sc);
    types.push_back(s == "<u>" ? 4 : 1);
  }
  w.add_string_array("tokenizer.ggml.tokens", tokens);
  w.add_f32_array("tokenizer.ggml.scores", scores);
  w.add_i32_array("tokenizer.ggml.token_type", types);
  std::vector<uint8_t> storage;
  auto tok = from_writer(w, storage);
  auto id = [&](std::string_view s) { return tok->token_id(s); };
  // "abc": bc (score -1) beats ab (-3); "▁a" (-5) after "▁" + "a"? "▁" and "a" merge only into "▁a" = -5.
  EXPECT_EQ(tok->encode("abc", false), (std::vector<int32_t>{id("\xe2\x96\x81"
                                                                "a"),
                                                             id("bc")}));
  // No space prefix after a user-defined token... a prefix is added after it, as llama.cpp does.
  EXPECT_EQ(tok->encode("a<u>c", false), (std::vector<int32_t>{id("\xe2\x96\x81"
                                                                  "a"),
                                                               id("<u>"), id("\xe2\x96\x81"), id("c")}));
  // Unknown characters become their bytes.
  EXPECT_EQ(tok->encode("z", false), (std::vector<int32_t>{id("\xe2\x96\x81"), id("<0x7A>")}));
  EXPECT_EQ(tok->decode(tok->encode("z", false)), " z");
}

TEST(TokenizerBpe, ErrorsAndPreTokenizers) {
  auto make = [](const std::string& pre, bool merges) {
    GgufWriter w;
    w.add_string("tokenizer.ggml.model", "gpt2");
    if (!pre.empty()) w.add_string("tokenizer.ggml.pre", pre);
    w.add_string_array("tokenizer.ggml.tokens", {"a", "b", "ab", "\xc4\xa0"});
    if (merges) w.add_string_array("tokenizer.ggml.merges", {"a b"});
    return w;
  };
  std::vector<uint8_t> storage;
  try {
    from_writer(make("no-such-pre", true), storage);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'no-such-pre'"), std::string::npos) << e.what();
  }
  EXPECT_THROW(from_writer(make("gpt-2", false), storage), Error);
  auto tok = from_writer(make("gpt-2", true), storage);
  EXPECT_EQ(tok->encode("ab a", false), (std::vector<int32_t>{2, 3, 0}));
  EXPECT_EQ(tok->decode({{2, 3, 0}}), "ab a");
  EXPECT_FALSE(tok->add_bos());

  GgufWriter bad;
  bad.add_string("tokenizer.ggml.model", "llama");
  EXPECT_THROW(from_writer(bad, storage), Error);  // no tokens
  bad.add_string_array("tokenizer.ggml.tokens", {"a", "b"});
  bad.add_f32_array("tokenizer.ggml.scores", {0.f});
  EXPECT_THROW(from_writer(bad, storage), Error);  // scores do not match the tokens
  GgufWriter other;
  other.add_string("tokenizer.ggml.model", "bert");
  other.add_string_array("tokenizer.ggml.tokens", {"a"});
  EXPECT_THROW(from_writer(other, storage), Error);

  for (auto name : known_pre_tokenizers()) {
    const PreTokenizerConfig* cfg = find_pre_tokenizer(name);
    ASSERT_NE(cfg, nullptr) << name;
    EXPECT_NO_THROW(PreTokenizer p(*cfg)) << name;
  }
}

TEST(TokenizerBpe, PreTokenizerSplits) {
  auto words = [](std::string_view pre, std::string_view text) {
    PreTokenizer p(*find_pre_tokenizer(pre));
    std::string out;
    for (const auto& w : p.split_words(text)) out += "[" + w + "]";
    return out;
  };
  EXPECT_EQ(words("gpt-2", "Hello world's  3.14\n\nx"), "[Hello][ world]['s][ ][ 3][.][14][\n][\n][x]");
  EXPECT_EQ(words("llama-bpe", "I'VE 12345 ok!!\n\n  x"), "[I]['VE][ ][123][45][ ok][!!\n\n][ ][ x]");
  EXPECT_EQ(words("qwen2", "12345"), "[1][2][3][4][5]");
  EXPECT_EQ(words("starcoder", "x 123"), "[x][ ][1][2][3]");
  EXPECT_EQ(words("falcon", "a 12345"), "[a][ ][123][45]");
  EXPECT_EQ(words("deepseek-llm", "ab \n12"), "[ab][ ][\n][12]");
  // Non-ASCII whitespace counts as whitespace (U+3000 ideographic space).
  // Non-ASCII whitespace is whitespace (U+3000): otherwise both would form one [^\s\p{L}\p{N}]+ word.
  EXPECT_EQ(words("gpt-2",
                  "a\u3000\u3000"
                  "b"),
            "[a][\u3000][\u3000][b]");
}

// llama.cpp's SPM splits the input into symbols by lead-byte length, so an invalid lead byte swallows the bytes
// after it (here the "▁" that stands for the space); those come out as byte tokens, so decode shows "▁".
TEST(TokenizerSpm, InvalidUtf8) {
  auto tok = load(test::repo_path("models/TinyLLama-v0.Q4_0.gguf"));
  const auto ids = tok->encode("\xfe x", false);
  ASSERT_GE(ids.size(), 5u);
  EXPECT_EQ(tok->token_text(ids[1]), "<0xFE>");
  EXPECT_EQ(tok->token_text(ids[2]), "<0xE2>");
  EXPECT_EQ(tok->decode(ids), " \xfe\xe2\x96\x81x");
}

// With parse_special, CONTROL token text becomes the token; without, it is ordinary text.
TEST(TokenizerBpe, SpecialTokens) {
  TT_REQUIRE_SHARED();
  auto tok = load(test::shared_path("reference/tokenizer/ggml-vocab-gpt-2.gguf"));
  EXPECT_EQ(tok->encode("a<|endoftext|>b", false, true), (std::vector<int32_t>{64, 50256, 65}));
  const auto plain = tok->encode("a<|endoftext|>b", false, false);
  EXPECT_GT(plain.size(), 3u);
  EXPECT_EQ(tok->decode(plain), "a<|endoftext|>b");
  EXPECT_TRUE(tok->is_eog(50256));
  EXPECT_EQ(tok->token_to_piece(50256), "");
  EXPECT_EQ(tok->token_to_piece(50256, true), "<|endoftext|>");
  EXPECT_EQ(tok->token_to_piece(tok->token_id("\xc4\xa0the")), " the");
}

}  // namespace
}  // namespace tt
