/*
 * proto.h — the deformd wire format: frame header, messages, limits, error codes.
 *
 * Pure functions on bytes. Encoders write into a growable proto_buf; decoders read a complete
 * frame payload and check every count against the bytes actually present and against the
 * limits in proto_limits, reject NaN/Inf, and return a named PROTO_E* code.
 *
 * This module DOES NOT do I/O, allocate sockets, know about sessions or keep any state between
 * calls. docs/protocol.md specifies every message byte by byte; keep the two in step.
 *
 * Ownership: decoded messages point into the payload they were decoded from (zero-copy) unless
 * a field says otherwise; the payload must outlive the message.
 */
#ifndef DEFORMD_PROTO_H
#define DEFORMD_PROTO_H

/* The parts, each with its own banner: the frame (header, buffer, limits, error codes), the
 * messages other than EDIT, and EDIT. Version 2's compact bodies are in proto2.h. */
#include "proto_frame.h"
#include "proto_msg.h"
#include "proto_edit.h"

#endif
