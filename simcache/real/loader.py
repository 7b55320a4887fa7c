"""Load SGLang's own cache files, unmodified, under their real module names, in a fake ``sglang`` package of their own.

Vocabulary
- A *load* (``Loaded``) is one target's real modules (``targets.Target``) read from one source (``source.Source``),
  plus the stub modules they import: its own module objects, never shared with another load, so several commits and
  releases live in one process.
- *Active*: while ``with loaded.active():`` runs, ``sys.modules`` holds this load's ``sglang`` modules and nothing
  else of that name (the caller's own ``sglang``, if any, is put aside and restored after), and a finder answers any
  ``sglang.*`` import not yet seen with a stub. The real files import lazily inside some methods, so every call
  into the real cache runs inside ``active()``.
- A *stub* is a module the load did not read from the source: either with contents (``stubs.py``) or inert, where
  every name is a placeholder class. ``Loaded.stubbed`` lists each stub module and the placeholder names taken from it.

Loading runs the files' code. Files are compiled from their bytes (no ``__pycache__`` is written next to them) with
their real path as the file name, so tracebacks and the call chain name the real files and lines.
"""
from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import logging
import sys
import types
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from .source import Source, SourceError
from .targets import Target

ROOT_PACKAGE = "sglang"


def _ours(name: str) -> bool:
    return name == ROOT_PACKAGE or name.startswith(ROOT_PACKAGE + ".")


class _Placeholder:
    """Inert stand-in for a class or function of a stubbed module that the cache never exercises."""

    def __init__(self, *args, **kwargs) -> None:
        pass

    def __call__(self, *args, **kwargs):
        return None


def _stub_getattr(module_name: str, taken: dict[str, set[str]]):
    def __getattr__(name: str):
        if name.startswith("__"):
            raise AttributeError(name)
        taken.setdefault(module_name, set()).add(name)
        return type(name, (_Placeholder,), {"__module__": module_name})

    return __getattr__


@dataclass
class Loaded:
    """One target loaded from one source (``load``)."""
    target: Target
    source: Source
    modules: dict[str, types.ModuleType] = field(default_factory=dict)
    real: dict[str, Path] = field(default_factory=dict)  # module name -> its file, for the loaded real modules
    stubbed: dict[str, set[str]] = field(default_factory=dict)  # stub module -> placeholder names taken from it
    fallbacks: dict[str, str] = field(default_factory=dict)  # optional real module stubbed instead -> why
    _depth: int = 0

    @property
    def real_files(self) -> frozenset[str]:
        """The loaded files' paths as their code objects name them (frames there belong to SGLang's code)."""
        return frozenset(str(p) for p in self.real.values())

    def module(self, name: str) -> types.ModuleType:
        """A loaded module by full name or by its last part (``"hi_mamba_radix_cache"``)."""
        if name in self.modules:
            return self.modules[name]
        for full, mod in self.modules.items():
            if full.rsplit(".", 1)[-1] == name and full in self.real:
                return mod
        raise KeyError(name)

    @property
    def cache_class(self) -> type:
        module, _, cls = self.target.cls.partition(":")
        return getattr(self.modules[module], cls)

    def stub_list(self) -> list[str]:
        """Every stub module of this load, with the placeholder names taken from it (``--list-stubs``)."""
        out = []
        for name in sorted(n for n in self.modules if n not in self.real):
            taken = sorted(self.stubbed.get(name, ()))
            given = sorted(k for k, v in vars(self.modules[name]).items()
                           if not k.startswith("__") and not isinstance(v, types.ModuleType))
            what = [*given, *(f"{t} (placeholder)" for t in taken)]
            why = f" [stubbed: {self.fallbacks[name]}]" if name in self.fallbacks else ""
            out.append((f"{name}: {', '.join(what)}" if what else name) + why)
        return out

    @contextmanager
    def active(self) -> Iterator[Loaded]:
        """Make this load's modules the ``sglang`` of ``sys.modules`` for the duration (re-entrant)."""
        if self._depth:
            self._depth += 1
            try:
                yield self
            finally:
                self._depth -= 1
            return
        aside = {k: sys.modules.pop(k) for k in [k for k in sys.modules if _ours(k)]}
        sys.modules.update(self.modules)
        finder = _StubFinder(self)
        sys.meta_path.insert(0, finder)
        log = logging.getLogger(ROOT_PACKAGE)
        level = log.level
        log.setLevel(logging.CRITICAL + 1)  # the real code logs on some paths; its loggers are children of this
        self._depth = 1
        try:
            yield self
        finally:
            self._depth = 0
            log.setLevel(level)
            sys.meta_path.remove(finder)
            for k in [k for k in sys.modules if _ours(k)]:
                self.modules[k] = sys.modules.pop(k)
            sys.modules.update(aside)


