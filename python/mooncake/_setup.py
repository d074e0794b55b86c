"""setup()'s arguments as Mooncake takes them: its keywords, its dict keys, its size units.

Every keyword and dict key of Mooncake's current setup is accepted. A bad value (a size of
"50%", a port of "x", a value of the wrong type) makes setup return INVALID_PARAMS with
last_error() saying which, as Mooncake's setup returns a code instead of raising; a bad
tenant_id (not 1 to 128 of [A-Za-z0-9._-]) returns INVALID_PARAMS. Sizes parse as
Mooncake parses them, every unit binary (internal/base ParseBytes is the Go side of the same
rule): "80GB" is 80 x 2^30 bytes.
"""

from typing import Any, Dict, Tuple

# Size units: all binary, as Mooncake's MooncakeConfig, vLLM and SGLang read them.
_UNITS = {
    "": 1, "b": 1,
    "k": 1 << 10, "kb": 1 << 10, "kib": 1 << 10,
    "m": 1 << 20, "mb": 1 << 20, "mib": 1 << 20,
    "g": 1 << 30, "gb": 1 << 30, "gib": 1 << 30,
    "t": 1 << 40, "tb": 1 << 40, "tib": 1 << 40,
}


def parse_size(name: str, v: Any) -> int:
    """A size in bytes from an int or a string such as "16MB", "16 MB", "1.5GB" or "4096";
    every unit is binary as in Mooncake (MB = MiB = 2^20, GB = GiB = 2^30). Raises ValueError
    for a percentage, a negative size or an unknown unit, TypeError for another type."""
    if isinstance(v, bool) or not isinstance(v, (int, str)):
        raise TypeError(f"{name} must be a size (an int or a string such as \"16GB\"), not {type(v).__name__}")
    if isinstance(v, int):
        if v < 0:
            raise ValueError(f"{name} must not be negative, got {v}")
        return v
    t = v.strip()
    if t.endswith("%"):
        raise ValueError(f"{name}={v!r}: a percentage of memory is not supported; give a size such as \"16GB\"")
    i = 0
    while i < len(t) and (t[i].isdigit() or t[i] == "."):
        i += 1
    num, unit = t[:i], t[i:].strip().lower()
    if not num or unit not in _UNITS:
        raise ValueError(f"{name}={v!r}: want a number with an optional unit such as 512MB or 4GB (binary: GB = 2^30)")
    try:
        n = int(num) * _UNITS[unit] if "." not in num else int(float(num) * _UNITS[unit])
    except ValueError:
        raise ValueError(f"{name}={v!r}: not a number") from None
    if n >= 1 << 63:
        raise ValueError(f"{name}={v!r}: too large")
    return n


class SetupError(Exception):
    """A value setup refuses: setup returns code and last_error() gives the message."""

    def __init__(self, code: int, msg: str) -> None:
        super().__init__(msg)
        self.code = code


# The names setup takes (keywords and dict keys) -> the canonical one. mooncake.json's
# spellings (device_name, master_server_address) are accepted in a dict too.
KEYS = {
    "local_hostname": "local_hostname",
    "metadata_server": "metadata_server",
    "global_segment_size": "global_segment_size",
    "local_buffer_size": "local_buffer_size",
    "protocol": "protocol",
    "rdma_devices": "rdma_devices",
    "device_name": "rdma_devices",
    "master_server_addr": "master_server_addr",
    "master_server_address": "master_server_addr",
    "enable_ssd_offload": "enable_ssd_offload",
    "ssd_offload_path": "ssd_offload_path",
    "tenant_id": "tenant_id",
    "enable_client_http_server": "enable_client_http_server",
    "client_http_port": "client_http_port",
    "ipc_socket_path": "ipc_socket_path",
    # Prefetch on exist (docs/python.md): enable_ssd_prefetch=false makes
    # is_exist(..., prefetch_to_memory=True) a plain is_exist; the other three are Mooncake's
    # client-side throttles, accepted and checked, without effect here (the worker bounds
    # prefetches by bytes in flight and never starts one twice).
    "enable_ssd_prefetch": "enable_ssd_prefetch",
    "ssd_prefetch_dedup_ttl_sec": "ssd_prefetch_dedup_ttl_sec",
    "ssd_prefetch_cooldown_sec": "ssd_prefetch_cooldown_sec",
    "ssd_get_wait_ms": "ssd_get_wait_ms",
}

