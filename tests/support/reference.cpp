#include "support/reference.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "support/paths.h"

namespace tt::test {

std::vector<std::string> greedy_models() {
  std::vector<std::string> out;
  std::filesystem::path dir = shared_path("reference/greedy");
  if (!std::filesystem::exists(dir)) return out;
  for (const auto& e : std::filesystem::directory_iterator(dir))
    if (e.is_directory() && std::filesystem::exists(e.path() / "greedy.json")) out.push_back(e.path().filename());
  std::sort(out.begin(), out.end());
  return out;
}

static std::vector<float> read_f32(const std::filesystem::path& p) {
  std::ifstream f(p, std::ios::binary | std::ios::ate);
  if (!f) throw std::runtime_error("cannot read " + p.string());
  std::vector<float> v(static_cast<size_t>(f.tellg()) / sizeof(float));
  f.seekg(0);
  f.read(reinterpret_cast<char*>(v.data()), static_cast<std::streamsize>(v.size() * sizeof(float)));
  return v;
}

static std::filesystem::path replacement_dir() { return repo_path("tests/data/llamacpp"); }

std::vector<GreedyCase> load_greedy_file(const std::string& path) {
  const std::filesystem::path file(path), dir = file.parent_path();
  std::ifstream f(file);
  if (!f) throw std::runtime_error("cannot read " + path);
  nlohmann::json j = nlohmann::json::parse(f);
  std::vector<GreedyCase> cases;
  for (const auto& r : j) {
    GreedyCase c;
    c.index = r["index"];
    c.prompt = r["prompt"];
    c.prompt_tokens = r["prompt_tokens"].get<std::vector<int32_t>>();
    c.greedy_tokens = r["greedy_tokens"].get<std::vector<int32_t>>();
    std::string hex = r["greedy_text_hex"];
    for (size_t i = 0; i + 1 < hex.size(); i += 2)
      c.greedy_bytes += static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16));
    c.first_logits = read_f32(dir / r["first_logits"].get<std::string>());
    for (const auto& step : r["top5_per_step"]) {
      std::vector<std::pair<int32_t, float>> s;
      for (const auto& e : step) s.emplace_back(e[0].get<int32_t>(), e[1].get<float>());
      c.top5.push_back(std::move(s));
    }
    c.source = path;
    if (r.contains("routing")) {
      for (const auto& step : r["routing"]) {
        if (step["step"].get<size_t>() != c.routing.size())
          throw std::runtime_error(path + ": routing steps out of order");
        auto& layers = c.routing.emplace_back();
        for (const auto& l : step["layers"])
          layers.push_back({l["experts"].get<std::vector<std::vector<int32_t>>>(),
                            l["weights"].get<std::vector<std::vector<float>>>(),
                            l["margin"].get<std::vector<float>>()});
      }
    }
    cases.push_back(std::move(c));
  }
  return cases;
}

std::vector<GreedyCase> load_greedy_cases(const std::string& model) {
  std::vector<GreedyCase> cases = load_greedy_file(shared_path("reference/greedy/" + model + "/greedy.json"));
  const std::filesystem::path replacements = replacement_dir() / model / "greedy.json";
  if (!std::filesystem::exists(replacements)) return cases;
  for (GreedyCase& r : load_greedy_file(replacements.string())) {
    auto it = std::find_if(cases.begin(), cases.end(), [&](const GreedyCase& c) { return c.index == r.index; });
    if (it == cases.end()) throw std::runtime_error(replacements.string() + ": no shared record to replace");
    if (it->prompt_tokens != r.prompt_tokens)
      throw std::runtime_error(replacements.string() + ": prompt tokens differ from the shared record's");
    *it = std::move(r);
  }
  return cases;
}

std::vector<std::string> replaced_greedy_models() {
  std::vector<std::string> out;
  if (!std::filesystem::exists(replacement_dir())) return out;
  for (const auto& e : std::filesystem::directory_iterator(replacement_dir()))
    if (std::filesystem::exists(e.path() / "greedy.json")) out.push_back(e.path().filename());
  std::sort(out.begin(), out.end());
  return out;
}

LlamaCppBuild reference_build(const std::string& model) {
  static const char* const kAmd[] = {"synth-mixtral-256.Q4_K_M", "synth-qwen2moe-256.Q8_0", "synth-olmoe-256.Q4_K_M",
                                     "synth-qwen3-256.Q8_0", "synth-qwen3moe-256.Q4_K_M"};
  for (const char* m : kAmd)
    if (model == m) return LlamaCppBuild::kAmdAvx512;
  return LlamaCppBuild::kIntelAvx512Fp16;
}

}  // namespace tt::test
