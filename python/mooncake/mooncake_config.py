"""mooncake.mooncake_config: Mooncake's MooncakeConfig, read from the same JSON file and the
same environment variables as Mooncake's (mooncake-wheel/mooncake/mooncake_config.py), so a
vLLM or SGLang deployment that builds its store from it runs unchanged::

    from mooncake.mooncake_config import MooncakeConfig
    cfg = MooncakeConfig.load_from_env()      # MOONCAKE_CONFIG_PATH, else MOONCAKE_* variables
    store.setup(cfg.local_hostname, cfg.metadata_server, cfg.global_segment_size,
                cfg.local_buffer_size, cfg.protocol, cfg.device_name or "", cfg.master_server_address)

Environment (without MOONCAKE_CONFIG_PATH): MOONCAKE_MASTER (required),
MOONCAKE_LOCAL_HOSTNAME ("localhost"), MOONCAKE_TE_META_DATA_SERVER ("P2PHANDSHAKE"),
MOONCAKE_GLOBAL_SEGMENT_SIZE, MOONCAKE_LOCAL_BUFFER_SIZE, MOONCAKE_PROTOCOL ("tcp"),
MOONCAKE_DEVICE (""), MOONCAKE_OFFLOAD_ENABLED ("false"), MOONCAKE_OFFLOAD_FILE_STORAGE_PATH
(""), MOONCAKE_TENANT_ID ("default"). Sizes take Mooncake's units, all binary (gb = 2^30).
Standard library only.
"""

import json
import os
from dataclasses import dataclass
from typing import Any, Optional

DEFAULT_GLOBAL_SEGMENT_SIZE = 3355443200  # 3.125 GiB, Mooncake's default
DEFAULT_LOCAL_BUFFER_SIZE = 1073741824  # 1 GiB

# Longest suffix first, so "gb" is not read as "b" after a number ending in "g".
_SUFFIXES = (("kb", 1 << 10), ("mb", 1 << 20), ("gb", 1 << 30), ("tb", 1 << 40),
             ("k", 1 << 10), ("m", 1 << 20), ("g", 1 << 30), ("t", 1 << 40), ("b", 1))


def _parse_segment_size(value: Any) -> int:
    """A size in bytes from an int or a string such as "4gb", "512 MB", "1.5g", "4096"
    (Mooncake's rule: case-insensitive, binary units). ValueError for anything else."""
    if isinstance(value, int):
        return value
    if isinstance(value, str):
        s = value.strip().lower()
        if not s:
            raise ValueError("Invalid segment size: empty string")
        for suffix, mult in _SUFFIXES:
            if s.endswith(suffix):
                num = s[: -len(suffix)].strip()
                if not num:
                    raise ValueError(f"Invalid segment size: missing number before '{suffix}'")
                return int(float(num) * mult)
        return int(float(s))
    return int(value)


def _parse_bool(value: Any) -> bool:
    """true/1/yes/on and false/0/no/off (any case), real bools and numbers; None and "" are
    False; anything else is ValueError rather than a silent default (Mooncake's rule)."""
    if isinstance(value, bool):
        return value
    if isinstance(value, (int, float)):
        return bool(value)
    if value is None:
        return False
    s = str(value).strip().lower()
    if not s:
        return False
    if s in ("true", "1", "yes", "on"):
        return True
    if s in ("false", "0", "no", "off"):
        return False
    raise ValueError(f"Invalid boolean value: {value!r}")


@dataclass
class MooncakeConfig:
    """Mooncake's client configuration: the fields of its mooncake.json."""

    local_hostname: str
    metadata_server: str
    global_segment_size: int
    local_buffer_size: int
    protocol: str
    device_name: Optional[str]
    master_server_address: str
    enable_ssd_offload: bool = False
    ssd_offload_path: str = ""
    tenant_id: str = "default"

    @staticmethod
    def from_file(file_path: str) -> "MooncakeConfig":
        """Reads a JSON file; local_hostname, metadata_server and master_server_address are
        required (ValueError naming the missing one)."""
        with open(file_path) as f:
            cfg = json.load(f)
        for name in ("local_hostname", "metadata_server", "master_server_address"):
            if name not in cfg:
                raise ValueError(f"Missing required config field: {name}")
        path, tenant = cfg.get("ssd_offload_path"), cfg.get("tenant_id")
        return MooncakeConfig(
            local_hostname=cfg.get("local_hostname"),
            metadata_server=cfg.get("metadata_server"),
            global_segment_size=_parse_segment_size(cfg.get("global_segment_size", DEFAULT_GLOBAL_SEGMENT_SIZE)),
            local_buffer_size=_parse_segment_size(cfg.get("local_buffer_size", DEFAULT_LOCAL_BUFFER_SIZE)),
            protocol=cfg.get("protocol", "tcp"),
            device_name=cfg.get("device_name", ""),
            master_server_address=cfg.get("master_server_address"),
            enable_ssd_offload=_parse_bool(cfg.get("enable_ssd_offload", False)),
            ssd_offload_path="" if path is None else str(path),
            tenant_id="default" if tenant is None else str(tenant),
        )

    @staticmethod
    def load_from_env() -> "MooncakeConfig":
        """The file MOONCAKE_CONFIG_PATH names, else the MOONCAKE_* variables (module
        docstring); ValueError when neither MOONCAKE_CONFIG_PATH nor MOONCAKE_MASTER is set."""
        path = os.getenv("MOONCAKE_CONFIG_PATH")
        if path is not None:
            return MooncakeConfig.from_file(path)
        if not os.getenv("MOONCAKE_MASTER"):
            raise ValueError("Neither the environment variable 'MOONCAKE_CONFIG_PATH' nor 'MOONCAKE_MASTER' is set.")
        env = os.getenv
        return MooncakeConfig(
            local_hostname=env("MOONCAKE_LOCAL_HOSTNAME", "localhost"),
            metadata_server=env("MOONCAKE_TE_META_DATA_SERVER", "P2PHANDSHAKE"),
            global_segment_size=_parse_segment_size(env("MOONCAKE_GLOBAL_SEGMENT_SIZE", DEFAULT_GLOBAL_SEGMENT_SIZE)),
            local_buffer_size=_parse_segment_size(env("MOONCAKE_LOCAL_BUFFER_SIZE", DEFAULT_LOCAL_BUFFER_SIZE)),
            protocol=env("MOONCAKE_PROTOCOL", "tcp"),
            device_name=env("MOONCAKE_DEVICE", ""),
            master_server_address=env("MOONCAKE_MASTER", ""),
            enable_ssd_offload=_parse_bool(env("MOONCAKE_OFFLOAD_ENABLED", "false")),
            ssd_offload_path=env("MOONCAKE_OFFLOAD_FILE_STORAGE_PATH", ""),
            tenant_id=env("MOONCAKE_TENANT_ID", "default"),
        )