class _StubFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Answers every ``sglang.*`` import the active load has no module for with an inert stub package."""

    def __init__(self, loaded: Loaded) -> None:
        self.loaded = loaded

    def find_spec(self, name, path, target=None):
        if not _ours(name):
            return None
        return importlib.machinery.ModuleSpec(name, self, is_package=True)

    def create_module(self, spec):
        return _new_stub(spec.name, {}, self.loaded)

    def exec_module(self, module) -> None:
        pass


def _new_stub(name: str, attrs: dict[str, object], loaded: Loaded) -> types.ModuleType:
    m = types.ModuleType(name)
    m.__path__ = []  # a package: any depth of submodule can be stubbed below it
    m.__getattr__ = _stub_getattr(name, loaded.stubbed)
    for k, v in attrs.items():
        setattr(m, k, v)
    return m


def _install(name: str, module: types.ModuleType) -> None:
    """Put ``module`` in ``sys.modules`` and on its parent package (created as a stub when missing)."""
    parent, _, leaf = name.rpartition(".")
    if parent:
        pkg = sys.modules.get(parent) or importlib.import_module(parent)
        setattr(pkg, leaf, module)
    sys.modules[name] = module


def load(source: Source, target: Target) -> Loaded:
    """Read ``target``'s files from ``source`` and run them as their real modules over the stubs -> ``Loaded``.

    A missing required file, or a file that fails to load, raises a ``SourceError`` naming it."""
    files = {m: source.root / target.path_of(m) for m in target.modules}
    missing = [target.path_of(m) for m, p in files.items() if m not in target.optional and not p.is_file()]
    if missing and source.kind == "release":
        raise SourceError(f"the wheel of {source.label} has no {', '.join(missing)}; this release does not ship the "
                          f"{target.name} cache")
    if missing:
        raise SourceError(f"{source.label} has no {', '.join(missing)}; point --sglang at a SGLang checkout or an "
                          f"unpacked wheel (the folder that holds sglang/, or python/sglang/)")
    loaded = Loaded(target, source)
    with loaded.active():
        for name, attrs in target.stubs().items():
            if name in target.modules and files[name].is_file():
                continue  # the real module replaces its stub
            _install(name, _new_stub(name, attrs, loaded))
        for name, path in files.items():
            if not path.is_file():
                continue
            try:
                code = compile(path.read_bytes(), str(path), "exec", dont_inherit=True)
            except (OSError, SyntaxError, ValueError) as e:
                raise SourceError(f"cannot read {path}: {e}") from None
            mod = types.ModuleType(name)
            mod.__file__ = str(path)
            mod.__package__ = name.rpartition(".")[0]
            mod.__spec__ = importlib.machinery.ModuleSpec(name, None, origin=str(path))
            if path.name == "__init__.py":  # a package (the unified cache's folders): its submodules import below it
                mod.__path__, mod.__package__ = [], name
            _install(name, mod)
            loaded.real[name] = path
            try:
                exec(code, mod.__dict__)
            except ImportError as e:
                if name not in target.optional or _ours(e.name or ROOT_PACKAGE):
                    raise SourceError(f"loading {path} failed: {type(e).__name__}: {e}; this file may need a stub "
                                      f"simcache.real does not have (see `simcache real --list-stubs`)") from None
                # an optional file that needs a third-party package (triton, in the older commits' utils.py): its
                # stub stands in, and the stub list says why
                del loaded.real[name]
                _install(name, _new_stub(name, target.stubs().get(name, {}), loaded))
                loaded.fallbacks[name] = f"its file needs {e.name}, which is not installed"
            except Exception as e:  # noqa: BLE001 -- any failure of foreign code is one sentence
                raise SourceError(f"loading {path} failed: {type(e).__name__}: {e}; this file may need a stub "
                                  f"simcache.real does not have (see `simcache real --list-stubs`)") from None
    try:
        loaded.cache_class  # noqa: B018 -- the class must exist
    except AttributeError:
        raise SourceError(f"{files[target.cls.partition(':')[0]]} defines no {target.cls.partition(':')[2]}; "
                          f"this SGLang version does not have the {target.name} cache") from None
    return loaded
