"""Cache configuration (frozen): sizes, policy, storage, and the version flags."""
from __future__ import annotations

from dataclasses import asdict, dataclass, field

from .errors import ConfigError, shown
from .streams import resolve_device
from .versions import Flags

POLICIES = ("write_through", "write_through_selective", "write_back")


@dataclass(frozen=True)
class CacheConfig:
    page_size: int = 1
    device_kv: int = 32
    device_mamba: int = 8
    host_kv: int = 8
    host_mamba: int = 8
    policy: str = "write_through"
    storage: bool = False
    prefetch_threshold: int = 1
    write_through_threshold: int | None = None  # default: 1 for write_through, else 2
    load_back_threshold: int = 10
    prefetch_stop_policy: str = "best_effort"
    flags: Flags = field(default_factory=Flags)
    device: str = "cpu"  # where the device pools live: cpu, cuda, cuda:N, or auto (cuda when available)
    auto_complete: bool = True  # copies complete at once (acks consumed by the next check)

    def __post_init__(self) -> None:
        for name in ("page_size", "device_kv", "device_mamba", "host_kv", "host_mamba", "prefetch_threshold",
                     "load_back_threshold"):
            v, low = getattr(self, name), 1 if name == "page_size" else 0
            if type(v) is not int or v < low:
                raise ConfigError(f"{name} must be a whole number >= {low}, not {shown(v, 40)}")
        if not isinstance(self.policy, str) or self.policy not in POLICIES:
            raise ConfigError(f"policy must be one of {', '.join(POLICIES)}, not {shown(self.policy, 40)}")
        if type(self.storage) is not bool:
            raise ConfigError(f"storage must be true or false, not {self.storage!r}")
        if not isinstance(self.flags, Flags):
            raise ConfigError(f"flags must be a Flags (e.g. simcache.preset('pre_fix')), not "
                              f"{type(self.flags).__name__}")
        if self.device is not None and not isinstance(self.device, str):
            raise ConfigError(f"device must be None, 'cpu' or 'cuda', not {shown(self.device, 40)}")
        if type(self.auto_complete) is not bool:
            raise ConfigError(f"auto_complete must be true or false, not {shown(self.auto_complete, 40)}")
        if not isinstance(self.prefetch_stop_policy, str) or self.prefetch_stop_policy not in (
                "best_effort", "wait_complete", "timeout"):
            raise ConfigError("prefetch_stop_policy must be best_effort, wait_complete or timeout")
        if self.write_through_threshold is not None and (type(self.write_through_threshold) is not int
                                                         or self.write_through_threshold < 0):
            raise ConfigError("write_through_threshold must be a whole number >= 0")
        resolve_device(self.device)  # one sentence for "meta", "cuda:7" on a 1-GPU machine, "cuda" without CUDA
        limit = 1 << 20
        for name in ("device_kv", "device_mamba", "host_kv", "host_mamba"):
            if getattr(self, name) > limit:
                raise ConfigError(f"{name} = {getattr(self, name)} is too large; keep pools at most {limit} slots")

    @property
    def threshold(self) -> int:
        if self.write_through_threshold is not None:
            return self.write_through_threshold
        return 1 if self.policy == "write_through" else 2

    @property
    def extra_buffer(self) -> bool:
        """SGLang needs the Mamba extra buffer (a tracking slot per request) when pages are larger than 1."""
        return self.page_size > 1

    def as_dict(self) -> dict:
        d = asdict(self)
        d["flags"] = self.flags.as_dict()
        return d
