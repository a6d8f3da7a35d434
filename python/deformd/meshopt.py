"""Decoders of meshoptimizer's vertex codec (version 0) and index codec (versions 0 and 1), the
entropy codecs of protocol version 2 (docs/protocol.md §12.4, §12.6). A port of
viewer/web/meshopt.js (itself written from meshoptimizer 0.18's decoders), with the same checks
in the same order, so a body the C decoder refuses is refused here too. Pure Python: this is the
slow part of joining a large session without numpy or with it (a few seconds for 41,077
vertices); it does not encode."""
from typing import List, MutableSequence

_VERTEX_HEADER = 0xA0
_INDEX_HEADER = 0xE0
_BLOCK_BYTES = 8192
_BLOCK_MAX = 256
_GROUP = 16
_GROUP_DECODE_LIMIT = 24
_TAIL_MAX = 32


def _vertex_block_size(stride: int) -> int:
    n = (_BLOCK_BYTES // stride) & ~(_GROUP - 1)
    return n if n < _BLOCK_MAX else _BLOCK_MAX


def _decode_bytes(src: bytes, at: int, end: int, out: List[int], size: int) -> int:
    header = at
    header_size = (size // _GROUP + 3) >> 2
    if end - at < header_size:
        return -1
    at += header_size
    for i in range(0, size, _GROUP):
        if end - at < _GROUP_DECODE_LIMIT:
            return -1
        g = i // _GROUP
        bitslog2 = (src[header + (g >> 2)] >> ((g & 3) * 2)) & 3
        if bitslog2 == 0:
            out[i:i + _GROUP] = [0] * _GROUP
        elif bitslog2 == 3:
            out[i:i + _GROUP] = src[at:at + _GROUP]
            at += _GROUP
        else:
            bits = 2 if bitslog2 == 1 else 4
            mask = (1 << bits) - 1
            v = at + (_GROUP * bits) // 8
            for j in range(_GROUP):
                byte = src[at + ((j * bits) >> 3)]
                enc = (byte >> (8 - bits - ((j * bits) & 7))) & mask
                if enc == mask:
                    out[i + j] = src[v]
                    v += 1
                else:
                    out[i + j] = enc
            at = v
    return at


def decode_vertex_buffer(target: bytearray, count: int, stride: int, src: bytes) -> int:
    """Decodes `count` records of `stride` bytes into `target` (count * stride bytes). Returns 0,
    or meshoptimizer's -1 (not this codec or version), -2 (truncated), -3 (bytes left over)."""
    end = len(src)
    if end < 1 + stride:
        return -2
    head = src[0]
    if (head & 0xF0) != _VERTEX_HEADER or (head & 0x0F) > 0:
        return -1
    last = list(src[end - stride:end])
    block = _vertex_block_size(stride)
    buf = [0] * _BLOCK_MAX
    at = 1
    for base in range(0, count, block):
        n = block if base + block < count else count - base
        aligned = (n + _GROUP - 1) & ~(_GROUP - 1)
        for k in range(stride):
            at = _decode_bytes(src, at, end, buf, aligned)
            if at < 0:
                return -2
            p = last[k]
            o = base * stride + k
            for i in range(n):
                z = buf[i]
                p = (((-(z & 1)) ^ (z >> 1)) + p) & 0xFF
                target[o] = p
                o += stride
            last[k] = p
    tail = _TAIL_MAX if stride < _TAIL_MAX else stride
    if end - at != tail:
        return -3
    return 0


def decode_index_buffer(target: MutableSequence[int], index_count: int, src: bytes) -> int:
    """Decodes `index_count` indices (a multiple of 3) into `target`. Returns 0 or -1/-2/-3."""
    size = len(src)
    if size < 1 + index_count // 3 + 16:
        return -2
    if (src[0] & 0xF0) != _INDEX_HEADER:
        return -1
    version = src[0] & 0x0F
    if version > 1:
        return -1
    M = 0xFFFFFFFF
    edge = [M] * 32
    vfifo = [M] * 16
    eo = vo = nxt = last = 0
    fecmax = 13 if version >= 1 else 15
    code = 1
    at = 1 + index_count // 3
    safe_end = size - 16
    aux = safe_end

    def vbyte() -> int:
        nonlocal at
        lead = src[at]
        at += 1
        if lead < 128:
            return lead
        result = lead & 127
        shift = 7
        for _ in range(4):
            group = src[at]
            at += 1
            result = (result | ((group & 127) << shift)) & M
            shift += 7
            if group < 128:
                break
        return result

    def index(prev: int) -> int:
        v = vbyte()
        d = (v >> 1) ^ -(v & 1)
        return (prev + d) & M

    for i in range(0, index_count, 3):
        if at > safe_end:
            return -2
        codetri = src[code]
        code += 1
        if codetri < 0xF0:
            fe = codetri >> 4
            e = (eo - 1 - fe) & 15
            a = edge[2 * e]
            b = edge[2 * e + 1]
            fec = codetri & 15
            if fec < fecmax:
                cf = vfifo[(vo - 1 - fec) & 15]
                c = nxt if fec == 0 else cf
                fec0 = 1 if fec == 0 else 0
                nxt = (nxt + fec0) & M
                vfifo[vo] = c
                vo = (vo + fec0) & 15
            else:
                c = (last + (fec - (fec ^ 3))) & M if fec != 15 else index(last)
                last = c
                vfifo[vo] = c
                vo = (vo + 1) & 15
            target[i], target[i + 1], target[i + 2] = a, b, c
            edge[2 * eo], edge[2 * eo + 1] = c, b
            eo = (eo + 1) & 15
            edge[2 * eo], edge[2 * eo + 1] = a, c
            eo = (eo + 1) & 15
        elif codetri < 0xFE:
            codeaux = src[aux + (codetri & 15)]
            feb = codeaux >> 4
            fec = codeaux & 15
            a = nxt
            nxt = (nxt + 1) & M
            bf = vfifo[(vo - feb) & 15]
            b = nxt if feb == 0 else bf
            feb0 = 1 if feb == 0 else 0
            nxt = (nxt + feb0) & M
            cf = vfifo[(vo - fec) & 15]
            c = nxt if fec == 0 else cf
            fec0 = 1 if fec == 0 else 0
            nxt = (nxt + fec0) & M
            target[i], target[i + 1], target[i + 2] = a, b, c
            vfifo[vo] = a
            vo = (vo + 1) & 15
            vfifo[vo] = b
            vo = (vo + feb0) & 15
            vfifo[vo] = c
            vo = (vo + fec0) & 15
            for x, y in ((b, a), (c, b), (a, c)):
                edge[2 * eo], edge[2 * eo + 1] = x, y
                eo = (eo + 1) & 15
        else:
            codeaux = src[at]
            at += 1
            fea = 0 if codetri == 0xFE else 15
            feb = codeaux >> 4
            fec = codeaux & 15
            if codeaux == 0:
                nxt = 0
            if fea == 0:
                a = nxt
                nxt = (nxt + 1) & M
            else:
                a = 0
            if feb == 0:
                b = nxt
                nxt = (nxt + 1) & M
            else:
                b = vfifo[(vo - feb) & 15]
            if fec == 0:
                c = nxt
                nxt = (nxt + 1) & M
            else:
                c = vfifo[(vo - fec) & 15]
            if fea == 15:
                last = a = index(last)
            if feb == 15:
                last = b = index(last)
            if fec == 15:
                last = c = index(last)
            target[i], target[i + 1], target[i + 2] = a, b, c
            vfifo[vo] = a
            vo = (vo + 1) & 15
            vfifo[vo] = b
            vo = (vo + (1 if feb in (0, 15) else 0)) & 15
            vfifo[vo] = c
            vo = (vo + (1 if fec in (0, 15) else 0)) & 15
            for x, y in ((b, a), (c, b), (a, c)):
                edge[2 * eo], edge[2 * eo + 1] = x, y
                eo = (eo + 1) & 15
    if at != safe_end:
        return -3
    return 0
