// SQLite export: one database per run (schema in docs/export.md), written in one transaction to a temporary file
// that is renamed over the output when complete.
#include <sqlite3.h>
#include <unistd.h>

#include <filesystem>

#include "core/error.h"
#include "core/shape.h"
#include "export/export.h"

namespace tt::exporter {

namespace {

namespace fs = std::filesystem;

constexpr const char* kSchema = R"sql(
CREATE TABLE run_info (key TEXT PRIMARY KEY, value TEXT);
CREATE TABLE steps (
  step INTEGER PRIMARY KEY, phase TEXT NOT NULL, pos_begin INTEGER, pos_end INTEGER,
  start_ns INTEGER, end_ns INTEGER, duration_ns INTEGER, complete INTEGER,
  input_tokens TEXT, token INTEGER, token_text TEXT, probability REAL, softmax_probability REAL,
  entropy REAL, n_ops INTEGER, graph INTEGER);
CREATE TABLE ops (
  id INTEGER PRIMARY KEY, step INTEGER NOT NULL, node INTEGER NOT NULL, phase TEXT, op TEXT NOT NULL,
  name TEXT NOT NULL, layer INTEGER, pos_begin INTEGER, pos_end INTEGER, is_view INTEGER,
  thread INTEGER, n_threads INTEGER, start_ns INTEGER, end_ns INTEGER, duration_ns INTEGER,
  out_type TEXT, out_shape TEXT, out_pool TEXT, out_buffer INTEGER, out_offset INTEGER, out_bytes INTEGER,
  write_pool TEXT, write_buffer INTEGER, write_offset INTEGER, write_length INTEGER,
  bytes_read INTEGER, file_bytes_read INTEGER,
  stat_min REAL, stat_max REAL, stat_mean REAL, stat_nan INTEGER, stat_inf INTEGER, stat_hash TEXT);
CREATE TABLE op_inputs (
  op_id INTEGER NOT NULL REFERENCES ops(id), slot INTEGER NOT NULL, name TEXT NOT NULL, type TEXT, shape TEXT,
  pool TEXT, buffer_id INTEGER, offset INTEGER, bytes INTEGER, bytes_read INTEGER, n_ranges INTEGER,
  PRIMARY KEY (op_id, slot));
CREATE TABLE ranges (
  id INTEGER PRIMARY KEY, op_id INTEGER NOT NULL REFERENCES ops(id), slot INTEGER NOT NULL, pool TEXT NOT NULL,
  buffer_id INTEGER, offset INTEGER NOT NULL, length INTEGER NOT NULL, pos_begin INTEGER, pos_end INTEGER);
CREATE TABLE spans (
  id INTEGER PRIMARY KEY, op_id INTEGER REFERENCES ops(id), step INTEGER NOT NULL, node INTEGER NOT NULL,
  thread INTEGER NOT NULL, start_ns INTEGER, end_ns INTEGER, duration_ns INTEGER);
CREATE TABLE tensors (
  name TEXT PRIMARY KEY, type TEXT, shape TEXT, offset_start INTEGER, offset_end INTEGER, size_bytes INTEGER,
  layer INTEGER, category TEXT, component TEXT);
CREATE TABLE buffers (
  id INTEGER PRIMARY KEY, t_ns INTEGER, step INTEGER, kind TEXT, pool TEXT, buffer_id INTEGER, offset INTEGER,
  bytes INTEGER, tensor TEXT, reuse INTEGER);
CREATE TABLE routing (
  step INTEGER NOT NULL, layer INTEGER NOT NULL, token_pos INTEGER NOT NULL, slot INTEGER NOT NULL,
  expert INTEGER NOT NULL, weight REAL, margin REAL, PRIMARY KEY (step, layer, token_pos, slot));
CREATE TABLE step_memory (
  step INTEGER PRIMARY KEY, activation_peak_bytes INTEGER, activation_peak_node TEXT, arena_bytes INTEGER,
  scratch_bytes INTEGER, static_bytes INTEGER, total_peak_bytes INTEGER);
)sql";

constexpr const char* kIndices = R"sql(
CREATE INDEX ops_step ON ops(step, node);
CREATE INDEX ops_layer ON ops(layer);
CREATE INDEX ops_name ON ops(name);
CREATE INDEX op_inputs_name ON op_inputs(name);
CREATE INDEX ranges_op ON ranges(op_id, slot);
CREATE INDEX ranges_pool ON ranges(pool, offset);
CREATE INDEX spans_op ON spans(op_id);
CREATE INDEX spans_step ON spans(step, thread);
CREATE INDEX buffers_step ON buffers(step);
CREATE INDEX routing_expert ON routing(layer, expert);
)sql";

