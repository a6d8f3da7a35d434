/*
 * srv_ports.h — the ports' transports: the binary stream port and the JSON-RPC port.
 */
#ifndef DEFORMD_SRV_PORTS_H
#define DEFORMD_SRV_PORTS_H

#include <stddef.h>
#include <stdint.h>

#include "srv_conn.h"

extern const srv_conn_ops srv_stream_ops;
extern const srv_conn_ops srv_rpc_conn_ops;

#endif
