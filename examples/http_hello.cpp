// http_hello: a minimal HTTP/1.1 keep-alive server that answers "hello".
//
//   http_hello                       a bounded demo: serves on a free port and
//                                    runs its own clients against it (keep-alive,
//                                    malformed, oversized and stalled requests)
//   http_hello --port P [--seconds S] [--workers W]    just serve on 127.0.0.1:P,
//                                    until Ctrl+C (SIGINT) or SIGTERM, or S seconds
//
// A slow or malformed client cannot hold a connection: the request head
// must arrive within a read timeout (aspen::timeout) and fit in 8 KiB;
// otherwise the server answers 408/431/400 (when it still can) and closes.
// Only GET and HEAD without a body are served; anything else gets 405/501.
#include <aspen/aspen.hpp>

#include <cctype>
#include <csignal>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

using namespace std::chrono_literals;

namespace {

constexpr std::size_t max_head = 8 * 1024;

struct server_options {
    std::chrono::milliseconds read_timeout{5000};
};

enum class head_status { complete, closed, too_big };

// Reads until buf holds a whole request head ("\r\n\r\n"). Bytes after it
// (a pipelined request) stay in buf for the next round.
aspen::task<head_status> read_head(aspen::tcp_stream& s, std::string& buf) {
    char chunk[2048];
    for (;;) {
        if (buf.find("\r\n\r\n") != std::string::npos) co_return head_status::complete;
        if (buf.size() >= max_head) co_return head_status::too_big;
        std::size_t n = co_await s.read(chunk, std::min(sizeof chunk, max_head + 4 - buf.size()));
        if (n == 0) co_return head_status::closed;
        buf.append(chunk, n);
    }
}

bool iequals(std::string_view a, std::string_view b) {
    if (a.size() != b.size()) return false;
    for (std::size_t i = 0; i < a.size(); ++i)
        if (std::tolower(static_cast<unsigned char>(a[i])) != std::tolower(static_cast<unsigned char>(b[i]))) return false;
    return true;
}

struct request {
    std::string method;
    bool keep_alive = true;
    bool has_body = false;
};

// Parses the request line and the headers we care about; false if malformed.
bool parse(std::string_view head, request& req) {
    auto line_end = head.find("\r\n");
    std::string_view line = head.substr(0, line_end);
    auto sp1 = line.find(' ');
    auto sp2 = line.rfind(' ');
    if (sp1 == std::string_view::npos || sp2 == sp1) return false;
    req.method = std::string(line.substr(0, sp1));
    std::string_view version = line.substr(sp2 + 1);
    if (version != "HTTP/1.1" && version != "HTTP/1.0") return false;
    req.keep_alive = version == "HTTP/1.1";
    std::string_view rest = head.substr(line_end + 2);
    while (!rest.empty()) {
        auto end = rest.find("\r\n");
        std::string_view h = rest.substr(0, end);
        rest = end == std::string_view::npos ? std::string_view() : rest.substr(end + 2);
        if (h.empty()) break;
        auto colon = h.find(':');
        if (colon == std::string_view::npos || colon == 0) return false;
        std::string_view name = h.substr(0, colon);
        std::string_view value = h.substr(colon + 1);
        while (!value.empty() && value.front() == ' ') value.remove_prefix(1);
        if (iequals(name, "connection")) {
            if (iequals(value, "close")) req.keep_alive = false;
            if (iequals(value, "keep-alive")) req.keep_alive = true;
        } else if ((iequals(name, "content-length") && value != "0") || iequals(name, "transfer-encoding")) {
            req.has_body = true;
        }
    }
    return true;
}

std::string response(int code, const char* reason, std::string_view body, bool keep_alive, bool head_only = false) {
    std::string r = "HTTP/1.1 " + std::to_string(code) + " " + reason + "\r\n";
    r += "Content-Type: text/plain\r\nContent-Length: " + std::to_string(body.size()) + "\r\n";
    r += keep_alive ? "Connection: keep-alive\r\n\r\n" : "Connection: close\r\n\r\n";
    if (!head_only) r += body;
    return r;
}

// Sends a final error response and closes without a reset: closing a
// socket with unread input makes the kernel send RST, which can destroy the
// response before the client reads it. So: half-close, then discard what the
// client still sends, bounded in bytes and time.
aspen::task<void> reply_and_close(aspen::tcp_stream& s, std::string final_response, server_options opt) {
    co_await s.write_all(final_response);
    s.shutdown(aspen::shutdown_mode::write);
    auto drain = [](aspen::tcp_stream& s) -> aspen::task<void> {
        char sink[4096];
        for (std::size_t total = 0; total < 64 * 1024;) {
            std::size_t n = co_await s.read(sink, sizeof sink);
            if (n == 0) co_return;
            total += n;
        }
    };
    try {
        co_await aspen::timeout(opt.read_timeout, drain(s));
    } catch (const aspen::timed_out&) {
    }
}

aspen::task<void> serve_connection(aspen::tcp_stream s, server_options opt) {
    std::string buf;
    for (;;) {
        head_status st;
        try {
            st = co_await aspen::timeout(opt.read_timeout, read_head(s, buf));
        } catch (const aspen::timed_out&) {
            st = head_status::closed;
            buf = "timeout";
        }
        if (st == head_status::closed) {
            if (buf == "timeout") co_await reply_and_close(s, response(408, "Request Timeout", "timeout\n", false), opt);
            co_return;  // closed (or timed out): drop the connection
        }
        if (st == head_status::too_big) {
            co_await reply_and_close(s, response(431, "Request Header Fields Too Large", "header too large\n", false), opt);
            co_return;
        }
        std::size_t end = buf.find("\r\n\r\n") + 4;
        request req;
        bool ok = parse(std::string_view(buf).substr(0, end), req);
        buf.erase(0, end);
        if (!ok) {
            co_await reply_and_close(s, response(400, "Bad Request", "bad request\n", false), opt);
            co_return;
        }
        if (req.has_body) {
            co_await reply_and_close(s, response(501, "Not Implemented", "no request bodies here\n", false), opt);
            co_return;
        }
        if (req.method != "GET" && req.method != "HEAD") {
            co_await s.write_all(response(405, "Method Not Allowed", "GET or HEAD\n", req.keep_alive));
        } else {
            co_await s.write_all(response(200, "OK", "hello\n", req.keep_alive, req.method == "HEAD"));
        }
        if (!req.keep_alive) co_return;
    }
}

// Serves `connections` connections (-1: forever), each in its own task.
aspen::task<void> serve(aspen::tcp_listener& listener, server_options opt, long connections) {
    std::vector<aspen::join_handle<void>> active;
    for (long i = 0; connections < 0 || i < connections; ++i) {
        aspen::tcp_stream s = co_await listener.accept();
        s.set_nodelay(true);
        auto h = aspen::spawn([](aspen::tcp_stream s, server_options opt) -> aspen::task<void> {
            try {
                co_await serve_connection(std::move(s), opt);
            } catch (const std::system_error&) {
                // The client went away (reset): nothing to answer.
            }
        }(std::move(s), opt));
        if (connections < 0) h.detach();
        else active.push_back(std::move(h));
    }
    for (auto& h : active) co_await h;
}

// Serves until SIGINT or SIGTERM: then stops accepting, and the runtime's
// end drops the connections still open.
aspen::task<void> serve_until_signal(aspen::tcp_listener& listener) {
    aspen::signal_listener term(SIGTERM);
    auto wait_term = [](aspen::signal_listener& t) -> aspen::task<void> { co_await t.recv(); };
    auto first = co_await aspen::when_any(serve(listener, {}, -1), aspen::ctrl_c(), wait_term(term));
    std::printf("http_hello: %s, shutting down\n", first.index == 1 ? "SIGINT" : "SIGTERM");
}

// ---- the demo's clients ---------------------------------------------------------

// Sends `text` and reads until the server closes or `responses` complete
// responses ("hello\n" bodies or error statuses) arrived.
aspen::task<std::string> exchange(aspen::socket_address addr, std::string text, bool until_close) {
    aspen::tcp_stream s = co_await aspen::tcp_stream::connect(addr, 5s);
    co_await s.write_all(text);
    std::string got;
    char buf[4096];
    for (;;) {
        std::size_t n = co_await s.read(buf, sizeof buf);
        if (n == 0) break;
        got.append(buf, n);
        if (!until_close && got.find("Connection: close") != std::string::npos) break;
    }
    co_return got;
}

int count(const std::string& s, std::string_view what) {
    int n = 0;
    for (auto p = s.find(what); p != std::string::npos; p = s.find(what, p + 1)) ++n;
    return n;
}

aspen::task<int> run_checks(aspen::socket_address addr) {
    int failures = 0;
    auto check = [&](const char* what, bool ok) {
        std::printf("  %-58s %s\n", what, ok ? "ok" : "FAILED");
        if (!ok) ++failures;
    };
    // Three pipelined keep-alive requests on one connection, the last one closes.
    std::string three = "GET / HTTP/1.1\r\nHost: x\r\n\r\nGET /a HTTP/1.1\r\nHost: x\r\n\r\n"
                        "GET /b HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
    std::string r = co_await exchange(addr, three, true);
    check("3 keep-alive requests on one connection -> 3 x \"hello\"", count(r, "200 OK") == 3 && count(r, "hello\n") == 3);
    r = co_await exchange(addr, "NONSENSE\r\n\r\n", true);
    check("malformed request line -> 400 and close", r.rfind("HTTP/1.1 400", 0) == 0);
    r = co_await exchange(addr, "GET / HTTP/1.1\r\nX-Big: " + std::string(max_head, 'a') + "\r\n\r\n", true);
    check("an 8 KiB header -> 431 and close", r.rfind("HTTP/1.1 431", 0) == 0);
    r = co_await exchange(addr, "GET / HTTP/1.1\r\nHost: slow", true);  // never finishes its head
    check("a client that stalls mid-header -> 408 after the timeout", r.rfind("HTTP/1.1 408", 0) == 0);
    co_return failures;
}

aspen::task<int> demo() {
    auto listener = aspen::tcp_listener::bind(aspen::socket_address::loopback_v4(0));
    auto addr = listener.local_addr();
    std::printf("http_hello: demo server on %s (read timeout 200 ms, head limit %zu bytes)\n", addr.to_string().c_str(),
                max_head);
    auto server = aspen::spawn(serve(listener, server_options{200ms}, 4));
    int failures = 0;
    try {
        failures = co_await run_checks(addr);
    } catch (const std::exception& e) {
        std::printf("http_hello: a check failed with: %s\n", e.what());
        failures = 1;
    }
    // The server task uses the listener: end it before the listener goes.
    server.abort();
    try {
        co_await server;
    } catch (const aspen::task_cancelled&) {
    }
    co_return failures;
}

}  // namespace