class Db {
 public:
  explicit Db(const std::string& path) : path_(path) {
    if (sqlite3_open_v2(path.c_str(), &db_, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, nullptr) != SQLITE_OK) {
      std::string msg = db_ ? sqlite3_errmsg(db_) : "out of memory";
      sqlite3_close(db_);
      db_ = nullptr;
      fail("cannot create '{}': {}", path, msg);
    }
  }
  ~Db() {
    if (db_) sqlite3_close(db_);
  }
  void close() {
    if (db_ && sqlite3_close(db_) != SQLITE_OK) fail("cannot close '{}': {}", path_, sqlite3_errmsg(db_));
    db_ = nullptr;
  }
  void exec(const char* sql) {
    char* err = nullptr;
    if (sqlite3_exec(db_, sql, nullptr, nullptr, &err) != SQLITE_OK) {
      std::string msg = err ? err : "unknown error";
      sqlite3_free(err);
      fail("'{}': {}", path_, msg);
    }
  }
  sqlite3* get() const { return db_; }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  sqlite3* db_ = nullptr;
};

// A prepared INSERT; bind values in column order with `operator<<`-style add(), then run().
class Insert {
 public:
  Insert(Db& db, const char* sql) : db_(db) {
    if (sqlite3_prepare_v2(db.get(), sql, -1, &st_, nullptr) != SQLITE_OK)
      fail("'{}': {}: {}", db.path(), sqlite3_errmsg(db.get()), sql);
  }
  ~Insert() { sqlite3_finalize(st_); }
  Insert& i(int64_t v) {
    sqlite3_bind_int64(st_, ++col_, v);
    return *this;
  }
  Insert& u(uint64_t v) { return i(static_cast<int64_t>(v)); }  // sizes and offsets fit in 63 bits
  Insert& d(double v) {
    sqlite3_bind_double(st_, ++col_, v);
    return *this;
  }
  Insert& s(const std::string& v) {
    sqlite3_bind_text(st_, ++col_, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT);
    return *this;
  }
  Insert& null() {
    sqlite3_bind_null(st_, ++col_);
    return *this;
  }
  Insert& opt(int64_t v, bool present) { return present ? i(v) : null(); }
  void run() {
    if (sqlite3_step(st_) != SQLITE_DONE) fail("'{}': insert failed: {}", db_.path(), sqlite3_errmsg(db_.get()));
    sqlite3_reset(st_);
    sqlite3_clear_bindings(st_);
    col_ = 0;
  }

 private:
  Db& db_;
  sqlite3_stmt* st_ = nullptr;
  int col_ = 0;
};

