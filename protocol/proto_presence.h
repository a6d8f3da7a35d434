/*
 * proto_presence.h — PRESENCE (message type 14): who is in a session and where each one works
 * (docs/protocol.md §16). A frame of the capability "presence" (proto_caps.h): only connections
 * granted it send or receive one.
 *
 * A PRESENCE payload is a list of records back to back, each a u8 kind and a fixed body (INFO
 * ends with the author's name). Every record carries absolute values (invariant 1 of
 * docs/architecture.md), so a receiver may miss any number of frames and be exact again with
 * the next record of the same participant; CLEAR ("forget everyone: the participants are the
 * ones that follow") makes a whole list absolute too. The header's session_version is always 0:
 * presence is not part of a session's versioned state and never reaches its store.
 *
 * DOES NOT decide who may send, how often, or to whom (server/deformd/session/srv_presence.c),
 * or do I/O.
 */
#ifndef DEFORMD_PROTO_PRESENCE_H
#define DEFORMD_PROTO_PRESENCE_H

#include <stddef.h>
#include <stdint.h>

#include "proto.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Record kinds. Server -> client: INFO, LEAVE, STATE, CLEAR; client -> server: STATE (its id 0)
 * and ABOUT. */
typedef enum proto_presence_kind {
  PROTO_PRES_INFO = 1,  /* a participant: id, role, client kind, flags, idle time, author */
  PROTO_PRES_LEAVE = 2, /* a participant left */
  PROTO_PRES_STATE = 3, /* a participant's cursor, brush circle, tool and camera */
  PROTO_PRES_CLEAR = 4, /* forget every participant (the records after it list them again) */
  PROTO_PRES_ABOUT = 5  /* a client says what it is and whether it shares its cursor and camera */
} proto_presence_kind;

/* What kind of client a participant is (INFO, ABOUT). */
typedef enum proto_client_kind {
  PROTO_CLIENT_UNKNOWN = 0,
  PROTO_CLIENT_VIEW = 1, /* deform-view */
  PROTO_CLIENT_PAGE = 2, /* the browser page */
  PROTO_CLIENT_TOOL = 3, /* deformctl, tests, other stream clients */
  PROTO_CLIENT_JSON = 4, /* a JSON-RPC client (presence.set) */
  PROTO_CLIENT_KIND_COUNT
} proto_client_kind;

/* INFO flags. */
#define PROTO_PRES_EDITING 0x01 /* joined as an editor (else watching) */
#define PROTO_PRES_PRIVATE 0x02 /* shares no cursor or camera (ABOUT too) */
#define PROTO_PRES_REMOTE 0x04  /* joined through another node of the cluster (INFO only) */
#define PROTO_PRES_INFO_FLAGS 0x07
/* STATE flags: which parts hold a value (the others are zeros). */
#define PROTO_PRES_CURSOR 0x01 /* hit, normal, radius, tool */
#define PROTO_PRES_CAMERA 0x02 /* eye, target, fov */
#define PROTO_PRES_STATE_FLAGS 0x03

/* Tools a cursor names: none, an ARAP/Laplacian drag, or 2 + the brush of EDIT BRUSH (0..7). */
#define PROTO_TOOL_NONE 0
#define PROTO_TOOL_DEFORM 1
#define PROTO_TOOL_BRUSH0 2
#define PROTO_TOOL_MAX 9

#define PROTO_MAX_PRESENCE_RECORDS 4096 /* in one frame */
#define PROTO_PRES_STATE_SIZE 63        /* a STATE record, kind byte included */

typedef struct proto_presence_info {
  uint32_t id;      /* the participant, unique in the session while it is there */
  uint8_t role;     /* PROTO_ROLE_VIEWER or PROTO_ROLE_EDITOR */
  uint8_t client;   /* proto_client_kind */
  uint8_t flags;    /* PROTO_PRES_EDITING | PRIVATE | REMOTE */
  uint32_t idle_ms; /* since it last edited or moved, when the frame was made */
  proto_str author; /* 1 to PROTO_MAX_AUTHOR bytes, no control characters */
} proto_presence_info;

typedef struct proto_presence_state {
  uint32_t id;      /* 0 from a client (the server knows who sent it) */
  uint8_t flags;    /* PROTO_PRES_CURSOR | CAMERA */
  uint8_t tool;     /* PROTO_TOOL_* */
  float hit[3];     /* the cursor: the point under it on the surface */
  float normal[3];  /* ... the surface's normal there (unit length, or zeros) */
  float radius;     /* the brush circle's radius in mesh units, >= 0 (0: none) */
  float eye[3];     /* the camera: where it is */
  float target[3];  /* ... what it looks at */
  float fov;        /* ... vertical field of view in radians, 0 < fov < pi */
} proto_presence_state;

typedef struct proto_presence_rec {
  uint8_t kind; /* proto_presence_kind */
  union {
    proto_presence_info info; /* INFO */
    uint32_t id;              /* LEAVE */
    proto_presence_state state; /* STATE */
    struct {
      uint8_t client, flags;  /* ABOUT: proto_client_kind, PROTO_PRES_PRIVATE or 0 */
    } about;
  } u;
} proto_presence_rec;

/* Encoding: proto_presence_begin starts a frame (header version 1, session_version 0), the put
 * functions append records, proto_presence_end closes it (0, PROTO_ENOMEM or PROTO_ETOOBIG).
 * The put functions return 0 or PROTO_ENOMEM; they do not check values (decoders do). */
size_t proto_presence_begin(proto_buf *b);
int proto_presence_put_info(proto_buf *b, const proto_presence_info *m);
int proto_presence_put_leave(proto_buf *b, uint32_t id);
int proto_presence_put_state(proto_buf *b, const proto_presence_state *m);
int proto_presence_put_clear(proto_buf *b);
int proto_presence_put_about(proto_buf *b, uint8_t client, uint8_t flags);
int proto_presence_end(proto_buf *b, size_t at);

/* Decoding: a cursor over one payload (zero-copy: an INFO's author points into it). */
typedef struct proto_presence_iter {
  const uint8_t *p;
  size_t n, at;
  uint32_t count;
} proto_presence_iter;

void proto_presence_iter_init(proto_presence_iter *it, const uint8_t *p, size_t n);
/* The next record into *r: 1, 0 at the end, or PROTO_ETRUNCATED, PROTO_EINVAL (an unknown kind,
 * role, client kind, flag or tool; an author that is empty, too long or holds a control
 * character; a radius below 0; a fov outside (0, pi) when CAMERA is set), PROTO_ENONFINITE,
 * PROTO_ETOOBIG (over PROTO_MAX_PRESENCE_RECORDS records). */
int proto_presence_next(proto_presence_iter *it, proto_presence_rec *r);
/* Checks a whole payload: 0 or the first record's error, and the record count in *count. */
int proto_decode_presence(const uint8_t *p, size_t n, uint32_t *count);

/* An author's colour, the same in every viewer (deform-view, the page: viewer/web/protocol.js
 * presenceColour): FNV-1a 32 of the name's bytes, its value mod 360 a hue, turned into RGB
 * with value 230 and chroma 161 in integers only, so that C and JavaScript give the same bytes
 * (docs/protocol.md §16.4). */
void proto_presence_colour(const char *name, size_t len, uint8_t rgb[3]);

#ifdef __cplusplus
}
#endif

#endif
