"""Record and read kvtier selection traces: what a sparse-attention indexer selected.

A trace is a header (format version, geometry, producer, created) and a stream of records:
``Begin(id, prompt_tokens, shared_with, shared_pages)``, ``End(id)`` and ``Forward(rows,
selections)`` where ``rows`` is a list of ``Row(request, position, count, kind)`` and
``selections[layer][row]`` an ascending array of selected block ids. docs/trace-format.md
describes the file byte by byte; docs/recording.md shows where the hook goes in an engine.

Recording (the hook goes right after the indexer's top-k, once per QSA layer and forward)::

    import kvtier_trace as kt
    w = kt.TraceWriter("run.ktr", geometry={"page_size": 64}, producer="myengine 0.3")
    w.begin(req_id, prompt_tokens)                # when the scheduler admits a request
    fwd = w.forward([kt.Row(req_id, pos, 1, "decode"), ...])
    for layer, topk in enumerate(per_layer_topk): # topk: [rows, k] block ids, -1 padded,
        fwd.set_layer(layer, topk)                # numpy or a torch (CUDA) tensor
    fwd.commit()
    w.end(req_id)                                 # when the request finishes
    w.close()

Each record is checked when it is handed over, with the rules and messages of kvtier's own
reader (validation.json); coding, compression and I/O run on a background thread.
"""

from .format import (DEFAULT_GEOMETRY, FORMAT_VERSION, Begin, End, Forward, Record, Row,
                     TraceError)
from .reader import TraceReader, read_trace
from .writer import ForwardBuilder, TraceWriter

__all__ = ["Begin", "DEFAULT_GEOMETRY", "End", "FORMAT_VERSION", "Forward", "ForwardBuilder",
           "Record", "Row", "TraceError", "TraceReader", "TraceWriter", "read_trace"]
__version__ = "0.2.0"