int main(int argc, char** argv) {
    aspen::config cfg;
    long port = -1, seconds = -1;
    for (int i = 1; i + 1 < argc; i += 2) {
        std::string a = argv[i];
        long v = std::strtol(argv[i + 1], nullptr, 10);
        if (a == "--port") port = v;
        else if (a == "--seconds") seconds = v;
        else if (a == "--workers") cfg.workers = static_cast<std::size_t>(v);
        else {
            std::fprintf(stderr, "usage: http_hello [--port P [--seconds S] [--workers W]]\n");
            return 2;
        }
    }
    aspen::runtime rt(cfg);
    if (port < 0) {
        int failures = rt.block_on(demo());
        std::printf("http_hello: %s\n", failures ? "FAILED" : "all checks passed");
        return failures ? 1 : 0;
    }
    auto listener = aspen::tcp_listener::bind(aspen::socket_address::loopback_v4(static_cast<std::uint16_t>(port)));
    std::printf("http_hello: serving http://%s/\n", listener.local_addr().to_string().c_str());
    std::fflush(stdout);
    try {
        if (seconds >= 0) rt.block_on(aspen::timeout(std::chrono::seconds(seconds), serve_until_signal(listener)));
        else rt.block_on(serve_until_signal(listener));
    } catch (const aspen::timed_out&) {
    }
    return 0;
}
