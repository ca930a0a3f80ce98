"""TraceWriter: validation on the calling thread, coding, compression and I/O on its own.

The calling thread checks each record against the spec (validate.py), copies the top-k ids
off the caller's buffers (or starts their device-to-host copy) and queues the record; a
bounded queue hands it to the writer's thread, which codes it (encode.py), cuts frames of
about `frame_bytes` (or whatever is pending after `flush_seconds`), compresses them and
writes each whole frame with one write and a flush. A process killed mid-recording leaves a
file of whole frames that `kvtier trace repair` turns into a valid trace.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import queue
import sys
import threading
import time
import weakref
from typing import Dict, List, Optional, Sequence

import numpy as np

from .encode import DeltaEncoder, selections_of
from .format import (CODEC_RAW, CODEC_ZSTD, END_MAGIC, END_MARKER, FRAME_HEADER, FRAME_MAGIC,
                     TAG_BEGIN, TAG_END, Begin, End, Record, Row, TraceError,
                     full_geometry, header_bytes, header_json, put_varint)
from .staging import PinnedPool, Staged, row_stats, stage
from .validate import Limits, Validator, is_int_key, show

try:
    import zstandard
except ImportError:  # raw frames, which every reader accepts
    zstandard = None


class ForwardBuilder:
    """One forward: its rows, then each QSA layer's top-k (set_layer), then commit()."""

    __slots__ = ("_w", "keys", "positions", "counts", "kinds", "_staged", "_done")

    def __init__(self, writer: "TraceWriter", rows: Sequence):
        self._w = writer
        keys, positions, counts, kinds = [], [], [], []
        for row in rows:
            if not isinstance(row, Row):
                row = Row(*row)
            keys.append(row.request)
            positions.append(int(row.position))
            counts.append(int(row.count))
            kinds.append(row.kind)
        self.keys, self.positions, self.counts, self.kinds = keys, positions, counts, kinds
        self._staged: List[Optional[Staged]] = [None] * writer.layers
        self._done = False

    def set_layer(self, layer: int, topk) -> None:
        """topk: [rows, k] block ids of this QSA layer (index into qsa_layer_ids), in any
        order, negative ids as padding (numpy, a torch tensor on the CPU or a CUDA device,
        lists, or one array per row). A prefill row's ids are the union of its tokens'."""
        if not 0 <= layer < len(self._staged):
            raise TraceError(f"layer {layer} is not a QSA layer index (0..{len(self._staged) - 1})")
        self._staged[layer] = stage(topk, len(self.keys), self._w._pool)

    def commit(self) -> None:
        if self._done:
            raise TraceError("forward committed twice")
        self._done = True
        self._w._commit(self)


