// Networking at once: socket_address, tcp_listener / tcp_stream, tcp_socket,
// udp_socket, unix_listener / unix_stream, unix_datagram, resolve. Each header documents
// its cancel safety at its top.
#pragma once

#include <aspen/net/address.hpp>
#include <aspen/net/resolve.hpp>
#include <aspen/net/tcp.hpp>
#include <aspen/net/tcp_socket.hpp>
#include <aspen/net/udp_socket.hpp>
#include <aspen/net/unix.hpp>
#include <aspen/net/unix_datagram.hpp>
