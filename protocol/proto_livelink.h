/*
 * proto_livelink.h — Live Link Face's UDP frames (Epic Games' iPhone app, packet version 6, the
 * layout of the app's 1.x releases that PyLiveLinkFace decodes, JimWest/PyLiveLinkFace
 * pylivelinkface.py `decode`): one datagram per frame,
 *
 *   offset      size  field
 *   0           4     packet version, little-endian uint32: 6
 *   4           37    the device's id (text, as sent: "$" and a UUID)
 *   41          4     the subject name's length L, big-endian int32 (0 to 255 here)
 *   45          L     the subject name (UTF-8)
 *   45+L        16    frame time: frame number (int32), subframe (float32), frame rate
 *                     numerator and denominator (int32 each), big-endian
 *   61+L        1     the number of values that follow: 61
 *   62+L        244   61 big-endian float32: ARKit's 52 blendshapes in ARFaceAnchor order
 *                     (eyeBlinkLeft ... tongueOut), then head yaw, pitch, roll and both eyes'
 *                     yaw, pitch, roll
 *
 * A datagram of any other size, version or count is refused (a frame that promised 61 values
 * and carried another number of bytes would shift every name).
 *
 * DOES NOT do I/O or allocate.
 */
#ifndef DEFORMD_PROTO_LIVELINK_H
#define DEFORMD_PROTO_LIVELINK_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define PROTO_LIVELINK_VERSION 6
#define PROTO_LIVELINK_VALUES 61  /* values in a frame */
#define PROTO_LIVELINK_SHAPES 52  /* of them, ARKit blendshapes; the rest are head and eye angles */
#define PROTO_LIVELINK_ID 37
#define PROTO_LIVELINK_MAX_NAME 255
#define PROTO_LIVELINK_SIZE(name_len) (62u + (name_len) + 4u * PROTO_LIVELINK_VALUES)

typedef struct proto_livelink_frame {
  const char *subject;  /* inside the datagram, not NUL-terminated */
  uint32_t subject_len;
  int32_t frame_number, rate_num, rate_den;
  float subframe;
  float values[PROTO_LIVELINK_VALUES]; /* may hold NaN or Inf: the reader decides */
} proto_livelink_frame;

/* Decodes one datagram p[0..n). Returns 0, or PROTO_ETRUNCATED / PROTO_ETRAILING (the size the
 * name's length implies is not n), PROTO_EVERSION (not version 6), PROTO_EINVAL (a name length
 * below 0 or over PROTO_LIVELINK_MAX_NAME, a count other than 61). */
int proto_livelink_decode(const uint8_t *p, size_t n, proto_livelink_frame *out);

/* The name of value i (0 .. 60): ARKit's for 0 .. 51 ("eyeBlinkLeft"), then "headYaw",
 * "headPitch", "headRoll", "leftEyeYaw", ... "rightEyeRoll". Static storage; NULL past 60. */
const char *proto_livelink_name(uint32_t i);

#ifdef __cplusplus
}
#endif
#endif
