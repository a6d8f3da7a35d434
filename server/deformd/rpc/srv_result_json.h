/*
 * srv_result_json.h — the JSON-RPC result of a session-layer answer (a srv_result).
 */
#ifndef DEFORMD_SRV_RESULT_JSON_H
#define DEFORMD_SRV_RESULT_JSON_H

#include <cjson/cJSON.h>

#include "srv_reply.h"
#include "srv_server.h"

/* The answer's JSON object, keys in the order docs/json-api.md gives them (author names looked
 * up in s->authors). Caller frees; NULL when out of memory. */
cJSON *srv_result_json(srv_server *s, const srv_result *r);

#endif
