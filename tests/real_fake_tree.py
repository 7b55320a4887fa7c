"""A made-up SGLang tree for simcache.real's tests: our own few lines under SGLang's module names (nothing of
SGLang's), enough for the loader to load, stub and isolate."""
from __future__ import annotations

from pathlib import Path

MC = "sglang/srt/mem_cache"
FILES = {
    "evict_policy.py": "POLICY = 'lru'\n",
    "base_prefix_cache.py": "from sglang.srt.mem_cache.evict_policy import POLICY\nBASE = POLICY + '-base'\n",
    "radix_cache.py": "from sglang.srt.mem_cache.base_prefix_cache import BASE\nfrom sglang.srt.made.up import Thing\n",
    "mamba_radix_cache.py": "from sglang.srt.mem_cache.radix_cache import Thing\nclass MambaRadixCache:\n    pass\n",
    "hi_mamba_radix_cache.py": (
        "from sglang.srt.mem_cache.mamba_radix_cache import MambaRadixCache\n"
        "from sglang.srt.mem_cache.hicache_storage import PoolName\n"
        "VERSION = {version!r}\n"
        "class HiMambaRadixCache(MambaRadixCache):\n"
        "    def lazy(self):\n"
        "        from sglang.srt.runtime_context import get_server_args\n"
        "        from sglang.srt.later.only import Late\n"
        "        return get_server_args().mamba_cache_chunk_size, Late.__name__\n"),
}


def make_tree(base: Path, version: str = "one", checkout: bool = False, extra: dict | None = None) -> Path:
    root = base / "python" if checkout else base
    (root / MC).mkdir(parents=True)
    for name, text in {**FILES, **(extra or {})}.items():
        (root / MC / name).write_text(text.format(version=version) if "{version" in text else text)
    return base
