// The engine without ../shared: the bundled model against llama.cpp's tokens, load-time validation with clear
// errors, context overflow, sampling reproducibility, thread-count invariance, qwen2 and tied outputs.
#include "model/engine.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <set>
#include <sstream>

#include "core/error.h"
#include "model/generate.h"
#include "quant/quant.h"
#include "support/paths.h"
#include "support/tiny_model.h"
#include "tokenizer/tokenizer.h"

namespace tt {
namespace {

namespace fs = std::filesystem;

// llama.cpp's greedy tokens for stories260K, "Once upon a time" (shared/reference/greedy/stories260K, prompt 0).
const std::vector<int32_t> kStoriesPrompt = {1, 403, 407, 261, 378};
const std::vector<int32_t> kStoriesGreedy = {
    432, 383, 286, 261, 376, 298, 315, 421, 395, 317, 426, 338, 401, 396, 267, 337, 410, 408, 419, 292, 411, 322,
    265, 282, 295, 433, 426, 385, 328, 432, 358, 394, 261, 370, 432, 352, 266, 268, 388, 426, 338, 391, 266, 267,
    337, 335, 312, 432, 398, 312, 286, 267, 414, 270, 333, 415, 426, 13,  438, 310, 439, 419, 357, 336};

GenerateResult greedy(Engine& e, const std::vector<int32_t>& prompt, int n) {
  GenerateOptions go;
  go.prompt_tokens = prompt;
  go.n_predict = n;
  go.sampling.temperature = 0;
  return generate(e, go, nullptr, nullptr);
}

TEST(Engine, BundledStoriesMatchesLlamaCppGreedy) {
  auto model = load_model(test::repo_path("models/stories260K.gguf"));
  EXPECT_EQ(model->tokenizer->encode("Once upon a time", true), kStoriesPrompt);
  for (int threads : {1, 2}) {
    Engine engine(*model, {256, threads, GgmlType::F16});
    GenerateResult r = greedy(engine, kStoriesPrompt, 64);
    ASSERT_EQ(r.tokens.size(), kStoriesGreedy.size());
    for (size_t i = 0; i < r.tokens.size(); ++i)
      ASSERT_EQ(r.tokens[i], kStoriesGreedy[i])
          << "first difference at step " << i << " with " << threads << " threads";
    EXPECT_EQ(r.text.substr(0, 30), ", there was a little girl name");
  }
}

TEST(Engine, BundledTinyLlamaRuns) {
  auto model = load_model(test::repo_path("models/TinyLLama-v0.Q4_0.gguf"));
  Engine engine(*model, {128, 2, GgmlType::F16});
  GenerateResult r = greedy(engine, model->tokenizer->encode("Once upon a time", true), 16);
  EXPECT_EQ(r.tokens.size(), 16u);
  EXPECT_FALSE(r.text.empty());
}

class TinyModelFile {
 public:
  explicit TinyModelFile(const test::TinyModelSpec& spec) {
    path_ = (fs::temp_directory_path() /
             ("tt-tiny-" + std::to_string(::getpid()) + "-" + std::to_string(counter_++) + ".gguf"))
                .string();
    test::write_tiny_model(spec, path_);
  }
  ~TinyModelFile() { fs::remove(path_); }
  const std::string& path() const { return path_; }

