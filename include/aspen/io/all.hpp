// Stream utilities at once, as tokio::io: buf_reader (read_line,
// read_until, next_line), buf_writer, copy and copy_bidirectional,
// read_frame / write_frame (length-delimited messages), the standard
// streams (stdin, stdout, stderr). Each header documents its cancel safety
// at its top.
#pragma once

#include <aspen/io/buf_reader.hpp>
#include <aspen/io/buf_writer.hpp>
#include <aspen/io/copy.hpp>
#include <aspen/io/duplex.hpp>
#include <aspen/io/frame.hpp>
#include <aspen/io/stdio.hpp>
