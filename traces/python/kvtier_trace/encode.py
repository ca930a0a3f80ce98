"""Delta coding of forwards (docs/trace-format.md, "Binary form"), vectorised with numpy.

A forward's selections are coded per (request, layer) against that request and layer's
previous selection: the indices (in the previous selection) of the ids that left and the ids
that joined, both as gaps, all as LEB128 varints. Every step below is one numpy call over
all the forward's layers x rows selections ("segments", in layer-major order as the file
stores them); nothing loops per id in Python.
"""

from __future__ import annotations

from typing import Dict, List, Sequence

import numpy as np

from .format import TAG_FORWARD, varint_bytes

# Membership of one forward's ids is tested in a byte map indexed by (segment, id); segments
# are processed in groups whose map stays under about this many bytes (one group up to
# 384 segments at 87k blocks, 350k tokens, of context each).
_MAP_BYTES = 1 << 25


def selections_of(layers: Sequence[np.ndarray]):
    """[layers] x [rows, k] top-k ids (any order, negative = padding, duplicates allowed) ->
    (ids, counts): the ascending distinct non-negative ids of every segment, concatenated in
    layer-major order (int64), and each segment's count."""
    k = max(a.shape[1] for a in layers)
    if all(a.shape[1] == k and a.dtype == layers[0].dtype for a in layers):
        x = np.stack(layers)
    else:
        x = np.full((len(layers), layers[0].shape[0], k), -1, np.int64)
        for l, a in enumerate(layers):
            x[l, :, : a.shape[1]] = a
    x = x.reshape(-1, k)
    if k == 0:
        return np.zeros(0, np.int64), np.zeros(x.shape[0], np.int64)
    s = np.sort(x, axis=1)
    keep = s >= 0
    keep[:, 1:] &= s[:, 1:] != s[:, :-1]
    return s[keep].astype(np.int64), np.count_nonzero(keep, axis=1).astype(np.int64)


def _gaps(v: np.ndarray, seg: np.ndarray) -> np.ndarray:
    """x - previous - 1 within each segment, the first of a segment against -1."""
    g = v.copy()
    if v.size > 1:
        g[1:] -= v[:-1] + 1
        first = np.empty(v.size, bool)
        first[0] = True
        np.not_equal(seg[1:], seg[:-1], out=first[1:])
        g[first] = v[first]
    return g


def _starts(counts: np.ndarray) -> np.ndarray:
    out = np.zeros(counts.size, np.int64)
    np.cumsum(counts[:-1], out=out[1:])
    return out


