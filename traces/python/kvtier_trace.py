"""Read and write kvtier selection traces from Python (numpy only; libzstd through ctypes).

A trace is a header (format version, geometry, producer, created) and a stream of records:
``Begin(id, prompt_tokens, shared_with, shared_pages)``, ``End(id)`` and ``Forward(rows,
selections)`` where ``rows`` is a list of ``Row(request, position, count, kind)`` and
``selections[layer][row]`` is an ascending numpy int32 array of selected block ids.
docs/trace-format.md describes both forms byte by byte.

Recording from an engine's attention backend (the hook goes right after the indexer's
top-k, once per QSA layer and forward)::

    import kvtier_trace as kt
    w = kt.TraceWriter("run.ktr", geometry={"page_size": 64}, producer="myengine 0.3")
    w.begin(req_id, prompt_tokens)                # when the scheduler admits a request
    fwd = w.forward(rows=[kt.Row(req_id, pos, 1, "decode"), ...])
    for layer, topk in enumerate(per_layer_topk): # topk: [rows, k] block ids, -1 padded
        fwd.set_layer(layer, topk)                # (a prefill chunk: the union of its tokens)
    fwd.commit()
    w.end(req_id)                                 # when the request finishes
    w.close()

The binary writer compresses frames with libzstd when it can load it (ctypes) and stores
them raw otherwise; both read back in C++ and here.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import json
import struct
from dataclasses import dataclass, field
from typing import Iterator, List, Optional, Sequence, Union

import numpy as np

FORMAT_VERSION = 1
FILE_MAGIC = b"KVTRACE1"
FRAME_MAGIC = b"KVTF"
END_MAGIC = b"KVTE"
CODEC_RAW, CODEC_ZSTD = 0, 1
TAG_BEGIN, TAG_END, TAG_FORWARD = 1, 2, 3

# The Flash-Next reference geometry (model/geometry.hpp): fields a header may omit.
DEFAULT_GEOMETRY = {
    "total_layers": 48,
    "qsa_layer_ids": [3, 7, 11, 15, 19, 23, 27, 31, 35, 39, 43, 47],
    "compress_ratio": 4,
    "select_budget": 2048,
    "page_size": 64,
}


class TraceError(Exception):
    """A trace that cannot be read; the message names the record and byte offset."""


@dataclass
class Row:
    request: int
    position: int
    count: int = 1
    kind: str = "decode"  # or "prefill"


@dataclass
class Begin:
    id: int
    prompt_tokens: int
    shared_with: int = 0
    shared_pages: int = 0


@dataclass
class End:
    id: int


@dataclass
class Forward:
    rows: List[Row]
    selections: List[List[np.ndarray]]  # [layer][row] ascending int32 block ids

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


# ----------------------------------------------------------------------------- libzstd
class _Zstd:
    def __init__(self):
        name = ctypes.util.find_library("zstd") or "libzstd.so.1"
        self.lib = ctypes.CDLL(name)
        L = self.lib
        L.ZSTD_compressBound.restype = ctypes.c_size_t
        L.ZSTD_compressBound.argtypes = [ctypes.c_size_t]
        L.ZSTD_compress.restype = ctypes.c_size_t
        L.ZSTD_compress.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p,
                                    ctypes.c_size_t, ctypes.c_int]
        L.ZSTD_decompress.restype = ctypes.c_size_t
        L.ZSTD_decompress.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p,
                                      ctypes.c_size_t]
        L.ZSTD_isError.restype = ctypes.c_uint
        L.ZSTD_isError.argtypes = [ctypes.c_size_t]

    def compress(self, data: bytes, level: int) -> bytes:
        cap = self.lib.ZSTD_compressBound(len(data))
        out = ctypes.create_string_buffer(cap)
        n = self.lib.ZSTD_compress(out, cap, data, len(data), level)
        if self.lib.ZSTD_isError(n):
            raise TraceError("zstd compression failed")
        return out.raw[:n]

    def decompress(self, data: bytes, size: int) -> bytes:
        out = ctypes.create_string_buffer(max(size, 1))
        n = self.lib.ZSTD_decompress(out, size, data, len(data))
        if self.lib.ZSTD_isError(n) or n != size:
            raise TraceError("corrupt zstd frame")
        return out.raw[:size]


_zstd: Optional[_Zstd] = None
_zstd_tried = False


def zstd() -> Optional[_Zstd]:
    global _zstd, _zstd_tried
    if not _zstd_tried:
        _zstd_tried = True
        try:
            _zstd = _Zstd()
        except OSError:
            _zstd = None
    return _zstd


# ----------------------------------------------------------------------------- varints
def _put_varints(out: bytearray, values: np.ndarray) -> None:
    """Appends LEB128 varints of non-negative integers (vectorised for the common sizes)."""
    v = np.asarray(values, dtype=np.uint64)
    if v.size == 0:
        return
    if int(v.max()) < 0x80:
        out += v.astype(np.uint8).tobytes()
        return
    for x in v.tolist():
        while x >= 0x80:
            out.append((x & 0x7F) | 0x80)
            x >>= 7
        out.append(x)


def _put_varint(out: bytearray, x: int) -> None:
    while x >= 0x80:
        out.append((x & 0x7F) | 0x80)
        x >>= 7
    out.append(x)


class _Cursor:
    def __init__(self, data: bytes, fail):
        self.data, self.pos, self.fail = data, 0, fail

    def varint(self) -> int:
        r, shift, d = 0, 0, self.data
        while True:
            if self.pos >= len(d) or shift > 63:
                self.fail("corrupt or truncated varint")
            b = d[self.pos]
            self.pos += 1
            r |= (b & 0x7F) << shift
            if b < 0x80:
                return r
            shift += 7

    def byte(self) -> int:
        if self.pos >= len(self.data):
            self.fail("truncated record")
        b = self.data[self.pos]
        self.pos += 1
        return b


# ----------------------------------------------------------------------------- header
def _full_geometry(geometry: Optional[dict]) -> dict:
    g = dict(geometry or {})
    for k, v in DEFAULT_GEOMETRY.items():
        g.setdefault(k, v)
    return g


def _header_json(geometry: dict, producer: str, created: str) -> dict:
    return {"kvtier_trace": FORMAT_VERSION, "geometry": geometry, "producer": producer,
            "created": created}


def _as_sorted_ids(ids) -> np.ndarray:
    a = np.asarray(ids, dtype=np.int64).ravel()
    a = a[a >= 0]  # drop -1 padding
    return np.unique(a).astype(np.int32)


# ----------------------------------------------------------------------------- writer
class _ForwardBuilder:
    def __init__(self, writer: "TraceWriter", rows: Sequence[Row]):
        self.writer, self.rows = writer, list(rows)
        self.sel: List[Optional[List[np.ndarray]]] = [None] * writer.layers

    def set_layer(self, layer: int, topk) -> None:
        """topk: [rows, k] block ids (any order, -1 padding) or a list of per-row arrays."""
        self.sel[layer] = [_as_sorted_ids(r) for r in topk]

    def commit(self) -> None:
        if any(s is None for s in self.sel):
            raise TraceError("forward committed before every QSA layer was set")
        self.writer.write(Forward(self.rows, self.sel))


class TraceWriter:
    """Writes a trace; binary (".ktr") unless the path ends in .jsonl/.json or binary=False."""

    def __init__(self, path: str, geometry: Optional[dict] = None, producer: str = "",
                 created: str = "", binary: Optional[bool] = None, zstd_level: int = 3,
                 frame_bytes: int = 1 << 20):
        self.geometry = _full_geometry(geometry)
        self.layers = len(self.geometry["qsa_layer_ids"])
        self.ratio = int(self.geometry["compress_ratio"])
        self.page_size = int(self.geometry["page_size"])
        # the geometry's largest context, as kvtier's validator bounds every request by it
        # (fields the geometry leaves out take kvtier's defaults)
        self.max_context = int(int(self.geometry.get("rope_max_positions", 262144)) *
                               float(self.geometry.get("yarn_factor", 4.0)))
        if binary is None:
            binary = not (path.endswith(".jsonl") or path.endswith(".json"))
        self.binary = binary
        self.f = open(path, "wb")
        self.total = 0
        self.open_requests = {}  # id -> [layer] previous selection
        head = _header_json(self.geometry, producer, created)
        if binary:
            self.codec = CODEC_ZSTD if (zstd_level > 0 and zstd() is not None) else CODEC_RAW
            self.level, self.frame_bytes = zstd_level, frame_bytes
            self.raw, self.frame_records = bytearray(), 0
            js = json.dumps(head, separators=(",", ":")).encode()
            self.f.write(FILE_MAGIC + struct.pack("<II", FORMAT_VERSION, len(js)) + js)
        else:
            self.f.write(json.dumps(head, separators=(",", ":")).encode() + b"\n")

    # Convenience for engines.
    def begin(self, id: int, prompt_tokens: int, shared_with: int = 0, shared_pages: int = 0):
        self.write(Begin(id, prompt_tokens, shared_with, shared_pages))

    def end(self, id: int):
        self.write(End(id))

    def forward(self, rows: Sequence[Row]) -> _ForwardBuilder:
        return _ForwardBuilder(self, rows)

    def _check(self, r: Record) -> None:
        where = f"record {self.total}"
        if isinstance(r, Begin):
            if r.id in self.open_requests:
                raise TraceError(f"{where}: request {r.id} begins twice")
            if max(r.prompt_tokens, r.shared_pages * self.page_size) > self.max_context:
                raise TraceError(f"{where}: request {r.id} is beyond the geometry's largest "
                                 f"context, {self.max_context} tokens")
        elif isinstance(r, End):
            if r.id not in self.open_requests:
                raise TraceError(f"{where}: request {r.id} ends but is not open")
        else:
            if len(r.selections) != self.layers:
                raise TraceError(f"{where}: forward has {len(r.selections)} layers but the "
                                 f"geometry has {self.layers} QSA layers")
            seen = set()
            for row in r.rows:
                if row.request not in self.open_requests or row.request in seen:
                    raise TraceError(f"{where}: row of request {row.request} not open or twice")
                seen.add(row.request)
                if row.position + row.count > self.max_context:
                    raise TraceError(f"{where}: row of request {row.request} at position "
                                     f"{row.position} + count {row.count} is beyond the "
                                     f"geometry's largest context, {self.max_context} tokens")
            for l, per_row in enumerate(r.selections):
                for row, ids in zip(r.rows, per_row):
                    ids = np.asarray(ids)
                    if ids.size and (np.any(np.diff(ids) <= 0) or ids[0] < 0 or
                                     ids[-1] >= (row.position + row.count) // self.ratio):
                        raise TraceError(f"{where}: selection of request {row.request} at "
                                         f"layer {l} not ascending or beyond the context")

    def write(self, r: Record) -> None:
        self._check(r)
        if isinstance(r, Begin):
            self.open_requests[r.id] = [np.zeros(0, np.int32)] * self.layers
        elif isinstance(r, End):
            del self.open_requests[r.id]
        if self.binary:
            self._encode(r)
        else:
            self.f.write(json.dumps(_record_json(r), separators=(",", ":")).encode() + b"\n")
        self.total += 1

    def _encode(self, r: Record) -> None:
        out = self.raw
        if isinstance(r, Begin):
            out.append(TAG_BEGIN)
            for x in (r.id, r.prompt_tokens, r.shared_with, r.shared_pages):
                _put_varint(out, x)
        elif isinstance(r, End):
            out.append(TAG_END)
            _put_varint(out, r.id)
        else:
            out.append(TAG_FORWARD)
            _put_varint(out, len(r.rows))
            for row in r.rows:
                for x in (row.request, row.position, row.count):
                    _put_varint(out, x)
                out.append(1 if row.kind == "decode" else 0)
            for l in range(self.layers):
                for i, row in enumerate(r.rows):
                    cur = np.asarray(r.selections[l][i], dtype=np.int32)
                    prev = self.open_requests[row.request][l]
                    removed = np.nonzero(~np.isin(prev, cur, assume_unique=True))[0]
                    added = cur[~np.isin(cur, prev, assume_unique=True)].astype(np.int64)
                    _put_varint(out, len(removed))
                    _put_varint(out, len(added))
                    _put_varints(out, np.diff(removed.astype(np.int64), prepend=-1) - 1)
                    _put_varints(out, np.diff(added, prepend=-1) - 1)
                    self.open_requests[row.request][l] = cur
        self.frame_records += 1
        if len(self.raw) >= self.frame_bytes:
            self._flush()

    def _flush(self) -> None:
        if not self.frame_records:
            return
        raw = bytes(self.raw)
        payload = zstd().compress(raw, self.level) if self.codec == CODEC_ZSTD else raw
        self.f.write(FRAME_MAGIC + struct.pack("<IIII", self.codec, len(raw), len(payload),
                                               self.frame_records) + payload)
        self.raw, self.frame_records = bytearray(), 0

    def close(self) -> None:
        if self.f.closed:
            return
        if self.binary:
            self._flush()
            self.f.write(END_MAGIC + struct.pack("<Q", self.total))
        self.f.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def _record_json(r: Record) -> dict:
    if isinstance(r, Begin):
        return {"begin": {"id": r.id, "prompt_tokens": r.prompt_tokens,
                          "shared_with": r.shared_with, "shared_pages": r.shared_pages}}
    if isinstance(r, End):
        return {"end": {"id": r.id}}
    return {"forward": {
        "rows": [{"request": w.request, "position": w.position, "count": w.count,
                  "kind": w.kind} for w in r.rows],
        "selections": [[np.asarray(s).tolist() for s in per_row] for per_row in r.selections]}}


# ----------------------------------------------------------------------------- reader
class TraceReader:
    """Streams the records of a binary or JSON-lines trace (one frame or line at a time)."""

    def __init__(self, path: str):
        self.path = path
        self.f = open(path, "rb")
        first = self.f.read(8)
        self.index = 0
        if first.startswith(FILE_MAGIC[:4]):
            self.binary = True
            if first != FILE_MAGIC:
                self._fail_at(0, "not a kvtier binary trace (wrong magic)")
            rest = self.f.read(8)
            if len(rest) < 8:
                self._fail_at(8, "truncated header")
            version, n = struct.unpack("<II", rest)
            if version != FORMAT_VERSION:
                self._fail_at(8, f"unsupported trace format version {version}")
            head = json.loads(self.f.read(n))
        elif first.lstrip().startswith(b"{"):
            self.binary = False
            self.f.seek(0)
            head = json.loads(self.f.readline())
        else:
            self._fail_at(0, "not a kvtier trace")
        if head.get("kvtier_trace") != FORMAT_VERSION:
            raise TraceError(f"{path}: unsupported trace format version {head.get('kvtier_trace')}")
        self.geometry = _full_geometry(head["geometry"])
        self.header = head
        self.layers = len(self.geometry["qsa_layer_ids"])
        self.prev = {}

    def _fail_at(self, offset: int, what: str):
        raise TraceError(f"{self.path}: byte offset {offset}: {what}")

    def __iter__(self) -> Iterator[Record]:
        return self._binary() if self.binary else self._jsonl()

    def _jsonl(self) -> Iterator[Record]:
        for line in self.f:
            if not line.strip():
                continue
            o = json.loads(line)
            if "begin" in o:
                b = o["begin"]
                yield Begin(b["id"], b["prompt_tokens"], b.get("shared_with", 0),
                            b.get("shared_pages", 0))
            elif "end" in o:
                yield End(o["end"]["id"])
            else:
                f = o["forward"]
                rows = [Row(w["request"], w["position"], w.get("count", 1), w["kind"])
                        for w in f["rows"]]
                sel = [[np.asarray(s, dtype=np.int32) for s in per_row]
                       for per_row in f["selections"]]
                yield Forward(rows, sel)
            self.index += 1

    def _binary(self) -> Iterator[Record]:
        while True:
            at = self.f.tell()
            magic = self.f.read(4)
            if magic == END_MAGIC:
                (total,) = struct.unpack("<Q", self.f.read(8))
                if total != self.index:
                    self._fail_at(at, "end marker count does not match")
                return
            if magic != FRAME_MAGIC:
                self._fail_at(at, "truncated or bad frame magic")
            codec, raw_size, stored, records = struct.unpack("<IIII", self.f.read(16))
            payload = self.f.read(stored)
            if len(payload) != stored:
                self._fail_at(at, "truncated frame")
            if codec == CODEC_ZSTD:
                z = zstd()
                if z is None:
                    self._fail_at(at, "zstd frame but libzstd is not available")
                raw = z.decompress(payload, raw_size)
            else:
                raw = payload

            def fail(what, at=at):
                raise TraceError(f"{self.path}: record {self.index} (frame at byte offset "
                                 f"{at}, byte {cur.pos} of its decoded payload): {what}")

            cur = _Cursor(raw, fail)
            for _ in range(records):
                yield self._record(cur, fail)
                self.index += 1

    def _record(self, c: _Cursor, fail) -> Record:
        tag = c.byte()
        if tag == TAG_BEGIN:
            r = Begin(c.varint(), c.varint(), c.varint(), c.varint())
            self.prev[r.id] = [np.zeros(0, np.int32)] * self.layers
            return r
        if tag == TAG_END:
            r = End(c.varint())
            self.prev.pop(r.id, None)
            return r
        if tag != TAG_FORWARD:
            fail(f"unknown record tag {tag}")
        rows = []
        for _ in range(c.varint()):
            req, pos, cnt = c.varint(), c.varint(), c.varint()
            rows.append(Row(req, pos, cnt, "decode" if c.byte() == 1 else "prefill"))
            if req not in self.prev:
                fail(f"row refers to request {req}, which is not open")
        sel = []
        for l in range(self.layers):
            per_row = []
            for row in rows:
                prev = self.prev[row.request][l]
                nrem, nadd = c.varint(), c.varint()
                rem = np.cumsum(np.array([c.varint() for _ in range(nrem)], np.int64) + 1) - 1
                add = np.cumsum(np.array([c.varint() for _ in range(nadd)], np.int64) + 1) - 1
                if nrem and rem[-1] >= len(prev):
                    fail("removed index beyond the previous selection")
                keep = np.ones(len(prev), bool)
                keep[rem] = False
                new = np.sort(np.concatenate([prev[keep], add.astype(np.int32)]))
                self.prev[row.request][l] = new
                per_row.append(new)
            sel.append(per_row)
        return Forward(rows, sel)

    def close(self):
        self.f.close()


def read_trace(path: str):
    """(header dict, list of records): for small traces and tests."""
    r = TraceReader(path)
    recs = list(r)
    r.close()
    return r.header, recs
