#include "analysis/diff.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <tuple>
#include <unordered_map>

namespace tt::analysis {

using nlohmann::json;

namespace {

struct StepOps {
  std::vector<const trace::OpRecord*> ops;
  std::unordered_map<std::string, const trace::OpRecord*> by_key;  // "name#k"
};

std::map<uint32_t, StepOps> index_ops(const trace::TraceContents& t) {
  std::map<uint32_t, StepOps> out;
  std::map<uint32_t, std::unordered_map<std::string, int>> seen;
  for (const trace::OpRecord& o : t.ops) {
    StepOps& s = out[o.step];
    s.ops.push_back(&o);
    const int k = seen[o.step][o.name]++;
    s.by_key.emplace(fmt::format("{}#{}", o.name, k), &o);
  }
  return out;
}

uint64_t dur(const trace::OpRecord& o) { return o.end_ns > o.start_ns ? o.end_ns - o.start_ns : 0; }

uint64_t bytes_read(const trace::OpRecord& o, int pool = -1) {
  uint64_t b = 0;
  for (const auto& in : o.inputs)
    for (const auto& r : in.ranges)
      if (pool < 0 || static_cast<int>(r.pool) == pool) b += r.length;
  return b;
}

double scaled_diff(double a, double b) {
  if (std::isnan(a) && std::isnan(b)) return 0;
  return std::fabs(a - b) / std::max({1.0, std::fabs(a), std::fabs(b)});
}

json stats_json(const trace::ValueStats& s) {
  return {{"min", s.min},       {"max", s.max},       {"mean", s.mean},
          {"nan", s.nan_count}, {"inf", s.inf_count}, {"hash", fmt::format("{:016x}", s.hash)}};
}

json run_info(const RunData& r) {
  json j = {{"run_dir", r.dir}};
  const RunInfo& i = r.info;
  if (i.has_model) j["model"] = i.model_file;
  if (i.has_options) {
    j["threads"] = i.threads.value_or(0);
    if (i.sampling) {
      j["temperature"] = i.sampling->temperature;
      j["seed"] = i.sampling->seed;
    }
  }
  if (r.run.contains("generated_text")) j["generated_text"] = i.generated_text;
  bool values = false;
  for (const auto& o : r.trace.ops)
    if (o.has_stats) {
      values = true;
      break;
    }
  j["has_values"] = values;
  return j;
}

// Routing of two mixture-of-experts runs, token by token: a (token, layer) decision flips when the two runs chose
// different expert sets for the same (step, position) in that layer (the same set in another slot order is no flip).
// The input token at each position, from steps.jsonl (-1 where no step gives it).
std::vector<int64_t> tokens_by_position(const RunData& r) {
  std::vector<int64_t> out;
  for (const RunStep& s : r.steps)
    for (size_t i = 0; i < s.input_tokens.size(); ++i) {
      const size_t pos = static_cast<size_t>(s.pos_begin) + i;
      if (s.pos_begin < 0) break;
      if (pos >= out.size()) out.resize(pos + 1, -1);
      out[pos] = s.input_tokens[i];
    }
  return out;
}

json routing_diff(const RunData& a, const RunData& b) {
  if (a.trace.routing.empty() && b.trace.routing.empty()) return nullptr;
  if (a.trace.routing.empty() || b.trace.routing.empty())
    return {{"available", false},
            {"note", fmt::format("only {} has expert routing (a mixture-of-experts run); nothing to compare",
                                 a.trace.routing.empty() ? "B" : "A")}};
  using Key = std::tuple<uint32_t, int32_t, int>;  // step, position, layer
  std::map<Key, const trace::RoutingRecord*> rb;
  for (const trace::RoutingRecord& y : b.trace.routing) rb.emplace(Key(y.step, y.token_pos, y.layer), &y);
  struct Layer {
    uint64_t compared = 0, flips = 0;
  };
  std::map<int, Layer> layers;
  uint64_t compared = 0, flips = 0, same_input_flips = 0, reordered = 0, only_a = 0;
  const trace::RoutingRecord *first_a = nullptr, *first_b = nullptr;
  auto sorted = [](std::vector<uint32_t> v) {
    std::sort(v.begin(), v.end());
    return v;
  };
  // Positions before `same_prefix` hold the same input tokens in both runs: a flip there comes from the numbers,
  // not from another token.
  const std::vector<int64_t> ta = tokens_by_position(a), tb = tokens_by_position(b);
  size_t same_prefix = 0;
  while (same_prefix < std::min(ta.size(), tb.size()) && ta[same_prefix] >= 0 && ta[same_prefix] == tb[same_prefix])
    ++same_prefix;
  std::set<Key> matched;
  for (const trace::RoutingRecord& x : a.trace.routing) {
    const Key key(x.step, x.token_pos, x.layer);
    const auto it = rb.find(key);
    if (it == rb.end()) {
      ++only_a;
      continue;
    }
    matched.insert(key);
    const trace::RoutingRecord& y = *it->second;
    ++compared;
    Layer& l = layers[x.layer];
    ++l.compared;
    if (sorted(x.experts) == sorted(y.experts)) {
      reordered += x.experts != y.experts;
      continue;
    }
    ++flips;
    ++l.flips;
    if (x.token_pos >= 0 && static_cast<size_t>(x.token_pos) < same_prefix) ++same_input_flips;
    // Records come by step, then layer, then position: the first token is the least (step, position).
    if (!first_a || std::pair(x.step, x.token_pos) < std::pair(first_a->step, first_a->token_pos) ||
        (std::pair(x.step, x.token_pos) == std::pair(first_a->step, first_a->token_pos) && x.layer < first_a->layer))
      first_a = &x, first_b = &y;
  }
  json per_layer = json::array();
  for (const auto& [layer, l] : layers)
    per_layer.push_back({{"layer", layer},
                         {"compared", l.compared},
                         {"flips", l.flips},
                         {"flip_rate", l.compared ? static_cast<double>(l.flips) / l.compared : 0.0}});
  json first = nullptr;
  if (first_a) {
    uint64_t layers_differing = 0;
    for (const trace::RoutingRecord& x : a.trace.routing) {
      if (x.step != first_a->step || x.token_pos != first_a->token_pos) continue;
      const auto it = rb.find(Key(x.step, x.token_pos, x.layer));
      if (it != rb.end() && sorted(x.experts) != sorted(it->second->experts)) ++layers_differing;
    }
    first = {{"step", first_a->step},         {"position", first_a->token_pos},
             {"layer", first_a->layer},       {"a", first_a->experts},
             {"b", first_b->experts},         {"a_weights", first_a->weights},
             {"b_weights", first_b->weights}, {"layers_differing", layers_differing}};
  }
  return {{"available", true},
          {"compared", compared},
          {"flips", flips},
          {"same_token_positions", same_prefix},
          {"flips_with_same_tokens", same_input_flips},
          {"reordered_only", reordered},
          {"only_in_a", only_a},
          {"only_in_b", b.trace.routing.size() - matched.size()},
          {"first_differing_token", first},
          {"per_layer", per_layer}};
}

}  // namespace

json diff_runs(const RunData& a, const RunData& b, const DiffOptions& opt) {
  json d = {{"format", "tensortrace.diff"}, {"version", 1}, {"tolerance", opt.tolerance}};
  d["a"] = run_info(a);
  d["b"] = run_info(b);

  // Tokens, step by step.
  json tokens = json::array();
  int first_token_diff = -1, n_token_diff = 0;
  const size_t n_steps = std::min(a.trace.steps.size(), b.trace.steps.size());
  for (size_t i = 0; i < n_steps; ++i) {
    const auto& x = a.trace.steps[i];
    const auto& y = b.trace.steps[i];
    const bool same = x.token == y.token;
    if (!same) {
      ++n_token_diff;
      if (first_token_diff < 0) first_token_diff = static_cast<int>(x.step);
    }
    json row = {{"step", x.step}, {"a", x.token}, {"b", y.token}, {"same", same}};
    if (i < a.steps.size() && a.steps[i].json.contains("token_text")) row["a_text"] = a.steps[i].json["token_text"];
    if (i < b.steps.size() && b.steps[i].json.contains("token_text")) row["b_text"] = b.steps[i].json["token_text"];
    tokens.push_back(row);
  }
  d["tokens"] = {{"steps_compared", n_steps},
                 {"steps_a", a.trace.steps.size()},
                 {"steps_b", b.trace.steps.size()},
                 {"differing_steps", n_token_diff},
                 {"first_differing_step", first_token_diff >= 0 ? json(first_token_diff) : json(nullptr)},
                 {"steps", tokens}};

  // Ops aligned by name.
  const auto ia = index_ops(a.trace), ib = index_ops(b.trace);
  const bool values = d["a"]["has_values"].get<bool>() && d["b"]["has_values"].get<bool>();
  uint64_t matched = 0, only_a = 0, only_b = 0, divergent = 0, compared = 0;
  json first = nullptr;
  json per_step = json::array();
  struct Agg {
    std::string op;
    int layer = -1;
    uint64_t a_ns = 0, b_ns = 0, a_bytes = 0, b_bytes = 0, a_file = 0, b_file = 0, n = 0;
  };
  std::map<std::string, Agg> by_name;
  std::map<std::string, Agg> by_kind;
  uint64_t ta = 0, tb = 0;
  for (const auto& [step, sa] : ia) {
    auto itb = ib.find(step);
    if (itb == ib.end()) {
      only_a += sa.ops.size();
      continue;
    }
    const StepOps& sb = itb->second;
    uint64_t step_div = 0;
    json step_first = nullptr;
    std::unordered_map<std::string, int> seen;
    for (const trace::OpRecord* x : sa.ops) {
      const std::string key = fmt::format("{}#{}", x->name, seen[x->name]++);
      auto m = sb.by_key.find(key);
      if (m == sb.by_key.end()) {
        ++only_a;
        continue;
      }
      const trace::OpRecord* y = m->second;
      ++matched;
      if (!op_is_view(x->op)) {
        Agg& g = by_name[x->name];
        g.op = op_name(x->op);
        g.layer = x->layer;
        g.a_ns += dur(*x), g.b_ns += dur(*y);
        g.a_bytes += bytes_read(*x), g.b_bytes += bytes_read(*y);
        g.a_file += bytes_read(*x, 0), g.b_file += bytes_read(*y, 0);
        ++g.n;
        Agg& k = by_kind[op_name(x->op)];
        k.op = op_name(x->op);
        k.a_ns += dur(*x), k.b_ns += dur(*y);
        k.a_bytes += bytes_read(*x), k.b_bytes += bytes_read(*y);
        k.a_file += bytes_read(*x, 0), k.b_file += bytes_read(*y, 0);
        ++k.n;
        ta += dur(*x), tb += dur(*y);
      }
      if (!values || !x->has_stats || !y->has_stats) continue;
      ++compared;
      const trace::ValueStats &p = x->stats, &q = y->stats;
      double worst = 0;
      bool differs;
      if (opt.tolerance <= 0) {
        differs = p.hash != q.hash;
        worst = std::max({scaled_diff(p.min, q.min), scaled_diff(p.max, q.max), scaled_diff(p.mean, q.mean)});
      } else {
        worst = std::max({scaled_diff(p.min, q.min), scaled_diff(p.max, q.max), scaled_diff(p.mean, q.mean)});
        differs = worst > opt.tolerance || p.nan_count != q.nan_count || p.inf_count != q.inf_count;
      }
      if (!differs) continue;
      ++divergent;
      ++step_div;
      json info = {{"step", step},       {"node_a", x->node},    {"node_b", y->node},
                   {"name", x->name},    {"op", op_name(x->op)}, {"layer", x->layer},
                   {"a", stats_json(p)}, {"b", stats_json(q)},   {"max_scaled_difference", worst}};
      if (step_first.is_null()) step_first = info;
      if (first.is_null()) first = info;
    }
    uint64_t a_ns = 0, b_ns = 0;
    for (const auto* x : sa.ops) a_ns += dur(*x);
    for (const auto* y : sb.ops) b_ns += dur(*y);
    per_step.push_back({{"step", step},
                        {"ops_a", sa.ops.size()},
                        {"ops_b", sb.ops.size()},
                        {"divergent_ops", step_div},
                        {"first_divergent", step_first.is_null() ? json(nullptr) : json(step_first["name"])},
                        {"a_op_ns", a_ns},
                        {"b_op_ns", b_ns}});
  }
  // Ops of B with no partner in A.
  for (const auto& [step, sb] : ib) {
    auto ita = ia.find(step);
    if (ita == ia.end()) {
      only_b += sb.ops.size();
      continue;
    }
    for (const auto& [key, op] : sb.by_key)
      if (!ita->second.by_key.count(key)) ++only_b;
  }
  d["alignment"] = {{"matched_ops", matched}, {"only_in_a", only_a}, {"only_in_b", only_b}};
  json values_j = {
      {"available", values}, {"ops_compared", compared}, {"divergent_ops", divergent}, {"first_divergent_op", first}};
  if (!values)
    values_j["note"] = fmt::format(
        "output values need --trace-values in both runs (A: {}, B: {}); only tokens, times and bytes are compared",
        d["a"]["has_values"].get<bool>() ? "yes" : "no", d["b"]["has_values"].get<bool>() ? "yes" : "no");
  else if (first.is_null())
    values_j["note"] = opt.tolerance > 0 ? fmt::format("every op's output agrees within {}", opt.tolerance)
                                         : "every op's output is bit-identical (same hash)";
  d["values"] = values_j;
  d["steps"] = per_step;
  if (json r = routing_diff(a, b); !r.is_null()) d["routing"] = std::move(r);

  // Time and bytes.
  auto agg_json = [](const std::string& name, const Agg& g) {
    return json{{"name", name},
                {"op", g.op},
                {"layer", g.layer},
                {"count", g.n},
                {"a_ns", g.a_ns},
                {"b_ns", g.b_ns},
                {"diff_ns", static_cast<int64_t>(g.b_ns) - static_cast<int64_t>(g.a_ns)},
                {"ratio", g.a_ns ? static_cast<double>(g.b_ns) / g.a_ns : 0.0},
                {"a_bytes", g.a_bytes},
                {"b_bytes", g.b_bytes},
                {"a_file_bytes", g.a_file},
                {"b_file_bytes", g.b_file}};
  };
  std::vector<json> names;
  for (const auto& [n, g] : by_name) names.push_back(agg_json(n, g));
  std::sort(names.begin(), names.end(), [](const json& x, const json& y) {
    return std::llabs(x["diff_ns"].get<int64_t>()) > std::llabs(y["diff_ns"].get<int64_t>());
  });
  json top_time = json::array();
  for (size_t i = 0; i < names.size() && static_cast<int>(i) < opt.top; ++i) top_time.push_back(names[i]);
  json byte_diffs = json::array();
  uint64_t n_byte_diff = 0;
  for (const json& n : names)
    if (n["a_bytes"] != n["b_bytes"]) {
      ++n_byte_diff;
      if (static_cast<int>(byte_diffs.size()) < opt.top) byte_diffs.push_back(n);
    }
  json kinds = json::array();
  for (const auto& [k, g] : by_kind) kinds.push_back(agg_json(k, g));
  d["time"] = {{"a_op_ns", ta},
               {"b_op_ns", tb},
               {"ratio", ta ? static_cast<double>(tb) / ta : 0.0},
               {"op_kinds", kinds},
               {"largest_differences", top_time}};
  d["bytes"] = {{"ops_with_different_bytes", n_byte_diff}, {"largest", byte_diffs}};
  return d;
}

std::string render_diff_text(const json& d) {
  std::string o;
  auto side = [&](const char* k) {
    const json& r = d[k];
    std::string s = fmt::format("  {}: {}", k == std::string("a") ? "A" : "B", r["run_dir"].get<std::string>());
    if (r.contains("model")) s += fmt::format(" ({}", r["model"].get<std::string>());
    if (r.contains("threads")) s += fmt::format(", {} threads", r["threads"].get<int>());
    if (r.contains("temperature"))
      s += fmt::format(", temp {}, seed {}", r["temperature"].get<double>(), r["seed"].dump());
    if (r.contains("model")) s += ")";
    return s + "\n";
  };
  o += "diff\n" + side("a") + side("b");

  const json& t = d["tokens"];
  o += "\n== Tokens ==\n";
  if (t["first_differing_step"].is_null())
    o += fmt::format("  identical over {} steps (A {} steps, B {} steps)\n", t["steps_compared"].get<size_t>(),
                     t["steps_a"].get<size_t>(), t["steps_b"].get<size_t>());
  else {
    o += fmt::format("  {} of {} steps chose different tokens; first at step {}\n", t["differing_steps"].get<int>(),
                     t["steps_compared"].get<size_t>(), t["first_differing_step"].get<int>());
    int shown = 0;
    for (const json& s : t["steps"]) {
      if (s["same"].get<bool>()) continue;
      if (shown++ >= 10) break;
      o += fmt::format("    step {:>3}: A {} {:<14} B {} {}\n", s["step"].get<uint32_t>(), s["a"].get<int>(),
                       s.contains("a_text") ? s["a_text"].dump() : "", s["b"].get<int>(),
                       s.contains("b_text") ? s["b_text"].dump() : "");
    }
  }
  const json& al = d["alignment"];
  o += fmt::format("\n== Ops == aligned by name: {} matched, {} only in A, {} only in B\n",
                   al["matched_ops"].get<uint64_t>(), al["only_in_a"].get<uint64_t>(), al["only_in_b"].get<uint64_t>());
  const json& v = d["values"];
  if (!v["available"].get<bool>())
    o += "  " + v["note"].get<std::string>() + "\n";
  else if (v["first_divergent_op"].is_null())
    o += fmt::format("  {} ops compared: {}\n", v["ops_compared"].get<uint64_t>(), v["note"].get<std::string>());
  else {
    const json& f = v["first_divergent_op"];
    o += fmt::format("  {} of {} ops differ (tolerance {}); first: step {} node {} {} '{}' layer {}\n",
                     v["divergent_ops"].get<uint64_t>(), v["ops_compared"].get<uint64_t>(),
                     d["tolerance"].get<double>(), f["step"].get<uint32_t>(), f["node_a"].get<uint32_t>(),
                     f["op"].get<std::string>(), f["name"].get<std::string>(), f["layer"].get<int>());
    for (const char* k : {"a", "b"})
      o += fmt::format("    {}: min {:.6g} max {:.6g} mean {:.6g} nan {} inf {} hash {}\n", k,
                       f[k]["min"].get<double>(), f[k]["max"].get<double>(), f[k]["mean"].get<double>(),
                       f[k]["nan"].get<uint64_t>(), f[k]["inf"].get<uint64_t>(), f[k]["hash"].get<std::string>());
    o += fmt::format("    largest scaled difference of min/max/mean: {:.3g}\n",
                     f["max_scaled_difference"].get<double>());
  }

  if (d.contains("routing")) {
    const json& r = d["routing"];
    o += "\n== Routing ==\n";
    if (!r["available"].get<bool>())
      o += "  " + r["note"].get<std::string>() + "\n";
    else {
      o += fmt::format(
          "  {} of {} (token, layer) routing decisions chose a different expert set ({} at positions 0-{} whose tokens "
          "are the same in both runs); {} only reordered; {} only in A, {} only in B\n",
          r["flips"].get<uint64_t>(), r["compared"].get<uint64_t>(), r["flips_with_same_tokens"].get<uint64_t>(),
          static_cast<int64_t>(r["same_token_positions"].get<size_t>()) - 1, r["reordered_only"].get<uint64_t>(),
          r["only_in_a"].get<uint64_t>(), r["only_in_b"].get<uint64_t>());
      const json& f = r["first_differing_token"];
      if (f.is_null())
        o += "  every token chose the same experts in every layer\n";
      else
        o += fmt::format("  first token whose experts differ: step {} position {} ({} layers), layer {}: A {} B {}\n",
                         f["step"].get<uint32_t>(), f["position"].get<int32_t>(), f["layers_differing"].get<uint64_t>(),
                         f["layer"].get<int>(), f["a"].dump(), f["b"].dump());
      o += fmt::format("  {:>5} {:>9} {:>7} {:>7}\n", "layer", "compared", "flips", "rate");
      for (const json& l : r["per_layer"])
        o += fmt::format("  {:>5} {:>9} {:>7} {:>6.1f}%\n", l["layer"].get<int>(), l["compared"].get<uint64_t>(),
                         l["flips"].get<uint64_t>(), 100 * l["flip_rate"].get<double>());
    }
  }

  const json& tm = d["time"];
  o += fmt::format("\n== Time == op time A {:.3f} ms, B {:.3f} ms (B/A {:.3f})\n", tm["a_op_ns"].get<uint64_t>() / 1e6,
                   tm["b_op_ns"].get<uint64_t>() / 1e6, tm["ratio"].get<double>());
  o += fmt::format("  {:<16} {:>12} {:>12} {:>7} {:>12} {:>12}\n", "op kind", "A ms", "B ms", "B/A", "A bytes",
                   "B bytes");
  for (const json& k : tm["op_kinds"])
    o += fmt::format("  {:<16} {:>12.3f} {:>12.3f} {:>7.3f} {:>12} {:>12}\n", k["name"].get<std::string>(),
                     k["a_ns"].get<uint64_t>() / 1e6, k["b_ns"].get<uint64_t>() / 1e6, k["ratio"].get<double>(),
                     format_bytes(k["a_bytes"]), format_bytes(k["b_bytes"]));
  o += "  largest per-op time differences (summed over steps):\n";
  for (const json& k : tm["largest_differences"])
    o += fmt::format("    {:<24} {:<14} A {:>9.3f} ms  B {:>9.3f} ms  ({:+.3f} ms)\n", k["name"].get<std::string>(),
                     k["op"].get<std::string>(), k["a_ns"].get<uint64_t>() / 1e6, k["b_ns"].get<uint64_t>() / 1e6,
                     k["diff_ns"].get<int64_t>() / 1e6);
  const json& by = d["bytes"];
  o += fmt::format("\n== Bytes == {} ops read a different number of bytes\n",
                   by["ops_with_different_bytes"].get<uint64_t>());
  for (const json& k : by["largest"])
    o += fmt::format("    {:<24} {:<10} A {:>11} (file {:>11})  B {:>11} (file {:>11})\n", k["name"].get<std::string>(),
                     k["op"].get<std::string>(), format_bytes(k["a_bytes"]), format_bytes(k["a_file_bytes"]),
                     format_bytes(k["b_bytes"]), format_bytes(k["b_file_bytes"]));
  return o;
}

}  // namespace tt::analysis
