#include "model/weights.h"

#include <fmt/format.h>

#include <cstring>
#include <set>
#include <vector>

#include "core/error.h"
#include "quant/quant.h"

namespace tt {
namespace {

std::string dims_string(const std::vector<int64_t>& d) {
  std::string s = "[";
  for (size_t i = 0; i < d.size(); ++i) s += (i ? ", " : "") + std::to_string(d[i]);
  return s + "]";
}

class Binder {
 public:
  Binder(const GgufFile& f, ModelWeights& w) : f_(f), w_(w) {}

  // Required unless `optional`; shape in ggml order.
  const Tensor* bind(const std::string& name, std::vector<int64_t> shape, bool optional = false, int layer = -1) {
    const GgufTensorInfo* info = f_.find_tensor(name);
    if (!info) {
      if (optional) return nullptr;
      fail("{}: required tensor '{}' is missing", f_.path(), name);
    }
    std::vector<int64_t> got = info->shape();
    while (got.size() > shape.size() && got.back() == 1) got.pop_back();
    if (got != shape)
      fail("{}: {}: expected {}, got {}", f_.path(), name, dims_string(shape), dims_string(info->shape()));
    if (!find_kernels(info->type))
      fail("{}: tensor '{}' has type {}, which this engine does not implement", f_.path(), name, type_name(info->type));
    used_.insert(name);
    Tensor& t = w_.views.emplace_back();
    t.name = name;
    t.type = info->type;
    for (int d = 0; d < 4; ++d) t.ne[d] = info->ne[d];
    t.pool = Pool::MODEL_FILE;
    t.offset = info->offset;
    t.data = const_cast<uint8_t*>(f_.tensor_data(*info));
    t.layer = layer;
    return &t;
  }

  // Vectors applied elementwise (norm weights, biases) must be F32.
  const Tensor* bind_f32(const std::string& name, std::vector<int64_t> shape, bool optional = false, int layer = -1) {
    const Tensor* t = bind(name, std::move(shape), optional, layer);
    if (t && t->type != GgmlType::F32)
      fail("{}: tensor '{}' has type {}, expected F32", f_.path(), name, type_name(t->type));
    return t;
  }

  // A 3-D expert tensor [ne0, ne1, n_expert]: the third dimension must be the model's expert count.
  const Tensor* bind_experts(const std::string& name, int64_t ne0, int64_t ne1, const ModelConfig& c, int layer) {
    if (const GgufTensorInfo* info = f_.find_tensor(name); info && info->ne[2] != c.n_expert)
      fail("{}: {}: {} experts (third dimension of {}) but {}.expert_count is {}", f_.path(), name, info->ne[2],
           dims_string(info->shape()), c.arch_name, c.n_expert);
    return bind(name, {ne0, ne1, c.n_expert}, false, layer);
  }

  std::vector<std::string> unused() const {
    std::vector<std::string> out;
    for (const GgufTensorInfo& t : f_.tensors())
      if (!used_.count(t.name)) out.push_back(t.name);
    return out;
  }

