"""simcache: a faithful, visual simulator of SGLang HiMambaRadixCache."""
__version__ = "0.1.0"
