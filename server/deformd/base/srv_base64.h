/*
 * srv_base64.h — base64 (RFC 4648, padded, no line breaks) as JSON-RPC carries binary data
 * (mesh.upload's chunks, texclip.upload's frames).
 *
 * DOES NOT encode or know what the bytes are.
 */
#ifndef DEFORMD_SRV_BASE64_H
#define DEFORMD_SRV_BASE64_H

#include <stddef.h>
#include <stdint.h>

/* Decodes n characters into a new buffer (*out, the caller frees; *len bytes). Returns 0, -1
 * when the text is not base64, or -2 when out of memory. */
int srv_base64_decode(const char *in, size_t n, uint8_t **out, size_t *len);

#endif
