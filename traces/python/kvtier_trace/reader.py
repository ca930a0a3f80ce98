"""TraceReader: streams the records of a binary or JSON-lines trace (for tests and tools;
kvtier's C++ reader is the fast one)."""

from __future__ import annotations

import json
import struct
from typing import Iterator

import numpy as np

from .format import (CODEC_ZSTD, END_MAGIC, FILE_MAGIC, FORMAT_VERSION, FRAME_MAGIC, TAG_BEGIN,
                     TAG_END, TAG_FORWARD, Begin, End, Forward, Record, Row, TraceError,
                     full_geometry)

try:
    import zstandard
except ImportError:
    zstandard = None


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

    def varints(self, n: int) -> np.ndarray:
        d, p = self.data, self.pos
        chunk = d[p:p + n]
        if len(chunk) == n and max(chunk, default=0) < 0x80:  # every value one byte
            self.pos += n
            return np.frombuffer(chunk, np.uint8).astype(np.int64)
        return np.array([self.varint() for _ in range(n)], np.int64)

    def byte(self) -> int:
        if self.pos >= len(self.data):
            self.fail("truncated record")
        b = self.data[self.pos]
        self.pos += 1
        return b


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
            text = self.f.read(n)
            if len(text) < n:
                self._fail_at(16, "truncated header")
            head = json.loads(text)
        elif first.lstrip().startswith(b"{"):
            self.binary = False
            self.f.seek(0)
            head = json.loads(self.f.readline())
        else:
            self._fail_at(0, "not a kvtier trace")
        if head.get("kvtier_trace") != FORMAT_VERSION:
            raise TraceError(f"{path}: unsupported trace format version {head.get('kvtier_trace')}")
        self.geometry = full_geometry(head["geometry"])
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
            head = self.f.read(16)
            if len(head) < 16:
                self._fail_at(at, "truncated frame header")
            codec, raw_size, stored, records = struct.unpack("<IIII", head)
            payload = self.f.read(stored)
            if len(payload) != stored:
                self._fail_at(at, "truncated frame")
            if codec == CODEC_ZSTD:
                if zstandard is None:
                    self._fail_at(at, "zstd frame but the zstandard module is missing")
                try:
                    raw = zstandard.ZstdDecompressor().decompress(payload,
                                                                  max_output_size=raw_size)
                except zstandard.ZstdError as e:
                    self._fail_at(at, f"corrupt zstd frame: {e}")
                if len(raw) != raw_size:
                    self._fail_at(at, "corrupt zstd frame (content size)")
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
                rem = np.cumsum(c.varints(nrem) + 1) - 1
                add = np.cumsum(c.varints(nadd) + 1) - 1
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
    try:
        recs = list(r)
    finally:
        r.close()
    return r.header, recs
