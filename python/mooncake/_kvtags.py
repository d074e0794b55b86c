"""ReplicateConfig.kv_sessions: Mooncake's tagged writes. A write whose config carries
kv_sessions (one list of session ids per key, single-key writes included) makes each key it
stored a member of its sessions, as attach_kv_session does.

Unlike Mooncake's, whose master registers tags at write admission (before the object is
readable), the tags are attached right after the write, by this client: an object is readable
a moment before it joins its sessions. A key whose write failed joins nothing. A key stored
whose attach failed reports the attach's code (SESSION_LIMIT_EXCEEDED...) in place of 0, so a
tag is never dropped silently; the object stays stored (Mooncake does not roll back
membership either)."""

import ctypes
from typing import Any, Dict, List, Optional

from . import _lib
from ._args import _INVALID

# BAD is what check returns for tags that do not fit the keys: the write fails INVALID_PARAMS
# before anything is written, as Mooncake rejects it before indexing.
BAD: List[List[bytes]] = []


def check(config: Any, n: int) -> Optional[List[List[bytes]]]:
    """The tags of config for n keys: None (nothing to attach), BAD, or one list per key."""
    tags = getattr(config, "kv_sessions", None) if config is not None else None
    if not tags or not any(tags):
        return None  # omitted tags and empty inner lists add nothing
    if len(tags) != n:
        _lib.set_error(f"ReplicateConfig.kv_sessions has {len(tags)} lists for {n} keys")
        return BAD
    out: List[List[bytes]] = []
    for ids in tags:
        bs = []
        for sid in dict.fromkeys(ids):  # repeated tags are deduplicated
            b = sid.encode("utf-8", "surrogatepass")
            if not b or len(b) > 4096 or b"\0" in b:
                _lib.set_error(f"ReplicateConfig.kv_sessions: invalid session id of {len(b)} bytes")
                return BAD
            bs.append(b)
        out.append(bs)
    return out


def attach(store: Any, keys: List[bytes], tags: Optional[List[List[bytes]]], results: List[int]) -> List[int]:
    """Attaches each key whose result is 0 to its sessions (one attach_kv_session call per
    session and 4096 keys); returns results with a failed attach's code in its key's place."""
    if not tags:
        return results
    by_session: Dict[bytes, List[int]] = {}
    for i, ids in enumerate(tags):
        if results[i] == 0:
            for sid in ids:
                by_session.setdefault(sid, []).append(i)
    out = list(results)
    fn = store._L.mooncake_store_attach_kv_session
    for sid, idx in by_session.items():
        for at in range(0, len(idx), 4096):
            part = idx[at : at + 4096]
            ks = [keys[i] for i in part]
            res = (ctypes.c_int * len(ks))()
            rc = fn(store._h, sid, (ctypes.c_char_p * len(ks))(*ks), len(ks), res)
            for j, i in enumerate(part):
                code = rc if rc < 0 else res[j]
                if code < 0 and out[i] == 0:
                    out[i] = code
    return out


def invalid(n: int) -> List[int]:
    return [_INVALID] * n
