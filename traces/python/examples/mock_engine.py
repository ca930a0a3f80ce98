#!/usr/bin/env python3
"""A small mock of a sparse-attention (DSA/NSA-style) engine's serving loop, recorded with
kvtier_trace: the recorder's lines are the ones marked `# kvtier`.

The loop is shaped like a real engine's (docs/recording.md): a scheduler admits requests,
runs their prompts in chunks and then decodes them, one batch forward at a time, and in each
QSA layer an indexer scores the compressed keys (one per `compress_ratio` tokens: a "block")
against the query and keeps the top-k blocks for the attention to read. That top-k -- a
[rows, k] tensor of block ids, -1 where a row has fewer than k blocks -- is what the trace
records. A prefill chunk's row selects the union of its tokens' top-k.

usage: mock_engine.py --out run.ktr [--requests 6] [--concurrent 3] [--decode 40] [--torch]
  --torch: the top-k is handed over as a torch tensor (on CUDA when there is one), as an
  engine's indexer returns it; the recorder takes the device tensor as it is.
"""

import argparse
import os
import sys

import numpy as np

try:
    import kvtier_trace as kt
except ImportError:  # run from the source tree, not installed
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    import kvtier_trace as kt

# A small model: 4 sparse-attention (QSA) layers of 8, 4 tokens per block, top-64 blocks.
GEOMETRY = {"total_layers": 8, "qsa_layer_ids": [1, 3, 5, 7], "compress_ratio": 4,
            "select_budget": 256, "page_size": 64}
RATIO = GEOMETRY["compress_ratio"]
TOPK = GEOMETRY["select_budget"] // RATIO
INDEX_DIM = 16
PREFILL_CHUNK = 512


class Request:
    def __init__(self, rid, prompt, decode, rng):
        self.id, self.prompt, self.decode_left = rid, prompt, decode
        self.pos = 0  # tokens whose KV is written
        # per QSA layer: the compressed index keys of the blocks written so far
        self.keys = [np.zeros((0, INDEX_DIM), np.float32) for _ in GEOMETRY["qsa_layer_ids"]]
        self.query_bias = rng.standard_normal(INDEX_DIM).astype(np.float32)

    def extend(self, tokens, rng):
        """Writes `tokens` tokens: the blocks they complete get index keys."""
        before, self.pos = self.pos // RATIO, self.pos + tokens
        new = self.pos // RATIO - before
        for layer in range(len(self.keys)):
            k = rng.standard_normal((new, INDEX_DIM)).astype(np.float32)
            self.keys[layer] = np.concatenate([self.keys[layer], k])


def indexer_topk(req, layer, queries):
    """The indexer of one row: the top-k blocks for each query token, unioned over the
    row's tokens; [k'] block ids, -1 padded."""
    keys = req.keys[layer]
    if keys.shape[0] == 0:
        return np.full(TOPK, -1, np.int64)
    scores = queries @ keys.T  # [tokens, blocks]
    k = min(TOPK, keys.shape[0])
    top = np.argpartition(-scores, k - 1, axis=1)[:, :k]
    ids = np.unique(top)
    return np.concatenate([ids, np.full(max(0, TOPK - ids.size), -1)])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--requests", type=int, default=6)
    ap.add_argument("--concurrent", type=int, default=3)
    ap.add_argument("--decode", type=int, default=40)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--torch", action="store_true")
    a = ap.parse_args()
    rng = np.random.default_rng(a.seed)
    torch = device = None
    if a.torch:
        import torch
        device = "cuda" if torch.cuda.is_available() else "cpu"

    writer = kt.TraceWriter(a.out, geometry=GEOMETRY,                       # kvtier
                            producer=f"mock_engine.py --seed {a.seed}")     # kvtier
    waiting = [Request(f"req-{i}", int(rng.integers(600, 3000)), a.decode, rng)
               for i in range(a.requests)]
    running, forwards = [], 0
    while waiting or running:
        while waiting and len(running) < a.concurrent:  # the scheduler admits a request
            req = waiting.pop(0)
            running.append(req)
            writer.begin(req.id, req.prompt)                                 # kvtier
        # one batch forward: a prefill chunk per prompt not yet in, a decode row per other
        rows, tokens = [], []
        for req in running:
            if req.pos < req.prompt:
                n = min(PREFILL_CHUNK, req.prompt - req.pos)
                rows.append(kt.Row(req.id, req.pos, n, "prefill"))
            else:
                n = 1
                rows.append(kt.Row(req.id, req.pos, 1, "decode"))
            tokens.append(n)
        for req, n in zip(running, tokens):
            req.extend(n, rng)  # the forward writes its tokens' KV first
        fwd = writer.forward(rows)                                           # kvtier
        for layer in range(len(GEOMETRY["qsa_layer_ids"])):
            per_row = []
            for req, n in zip(running, tokens):
                q = (req.query_bias + 0.3 * rng.standard_normal((min(n, 4), INDEX_DIM))
                     ).astype(np.float32)  # a few of a chunk's tokens stand for it
                per_row.append(indexer_topk(req, layer, q))
            width = max(r.size for r in per_row)
            topk = np.stack([np.concatenate([r, np.full(width - r.size, -1)]) for r in per_row])
            if torch is not None:
                topk = torch.from_numpy(topk).to(device)
            # ... the sparse attention reads the blocks in topk ...
            fwd.set_layer(layer, topk)                                       # kvtier
        fwd.commit()                                                         # kvtier
        forwards += 1
        for req, row in zip(list(running), rows):
            req.decode_left -= row.kind == "decode"
            if req.decode_left == 0:
                running.remove(req)
                writer.end(req.id)                                           # kvtier
    writer.close()                                                           # kvtier
    print(f"{a.out}: {a.requests} requests, {forwards} forwards recorded")


if __name__ == "__main__":
    main()
