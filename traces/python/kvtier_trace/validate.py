"""Write-time validation with the C++ reader's rules and messages (traces/validate.cpp).

The messages are the templates of validation.json, the spec that the C++ validator is tested
against (tests/traces/test_validation_spec.*); the checks run in the C++ validator's order,
so a record with several faults is reported by the same first one on both sides.
"""

from __future__ import annotations

import json
import os
from typing import Dict, List, Optional, Sequence

import numpy as np

_SPEC_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "validation.json")
with open(_SPEC_PATH, encoding="utf-8") as _f:
    SPEC = json.load(_f)

MESSAGES: Dict[str, str] = {
    rule["name"]: rule["message"] for rules in SPEC["rules"].values() for rule in rules
}


def message(rule: str, **params) -> str:
    return MESSAGES[rule].format(**params)


def show(key) -> str:
    """How a request is named in a message: its integer id, else the caller's key."""
    return str(key) if is_int_key(key) else repr(key)


def is_int_key(key) -> bool:
    return isinstance(key, (int, np.integer)) and not isinstance(key, bool) and int(key) >= 0


class Limits:
    """The geometry's figures that validation needs (fields it omits take kvtier's defaults)."""

    def __init__(self, geometry: dict):
        d = SPEC["geometry_defaults"]
        get = lambda k: geometry.get(k, d[k])  # noqa: E731
        self.layers = len(geometry["qsa_layer_ids"])
        self.ratio = int(get("compress_ratio"))
        self.page_size = int(get("page_size"))
        self.block_topk = int(get("select_budget")) // self.ratio
        # Geometry::max_context(true): the double product, truncated as static_cast does
        self.max_context = int(float(get("rope_max_positions")) * float(get("yarn_factor")))

    def params(self) -> dict:
        return {"max_context": self.max_context, "block_topk": self.block_topk,
                "qsa_layers": self.layers}


class Validator:
    """The set of open requests (by the caller's keys) and the checks of each record kind.

    Each check returns None for a valid record, else the message; it changes the open set
    only through accept_begin/accept_end, which the writer calls once the record is taken.
    """

    def __init__(self, limits: Limits):
        self.limits = limits
        self.open = set()

    def _msg(self, rule, **params) -> str:
        return message(rule, **self.limits.params(), **params)

    def check_begin(self, key, prompt_tokens: int, shared_with, shared_pages: int) -> Optional[str]:
        who = show(key)
        mc = self.limits.max_context
        if prompt_tokens < 0:
            return self._msg("negative_prompt", id=who)
        if shared_pages < 0:
            return self._msg("negative_shared_pages", id=who)
        if prompt_tokens > mc:
            return self._msg("prompt_beyond_context", id=who, prompt_tokens=prompt_tokens)
        if shared_pages > mc // self.limits.page_size:
            return self._msg("shared_beyond_context", id=who, shared_pages=shared_pages)
        if shared_pages > 0 and shared_with == key:
            return self._msg("shares_itself", id=who)
        if shared_pages > 0 and shared_with not in self.open:
            return self._msg("shared_not_open", id=who, shared_with=show(shared_with))
        if key in self.open:
            return self._msg("begins_twice", id=who)
        return None

    def check_end(self, key) -> Optional[str]:
        if key not in self.open:
            return self._msg("end_not_open", id=show(key))
        return None

    def check_rows(self, keys: Sequence, positions: Sequence[int], counts: Sequence[int],
                   kinds: Sequence[str]) -> Optional[str]:
        mc = self.limits.max_context
        for key, pos, cnt, kind in zip(keys, positions, counts, kinds):
            who = show(key)
            if key not in self.open:
                return self._msg("row_not_open", request=who)
            if pos < 0:
                return self._msg("negative_position", request=who)
            if cnt < 1:
                return self._msg("count_below_one", request=who)
            if kind == "decode" and cnt != 1:
                return self._msg("decode_count", request=who)
            if pos > mc - cnt:
                return self._msg("row_beyond_context", request=who, position=pos, count=cnt)
            if kind != "decode" and kind != "prefill":
                return self._msg("bad_kind", request=who)
        if len(set(keys)) != len(keys):
            return self._msg("two_rows")
        return None

    def check_padded(self, keys, positions, counts, decode: np.ndarray,
                     maxes: np.ndarray, valid: np.ndarray, layers: List[np.ndarray]
                     ) -> Optional[str]:
        """Selections given as [rows, k] top-k ids in any order, negative = padding.

        maxes, valid: [layers, rows] largest id and count of non-negative ids per selection.
        The selection is the set of the non-negative ids, so it is ascending by
        construction: only its width and bounds can be wrong. Vectorised: the exact
        distinct count is taken only for a row whose non-negative count is over the budget.
        """
        ends = np.asarray(positions, np.int64) + np.asarray(counts, np.int64)
        visible = ends // self.limits.ratio
        topk = self.limits.block_topk
        wide = decode[None, :] & (valid > topk)
        for l, r in zip(*np.nonzero(wide)):  # rare: only rows over the budget
            ids = layers[l][r]
            if np.unique(ids[ids >= 0]).size <= topk:
                wide[l, r] = False
        beyond = maxes >= visible[None, :]
        bad = wide | beyond
        if not bad.any():
            return None
        l, r = divmod(int(np.argmax(bad.ravel())), bad.shape[1])
        who = show(keys[r])
        if wide[l, r]:
            ids = layers[l][r]
            return self._msg("width", request=who, layer=l, n=int(np.unique(ids[ids >= 0]).size))
        return self._msg("beyond_visible", request=who, layer=l, id=int(maxes[l, r]),
                         position=int(positions[r]), count=int(counts[r]), visible=int(visible[r]))

    def check_explicit(self, keys, positions, counts, kinds, selections) -> Optional[str]:
        """Selections given as the record holds them: [layer][row] ascending ids."""
        if len(selections) != self.limits.layers:
            return self._msg("layer_count", layers=len(selections))
        bad = self.check_rows(keys, positions, counts, kinds)
        if bad:
            return bad
        for l, per_row in enumerate(selections):
            if len(per_row) != len(keys):
                return (f"forward selections[{l}] holds {len(per_row)} selections for "
                        f"{len(keys)} rows")
            for r, ids in enumerate(per_row):
                ids = np.asarray(ids, np.int64).ravel()
                who = show(keys[r])
                if kinds[r] == "decode" and ids.size > self.limits.block_topk:
                    return self._msg("width", request=who, layer=l, n=ids.size)
                if ids.size == 0:
                    continue
                steps = np.diff(ids, prepend=-1)
                if (steps <= 0).any():
                    i = int(np.argmax(steps <= 0))
                    return self._msg("not_ascending", request=who, layer=l, id=int(ids[i]),
                                     prev=int(ids[i - 1]) if i else -1)
                visible = (positions[r] + counts[r]) // self.limits.ratio
                if ids[-1] >= visible:
                    return self._msg("beyond_visible", request=who, layer=l, id=int(ids[-1]),
                                     position=positions[r], count=counts[r], visible=visible)
        return None