void write_db(Db& db, const RunData& run, const Progress& progress) {
  db.exec("PRAGMA journal_mode=OFF; PRAGMA synchronous=OFF;");
  db.exec("BEGIN");
  db.exec(kSchema);

  {
    Insert ins(db, "INSERT INTO run_info VALUES (?,?)");
    auto put = [&](const std::string& k, const std::string& v) { ins.s(k).s(v).run(); };
    put("run_dir", run.dir);
    put("finished", run.finished ? "1" : "0");
    put("trace_complete", run.trace.complete ? "1" : "0");
    if (!run.trace.complete)
      put("trace_note", fmt::format("trace.bin truncated at byte {}: {}", run.trace.stopped_at, run.trace.stop_reason));
    put("n_threads", std::to_string(run.n_threads()));
    if (run.run.is_object()) {
      put("run_json", run.run.dump());
      if (run.info.has_model) put("model", run.info.model_file);
      if (run.run.contains("options")) put("prompt", run.info.prompt);
    }
  }
  {
    Insert ins(db, "INSERT INTO tensors VALUES (?,?,?,?,?,?,?,?,?)");
    for (const MapTensor& t : run.tensors)
      ins.s(t.name)
          .s(t.type)
          .s(nlohmann::json(t.shape).dump())
          .u(t.offset_start)
          .u(t.offset_end)
          .u(t.size_bytes)
          .opt(t.layer.value_or(0), t.layer.has_value())
          .s(t.category)
          .s(t.component)
          .run();
  }
  {
    Insert ins(db, "INSERT INTO steps VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)");
    // Steps in steps.jsonl or the trace (a killed run may have one in only one of them).
    const size_t n = std::max(run.steps.size(), run.trace.steps.size());
    for (size_t k = 0; k < n; ++k) {
      const RunStep* s = k < run.steps.size() ? &run.steps[k] : nullptr;
      const trace::StepMarker* m = k < run.trace.steps.size() ? &run.trace.steps[k] : nullptr;
      const uint64_t start = s ? s->start_ns : m->start_ns;
      const uint64_t end = s ? s->end_ns : m->end_ns;
      ins.i(static_cast<int64_t>(k)).s(phase_name(s ? s->phase : m->phase));
      ins.i(s ? s->pos_begin : m->pos_begin).i(s ? s->pos_end : m->pos_end);
      ins.u(start).u(end).i(end >= start ? static_cast<int64_t>(end - start) : 0).i(m ? m->ended : 0);
      if (s) {
        ins.s(nlohmann::json(s->input_tokens).dump());
        ins.opt(s->token.value_or(0), s->token.has_value()).s(s->token_text);
        auto num = [&](const char* key) {
          if (s->json.contains(key) && s->json[key].is_number())
            ins.d(s->json[key].get<double>());
          else
            ins.null();
        };
        num("probability");
        num("softmax_probability");
        num("entropy");
        ins.i(s->n_ops).i(s->graph);
      } else {
        ins.null().opt(m->token, m->token >= 0).null().d(m->probability).null().null();
        ins.i(static_cast<int64_t>(run.ops_of_step(m->step).size())).null();
      }
      ins.run();
    }
  }
  {
    Insert op_ins(db, "INSERT INTO ops VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)");
    Insert in_ins(db, "INSERT INTO op_inputs VALUES (?,?,?,?,?,?,?,?,?,?,?)");
    Insert r_ins(db,
                 "INSERT INTO ranges (op_id, slot, pool, buffer_id, offset, length, pos_begin, pos_end) "
                 "VALUES (?,?,?,?,?,?,?,?)");
    Insert sp_ins(db,
                  "INSERT INTO spans (op_id, step, node, thread, start_ns, end_ns, duration_ns) "
                  "VALUES (?,?,?,?,?,?,?)");
    const auto& ops = run.trace.ops;
    const size_t n_steps = run.step_ops.size();
    for (size_t step = 0; step < n_steps; ++step) {
      const auto [first, last] = run.step_ops[step];
      for (size_t id = first; id < last; ++id) {
        const trace::OpRecord& o = ops[id];
        uint64_t read = 0, file_read = 0;
        for (const auto& in : o.inputs)
          for (const auto& r : in.ranges) {
            read += r.length;
            if (r.pool == Pool::MODEL_FILE) file_read += r.length;
          }
        op_ins.i(static_cast<int64_t>(id)).i(o.step).i(o.node).s(phase_name(o.phase)).s(op_name(o.op)).s(o.name);
        op_ins.opt(o.layer, o.layer >= 0).i(o.pos_begin).i(o.pos_end).i(op_is_view(o.op));
        op_ins.i(o.thread).i(o.n_threads).u(o.start_ns).u(o.end_ns).u(o.end_ns - o.start_ns);
        op_ins.s(std::string(type_name(o.out.type))).s(shape_text(o.out.ne, ",")).s(pool_name(o.out.pool));
        op_ins.opt(o.out.buffer_id, o.out.buffer_id >= 0).u(o.out.offset).u(o.out.bytes);
        if (o.write.length > 0)
          op_ins.s(pool_name(o.write.pool))
              .opt(o.write.buffer_id, o.write.buffer_id >= 0)
              .u(o.write.offset)
              .u(o.write.length);
        else
          op_ins.null().null().null().null();
        op_ins.u(read).u(file_read);
        if (o.has_stats)
          op_ins.d(o.stats.min)
              .d(o.stats.max)
              .d(o.stats.mean)
              .u(o.stats.nan_count)
              .u(o.stats.inf_count)
              .s(fmt::format("{:016x}", o.stats.hash));
        else
          op_ins.null().null().null().null().null().null();
        op_ins.run();
        for (size_t slot = 0; slot < o.inputs.size(); ++slot) {
          const trace::TensorRecord& in = o.inputs[slot];
          uint64_t in_read = 0;
          for (const auto& r : in.ranges) {
            in_read += r.length;
            r_ins.i(static_cast<int64_t>(id)).i(static_cast<int64_t>(slot)).s(pool_name(r.pool));
            r_ins.opt(r.buffer_id, r.buffer_id >= 0).u(r.offset).u(r.length);
            r_ins.opt(r.pos_begin, r.pos_begin >= 0).opt(r.pos_end, r.pos_begin >= 0).run();
          }
          in_ins.i(static_cast<int64_t>(id)).i(static_cast<int64_t>(slot)).s(in.name);
          in_ins.s(std::string(type_name(in.type))).s(shape_text(in.ne, ",")).s(pool_name(in.pool));
          in_ins.opt(in.buffer_id, in.buffer_id >= 0).u(in.offset).u(in.bytes).u(in_read);
          in_ins.i(static_cast<int64_t>(in.ranges.size())).run();
        }
      }
      for (const trace::SpanRecord& s : run.spans_of_step(static_cast<uint32_t>(step))) {
        // Op ids are trace indices; a step's ops are in node order.
        int64_t op_id = -1;
        if (s.node < last - first && ops[first + s.node].node == s.node) op_id = static_cast<int64_t>(first + s.node);
        sp_ins.opt(op_id, op_id >= 0).i(s.step).i(s.node).i(s.thread).u(s.start_ns).u(s.end_ns);
        sp_ins.u(s.end_ns >= s.start_ns ? s.end_ns - s.start_ns : 0).run();
      }
      if (progress) progress(fmt::format("sqlite: step {}/{}", step + 1, n_steps));
    }
  }
  {
    Insert ins(db, "INSERT INTO routing VALUES (?,?,?,?,?,?,?)");
    for (const trace::RoutingRecord& x : run.trace.routing)
      for (size_t slot = 0; slot < x.experts.size(); ++slot)
        ins.i(x.step)
            .i(x.layer)
            .i(x.token_pos)
            .i(static_cast<int64_t>(slot))
            .i(x.experts[slot])
            .d(x.weights[slot])
            .d(x.margin)
            .run();
  }
  {
    Insert ins(db, "INSERT INTO buffers VALUES (?,?,?,?,?,?,?,?,?,?)");
    int64_t id = 0;
    for (const BufferEvent& e : run.buffer_events)
      ins.i(id++)
          .u(e.t_ns)
          .i(e.step)
          .s(e.alloc ? "alloc" : "free")
          .s(pool_name(e.pool))
          .i(e.buffer_id)
          .u(e.offset)
          .u(e.bytes)
          .s(e.tensor)
          .i(e.reuse)
          .run();
    Insert m(db, "INSERT INTO step_memory VALUES (?,?,?,?,?,?,?)");
    for (const BufferStep& s : run.buffer_steps)
      m.i(s.step)
          .u(s.activation_peak_bytes)
          .s(s.activation_peak_node)
          .u(s.arena_bytes)
          .u(s.scratch_bytes)
          .u(s.static_bytes)
          .u(s.total_peak_bytes)
          .run();
  }
  db.exec(kIndices);
  db.exec("COMMIT");
}

}  // namespace

void export_sqlite(const RunData& run, const std::string& out_path, const Progress& progress) {
  const std::string tmp = out_path + ".tmp-" + std::to_string(::getpid());
  std::error_code ec;
  fs::remove(tmp, ec);
  try {
    Db db(tmp);
    write_db(db, run, progress);
    db.close();
  } catch (...) {
    fs::remove(tmp, ec);
    throw;
  }
  fs::rename(tmp, out_path, ec);
  if (ec) {
    fs::remove(tmp, ec);
    fail("cannot rename '{}' to '{}': {}", tmp, out_path, ec.message());
  }
}

}  // namespace tt::exporter
