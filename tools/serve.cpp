// tensortrace serve RUN_DIR [RUN_DIR2] [--port P] [--host H]: the web viewer. Serves the built web app (web/dist)
// and the runs' data through the JSON API of src/serve/api.h (docs/viewer.md).
#include <fmt/format.h>
#include <httplib.h>
#include <pthread.h>
#include <signal.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "core/error.h"
#include "serve/api.h"
#include "tools/command.h"

namespace tt::cli {
namespace {

namespace fs = std::filesystem;

std::string error_json(const std::string& message) {
  return nlohmann::json{{"error", message}}.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

// cpp-httplib brotli-compresses (at quality 11) every response whose Content-Type is exactly "application/json" or
// "application/javascript" (or starts with "text/") when the browser accepts br: 50-130 ms per heatmap answer and
// 800 ms per graph on the 2-core machine, for bytes that only cross the loopback. A type with a charset parameter
// is sent as is (tests/cli/serve_api.sh checks it).
constexpr const char* kJson = "application/json; charset=utf-8";

const char* content_type(const fs::path& p) {
  const std::string ext = p.extension().string();
  if (ext == ".html") return "text/html; charset=utf-8";
  if (ext == ".js" || ext == ".mjs") return "application/javascript; charset=utf-8";  // the bundle: not compressed
  if (ext == ".css") return "text/css; charset=utf-8";
  if (ext == ".json") return kJson;
  if (ext == ".svg") return "image/svg+xml";
  if (ext == ".png") return "image/png";
  if (ext == ".ico") return "image/x-icon";
  if (ext == ".woff2") return "font/woff2";
  return "application/octet-stream";
}

bool has_dot_segment(const std::string& path) {
  std::stringstream ss(path);
  std::string part;
  while (std::getline(ss, part, '/'))
    if (part == ".." || part == ".") return true;
  return path.find('\\') != std::string::npos || path.find('\0') != std::string::npos;
}

RegisterCommand reg("serve", "Serve the web viewer for one run directory (two: compare them)", 40, [](CLI::App& cmd) {
  auto dirs = std::make_shared<std::vector<std::string>>();
  auto port = std::make_shared<int>(8080);
  auto host = std::make_shared<std::string>("127.0.0.1");
  auto web = std::make_shared<std::string>(TT_WEB_DIST);
  cmd.add_option("run_dirs", *dirs, "Run directory (a second one opens compare mode)")->required()->expected(1, 2);
  cmd.add_option("--port", *port, "Port (0: any free port)")->check(range(0, 65535));
  cmd.add_option("--host", *host, "Address to listen on");
  cmd.add_option("--web-dir", *web, "Built web app to serve")->capture_default_str();
  return [=]() {
    const fs::path dist = fs::path(*web);
    if (!fs::exists(dist / "index.html"))
      fail("the web app is not built: '{}' has no index.html (build it with `make build`, which runs npm in web/)",
           dist.string());
    const fs::path dist_root = fs::canonical(dist);

    const auto t0 = std::chrono::steady_clock::now();
    serve::Api api(*dirs);
    const double load_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();

    // SIGINT/SIGTERM go to a waiting thread that stops the server (no work in a signal handler).
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &set, nullptr);

    httplib::Server svr;
    svr.set_payload_max_length(1 << 20);
    // Without TCP_NODELAY the body of a response on a kept-alive connection (headers and body are two writes) waits
    // for the client's delayed ACK (Nagle): 40 ms per API call.
    svr.set_tcp_nodelay(true);
    svr.Get(R"(/api(/.*)?)", [&](const httplib::Request& req, httplib::Response& res) {
      serve::Params params;
      for (const auto& [k, v] : req.params) params[k] = v;  // a repeated key keeps its first value
      serve::Response r = api.handle(req.path, params);
      res.status = r.status;
      res.set_header("Cache-Control", "no-store");
      res.set_content(r.body, kJson);
    });
    svr.Get(R"(/.*)", [&](const httplib::Request& req, httplib::Response& res) {
      std::string rel = req.path == "/" ? "index.html" : req.path.substr(1);
      if (has_dot_segment(req.path)) {
        res.status = 400;
        res.set_content(error_json("bad path"), kJson);
        return;
      }
      std::error_code ec;
      const fs::path file = fs::weakly_canonical(dist_root / rel, ec);
      const std::string root = dist_root.string() + "/";
      if (ec || file.string().compare(0, root.size(), root) != 0 || !fs::is_regular_file(file)) {
        res.status = 404;
        res.set_content(error_json("not found: " + req.path), kJson);
        return;
      }
      std::ifstream in(file, std::ios::binary);
      std::string body((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      if (rel.rfind("assets/", 0) == 0) res.set_header("Cache-Control", "max-age=31536000, immutable");
      res.set_content(body, content_type(file));
    });
    svr.set_error_handler([](const httplib::Request& req, httplib::Response& res) {
      if (res.body.empty()) res.set_content(error_json(fmt::format("HTTP {}", res.status)), kJson);
    });
    svr.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
      std::string what = "internal error";
      try {
        std::rethrow_exception(ep);
      } catch (const std::exception& e) {
        what += std::string(": ") + e.what();
      } catch (...) {
      }
      res.status = 500;
      res.set_content(error_json(what), kJson);
    });
    svr.Post(R"(/.*)", [](const httplib::Request&, httplib::Response& res) {
      res.status = 405;
      res.set_content(error_json("method not allowed"), kJson);
    });

    int bound = *port;
    if (*port == 0) {
      bound = svr.bind_to_any_port(*host);
      if (bound < 0) fail("cannot listen on {}", *host);
    } else if (!svr.bind_to_port(*host, *port)) {
      fail("cannot listen on {}:{} (in use? try --port 0)", *host, *port);
    }
    const std::string shown = host->find(':') != std::string::npos ? "[" + *host + "]" : *host;
    fmt::print("tensortrace serve: {} run(s) loaded in {:.0f} ms\n", api.run_count(), load_ms);
    fmt::print("serving http://{}:{}/\n", shown, bound);
    std::fflush(stdout);

    std::atomic<bool> signalled{false};
    std::thread stopper([&] {
      int sig = 0;
      sigwait(&set, &sig);
      signalled = true;
      svr.stop();
    });
    const bool ok = svr.listen_after_bind();
    // Wake the stopper if the server ended on its own.
    if (!signalled) pthread_kill(stopper.native_handle(), SIGTERM);
    stopper.join();
    fmt::print("tensortrace serve: stopped\n");
    return ok ? 0 : 1;
  };
});

}  // namespace
}  // namespace tt::cli