class TraceWriter:
    """Writes a trace: binary (".ktr") unless the path ends in .jsonl/.json or binary=False.

    geometry: the model's (model/geometry.hpp fields; omitted ones take kvtier's defaults).
    Request ids may be any hashable: non-negative ints are written as they are, other keys
    get the next integer not open (request_id(key) tells which). Errors found on the
    writer's thread (I/O; the checks of ids that were still on a device at commit) are
    raised by the next call, and by close().
    """

    def __init__(self, path: str, geometry: Optional[dict] = None, producer: str = "",
                 created: Optional[str] = None, binary: Optional[bool] = None,
                 zstd_level: int = 3, frame_bytes: int = 1 << 20, flush_seconds: float = 2.0,
                 queue_size: int = 16, fsync: bool = False):
        self.geometry = full_geometry(geometry)
        self.limits = Limits(self.geometry)
        self.layers = self.limits.layers
        self.path = path
        self.total = 0  # records accepted
        self._validator = Validator(self.limits)
        self._fid: Dict[object, int] = {}  # open request key -> id in the file
        self._key_of: Dict[int, object] = {}  # open id in the file -> key
        self._next_id = 1
        self._pool = PinnedPool(keep=4 * self.layers * (queue_size + 2))
        self._closed = False
        self._reported = False
        if binary is None:
            binary = not (path.endswith(".jsonl") or path.endswith(".json"))
        if created is None:
            created = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        codec = CODEC_RAW
        if binary and zstd_level > 0:
            if zstandard is None:
                print("kvtier_trace: the zstandard module is missing: frames are stored raw",
                      file=sys.stderr)
            else:
                codec = CODEC_ZSTD
        f = None
        try:
            f = open(path, "wb")
            if binary:
                f.write(header_bytes(self.geometry, producer, created))
            else:
                f.write(json.dumps(header_json(self.geometry, producer, created),
                                   separators=(",", ":")).encode() + b"\n")
            f.flush()
        except OSError as e:
            if f is not None:
                with contextlib.suppress(OSError):  # its buffer cannot be written either
                    f.close()
            raise TraceError(f"cannot create '{path}': {e.strerror or e}") from e
        self._sink = _Sink(f, binary, self._validator, codec, zstd_level, frame_bytes,
                           flush_seconds, fsync, queue_size)
        self._sink.start()
        _live.add(self)

    # ------------------------------------------------------------------ records
    def begin(self, id, prompt_tokens: int, shared_with=0, shared_pages: int = 0) -> int:
        """A request is admitted; its first shared_pages pages are request shared_with's
        (prefix cache). Returns its id in the file."""
        self._alive()
        prompt_tokens, shared_pages = int(prompt_tokens), int(shared_pages)
        bad = self._validator.check_begin(id, prompt_tokens, shared_with, shared_pages)
        if bad:
            raise TraceError(f"record {self.total}: {bad}")
        if is_int_key(id):
            fid = int(id)
            if fid in self._key_of:
                raise TraceError(f"record {self.total}: request id {fid} is taken by request "
                                 f"{show(self._key_of[fid])}, which is open")
        else:
            while self._next_id in self._key_of:
                self._next_id += 1
            fid = self._next_id
            self._next_id += 1
        if shared_pages > 0:
            sw = self._fid[shared_with]
        else:
            sw = int(shared_with) if is_int_key(shared_with) else 0
        self._validator.open.add(id)
        self._fid[id] = fid
        self._key_of[fid] = id
        self._put(("begin", fid, prompt_tokens, sw, shared_pages))
        return fid

    def end(self, id) -> None:
        """A request finished (or was dropped)."""
        self._alive()
        bad = self._validator.check_end(id)
        if bad:
            raise TraceError(f"record {self.total}: {bad}")
        fid = self._fid.pop(id)
        del self._key_of[fid]
        self._validator.open.discard(id)
        self._put(("end", fid))

    def forward(self, rows: Sequence) -> ForwardBuilder:
        """rows: Row(request, position, count, kind) (or such tuples) of the batch."""
        self._alive()
        return ForwardBuilder(self, rows)

    def request_id(self, key) -> int:
        """The id in the file of an open request."""
        return self._fid[key]

    def write(self, r: Record) -> None:
        """A record as the reader returns it (selections [layer][row] ascending ids)."""
        if isinstance(r, Begin):
            self.begin(r.id, r.prompt_tokens, r.shared_with, r.shared_pages)
        elif isinstance(r, End):
            self.end(r.id)
        else:
            self._alive()
            b = ForwardBuilder(self, r.rows)
            bad = self._validator.check_explicit(b.keys, b.positions, b.counts, b.kinds,
                                                 r.selections)
            if bad:
                raise TraceError(f"record {self.total}: {bad}")
            for l, per_row in enumerate(r.selections):
                b.set_layer(l, list(per_row))
            b._done = True
            self._queue_forward(b)

    def _commit(self, b: ForwardBuilder) -> None:
        self._alive()
        staged = b._staged
        missing = [l for l, s in enumerate(staged) if s is None]
        if missing:
            raise TraceError(f"record {self.total}: forward committed before every QSA layer "
                             f"was set (missing layers {missing})")
        v = self._validator
        bad = v.check_rows(b.keys, b.positions, b.counts, b.kinds)
        if not bad and not any(s.on_device for s in staged):
            decode = np.fromiter((k == "decode" for k in b.kinds), bool, len(b.kinds))
            bad = v.check_padded(b.keys, b.positions, b.counts, decode,
                                 np.stack([s.maxes for s in staged]),
                                 np.stack([s.valid for s in staged]),
                                 [s.host for s in staged])
        if bad:
            for s in staged:
                s.release()
            raise TraceError(f"record {self.total}: {bad}")
        self._queue_forward(b)

    def _queue_forward(self, b: ForwardBuilder) -> None:
        fids = [self._fid[k] for k in b.keys]
        self._put(("forward", self.total, fids, b.positions, b.counts, b.kinds, b.keys,
                   b._staged))

    def _put(self, item) -> None:
        self._sink.q.put(item)
        self.total += 1

    # ------------------------------------------------------------------ lifetime
    def _alive(self) -> None:
        if self._closed:
            raise TraceError(f"write to closed trace '{self.path}'")
        err = self._sink.error
        if err is not None:
            self._reported = True
            raise TraceError(f"{self.path}: the writer stopped: {err}") from err

    def flush(self) -> None:
        """Writes what is pending as a whole frame now, and waits for it."""
        self._alive()
        done = threading.Event()
        self._sink.q.put(("flush", done))
        done.wait()
        self._alive()

    def close(self) -> None:
        """Writes the last frame and the end marker; raises an error not yet raised."""
        if self._closed:
            return
        self._closed = True
        _live.discard(self)
        self._sink.q.put(("close",))
        self._sink.join()
        err = self._sink.error
        if err is not None and not self._reported:
            self._reported = True
            raise TraceError(f"{self.path}: the writer stopped: {err}") from err

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class _Sink(threading.Thread):
    """The writer's thread: codes records, cuts frames, compresses and writes them.

    Whatever goes wrong here is kept in `error`; later records are then dropped (their
    pinned buffers handed back) and the queue keeps draining, so the caller never blocks.
    A record that fails the checks deferred to here (ids that were on a device) leaves the
    file as it was, which close() then ends cleanly; any other failure (I/O) leaves it
    without the end marker, for `kvtier trace repair`.
    """

    def __init__(self, f, binary: bool, validator: Validator, codec: int, level: int,
                 frame_bytes: int, flush_seconds: float, fsync: bool, queue_size: int):
        super().__init__(name="kvtier-trace-writer", daemon=True)
        self.q: "queue.Queue" = queue.Queue(max(1, queue_size))
        self.error: Optional[BaseException] = None
        self.f, self.binary, self.validator = f, binary, validator
        self.codec = codec
        self.zc = (zstandard.ZstdCompressor(level=level, write_checksum=True,
                                            write_content_size=True)
                   if codec == CODEC_ZSTD else None)
        self.frame_bytes, self.flush_seconds, self.fsync = max(1, frame_bytes), flush_seconds, fsync
        self.encoder = DeltaEncoder(validator.limits.layers)
        self.raw = bytearray()
        self.frame_records = 0
        self.frame_started = 0.0
        self.coded = 0  # records coded, in whole frames or pending
        self.consistent = True  # False once a failure may have left a partial record or frame

    def run(self) -> None:
        while True:
            timeout = None
            if self.frame_records:
                timeout = max(0.0, self.frame_started + self.flush_seconds - time.monotonic())
            try:
                item = self.q.get(timeout=timeout)
            except queue.Empty:
                self._guard(self._cut)
                continue
            op = item[0]
            if op == "close":
                self._guard(self._finish, always=True)
                try:
                    self.f.close()
                except OSError as e:
                    self.error = self.error or e
                return
            if op == "flush":
                self._guard(self._cut)
                item[1].set()
                continue
            if self.error is not None:
                if op == "forward":
                    for s in item[7]:
                        s.release()
                continue
            self._guard(self._record, item)

    def _guard(self, fn, *args, always: bool = False) -> None:
        if self.error is not None and not always:
            return
        try:
            fn(*args)
        except BaseException as e:  # noqa: B902 -- kept and raised on the calling thread
            self.consistent = False
            if self.error is None:
                self.error = e

    def _record(self, item) -> None:
        op = item[0]
        if op == "begin":
            _, fid, prompt, sw, shared = item
            self.encoder.begin(fid)
            if self.binary:
                self.raw.append(TAG_BEGIN)
                for x in (fid, prompt, sw, shared):
                    put_varint(self.raw, x)
            else:
                self._line({"begin": {"id": fid, "prompt_tokens": prompt, "shared_with": sw,
                                      "shared_pages": shared}})
        elif op == "end":
            self.encoder.end(item[1])
            if self.binary:
                self.raw.append(TAG_END)
                put_varint(self.raw, item[1])
            else:
                self._line({"end": {"id": item[1]}})
        elif not self._forward(*item[1:]):
            return
        self.coded += 1
        if self.frame_records == 0:
            self.frame_started = time.monotonic()
        self.frame_records += 1
        if len(self.raw) >= self.frame_bytes:
            self._cut()

    def _forward(self, index, fids, positions, counts, kinds, keys, staged) -> bool:
        """Codes a forward; False when its deferred checks fail (nothing coded)."""
        try:
            arrays = [s.array() for s in staged]
            if any(s.maxes is None for s in staged):  # ids that were on a device at commit
                stats = [row_stats(a) for a in arrays]
                decode = np.fromiter((k == "decode" for k in kinds), bool, len(kinds))
                bad = self.validator.check_padded(keys, positions, counts, decode,
                                                  np.stack([m for m, _ in stats]),
                                                  np.stack([n for _, n in stats]), arrays)
                if bad:
                    self.error = TraceError(f"record {index}: {bad}")
                    return False
            cur, n_cur = selections_of(arrays)
        finally:
            for s in staged:
                s.release()
        if self.binary:
            decode = [k == "decode" for k in kinds]
            self.raw += self.encoder.forward(fids, positions, counts, decode, cur,
                                             n_cur).tobytes()
        else:
            pieces = np.split(cur, np.cumsum(n_cur)[:-1]) if n_cur.size else []
            rows = len(fids)
            sel = [[pieces[l * rows + r].tolist() for r in range(rows)]
                   for l in range(len(staged))]
            self._line({"forward": {
                "rows": [{"request": f, "position": p, "count": c, "kind": k}
                         for f, p, c, k in zip(fids, positions, counts, kinds)],
                "selections": sel}})
        return True

    def _line(self, obj) -> None:
        self.raw += json.dumps(obj, separators=(",", ":")).encode()
        self.raw.append(0x0A)

    def _cut(self) -> None:
        """Writes the pending records: one frame (binary) or whole lines, one write."""
        if not self.frame_records:
            return
        if self.binary:
            raw = bytes(self.raw)
            payload = self.zc.compress(raw) if self.zc is not None else raw
            self.f.write(FRAME_HEADER.pack(FRAME_MAGIC, self.codec, len(raw), len(payload),
                                           self.frame_records) + payload)
        else:
            self.f.write(self.raw)
        self.f.flush()
        if self.fsync:
            os.fsync(self.f.fileno())
        self.raw = bytearray()
        self.frame_records = 0

    def _finish(self) -> None:
        if not self.consistent:
            return
        self._cut()
        if self.binary:
            self.f.write(END_MARKER.pack(END_MAGIC, self.coded))
        self.f.flush()
        if self.fsync:
            os.fsync(self.f.fileno())


_live: "weakref.WeakSet[TraceWriter]" = weakref.WeakSet()


@atexit.register
def _close_live() -> None:
    """A writer left open at interpreter exit is closed, so its file ends cleanly."""
    for w in list(_live):
        try:
            w.close()
        except Exception as e:  # noqa: BLE001 -- nothing to raise to at exit
            print(f"kvtier_trace: closing {w.path} at exit: {e}", file=sys.stderr)