 private:
  static inline int counter_ = 0;
  std::string path_;
};

std::string load_error(const test::TinyModelSpec& spec) {
  TinyModelFile f(spec);
  try {
    load_model(f.path());
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(Engine, TinyModelsLoadAndGenerate) {
  for (const char* arch : {"llama", "qwen2"}) {
    for (bool tied : {false, true}) {
      test::TinyModelSpec spec;
      spec.arch = arch;
      spec.tied_output = tied;
      TinyModelFile f(spec);
      auto model = load_model(f.path());
      EXPECT_EQ(model->weights.output_tied, tied);
      EXPECT_EQ(model->config.rope_neox, std::string(arch) == "qwen2");
      Engine engine(*model, {64, 2, GgmlType::F16});
      GenerateResult r = greedy(engine, {1, 50, 60, 70}, 8);
      EXPECT_EQ(r.tokens.size(), 8u) << arch;
    }
  }
}

TEST(Engine, WrongShapeNamesTensorExpectedAndGot) {
  test::TinyModelSpec spec;
  spec.edit_tensor = [](std::string& name, std::vector<int64_t>& dims, std::vector<float>&) {
    if (name == "blk.1.attn_k.weight") std::swap(dims[0], dims[1]);
  };
  const std::string e = load_error(spec);
  EXPECT_NE(e.find("blk.1.attn_k.weight: expected [32, 16], got [16, 32]"), std::string::npos) << e;
}

TEST(Engine, MissingTensorIsNamed) {
  test::TinyModelSpec spec;
  spec.edit_tensor = [](std::string& name, std::vector<int64_t>&, std::vector<float>&) {
    if (name == "blk.0.ffn_up.weight") name.clear();
  };
  const std::string e = load_error(spec);
  EXPECT_NE(e.find("required tensor 'blk.0.ffn_up.weight' is missing"), std::string::npos) << e;
}

TEST(Engine, UnimplementedTypeIsRefusedByName) {
  test::TinyModelSpec spec;
  spec.n_embd = 256;
  spec.n_ff = 256;
  spec.type_override = {{"blk.0.attn_q.weight", GgmlType::IQ2_XXS}};
  const std::string e = load_error(spec);
  EXPECT_NE(e.find("'blk.0.attn_q.weight' has type IQ2_XXS"), std::string::npos) << e;
}

TEST(Engine, HyperparameterChecks) {
  {
    test::TinyModelSpec spec;
    spec.arch = "gpt-neox";
    EXPECT_NE(load_error(spec).find("architecture 'gpt-neox' is not supported"), std::string::npos);
  }
  {
    test::TinyModelSpec spec;
    spec.extra_u32 = {{"llama.attention.head_count", 5}};
    EXPECT_NE(load_error(spec).find("embedding length 32 is not divisible by the head count 5"), std::string::npos);
  }
  {
    test::TinyModelSpec spec;
    spec.extra_u32 = {{"llama.attention.head_count_kv", 3}};
    EXPECT_NE(load_error(spec).find("KV head count 3 does not divide the head count 4"), std::string::npos);
  }
  {
    test::TinyModelSpec spec;
    spec.omit_keys = {"llama.block_count"};
    EXPECT_NE(load_error(spec).find("missing required metadata key 'llama.block_count'"), std::string::npos);
  }
  {
    test::TinyModelSpec spec;
    spec.extra_u32 = {{"llama.block_count", 1}};
    EXPECT_NE(load_error(spec).find("not used by the llama architecture"), std::string::npos);
  }
  {
    // Defaults for optional keys are documented and reported.
    test::TinyModelSpec spec;
    spec.omit_keys = {"llama.attention.layer_norm_rms_epsilon", "llama.rope.dimension_count"};
    TinyModelFile f(spec);
    auto model = load_model(f.path());
    EXPECT_FLOAT_EQ(model->config.rms_eps, 1e-5f);
    EXPECT_EQ(model->config.n_rot, 8);
    EXPECT_FLOAT_EQ(model->config.rope_base, 10000.0f);
    EXPECT_GE(model->config.notes.size(), 3u);
  }
}

// Mixture-of-experts and qwen3 files with one thing wrong: each refused with a message naming the file, the tensor
// or key, and the problem.
TEST(Engine, CorruptMoeFilesAreRefusedClearly) {
  auto moe = [] {
    test::TinyModelSpec spec;
    spec.n_expert = 4;
    spec.n_expert_used = 2;
    return spec;
  };
  {
    test::TinyModelSpec spec = moe();
    spec.edit_tensor = [](std::string& name, std::vector<int64_t>& dims, std::vector<float>&) {
      if (name == "blk.1.ffn_up_exps.weight") dims[2] = 3;
    };
    const std::string e = load_error(spec);
    EXPECT_NE(
        e.find("blk.1.ffn_up_exps.weight: 3 experts (third dimension of [32, 64, 3]) but llama.expert_count is 4"),
        std::string::npos)
        << e;
  }
  {
    // llama.cpp's limit: every per-(layer, expert) table stays bounded.
    test::TinyModelSpec spec = moe();
    spec.extra_u32 = {{"llama.expert_count", 513}};
    const std::string e = load_error(spec);
    EXPECT_NE(e.find("'llama.expert_count' = 513 is above the 512 experts a layer may have"), std::string::npos) << e;
  }
  for (uint32_t used : {0u, 5u}) {
    test::TinyModelSpec spec = moe();
    spec.n_expert_used = static_cast<int>(used);
    const std::string e = load_error(spec);
    EXPECT_NE(e.find(fmt::format("'llama.expert_used_count' = {} must be between 1 and expert_count 4", used)),
              std::string::npos)
        << e;
  }
  {
    test::TinyModelSpec spec = moe();
    spec.edit_tensor = [](std::string& name, std::vector<int64_t>&, std::vector<float>&) {
      if (name == "blk.0.ffn_gate_inp.weight") name.clear();
    };
    const std::string e = load_error(spec);
    EXPECT_NE(e.find("required tensor 'blk.0.ffn_gate_inp.weight' (the router of a model with llama.expert_count 4) "
                     "is missing"),
              std::string::npos)
        << e;
  }
  {
    test::TinyModelSpec spec;
    spec.arch = "qwen3";
    spec.head_dim = 16;
    spec.edit_tensor = [](std::string& name, std::vector<int64_t>& dims, std::vector<float>&) {
      if (name == "blk.0.attn_q.weight") dims[1] = 56;
    };
    const std::string e = load_error(spec);
    EXPECT_NE(e.find("blk.0.attn_q.weight: its 56 outputs are not a whole number of heads of 16 "
                     "(qwen3.attention.key_length)"),
              std::string::npos)
        << e;
    EXPECT_NE(e.find(".gguf"), std::string::npos) << e;
  }
  {
    test::TinyModelSpec spec;
    spec.arch = "qwen3moe";
    spec.head_dim = 16;
    const std::string e = load_error(spec);
    EXPECT_NE(e.find("missing required metadata key 'qwen3moe.expert_count'"), std::string::npos) << e;
  }
}

test::TinyModelSpec tiny_moe(const std::string& arch) {
  test::TinyModelSpec spec;
  spec.arch = arch;
  spec.n_expert = 8;
  spec.n_expert_used = 3;
  if (arch == "qwen3" || arch == "qwen3moe") spec.head_dim = 16;
  if (arch == "qwen3") spec.n_expert = spec.n_expert_used = 0;
  return spec;
}

// Every new architecture loads and generates, with the same tokens on one and two threads.
TEST(Engine, MoeAndQwen3ModelsGenerate) {
  for (const char* arch : {"llama", "olmoe", "qwen3", "qwen3moe"}) {
    TinyModelFile f(tiny_moe(arch));
    auto model = load_model(f.path());
    std::vector<int32_t> first;
    for (int threads : {1, 2}) {
      Engine engine(*model, {64, threads, GgmlType::F16});
      GenerateResult r = greedy(engine, {1, 50, 60, 70, 80, 90}, 6);
      EXPECT_EQ(r.tokens.size(), 6u) << arch;
      if (threads == 1) first = r.tokens;
      EXPECT_EQ(r.tokens, first) << arch;
      EXPECT_EQ(engine.routing().size(), std::string(arch) == "qwen3" ? 0u : 2u) << arch;
    }
  }
}

// Weights read into memory have their Q8_0, Q4_1 and Q4_K matrices stored in row groups where the kernels have them
// (RowGroups); the logits of a prompt (Q4_K: 4 tokens through the gemm, one through the gemv) and of the next token
// are those of the file's row order, bit for bit, for dense and expert matrices and a matrix whose last rows are not
// a whole group (the output's 259).
TEST(Engine, RowGroupsGiveTheLogitsOfTheFilesRowOrder) {
  for (GgmlType type : {GgmlType::Q8_0, GgmlType::Q4_K, GgmlType::Q4_1}) {
    for (const char* arch : {"llama", "olmoe"}) {
      SCOPED_TRACE(fmt::format("{} {}", type_name(type), arch));
      test::TinyModelSpec spec = tiny_moe(arch);
      spec.n_embd = type == GgmlType::Q4_K ? 256 : 64;  // K-quants: whole super-blocks
      spec.n_ff = type == GgmlType::Q4_K ? 256 : 96;
      spec.matrix_type = type;
      TinyModelFile f(spec);
      auto in_memory = load_model(f.path(), FileResidency::IN_MEMORY);
      auto mapped = load_model(f.path(), FileResidency::MAPPED);
      const QuantKernels& k = *find_kernels(type);
      for (const Tensor* t :
           {in_memory->weights.layers[0].wq, in_memory->weights.output, in_memory->weights.layers[0].ffn_up_exps})
        EXPECT_EQ(t->rows_grouped, k.groups_rows(t->ne[0], t->ne[1])) << t->name;
      EXPECT_EQ(in_memory->weights.layers[0].wq->rows_grouped, k.row_groups.has_value());
      EXPECT_FALSE(in_memory->weights.token_embd->rows_grouped);  // its rows are read one by one
      EXPECT_FALSE(mapped->weights.layers[0].wq->rows_grouped);
      Engine a(*in_memory, {64, 2, GgmlType::F16}), b(*mapped, {64, 2, GgmlType::F16});
      for (const std::vector<int32_t>& tokens : {std::vector<int32_t>{1, 50, 60, 70, 80}, std::vector<int32_t>{90}}) {
        const std::span<const float> la = a.eval(tokens), lb = b.eval(tokens);
        ASSERT_EQ(la.size(), lb.size());
        EXPECT_EQ(std::memcmp(la.data(), lb.data(), la.size_bytes()), 0) << tokens.size() << " tokens";
      }
    }
  }
}

// MUL_MAT_ID reads exactly the slabs of the experts its ids name (each once, in expert order), found from the
// file's tensor offsets; the routing view holds llama.cpp's order (probabilities descending) and renormalised
// weights.
TEST(Engine, MulMatIdReadsExactlyTheChosenExperts) {
  TinyModelFile f(tiny_moe("llama"));
  auto model = load_model(f.path());
  Engine engine(*model, {64, 2, GgmlType::F16});
  for (const std::vector<int32_t>& tokens : {std::vector<int32_t>{1, 50, 60, 70, 80}, std::vector<int32_t>{90}}) {
    engine.eval(tokens);
    for (const LayerRouting& r : engine.routing()) {
      for (int64_t t = 0; t < r.n_tokens(); ++t) {
        float sum = 0;
        for (int64_t s = 0; s < r.n_used(); ++s) {
          sum += r.weight(t, s);
          if (s > 0) {
            EXPECT_GE(r.probs->as<const float>()[t * r.probs->ne[0] + r.expert(t, s - 1)],
                      r.probs->as<const float>()[t * r.probs->ne[0] + r.expert(t, s)]);
          }
        }
        EXPECT_NEAR(sum, 1.0f, 1e-5f);
        EXPECT_GE(r.margin(t), 0.0f);
      }
    }
    int checked = 0;
    for (const Node& n : engine.last_step().graph.nodes()) {
      if (n.op != OpKind::MUL_MAT_ID) continue;
      const GgufTensorInfo* info = model->file->find_tensor(n.src[0]->name);
      ASSERT_NE(info, nullptr);
      const uint64_t slab = info->size_bytes / static_cast<uint64_t>(info->ne[2]);
      std::set<int32_t> chosen;
      for (int64_t i = 0; i < n.src[2]->n_elements(); ++i) chosen.insert(n.src[2]->as<const int32_t>()[i]);
      std::vector<std::pair<uint64_t, uint64_t>> want, got;
      for (int32_t e : chosen) want.emplace_back(info->offset + e * slab, slab);
      for (const ByteRange& br : n.reads)
        if (br.input == 0) got.emplace_back(br.offset, br.length);
      EXPECT_EQ(got, want) << n.out->name;
      EXPECT_LT(chosen.size(), 8u) << n.out->name;  // never the whole tensor here
      ++checked;
    }
    EXPECT_EQ(checked, 2 * 3);
  }
}

TEST(Engine, ContextOverflowIsAClearError) {
  test::TinyModelSpec spec;
  TinyModelFile f(spec);
  auto model = load_model(f.path());
  Engine engine(*model, {8, 1, GgmlType::F16});
  try {
    greedy(engine, {1, 2, 3, 4, 5}, 4);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("context overflow"), std::string::npos) << e.what();
  }
  // Stepping past the context directly is refused too, without touching memory.
  Engine direct(*model, {4, 1, GgmlType::F16});
  std::vector<int32_t> five = {1, 2, 3, 4, 5};
  EXPECT_THROW(direct.eval(five), Error);
}

TEST(Engine, SameSeedSameText) {
  auto model = load_model(test::repo_path("models/stories260K.gguf"));
  auto sample = [&](uint32_t seed, int threads) {
    Engine engine(*model, {256, threads, GgmlType::F16});
    GenerateOptions go;
    go.prompt_tokens = kStoriesPrompt;
    go.n_predict = 40;
    go.sampling.temperature = 1.0f;
    go.sampling.seed = seed;
    return generate(engine, go, nullptr, nullptr).tokens;
  };
  EXPECT_EQ(sample(7, 2), sample(7, 2));
  EXPECT_EQ(sample(7, 1), sample(7, 2)) << "results do not depend on the thread count";
  EXPECT_NE(sample(7, 2), sample(8, 2));
}

TEST(Engine, F32AndF16CachesAgree) {
  auto model = load_model(test::repo_path("models/stories260K.gguf"));
  Engine a(*model, {64, 1, GgmlType::F16}), b(*model, {64, 1, GgmlType::F32});
  std::span<const float> la = a.eval(kStoriesPrompt);
  std::vector<float> first(la.begin(), la.end());
  std::span<const float> lb = b.eval(kStoriesPrompt);
  float max_diff = 0;
  for (size_t i = 0; i < first.size(); ++i) max_diff = std::max(max_diff, std::fabs(first[i] - lb[i]));
  EXPECT_LT(max_diff, 0.05f);
  EXPECT_GT(a.kv_cache_bytes() * 2, b.kv_cache_bytes() - 1);
}

// Everything about a node that execution and tracing read: op, names, shapes, placement, parameters, byte ranges.
std::vector<std::string> describe(const Graph& g) {
  std::vector<std::string> out;
  auto tensor = [&](std::ostringstream& o, const Tensor& t) {
    // Runtime data as an offset in its buffer (two engines have two arenas); weights at their mapped address.
    const uint8_t* base = t.buffer_id >= 0 ? g.buffer(t.buffer_id).data : nullptr;
    o << t.name << " " << type_name(t.type) << " [" << t.ne[0] << "," << t.ne[1] << "," << t.ne[2] << "," << t.ne[3]
      << "] pool " << static_cast<int>(t.pool) << " buf " << t.buffer_id << " @"
      << (base ? std::to_string(t.data - base) : std::to_string(reinterpret_cast<uintptr_t>(t.data))) << "+" << t.offset
      << "/" << t.view_offset << "; ";
  };
  auto range = [](std::ostringstream& o, const ByteRange& r) {
    o << "{" << r.input << " " << static_cast<int>(r.pool) << " " << r.buffer_id << " " << r.offset << "+" << r.length
      << " pos " << r.pos_begin << ".." << r.pos_end << "} ";
  };
  for (const Node& n : g.nodes()) {
    std::ostringstream o;
    o << op_name(n.op) << " layer " << n.layer << " out ";
    tensor(o, *n.out);
    for (const Tensor* s : n.src) tensor(o, *s);
    o << "eps " << n.params.eps << " pos0 " << n.params.pos0 << " n_kv " << n.params.n_kv << " scale " << n.params.scale
      << " rope " << n.params.rope.n_dims << (n.params.rope.neox ? " neox" : "") << " kv_chunk " << n.params.kv_chunk
      << "/" << n.params.kv_chunks_max << " tiled " << n.params.tiled_tokens << " rows";
    for (int32_t r : n.params.rows) o << " " << r;
    o << " reads ";
    for (const ByteRange& r : n.reads) range(o, r);
    o << "write ";
    range(o, n.write);
    out.push_back(o.str());
  }
  return out;
}

void expect_same_graph(const Graph& patched, const Graph& built) {
  const std::vector<std::string> a = describe(patched), b = describe(built);
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) ASSERT_EQ(a[i], b[i]) << "first differing node: " << i;
}

// A step of the previous step's token count patches the previous graph (positions, token ids, attended lengths)
// instead of building a new one: the patched graph must be exactly what a fresh build gives, for single-token
// generation steps and for batches, with and without Q/K/V biases and NeoX RoPE.
TEST(Engine, UpdatedStepGraphEqualsFreshBuild) {
  test::TinyModelSpec qwen;
  qwen.arch = "qwen2";
  TinyModelFile qwen_file(qwen);
  for (const std::string& path : {test::repo_path("models/stories260K.gguf"), qwen_file.path()}) {
    SCOPED_TRACE(path);
    auto model = load_model(path);
    // One token after a prompt: `patched` updates the graph of its previous single-token step, `built` builds one.
    Engine patched(*model, {64, 2, GgmlType::F16}), built(*model, {64, 2, GgmlType::F16});
    patched.eval(std::vector<int32_t>{1, 5, 9, 14, 20});
    patched.eval(std::vector<int32_t>{30});
    const uint64_t structure = patched.last_step().graph.structure_id;
    patched.eval(std::vector<int32_t>{41});
    EXPECT_EQ(patched.last_step().graph.structure_id, structure) << "the single-token graph was not reused";
    built.eval(std::vector<int32_t>{1, 5, 9, 14, 20, 30});
    built.eval(std::vector<int32_t>{41});
    expect_same_graph(patched.last_step().graph, built.last_step().graph);

    // A batch of the previous batch's size at later positions.
    Engine patched_batch(*model, {64, 2, GgmlType::F16}), built_batch(*model, {64, 2, GgmlType::F16});
    patched_batch.eval(std::vector<int32_t>{1, 5, 9});
    patched_batch.eval(std::vector<int32_t>{7, 8, 2});
    built_batch.eval(std::vector<int32_t>{1, 5});
    built_batch.eval(std::vector<int32_t>{9});
    built_batch.eval(std::vector<int32_t>{7, 8, 2});
    expect_same_graph(patched_batch.last_step().graph, built_batch.last_step().graph);
  }
}

// One-token steps past 256 positions split the cache as llama.cpp does (docs/engine.md "Flash attention"), in the
// graph of the first one-token step, patched ever since: the split starts mid-graph (its partial results fit the
// room the graph was built with) and gives one thread's unsplit logits up to the chunks' F16 rounding.
TEST(Engine, CacheSplitStartsInAPatchedGraph) {
  auto model = load_model(test::repo_path("models/stories260K.gguf"));
  Engine two(*model, {600, 2, GgmlType::F16}), one(*model, {600, 1, GgmlType::F16});
  uint64_t structure = 0;
  int split_steps = 0;
  for (int32_t pos = 0; pos < 300; ++pos) {
    const std::vector<int32_t> token = {pos == 0 ? 1 : 3 + (pos * 37) % 500};
    std::span<const float> a = two.eval(token);
    const std::vector<float> split(a.begin(), a.end());
    std::span<const float> b = one.eval(token);
    float max_diff = 0;
    for (size_t i = 0; i < split.size(); ++i) max_diff = std::max(max_diff, std::fabs(split[i] - b[i]));
    ASSERT_LT(max_diff, 0.05f) << "position " << pos;  // the records' bar: each chunk rounds its own F16 sum
    if (pos == 0) structure = two.last_step().graph.structure_id;
    ASSERT_EQ(two.last_step().graph.structure_id, structure) << "position " << pos << ": the graph was rebuilt";
    for (const Node& n : two.last_step().graph.nodes())
      if (n.op == OpKind::FLASH_ATTN_EXT) {
        EXPECT_EQ(n.params.kv_chunks_max, 2);
        EXPECT_EQ(n.params.kv_chunk, pos < 256 ? 0 : 256) << "position " << pos;  // views of 256 and 512
        split_steps += n.params.kv_chunk > 0 && n.layer == 0;
      }
  }
  EXPECT_EQ(split_steps, 300 - 256);
}

// The patch path checks the context and the vocabulary like a fresh build, before touching the graph.
TEST(Engine, UpdatedStepGraphChecksContextAndTokens) {
  auto model = load_model(test::repo_path("models/stories260K.gguf"));
  Engine engine(*model, {7, 1, GgmlType::F16});
  engine.eval(std::vector<int32_t>{1, 5, 9, 14, 20});
  engine.eval(std::vector<int32_t>{30});
  EXPECT_THROW(engine.eval(std::vector<int32_t>{model->config.n_vocab}), Error);
  engine.eval(std::vector<int32_t>{31});
  try {
    engine.eval(std::vector<int32_t>{32});
    FAIL() << "expected a context overflow";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("context overflow"), std::string::npos) << e.what();
  }
  EXPECT_EQ(engine.n_past(), 7);
}

}  // namespace
}  // namespace tt
