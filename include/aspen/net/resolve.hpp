// aspen::resolve: host name -> socket addresses, without stalling a worker.
//
//   std::vector<aspen::socket_address> addrs = co_await aspen::resolve("localhost", 8080);
//   aspen::tcp_stream s = co_await aspen::tcp_stream::connect(addrs.front());
//
// getaddrinfo blocks (DNS, /etc/hosts, NSS modules), so it runs on the
// runtime's blocking pool (spawn_blocking) and the awaiting task is woken
// when it is done; a numeric address ("127.0.0.1", "::1") is answered at once without a
// thread. Results are in getaddrinfo's order (the system's preference),
// without duplicates. A failed lookup throws std::system_error whose code
// is in resolve_category() (the getaddrinfo EAI_* value; its message is
// gai_strerror's) or, for EAI_SYSTEM, the errno; the message names the host.
//
// Cancel safety: cancel-safe. An aborted resolve leaves its lookup to
// finish on the blocking pool; the result is discarded.
#pragma once

#include <aspen/net/address.hpp>
#include <aspen/task.hpp>

#include <cstdint>
#include <string>
#include <system_error>
#include <vector>

namespace aspen {

task<std::vector<socket_address>> resolve(std::string host, std::uint16_t port);

// The error category of getaddrinfo's EAI_* codes.
const std::error_category& resolve_category() noexcept;

}  // namespace aspen
