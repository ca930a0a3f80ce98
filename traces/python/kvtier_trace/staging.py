"""Getting one layer's top-k ids off the caller's hands: numpy arrays are copied (an engine
reuses its buffers), CUDA tensors are copied to pinned host memory asynchronously and
resolved on the writer's thread. torch is never imported here: a tensor is recognised only
when the caller has imported torch itself."""

from __future__ import annotations

import sys
import threading
from typing import Dict, List, Optional

import numpy as np

from .format import TraceError


class Staged:
    """One layer's [rows, k] ids on their way to the writer's thread.

    host: the ids once on the host (None while a device copy is in flight); maxes, valid:
    per row the largest id and the count of non-negative ids, for the write-time checks
    (None for a device copy: they are checked on the writer's thread).
    """

    __slots__ = ("host", "maxes", "valid", "_event", "_pinned", "_pinned_flat", "_pool", "_src")

    def __init__(self, host: Optional[np.ndarray]):
        self.host = host
        self.maxes = self.valid = None
        self._event = self._pinned = self._pinned_flat = self._pool = self._src = None
        if host is not None:
            self.maxes, self.valid = row_stats(host)

    @property
    def on_device(self) -> bool:
        return self._event is not None

    def array(self) -> np.ndarray:
        """The ids on the host; waits for the device copy (writer's thread only)."""
        if self.host is None:
            self._event.synchronize()
            self.host = self._pinned.numpy()
            self._src = None
        return self.host

    def release(self) -> None:
        """Hands a pinned buffer back; the ids must not be used after."""
        if self._pinned is not None:
            self._pool.give(self._pinned_flat)
            self._pinned = self._pinned_flat = None
            self.host = None


def row_stats(a: np.ndarray):
    k = a.shape[1]
    if k == 0:
        return np.full(a.shape[0], -1, np.int64), np.zeros(a.shape[0], np.int64)
    return a.max(axis=1).astype(np.int64), np.count_nonzero(a >= 0, axis=1)


class PinnedPool:
    """Flat pinned host buffers by dtype, reused across forwards of any shape."""

    def __init__(self, keep: int):
        self._free: Dict[object, List[object]] = {}
        self._lock = threading.Lock()
        self._keep = keep

    def take(self, torch, numel: int, dtype):
        with self._lock:
            free = self._free.get(dtype, [])
            for i, buf in enumerate(free):
                if buf.numel() >= numel:
                    return free.pop(i)
        size = 1 << max(numel - 1, 1).bit_length()
        return torch.empty(size, dtype=dtype, pin_memory=True)

    def give(self, buf) -> None:
        with self._lock:
            free = self._free.setdefault(buf.dtype, [])
            if len(free) < self._keep:
                free.append(buf)


def _pad_rows(rows_of_ids) -> np.ndarray:
    arrays = [np.asarray(r).ravel() for r in rows_of_ids]
    for a in arrays:
        if a.size and a.dtype.kind not in "iu":
            raise TraceError(f"top-k ids must be integers, not {a.dtype}")
    k = max((a.size for a in arrays), default=0)
    out = np.full((len(arrays), k), -1, np.int64)
    for i, a in enumerate(arrays):
        out[i, : a.size] = a
    return out


def _pad_tensor_rows(torch, rows_of_ids):
    """One tensor per row (a prefill chunk's ids: its tokens' top-k) -> [rows, k], -1 padded,
    on the rows' device."""
    flat = [r.detach().reshape(-1) for r in rows_of_ids]
    k = max(r.numel() for r in flat)
    out = torch.full((len(flat), k), -1, dtype=flat[0].dtype, device=flat[0].device)
    for i, r in enumerate(flat):
        out[i, : r.numel()] = r
    return out


def stage(topk, rows: int, pool: PinnedPool) -> Staged:
    """One layer's top-k as given by the caller: [rows, k] ids (numpy, a torch tensor on the
    CPU or a CUDA device, or nested lists), or one array per row (ragged)."""
    torch = sys.modules.get("torch")
    if (torch is not None and isinstance(topk, (list, tuple)) and topk
            and all(isinstance(r, torch.Tensor) for r in topk)):
        topk = _pad_tensor_rows(torch, topk)  # on their device: no copy to the host here
    if torch is not None and isinstance(topk, torch.Tensor):
        t = topk.detach()
        if t.dim() == 1 and rows == 1:
            t = t.view(1, -1)
        _check_shape(tuple(t.shape), rows, str(t.dtype), not t.dtype.is_floating_point
                     and t.dtype != torch.bool)
        if t.is_cuda:
            return _stage_cuda(torch, t, pool)
        return Staged(t.cpu().numpy().copy())
    if isinstance(topk, np.ndarray):
        a = topk
    elif isinstance(topk, (list, tuple)) and any(
            isinstance(r, (list, tuple, np.ndarray)) for r in topk):
        a = _pad_rows(topk)
    else:
        a = np.asarray(topk)
    if a.ndim == 1 and rows == 1:
        a = a.reshape(1, -1)
    if a.size == 0 and a.dtype.kind not in "iu":
        a = np.zeros((rows, 0), np.int64)
    _check_shape(a.shape, rows, str(a.dtype), a.dtype.kind in "iu")
    return Staged(np.array(a, copy=True))


def _check_shape(shape, rows: int, dtype: str, integral: bool) -> None:
    if not integral:
        raise TraceError(f"top-k ids must be integers, not {dtype}")
    if len(shape) != 2 or shape[0] != rows:
        raise TraceError(f"top-k ids of shape {list(shape)}: expected [{rows} rows, k]")


def _stage_cuda(torch, t, pool: PinnedPool) -> Staged:
    rows, k = t.shape
    flat = pool.take(torch, rows * k, t.dtype)
    pinned = flat[: rows * k].view(rows, k)
    pinned.copy_(t, non_blocking=True)
    event = torch.cuda.Event()
    event.record(torch.cuda.current_stream(t.device))
    st = Staged(None)
    st._event, st._pinned, st._pinned_flat, st._pool = event, pinned, flat, pool
    st._src = t  # alive until the copy is done
    return st
