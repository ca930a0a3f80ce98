"""The trace's records and the byte-level pieces of its binary form (docs/trace-format.md)."""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass
from typing import List, Union

import numpy as np

FORMAT_VERSION = 1
FILE_MAGIC = b"KVTRACE1"
FRAME_MAGIC = b"KVTF"
END_MAGIC = b"KVTE"
CODEC_RAW, CODEC_ZSTD = 0, 1
TAG_BEGIN, TAG_END, TAG_FORWARD = 1, 2, 3
FRAME_HEADER = struct.Struct("<4sIIII")  # magic, codec, raw_size, stored_size, records
END_MARKER = struct.Struct("<4sQ")  # magic, total records

# The Flash-Next reference geometry (model/geometry.hpp): the fields a header may omit that
# the recorder itself needs. Validation's own defaults come from validation.json.
DEFAULT_GEOMETRY = {
    "total_layers": 48,
    "qsa_layer_ids": [3, 7, 11, 15, 19, 23, 27, 31, 35, 39, 43, 47],
    "compress_ratio": 4,
    "select_budget": 2048,
    "page_size": 64,
}


class TraceError(Exception):
    """A record that breaks the trace's rules, or a file that cannot be read or written."""


@dataclass
class Row:
    request: object  # an int, or any hashable key the writer maps to an int in the file
    position: int
    count: int = 1
    kind: str = "decode"  # or "prefill"


@dataclass
class Begin:
    id: object
    prompt_tokens: int
    shared_with: object = 0
    shared_pages: int = 0


@dataclass
class End:
    id: object


@dataclass
class Forward:
    rows: List[Row]
    selections: List[List[np.ndarray]]  # [layer][row] ascending block ids

    def __eq__(self, other):
        if not isinstance(other, Forward) or self.rows != other.rows:
            return False
        if len(self.selections) != len(other.selections):
            return False
        return all(
            len(a) == len(b) and all(np.array_equal(x, y) for x, y in zip(a, b))
            for a, b in zip(self.selections, other.selections)
        )


Record = Union[Begin, End, Forward]


def full_geometry(geometry) -> dict:
    g = dict(geometry or {})
    for k, v in DEFAULT_GEOMETRY.items():
        g.setdefault(k, v)
    return g


def header_bytes(geometry: dict, producer: str, created: str) -> bytes:
    js = json.dumps(header_json(geometry, producer, created), separators=(",", ":")).encode()
    return FILE_MAGIC + struct.pack("<II", FORMAT_VERSION, len(js)) + js


def header_json(geometry: dict, producer: str, created: str) -> dict:
    return {"kvtier_trace": FORMAT_VERSION, "geometry": geometry, "producer": producer,
            "created": created}


def record_json(r: Record) -> dict:
    """The JSON-lines form of a record whose request ids are already the file's integers."""
    if isinstance(r, Begin):
        return {"begin": {"id": r.id, "prompt_tokens": r.prompt_tokens,
                          "shared_with": r.shared_with, "shared_pages": r.shared_pages}}
    if isinstance(r, End):
        return {"end": {"id": r.id}}
    return {"forward": {
        "rows": [{"request": w.request, "position": w.position, "count": w.count,
                  "kind": w.kind} for w in r.rows],
        "selections": [[np.asarray(s).tolist() for s in per_row] for per_row in r.selections]}}


# ----------------------------------------------------------------------------- varints
def varint_bytes(values: np.ndarray) -> np.ndarray:
    """LEB128 of every value of a non-negative int64 array, concatenated: a uint8 array.

    Vectorised over the values: one pass per 7-bit group (at most 10), no loop per value.
    """
    v = np.asarray(values, dtype=np.uint64)
    if v.size == 0:
        return np.zeros(0, np.uint8)
    if int(v.max()) < 0x80:  # the common case: every value takes one byte
        return v.astype(np.uint8)
    # groups[i]: bytes value i takes (1 + the number of 7-bit groups above its lowest)
    groups = np.ones(v.shape, np.int64)
    rest = v >> np.uint64(7)
    while rest.any():
        groups += rest != 0
        rest >>= np.uint64(7)
    ends = np.cumsum(groups)
    starts = ends - groups
    out = np.empty(int(ends[-1]), np.uint8)
    shift = np.uint64(0)
    for g in range(int(groups.max())):
        live = groups > g
        if g == 0:
            idx, vals, more = starts, v, groups > 1
        else:
            idx, vals, more = starts[live] + g, v[live], groups[live] > g + 1
        low7 = ((vals >> shift) & np.uint64(0x7F)).astype(np.uint8)
        out[idx] = low7 | (more.astype(np.uint8) << 7)
        shift += np.uint64(7)
    return out


def put_varint(out: bytearray, x: int) -> None:
    if x < 0:
        raise TraceError(f"cannot code the negative value {x} as a varint")
    while x >= 0x80:
        out.append((x & 0x7F) | 0x80)
        x >>= 7
    out.append(x)