 private:
  const GgufFile& f_;
  ModelWeights& w_;
  std::set<std::string> used_;
};

}  // namespace

ModelWeights bind_weights(const GgufFile& f, ModelConfig& c) {
  ModelWeights w;
  Binder b(f, w);
  const GgufTensorInfo* embd = f.find_tensor("token_embd.weight");
  if (!embd) fail("{}: required tensor 'token_embd.weight' is missing", f.path());
  c.n_vocab = static_cast<int32_t>(embd->ne[1]);
  const int64_t E = c.n_embd, KV = c.n_embd_kv(), F = c.n_ff, V = c.n_vocab;
  w.token_embd = b.bind("token_embd.weight", {E, V});
  w.output_norm = b.bind_f32("output_norm.weight", {E});
  w.output = b.bind("output.weight", {E, V}, /*optional=*/true);
  if (!w.output) {
    w.output = w.token_embd;
    w.output_tied = true;
    w.notes.push_back("output.weight absent: output tied to token_embd.weight");
  }
  w.rope_freqs = b.bind_f32("rope_freqs.weight", {c.n_rot / 2}, /*optional=*/true);
  if (w.rope_freqs) w.notes.push_back("rope_freqs.weight present: per-dimension rope frequency factors");
  const bool biases = c.arch == Architecture::QWEN2 || c.arch == Architecture::QWEN2MOE;
  const int64_t Q = c.n_embd_q();
  for (int il = 0; il < c.n_layer; ++il) {
    const std::string p = fmt::format("blk.{}.", il);
    LayerWeights& l = w.layers.emplace_back();
    l.attn_norm = b.bind_f32(p + "attn_norm.weight", {E}, false, il);
    if (const GgufTensorInfo* q = f.find_tensor(p + "attn_q.weight"); q && q->ne[1] % c.head_dim != 0)
      fail("{}: {}attn_q.weight: its {} outputs are not a whole number of heads of {} ({}.attention.key_length)",
           f.path(), p, q->ne[1], c.head_dim, c.arch_name);
    l.wq = b.bind(p + "attn_q.weight", {E, Q}, false, il);
    l.wk = b.bind(p + "attn_k.weight", {E, KV}, false, il);
    l.wv = b.bind(p + "attn_v.weight", {E, KV}, false, il);
    l.wo = b.bind(p + "attn_output.weight", {Q, E}, false, il);
    // qwen2 requires Q/K/V biases; llama files may carry them too (optional).
    l.bq = b.bind_f32(p + "attn_q.bias", {Q}, !biases, il);
    l.bk = b.bind_f32(p + "attn_k.bias", {KV}, !biases, il);
    l.bv = b.bind_f32(p + "attn_v.bias", {KV}, !biases, il);
    if (c.qk_norm_per_head || c.qk_norm_whole) {
      l.q_norm = b.bind_f32(p + "attn_q_norm.weight", {c.qk_norm_per_head ? c.head_dim : Q}, false, il);
      l.k_norm = b.bind_f32(p + "attn_k_norm.weight", {c.qk_norm_per_head ? c.head_dim : KV}, false, il);
    }
    l.ffn_norm = b.bind_f32(p + "ffn_norm.weight", {E}, false, il);
    if (c.n_expert == 0) {
      l.ffn_gate = b.bind(p + "ffn_gate.weight", {E, F}, false, il);
      l.ffn_up = b.bind(p + "ffn_up.weight", {E, F}, false, il);
      l.ffn_down = b.bind(p + "ffn_down.weight", {F, E}, false, il);
      continue;
    }
    const int64_t FE = c.n_ff_exp, NE = c.n_expert;
    if (!f.find_tensor(p + "ffn_gate_inp.weight"))
      fail("{}: required tensor '{}ffn_gate_inp.weight' (the router of a model with {}.expert_count {}) is missing",
           f.path(), p, c.arch_name, c.n_expert);
    l.ffn_gate_inp = b.bind(p + "ffn_gate_inp.weight", {E, NE}, false, il);
    l.ffn_gate_exps = b.bind_experts(p + "ffn_gate_exps.weight", E, FE, c, il);
    l.ffn_up_exps = b.bind_experts(p + "ffn_up_exps.weight", E, FE, c, il);
    l.ffn_down_exps = b.bind_experts(p + "ffn_down_exps.weight", FE, E, c, il);
    if (c.n_ff_shexp > 0) {
      const int64_t FS = c.n_ff_shexp;
      l.ffn_gate_inp_shexp = b.bind(p + "ffn_gate_inp_shexp.weight", {E}, false, il);
      l.ffn_gate_shexp = b.bind(p + "ffn_gate_shexp.weight", {E, FS}, false, il);
      l.ffn_up_shexp = b.bind(p + "ffn_up_shexp.weight", {E, FS}, false, il);
      l.ffn_down_shexp = b.bind(p + "ffn_down_shexp.weight", {FS, E}, false, il);
    }
  }
  std::vector<std::string> unused = b.unused();
  if (!unused.empty())
    fail("{}: {} tensor(s) not used by the {} architecture, e.g. '{}' (wrong architecture or layer count?)", f.path(),
         unused.size(), c.arch_name, unused.front());
  return w;
}

int group_weight_rows(GgufFile& file, ModelWeights& w) {
  if (!file.rewritable()) return 0;
  std::set<const Tensor*> matrices;
  for (const LayerWeights& l : w.layers)
    for (const Tensor* t : {l.wq, l.wk, l.wv, l.wo, l.ffn_gate, l.ffn_up, l.ffn_down, l.ffn_gate_inp, l.ffn_gate_exps,
                            l.ffn_up_exps, l.ffn_down_exps, l.ffn_gate_shexp, l.ffn_up_shexp, l.ffn_down_shexp})
      if (t) matrices.insert(t);
  if (!w.output_tied) matrices.insert(w.output);
  std::vector<Tensor*> chosen;
  for (Tensor& t : w.views) {
    const QuantKernels* k = find_kernels(t.type);
    if (matrices.count(&t) && k && k->groups_rows(t.ne[0], t.ne[1])) chosen.push_back(&t);
  }
  if (chosen.empty()) return 0;
  file.rewrite([&](uint8_t* data) {
    std::vector<uint8_t> group;
    for (Tensor* t : chosen) {
      const RowGroups& g = *find_kernels(t->type)->row_groups;
      const uint64_t row = t->row_size();
      group.resize(kRowGroup * row);
      for (int64_t e = 0; e < t->ne[2]; ++e)
        for (int64_t r = 0; r + kRowGroup <= t->ne[1]; r += kRowGroup) {
          uint8_t* rows = data + t->offset + static_cast<uint64_t>(e) * t->slab_stride() + r * row;
          g.group(rows, group.data(), t->ne[0]);
          std::memcpy(rows, group.data(), group.size());
        }
      t->rows_grouped = true;
    }
  });
  return static_cast<int>(chosen.size());
}

}  // namespace tt