# Setup keys that take a non-negative integer.
_COUNTS = ("ssd_prefetch_dedup_ttl_sec", "ssd_prefetch_cooldown_sec", "ssd_get_wait_ms")

DEFAULTS: Dict[str, Any] = {
    "local_hostname": "",
    "metadata_server": "",
    "global_segment_size": 16 << 20,
    "local_buffer_size": 1 << 30,
    "protocol": "tcp",
    "rdma_devices": "",
    "master_server_addr": "",
    "enable_ssd_offload": False,
    "ssd_offload_path": "",
    "tenant_id": "default",
    "enable_client_http_server": False,
    "client_http_port": 9300,
    "ipc_socket_path": "",
    "enable_ssd_prefetch": True,
    "ssd_prefetch_dedup_ttl_sec": 30,
    "ssd_prefetch_cooldown_sec": 5,
    "ssd_get_wait_ms": 10,
}


def parse_bool(name: str, v: Any) -> bool:
    """A bool as MooncakeConfig reads one: a bool, a number, or "true"/"false"/"1"/"0"/
    "yes"/"no"/"on"/"off"."""
    if v is None:
        return False
    if isinstance(v, bool):
        return v
    if isinstance(v, (int, float)):
        return bool(v)
    if isinstance(v, str):
        s = v.strip().lower()
        if s in ("", "false", "0", "no", "off"):
            return False
        if s in ("true", "1", "yes", "on"):
            return True
    raise ValueError(f"{name}={v!r}: want true or false")


def _string(name: str, v: Any) -> str:
    if v is None:
        return ""
    if isinstance(v, str):
        return v
    raise TypeError(f"{name} must be a string, not {type(v).__name__}")


def _port(name: str, v: Any) -> int:
    if isinstance(v, str) and v.strip().isdigit():
        v = int(v.strip())
    if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v <= 65535:
        raise ValueError(f"{name}={v!r}: want a port number 0-65535")
    return v


def _count(name: str, v: Any) -> int:
    if isinstance(v, str) and v.strip().isdigit():
        v = int(v.strip())
    if isinstance(v, bool) or not isinstance(v, int) or v < 0:
        raise ValueError(f"{name}={v!r}: want a non-negative integer")
    return v


def resolve(cfg: Dict[str, Any], invalid: int, not_supported: int) -> Tuple[Dict[str, Any], bool]:
    """setup's arguments from cfg (keywords or the dict form): the canonical values, and
    whether local_buffer_size was given as 0. Raises SetupError for what setup refuses."""
    out = dict(DEFAULTS)
    for k, v in cfg.items():
        name = KEYS.get(k) if isinstance(k, str) else None
        if name is None:
            raise SetupError(invalid, f"setup: unknown key {k!r} (Mooncake's keys: {', '.join(sorted(KEYS))})")
        try:
            if name in ("global_segment_size", "local_buffer_size"):
                out[name] = parse_size(k, v)
            elif name == "master_server_addr" and isinstance(v, (list, tuple)):
                out[name] = ",".join(_string(k, x) for x in v)
            elif name in ("enable_ssd_offload", "enable_client_http_server", "enable_ssd_prefetch"):
                out[name] = parse_bool(k, v)
            elif name == "client_http_port":
                out[name] = _port(k, v)
            elif name in _COUNTS:
                out[name] = _count(k, v)
            else:
                out[name] = _string(k, v)
        except (TypeError, ValueError) as e:
            raise SetupError(invalid, f"setup: {e}") from None
    out["tenant_id"] = out["tenant_id"].strip()
    return out, out["local_buffer_size"] == 0
