"""Cache configuration (frozen): sizes, policy, storage, and the version flags."""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from .errors import ConfigError, ScenarioError, SimcacheError, shown
from .streams import resolve_device
from .versions import Flags

POLICIES = ("write_through", "write_through_selective", "write_back")
STOP_POLICIES = ("best_effort", "wait_complete", "timeout")
DRIVERS = ("fuzz", "scheduler")  # the oracle's drivers ("scheduler": see driver.Driver.retry_mamba_alloc)
MAX_SLOTS = 1 << 20  # pools and counts: a million slots is plenty for a simulation
# the settings of a configuration dict (the oracle's config keys) and their defaults
SETTINGS = dict(policy="write_through", storage=False, page_size=1, device_kv=32, device_mamba=8, host_kv=8,
                host_mamba=8, prefetch_threshold=1, load_back_threshold=10, prefetch_stop_policy="best_effort",
                driver="fuzz")
OPTIONAL_SETTINGS = {"write_through_threshold", "mamba_extra_buffer", "cfg_index", "auto_complete"}
_WHOLE = ("page_size", "device_kv", "device_mamba", "host_kv", "host_mamba", "prefetch_threshold",
          "load_back_threshold")
_POOLS = ("device_kv", "device_mamba", "host_kv", "host_mamba")


def _problem(cfg: dict, where: str | None) -> str | None:
    """What is wrong with the settings ``cfg`` (every ``SETTINGS`` key present), the first problem as one sentence
    (None: nothing). The one validator: a configuration dict (``where`` names it, e.g. "config": file voice, every
    number between 0 and ``MAX_SLOTS``) and ``CacheConfig`` itself (``where`` None: the Python voice)."""
    at = "" if where is None else f"{where}."
    wtt = cfg.get("write_through_threshold")
    if where is not None:
        for k in (*_WHOLE, "write_through_threshold"):
            if k in cfg and not (type(cfg[k]) is int and 0 <= cfg[k] <= MAX_SLOTS):
                return f"{at}{k} must be a whole number between 0 and {MAX_SLOTS}, not {shown(cfg[k])}"
        if cfg["page_size"] < 1:
            return f"{at}page_size must be at least 1"
    else:
        for k in _WHOLE:
            v, low = cfg[k], 1 if k == "page_size" else 0
            if type(v) is not int or v < low:
                return f"{k} must be a whole number >= {low}, not {shown(v, 40)}"
    voice = (lambda v: repr(v)) if where is not None else (lambda v: shown(v, 40))
    if not isinstance(cfg["policy"], str) or cfg["policy"] not in POLICIES:
        return f"{at}policy must be one of {', '.join(POLICIES)}, not {voice(cfg['policy'])}"
    if type(cfg["storage"]) is not bool:
        return f"{at}storage must be true or false, not {shown(cfg['storage'])}"
    if where is not None and cfg["driver"] not in DRIVERS:
        return f"{at}driver must be fuzz or scheduler, not {shown(cfg['driver'])}"
    if not isinstance(cfg["prefetch_stop_policy"], str) or cfg["prefetch_stop_policy"] not in STOP_POLICIES:
        return (f"{at}prefetch_stop_policy must be best_effort, wait_complete or timeout"
                + ("" if where is None else f", not {shown(cfg['prefetch_stop_policy'])}"))
    for k in ("mamba_extra_buffer", "auto_complete"):
        if k in cfg and type(cfg[k]) is not bool:
            return f"{at}{k} must be true or false, not {voice(cfg[k])}"
    if where is None:
        if wtt is not None and (type(wtt) is not int or wtt < 0):
            return "write_through_threshold must be a whole number >= 0"
        for k in _POOLS:
            if cfg[k] > MAX_SLOTS:
                return f"{k} = {cfg[k]} is too large; keep pools at most {MAX_SLOTS} slots"
    elif cfg.get("mamba_extra_buffer", cfg["page_size"] > 1) != (cfg["page_size"] > 1):
        return f"{at}mamba_extra_buffer must be true exactly when page_size > 1"
    return None


def check_settings(raw: Any, where: str = "config") -> dict:
    """A configuration dict (a scenario's or an OPS.json's ``config``; None: all defaults) checked, with every
    default filled in; a ``ScenarioError`` names the first problem."""
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise ScenarioError(f"{where} must be an object of settings, like {{\"policy\": \"write_through\"}}")
    unknown = sorted(map(str, set(raw) - set(SETTINGS) - OPTIONAL_SETTINGS))
    if unknown:
        raise ScenarioError(f"{where} has unknown key(s) {', '.join(unknown)}; known keys: "
                            f"{', '.join(sorted(set(SETTINGS) | OPTIONAL_SETTINGS))}")
    cfg = {**SETTINGS, **raw}
    problem = _problem(cfg, where)
    if problem:
        raise ScenarioError(problem)
    cfg.setdefault("write_through_threshold", 1 if cfg["policy"] == "write_through" else 2)
    return cfg


def from_settings(cfg: dict, flags: Flags, device: str = "cpu") -> CacheConfig:
    """The cache's config for checked settings ``cfg`` (``check_settings``); ``device`` as ``CacheConfig.device``."""
    try:
        return CacheConfig(page_size=cfg["page_size"], device_kv=cfg["device_kv"], device_mamba=cfg["device_mamba"],
                           host_kv=cfg["host_kv"], host_mamba=cfg["host_mamba"], policy=cfg["policy"],
                           storage=cfg["storage"], prefetch_threshold=cfg["prefetch_threshold"],
                           write_through_threshold=cfg["write_through_threshold"],
                           load_back_threshold=cfg["load_back_threshold"],
                           prefetch_stop_policy=cfg["prefetch_stop_policy"], flags=flags,
                           auto_complete=cfg.get("auto_complete", True), device=device)
    except SimcacheError as e:
        raise ScenarioError(str(e)) from None


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
        problem = _problem(vars(self), None)
        if problem:
            raise ConfigError(problem)
        if not isinstance(self.flags, Flags):
            raise ConfigError(f"flags must be a Flags (e.g. simcache.preset('pre_fix')), not "
                              f"{type(self.flags).__name__}")
        if self.device is not None and not isinstance(self.device, str):
            raise ConfigError(f"device must be None, 'cpu' or 'cuda', not {shown(self.device, 40)}")
        resolve_device(self.device)  # one sentence for "meta", "cuda:7" on a 1-GPU machine, "cuda" without CUDA

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
