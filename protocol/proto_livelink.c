/*
 * proto_livelink.c — Live Link Face datagrams decoded (proto_livelink.h): sizes checked before
 * any read, big-endian floats, and the 61 names in the order the app sends them.
 *
 * DOES NOT map names to a mesh's targets (srv_face.c's mapping does).
 */
#include <string.h>

#include "proto_frame.h"
#include "proto_livelink.h"

/* ARFaceAnchor.BlendShapeLocation in the order Live Link Face sends them (PyLiveLinkFace's
 * FaceBlendShape enum), then the head and eye angles. */
static const char *const NAMES[PROTO_LIVELINK_VALUES] = {
    "eyeBlinkLeft", "eyeLookDownLeft", "eyeLookInLeft", "eyeLookOutLeft", "eyeLookUpLeft", "eyeSquintLeft",
    "eyeWideLeft", "eyeBlinkRight", "eyeLookDownRight", "eyeLookInRight", "eyeLookOutRight", "eyeLookUpRight",
    "eyeSquintRight", "eyeWideRight", "jawForward", "jawLeft", "jawRight", "jawOpen", "mouthClose",
    "mouthFunnel", "mouthPucker", "mouthLeft", "mouthRight", "mouthSmileLeft", "mouthSmileRight",
    "mouthFrownLeft", "mouthFrownRight", "mouthDimpleLeft", "mouthDimpleRight", "mouthStretchLeft",
    "mouthStretchRight", "mouthRollLower", "mouthRollUpper", "mouthShrugLower", "mouthShrugUpper",
    "mouthPressLeft", "mouthPressRight", "mouthLowerDownLeft", "mouthLowerDownRight", "mouthUpperUpLeft",
    "mouthUpperUpRight", "browDownLeft", "browDownRight", "browInnerUp", "browOuterUpLeft", "browOuterUpRight",
    "cheekPuff", "cheekSquintLeft", "cheekSquintRight", "noseSneerLeft", "noseSneerRight", "tongueOut",
    "headYaw", "headPitch", "headRoll", "leftEyeYaw", "leftEyePitch", "leftEyeRoll", "rightEyeYaw",
    "rightEyePitch", "rightEyeRoll"};

const char *proto_livelink_name(uint32_t i) { return i < PROTO_LIVELINK_VALUES ? NAMES[i] : NULL; }

static uint32_t be32(const uint8_t *p) {
  return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | (uint32_t)p[3];
}

static float bef(const uint8_t *p) {
  uint32_t w = be32(p);
  float f;
  memcpy(&f, &w, 4);
  return f;
}

int proto_livelink_decode(const uint8_t *p, size_t n, proto_livelink_frame *out) {
  if (n < 45) return PROTO_ETRUNCATED;
  uint32_t version = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
  if (version != PROTO_LIVELINK_VERSION) return PROTO_EVERSION;
  int32_t len = (int32_t)be32(p + 41);
  if (len < 0 || len > PROTO_LIVELINK_MAX_NAME) return PROTO_EINVAL;
  size_t want = PROTO_LIVELINK_SIZE((size_t)len);
  if (n < want) return PROTO_ETRUNCATED;
  if (n > want) return PROTO_ETRAILING;
  const uint8_t *t = p + 45 + len;
  if (t[16] != PROTO_LIVELINK_VALUES) return PROTO_EINVAL;
  out->subject = (const char *)(p + 45);
  out->subject_len = (uint32_t)len;
  out->frame_number = (int32_t)be32(t);
  out->subframe = bef(t + 4);
  out->rate_num = (int32_t)be32(t + 8);
  out->rate_den = (int32_t)be32(t + 12);
  for (uint32_t i = 0; i < PROTO_LIVELINK_VALUES; i++) out->values[i] = bef(t + 17 + 4 * i);
  return 0;
}
