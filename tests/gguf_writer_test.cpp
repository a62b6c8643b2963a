// GgufWriter round trips through real files on disk: what is written is what GgufFile::open reads back, with
// the layout the writer reports, and rewriting a real model reproduces it byte for byte.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "core/error.h"
#include "gguf/gguf.h"
#include "gguf/memory_map.h"
#include "gguf/writer.h"
#include "support/paths.h"

namespace tt {
namespace {

namespace fs = std::filesystem;

class GgufWriterTest : public testing::Test {
 protected:
  void SetUp() override {
    const auto* info = testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::temp_directory_path() / ("tt-gguf-writer-" + std::to_string(::getpid()) + "-" + info->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }

  fs::path dir_;
};

std::vector<uint8_t> read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

std::vector<uint8_t> iota_bytes(size_t n) {
  std::vector<uint8_t> b(n);
  for (size_t i = 0; i < n; ++i) b[i] = static_cast<uint8_t>(i * 31 + 5);
  return b;
}

TEST_F(GgufWriterTest, FileRoundTrip) {
  GgufWriter w;
  w.add_string("general.architecture", "llama");
  w.add_string("general.name", "round trip");
  w.add_u32("llama.block_count", 2);
  w.add_f32("llama.attention.layer_norm_rms_epsilon", 1e-5f);
  w.add_bool("tokenizer.ggml.add_bos_token", true);
  w.add_string_array("tokenizer.ggml.tokens", {"<unk>", "<s>", "</s>", "▁the"});
  w.add_f32_array("tokenizer.ggml.scores", {0.f, 0.f, 0.f, -3.5f});
  w.add_i32_array("tokenizer.ggml.token_type", {2, 3, 3, 1});
  std::vector<float> embd(8 * 4);
  for (size_t i = 0; i < embd.size(); ++i) embd[i] = 0.25f * static_cast<float>(i) - 2.f;
  w.add_tensor_f32("token_embd.weight", {8, 4}, embd);
  w.add_tensor("blk.0.attn_q.weight", GgmlType::Q4_0, {64, 8}, iota_bytes(16 * 18));
  w.add_tensor("blk.1.ffn_up.weight", GgmlType::Q6_K, {256, 2}, iota_bytes(2 * 210));
  w.add_tensor("output_norm.weight", GgmlType::F16, {8}, iota_bytes(16));
  w.write(path("model.gguf"));

  auto f = GgufFile::open(path("model.gguf"));
  EXPECT_EQ(f->path(), path("model.gguf"));
  EXPECT_GE(f->fd(), 0);
  EXPECT_EQ(f->version(), 3u);
  EXPECT_EQ(f->file_size(), fs::file_size(path("model.gguf")));
  EXPECT_EQ(read_file(path("model.gguf")), w.bytes());

  EXPECT_EQ(f->get_string("general.architecture"), "llama");
  EXPECT_EQ(f->get_string("general.name"), "round trip");
  EXPECT_EQ(f->get_uint("llama.block_count"), 2u);
  EXPECT_FLOAT_EQ(static_cast<float>(*f->get_float("llama.attention.layer_norm_rms_epsilon")), 1e-5f);
  EXPECT_EQ(f->get_bool("tokenizer.ggml.add_bos_token"), true);
  const auto* tokens = f->get_array("tokenizer.ggml.tokens", GgufValueType::STRING);
  ASSERT_TRUE(tokens);
  ASSERT_EQ(tokens->size(), 4u);
  EXPECT_EQ((*tokens)[3].str, "▁the");
  EXPECT_EQ(f->get_array("tokenizer.ggml.scores", GgufValueType::FLOAT32)->at(3).f, -3.5);
  EXPECT_EQ(f->get_array("tokenizer.ggml.token_type", GgufValueType::INT32)->at(0).i, 2);
  // Keys in the order written.
  ASSERT_EQ(f->kvs().size(), 8u);
  EXPECT_EQ(f->kvs()[2].key, "llama.block_count");

  ASSERT_EQ(f->tensors().size(), 4u);
  const GgufTensorInfo* e = f->find_tensor("token_embd.weight");
  ASSERT_TRUE(e);
  EXPECT_EQ(e->shape(), (std::vector<int64_t>{8, 4}));
  EXPECT_EQ(e->size_bytes, embd.size() * sizeof(float));
  EXPECT_EQ(std::memcmp(f->tensor_data(*e), embd.data(), e->size_bytes), 0);
  const GgufTensorInfo* q = f->find_tensor("blk.0.attn_q.weight");
  ASSERT_TRUE(q);
  EXPECT_EQ(q->type, GgmlType::Q4_0);
  EXPECT_EQ(q->size_bytes, 16u * 18);
  EXPECT_EQ(std::memcmp(f->tensor_data(*q), iota_bytes(16 * 18).data(), q->size_bytes), 0);
  const GgufTensorInfo* k = f->find_tensor("blk.1.ffn_up.weight");
  EXPECT_EQ(k->size_bytes, 420u);
  EXPECT_EQ(k->ne[2], 1);
  EXPECT_EQ(k->n_dims, 2);
  EXPECT_EQ(f->find_tensor("output_norm.weight")->offset_end(), f->file_size());
  EXPECT_EQ(f->find_tensor("nope"), nullptr);
}

TEST_F(GgufWriterTest, LayoutMatchesWhatTheReaderFinds) {
  GgufWriter w;
  w.set_alignment(64);
  w.add_string("general.name", "layout");
  w.add_u32("x", 1);
  w.add_tensor("a", GgmlType::F32, {5}, iota_bytes(20));
  w.add_tensor("b", GgmlType::Q8_0, {32, 3}, iota_bytes(3 * 34));
  w.add_tensor("c", GgmlType::I32, {1, 1, 1, 2}, iota_bytes(8));
  w.write(path("layout.gguf"));
  const GgufWriter::Layout l = w.layout();
  auto f = GgufFile::open(path("layout.gguf"));
  EXPECT_EQ(f->alignment(), 64u);
  EXPECT_EQ(f->header_end(), 24u);
  ASSERT_EQ(l.kv_offsets.size(), f->kvs().size());
  for (size_t k = 0; k < l.kv_offsets.size(); ++k) EXPECT_EQ(f->kvs()[k].offset, l.kv_offsets[k]);
  ASSERT_EQ(l.tensor_info_offsets.size(), f->tensors().size());
  for (size_t k = 0; k < l.tensor_info_offsets.size(); ++k) {
    const GgufTensorInfo& t = f->tensors()[k];
    EXPECT_EQ(t.info_offset, l.tensor_info_offsets[k]);
    EXPECT_EQ(t.offset % 64, 0u) << t.name;
    EXPECT_EQ(t.offset, f->data_offset() + t.relative_offset);
  }
  EXPECT_EQ(f->kv_end(), l.tensor_info_offsets[0]);
  EXPECT_EQ(f->data_offset(), l.data_offset);
  EXPECT_EQ(f->tensors()[1].relative_offset, 64u);
  EXPECT_EQ(f->tensors()[2].relative_offset, 192u);
  EXPECT_EQ(f->tensors()[2].shape(), (std::vector<int64_t>{1, 1, 1, 2}));

  nlohmann::json map = memory_map_json(*f);
  EXPECT_EQ(map["file"], "layout.gguf");
  EXPECT_EQ(map["alignment"], 64);
  EXPECT_EQ(map["tensors"][1]["offset_start"], f->data_offset() + 64);
  EXPECT_EQ(map["tensors"][1]["size_bytes"], 102);
  EXPECT_EQ(map["sections"]["tensor_info"], nlohmann::json::array({f->kv_end(), f->tensor_info_end()}));
}

TEST_F(GgufWriterTest, VersionTwoAndEmptyFiles) {
  GgufWriter v2(2);
  v2.add_u32("n", 9);
  v2.write(path("v2.gguf"));
  auto f = GgufFile::open(path("v2.gguf"));
  EXPECT_EQ(f->version(), 2u);
  EXPECT_EQ(f->get_uint("n"), 9u);
  EXPECT_EQ(f->data_offset(), f->file_size());

  GgufWriter empty;
  empty.write(path("empty.gguf"));
  f = GgufFile::open(path("empty.gguf"));
  EXPECT_TRUE(f->kvs().empty());
  EXPECT_TRUE(f->tensors().empty());
  EXPECT_EQ(f->file_size(), 32u);  // 24-byte header padded to the alignment
}

TEST_F(GgufWriterTest, OverwritesAndReportsUnwritablePaths) {
  GgufWriter big;
  big.add_tensor("t", GgmlType::F32, {256}, iota_bytes(1024));
  big.write(path("same.gguf"));
  GgufWriter small;
  small.add_u32("n", 1);
  small.write(path("same.gguf"));
  EXPECT_EQ(fs::file_size(path("same.gguf")), small.bytes().size());
  EXPECT_TRUE(GgufFile::open(path("same.gguf"))->tensors().empty());

  try {
    small.write(path("no/such/dir/x.gguf"));
    FAIL() << "wrote into a missing directory";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cannot write '" + path("no/such/dir/x.gguf") + "'"), std::string::npos)
        << e.what();
  }
}

TEST_F(GgufWriterTest, OpenErrorsNameThePath) {
  auto message = [](const std::string& p) {
    try {
      GgufFile::open(p);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("opened");
  };
  EXPECT_NE(message(path("missing.gguf")).find("cannot open '" + path("missing.gguf") + "'"), std::string::npos);
  EXPECT_NE(message(dir_.string()).find("is a directory"), std::string::npos);
  { std::ofstream(path("empty.gguf")); }
  EXPECT_NE(message(path("empty.gguf")).find("is empty"), std::string::npos);
  {
    std::ofstream f(path("text.gguf"));
    f << "hello, this is not a model\n";
  }
  std::string m = message(path("text.gguf"));
  EXPECT_NE(m.find(path("text.gguf") + ": not a GGUF file: bad magic 68656c6c"), std::string::npos) << m;
}

// Copy every kv and tensor of a real model into a writer: the result is the original file, byte for byte.
void expect_rewrite_identical(const std::string& model, const std::string& out) {
  auto f = GgufFile::open(model);
  GgufWriter w(f->version());
  for (const GgufKv& kv : f->kvs()) w.add_kv(kv.key, kv.value);
  for (const GgufTensorInfo& t : f->tensors())
    w.add_tensor(t.name, t.type, t.shape(), {f->tensor_data(t), t.size_bytes});
  w.write(out);
  auto g = GgufFile::open(out);
  EXPECT_EQ(g->file_size(), f->file_size());
  EXPECT_EQ(memory_map_json(*g)["tensors"], memory_map_json(*f)["tensors"]);
  EXPECT_TRUE(read_file(out) == read_file(model)) << model << " rewritten differs from the original";
}

TEST_F(GgufWriterTest, RewritingBundledModelsIsIdentity) {
  expect_rewrite_identical(test::repo_path("models/stories260K.gguf"), path("stories.gguf"));
  expect_rewrite_identical(test::repo_path("models/TinyLLama-v0.Q4_0.gguf"), path("tinyllama.gguf"));
}

// An expert tensor claiming more experts than a layer may have (here with no bytes at all: a dimension of 0) is
// refused by the memory map and `inspect`, which list a range per expert, instead of listing millions.
TEST_F(GgufWriterTest, ExpertSlabsAboveTheLimitAreRefused) {
  GgufWriter w;
  w.add_string("general.architecture", "llama");
  w.add_tensor("blk.0.ffn_up_exps.weight", GgmlType::F32, {32, 0, 100000000}, {});
  w.add_tensor("blk.1.ffn_up_exps.weight", GgmlType::F32, {32, 1, 8}, iota_bytes(32 * 8 * 4));
  w.write(path("experts.gguf"));
  auto f = GgufFile::open(path("experts.gguf"));
  try {
    memory_map_json(*f);
    ADD_FAILURE() << "mapped";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("blk.0.ffn_up_exps.weight: 100000000 experts, above the 512"),
              std::string::npos)
        << e.what();
  }
  const std::optional<ExpertSlabs> ok = expert_slabs(*f->find_tensor("blk.1.ffn_up_exps.weight"));
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->count, 8);
}

}  // namespace
}  // namespace tt
