// tensortrace serve RUN_DIR [RUN_DIR2] [--port P] [--host H]: the web viewer. Serves the built web app (web/dist)
// and the runs' data through the JSON API of src/serve/api.h (docs/viewer.md).
#include <fmt/format.h>
#include <httplib.h>
#include <netdb.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
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

using Clock = std::chrono::steady_clock;

// Connections served at once; more wait for a worker. Each holds its worker for at most kRequestTime per request
// and the keep-alive timeout (5 s) between requests, so slow clients delay the others, never stop them.
constexpr size_t kWorkers = 32;
// A request's line, headers and body must arrive within this from its first byte.
constexpr std::chrono::seconds kRequestTime{5};

// One connection's bytes for cpp-httplib's request parser. cpp-httplib's own stream times out each read alone, so a
// client sending a header line every few seconds held a worker for ever; here each request has a deadline.
class ConnectionStream final : public httplib::Stream {
 public:
  ConnectionStream(int sock, Clock::duration write_timeout) : sock_(sock), write_timeout_(write_timeout) {}

  void set_deadline(Clock::time_point t) { deadline_ = t; }
  bool has_buffered() const { return pos_ < buf_.size(); }
  // Waits for `events` on the socket until `until`; an error or hang-up counts as ready (the call after says it).
  bool wait(short events, Clock::time_point until) const {
    for (;;) {
      const auto left = std::chrono::ceil<std::chrono::milliseconds>(until - Clock::now()).count();
      pollfd p{sock_, events, 0};
      const int r = poll(&p, 1, static_cast<int>(std::clamp<int64_t>(left, 0, 60'000)));
      if (r > 0) return true;
      if (r < 0 && errno != EINTR) return false;
      if (r == 0 && Clock::now() >= until) return false;
    }
  }

  bool is_readable() const override { return has_buffered() || wait(POLLIN, deadline_); }
  bool is_writable() const override { return wait(POLLOUT, Clock::now() + write_timeout_); }
  ssize_t read(char* ptr, size_t size) override {
    if (!has_buffered()) {
      if (!wait(POLLIN, deadline_)) return -1;
      buf_.resize(4096);  // the parser reads a byte at a time: one recv per chunk, not per byte
      ssize_t n;
      do n = recv(sock_, buf_.data(), buf_.size(), 0);
      while (n < 0 && errno == EINTR);
      buf_.resize(n > 0 ? static_cast<size_t>(n) : 0);
      pos_ = 0;
      if (n <= 0) return n;
    }
    const size_t k = std::min(size, buf_.size() - pos_);
    std::memcpy(ptr, buf_.data() + pos_, k);
    pos_ += k;
    return static_cast<ssize_t>(k);
  }
  using httplib::Stream::write;
  ssize_t write(const char* ptr, size_t size) override {
    if (!is_writable()) return -1;
    ssize_t n;
    do n = send(sock_, ptr, size, MSG_NOSIGNAL);
    while (n < 0 && errno == EINTR);
    return n;
  }
  void get_remote_ip_and_port(std::string& ip, int& port) const override { address(false, ip, port); }
  void get_local_ip_and_port(std::string& ip, int& port) const override { address(true, ip, port); }
  socket_t socket() const override { return sock_; }

 private:
  void address(bool local, std::string& ip, int& port) const {
    sockaddr_storage a{};
    socklen_t len = sizeof a;
    auto* sa = reinterpret_cast<sockaddr*>(&a);
    if ((local ? getsockname(sock_, sa, &len) : getpeername(sock_, sa, &len)) != 0) return;
    char host[NI_MAXHOST], serv[NI_MAXSERV];
    if (getnameinfo(sa, len, host, sizeof host, serv, sizeof serv, NI_NUMERICHOST | NI_NUMERICSERV) != 0) return;
    ip = host;
    port = std::atoi(serv);
  }

  int sock_;
  Clock::duration write_timeout_;
  Clock::time_point deadline_ = Clock::now();
  std::vector<char> buf_;
  size_t pos_ = 0;
};

// cpp-httplib's server with its connection loop (keep-alive requests over one socket) on a ConnectionStream.
class DeadlineServer final : public httplib::Server {
  bool process_and_close_socket(socket_t sock) override {
    ConnectionStream strm(sock,
                          std::chrono::seconds(write_timeout_sec_) + std::chrono::microseconds(write_timeout_usec_));
    bool ok = false;
    for (size_t left = keep_alive_max_count_; left > 0 && wait_for_request(strm); --left) {
      strm.set_deadline(Clock::now() + kRequestTime);
      bool closed = false;
      ok = process_request(strm, left == 1, closed, nullptr);
      if (!ok || closed) break;
    }
    shutdown(sock, SHUT_RDWR);
    close(sock);
    return ok;
  }

  // Waits up to the keep-alive timeout for a request's first byte; false when none comes or the server stops.
  bool wait_for_request(const ConnectionStream& strm) const {
    const auto until = Clock::now() + std::chrono::seconds(keep_alive_timeout_sec_);
    while (svr_sock_ != INVALID_SOCKET) {
      if (strm.has_buffered() || strm.wait(POLLIN, std::min(until, Clock::now() + std::chrono::milliseconds(100))))
        return true;
      if (Clock::now() >= until) return false;
    }
    return false;
  }
};

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

    DeadlineServer svr;
    svr.new_task_queue = [] { return new httplib::ThreadPool(kWorkers); };
    // cpp-httplib's default options add SO_REUSEPORT, with which a second server binds the same port and takes a
    // share of the first one's requests.
    svr.set_socket_options([](socket_t sock) {
      const int yes = 1;
      setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
    });
    svr.set_payload_max_length(1 << 20);
    // Only this server's names: a page of another site can reach 127.0.0.1 under its own name (DNS rebinding).
    svr.set_pre_routing_handler([&](const httplib::Request& req, httplib::Response& res) {
      const std::string name = req.get_header_value("Host");
      if (serve::host_allowed(name, {*host, req.local_addr})) return httplib::Server::HandlerResponse::Unhandled;
      res.status = 403;
      res.set_content(error_json(fmt::format("host '{}' is not served here (use localhost, 127.0.0.1, [::1] or the "
                                             "--host name)",
                                             name)),
                      kJson);
      return httplib::Server::HandlerResponse::Handled;
    });
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

    errno = 0;
    const int bound = *port == 0 ? svr.bind_to_any_port(*host) : svr.bind_to_port(*host, *port) ? *port : -1;
    if (bound < 0) {
      if (errno == EADDRINUSE) fail("port {} is in use (try --port 0)", *port);
      fail("cannot listen on {}:{}: {}", *host, *port, errno ? std::strerror(errno) : "no such address");
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
