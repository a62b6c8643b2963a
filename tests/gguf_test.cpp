// The GGUF reader on real files: memory maps agree exactly with llama.cpp's gguf-py (shared/reference/memory-map).
#include "gguf/gguf.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "gguf/memory_map.h"
#include "support/paths.h"

namespace tt {
namespace {

nlohmann::json read_json(const std::string& path) {
  std::ifstream f(path);
  return nlohmann::json::parse(f);
}

// Invariants every memory map must hold: sorted, non-overlapping, padding only for alignment, inside the file.
void check_invariants(const nlohmann::json& map) {
  uint64_t prev_end = map["data_offset"].get<uint64_t>();
  uint64_t alignment = map["alignment"].get<uint64_t>();
  uint64_t padding = 0, sizes = 0;
  for (const auto& t : map["tensors"]) {
    uint64_t start = t["offset_start"], end = t["offset_end"], size = t["size_bytes"];
    ASSERT_GE(start, prev_end) << t["name"];
    ASSERT_EQ(end - start, size) << t["name"];
    ASSERT_EQ(start % alignment, 0u) << t["name"];
    ASSERT_LT(start - prev_end, alignment) << "gap before " << t["name"];
    padding += start - prev_end;
    sizes += size;
    prev_end = end;
  }
  uint64_t file_size = map["file_size"];
  ASSERT_LE(prev_end, file_size);
  EXPECT_EQ(sizes + padding + (file_size - prev_end), file_size - map["data_offset"].get<uint64_t>());
  EXPECT_LT(file_size - prev_end, alignment) << "bytes after the last tensor";
}

TEST(GgufReader, BundledModelsOpen) {
  for (const char* name : {"models/stories260K.gguf", "models/TinyLLama-v0.Q4_0.gguf"}) {
    auto f = GgufFile::open(test::repo_path(name));
    EXPECT_EQ(f->get_string("general.architecture"), "llama") << name;
    EXPECT_GT(f->tensors().size(), 0u);
    check_invariants(memory_map_json(*f));
  }
}

TEST(GgufReader, InMemoryHoldsTheFilesBytesReadOnly) {
  const std::string path = test::repo_path("models/stories260K.gguf");
  auto mapped = GgufFile::open(path);
  auto in_memory = GgufFile::open(path, FileResidency::IN_MEMORY);
  EXPECT_EQ(mapped->residency(), FileResidency::MAPPED);
  EXPECT_EQ(in_memory->residency(), FileResidency::IN_MEMORY);
  ASSERT_EQ(in_memory->bytes().size(), std::filesystem::file_size(path));
  ASSERT_NE(in_memory->bytes().data(), mapped->bytes().data());
  EXPECT_TRUE(std::equal(in_memory->bytes().begin(), in_memory->bytes().end(), mapped->bytes().begin()));
  EXPECT_EQ(memory_map_json(*in_memory), memory_map_json(*mapped));
  // Weights are never written: the copy is read-only like the mapping.
  uint8_t* first = const_cast<uint8_t*>(in_memory->bytes().data());
  EXPECT_DEATH(*first ^= 1, "");
  EXPECT_THROW(GgufFile::open(path + ".missing", FileResidency::IN_MEMORY), Error);
}

TEST(GgufReader, MemoryMapsMatchReference) {
  TT_REQUIRE_SHARED();
  int checked = 0, expert_tensors = 0;
  for (const auto& entry : std::filesystem::directory_iterator(test::shared_path("reference/memory-map"))) {
    std::string model = entry.path().stem().string();
    SCOPED_TRACE(model);
    nlohmann::json ref = read_json(entry.path().string());
    auto f = GgufFile::open(test::shared_path("models/" + model + ".gguf"));
    nlohmann::json ours = memory_map_json(*f);
    EXPECT_EQ(ours["file_size"], ref["file_size"]);
    EXPECT_EQ(ours["data_offset"], ref["data_offset"]);
    EXPECT_EQ(ours["alignment"], ref["alignment"]);
    ASSERT_EQ(ours["tensors"].size(), ref["tensors"].size());
    for (size_t k = 0; k < ref["tensors"].size(); ++k) {
      const auto& r = ref["tensors"][k];
      const auto& o = ours["tensors"][k];
      ASSERT_EQ(o["name"], r["name"]) << "tensor " << k;
      EXPECT_EQ(o["type"], r["type"]) << r["name"];
      EXPECT_EQ(o["shape"], r["shape"]) << r["name"];
      EXPECT_EQ(o["offset_start"], r["offset_start"]) << r["name"];
      EXPECT_EQ(o["offset_end"], r["offset_end"]) << r["name"];
      EXPECT_EQ(o["size_bytes"], r["size_bytes"]) << r["name"];
      // 3-D expert tensors: one contiguous slab per expert, tiling the tensor's bytes.
      const bool exps = o["component"].get<std::string>().ends_with("_exps");
      EXPECT_EQ(o.contains("experts"), exps && r["shape"].size() == 3) << r["name"];
      if (o.contains("experts")) {
        const auto& x = o["experts"];
        const uint64_t start = r["offset_start"], n = r["shape"][2], slab = r["size_bytes"].get<uint64_t>() / n;
        ASSERT_EQ(x["count"], n) << r["name"];
        EXPECT_EQ(x["bytes_per_expert"], slab) << r["name"];
        ASSERT_EQ(x["ranges"].size(), n) << r["name"];
        for (uint64_t e = 0; e < n; ++e)
          EXPECT_EQ(x["ranges"][e], nlohmann::json({start + e * slab, start + (e + 1) * slab})) << r["name"];
        EXPECT_EQ(x["ranges"][n - 1][1], r["offset_end"]) << r["name"];
        ++expert_tensors;
      }
    }
    check_invariants(ours);
    ++checked;
  }
  EXPECT_GE(checked, 20);
  EXPECT_EQ(expert_tensors, 4 * 4 * 3);  // four MoE models, 4 layers of gate/up/down experts
}

TEST(GgufReader, TensorRoles) {
  TensorRole q = tensor_role("blk.11.attn_q.weight");
  EXPECT_EQ(q.layer, 11);
  EXPECT_EQ(q.category, "attention");
  EXPECT_EQ(q.component, "q");
  TensorRole qb = tensor_role("blk.0.attn_q.bias");
  EXPECT_EQ(qb.component, "q_bias");
  TensorRole emb = tensor_role("token_embd.weight");
  EXPECT_FALSE(emb.layer.has_value());
  EXPECT_EQ(emb.category, "embedding");
  EXPECT_EQ(tensor_role("blk.2.ffn_down.weight").category, "ffn");
  EXPECT_EQ(tensor_role("output_norm.weight").category, "norm");
  EXPECT_EQ(tensor_role("output.weight").category, "output");
  EXPECT_EQ(tensor_role("blk.1.ffn_gate_inp.weight").component, "router");
  EXPECT_EQ(tensor_role("blk.1.ffn_down_exps.weight").component, "down_exps");
  EXPECT_EQ(tensor_role("blk.1.ffn_up_shexp.weight").category, "ffn");
}

}  // namespace
}  // namespace tt