class DeltaEncoder:
    """Codes forwards against the previous selection of every open (request, layer)."""

    def __init__(self, layers: int):
        self.layers = layers
        self.prev: Dict[int, List[np.ndarray]] = {}
        self._empty = np.zeros(0, np.int32)
        self._map = np.zeros(0, np.uint8)

    def begin(self, fid: int) -> None:
        self.prev[fid] = [self._empty] * self.layers

    def end(self, fid: int) -> None:
        self.prev.pop(fid, None)

    def forward(self, fids: Sequence[int], positions: Sequence[int], counts: Sequence[int],
                decode: Sequence[bool], cur: np.ndarray, n_cur: np.ndarray) -> np.ndarray:
        """The forward record's bytes (uint8); cur, n_cur as selections_of returns them."""
        rows, layers = len(fids), self.layers
        nseg = rows * layers
        plist = [self.prev[f][l] for l in range(layers) for f in fids]
        n_prev = np.fromiter(map(len, plist), np.int64, nseg)
        prev = np.concatenate(plist).astype(np.int64) if nseg else np.zeros(0, np.int64)
        prev_seg = np.repeat(np.arange(nseg), n_prev)
        cur_seg = np.repeat(np.arange(nseg), n_cur)
        in_cur, in_prev = self._membership(prev, prev_seg, n_prev, cur, cur_seg, n_cur)

        rem_glob = np.flatnonzero(~in_cur)
        rem_seg = prev_seg[rem_glob]
        rem = rem_glob - _starts(n_prev)[rem_seg]  # index within the previous selection
        added = ~in_prev
        add, add_seg = cur[added], cur_seg[added]
        n_rem = np.bincount(rem_seg, minlength=nseg)
        n_add = np.bincount(add_seg, minlength=nseg)

        # values of the selection part, per segment: n_rem, n_add, removed gaps, added gaps
        off = _starts(2 + n_rem + n_add)
        vals = np.empty(int(off[-1] + 2 + n_rem[-1] + n_add[-1]) if nseg else 0, np.int64)
        if nseg:
            vals[off] = n_rem
            vals[off + 1] = n_add
            rank = np.arange(rem.size) - _starts(n_rem)[rem_seg]
            vals[off[rem_seg] + 2 + rank] = _gaps(rem, rem_seg)
            rank = np.arange(add.size) - _starts(n_add)[add_seg]
            vals[off[add_seg] + 2 + n_rem[add_seg] + rank] = _gaps(add, add_seg)
        head = np.empty(1 + 4 * rows, np.int64)  # rows, then (request, position, count, kind)
        head[0] = rows
        head[1:] = np.column_stack([np.asarray(fids, np.int64), np.asarray(positions, np.int64),
                                    np.asarray(counts, np.int64),
                                    np.asarray(decode, np.int64)]).ravel()
        # the kind byte (0 or 1) is its own one-byte varint
        out = np.concatenate([np.array([TAG_FORWARD], np.uint8), varint_bytes(head),
                              varint_bytes(vals)])

        pieces = np.split(cur.astype(np.int32), np.cumsum(n_cur)[:-1]) if nseg else []
        for l in range(layers):
            base = l * rows
            for i, f in enumerate(fids):
                self.prev[f][l] = pieces[base + i]
        return out

    def _membership(self, a, a_seg, n_a, b, b_seg, n_b):
        """(a_in_b, b_in_a) for two id lists that are ascending within each segment."""
        nseg = n_a.size
        if nseg == 0:
            return np.zeros(0, bool), np.zeros(0, bool)
        # width of each segment's map: one past its largest id (lists are ascending)
        last_a = np.full(nseg, -1, np.int64)
        last_b = np.full(nseg, -1, np.int64)
        ends_a, ends_b = np.cumsum(n_a), np.cumsum(n_b)
        has_a, has_b = n_a > 0, n_b > 0
        last_a[has_a] = a[ends_a[has_a] - 1]
        last_b[has_b] = b[ends_b[has_b] - 1]
        width = np.maximum(last_a, last_b) + 1
        base = _starts(width)
        total = int(base[-1] + width[-1])
        if total > _MAP_BYTES:  # a group of segments at a time
            a_in_b = np.empty(a.size, bool)
            b_in_a = np.empty(b.size, bool)
            s = 0
            while s < nseg:
                e = max(s + 1, int(np.searchsorted(base, base[s] + _MAP_BYTES, "right")))
                sa = slice(int(ends_a[s - 1]) if s else 0, int(ends_a[e - 1]))
                sb = slice(int(ends_b[s - 1]) if s else 0, int(ends_b[e - 1]))
                ia = base[a_seg[sa]] - base[s] + a[sa]
                ib = base[b_seg[sb]] - base[s] + b[sb]
                size = int(base[e - 1] + width[e - 1] - base[s])
                a_in_b[sa], b_in_a[sb] = self._mark(ia, ib, size)
                s = e
            return a_in_b, b_in_a
        return self._mark(base[a_seg] + a, base[b_seg] + b, total)

    def _mark(self, ia: np.ndarray, ib: np.ndarray, size: int):
        if self._map.size < size:
            self._map = np.zeros(max(size, self._map.size * 2), np.uint8)
        m = self._map  # all zero between calls
        m[ia] = 1
        b_in_a = m[ib].astype(bool)
        m[ia] = 0
        m[ib] = 1
        a_in_b = m[ia].astype(bool)
        m[ib] = 0
        return a_in_b, b_in_a
