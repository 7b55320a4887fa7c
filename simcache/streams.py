"""Streams and events: when a copy between tiers really happens, on CUDA or in a deterministic CPU emulation.

Vocabulary
- The *default stream* runs the model's work on the device pools: writing fresh KV and Mamba states, reading them.
  A *side stream* runs the copies between tiers (``pools.copy_slots``), so they can overlap the model's work.
- An *event* marks a point in a stream. ``synchronize(event)`` blocks the host until the stream got there;
  ``wait(stream, event)`` makes ``stream`` wait for it without blocking the host.
- Work on two streams is unordered unless a wait orders it, and the host sees the result of a non-blocking
  device->host copy only after synchronizing on an event recorded after it.

Backends (one interface; ``backend_for`` picks one from the pools' device):
- ``None`` (device ``cpu``): no streams; every copy happens at once, in program order. The reference semantics.
- ``CudaStreams``: torch.cuda streams and events on the pools' GPU.
- ``EmulatedStreams``: a deterministic emulation on the CPU, so the CPU test suite can see a missing
  synchronisation. Each stream is a queue of pending work. Nothing runs until something forces it: a host read
  of the device, an event's ``synchronize``, another stream's wait (and, under ``eager_default``, any work on the
  default stream). A forced stream runs *everything* it holds, as a GPU that ran ahead would. A non-blocking
  device->host result reads as ``POISON`` until its work ran, and index tensors come from a per-stream caching
  allocator, so a tensor dropped while a queued copy still reads it is handed out again, as on a GPU.
  The two policies push each race to the side where a missing synchronisation shows:
  ``lazy`` delays every stream (a copy that does not wait for the model's write reads the old data);
  ``eager_default`` runs the model's work at once (a write that does not wait for a copy still reading a slot
  overwrites what the copy reads).
"""
from __future__ import annotations

import weakref
from collections import deque
from collections.abc import Callable

import torch

from .errors import ConfigError

DEVICE_CHOICES = "cpu, cuda, cuda:N or auto"
POLICIES = ("lazy", "eager_default")
POISON = -0x0BAD_0BAD_0BAD_0BAD  # never a fingerprint (those are >= 0): data a copy has not delivered yet


_CPU = torch.device("cpu")  # immutable, shared


def resolve_device(name: object) -> torch.device:
    """The device a ``CacheConfig.device`` names (``auto``: cuda when available); a ConfigError if unusable."""
    if not isinstance(name, str):
        raise ConfigError(f"device must be one of {DEVICE_CHOICES}, not {name!r}")
    text = name.strip().lower()
    if text == "cpu":
        return _CPU
    if text == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    head, _, index = text.partition(":")
    if head != "cuda" or (index and not index.isdigit()):
        raise ConfigError(f"device must be one of {DEVICE_CHOICES} (like cuda:0), not {name!r}")
    if not torch.cuda.is_available():
        raise ConfigError(f"device {name!r} needs CUDA, which this machine does not have; ask for cpu "
                          f"(the default) or auto")
    if index and int(index) >= torch.cuda.device_count():
        raise ConfigError(f"device {name!r} does not exist: this machine has {torch.cuda.device_count()} GPU(s), "
                          f"cuda:0 to cuda:{torch.cuda.device_count() - 1}")
    return torch.device("cuda", int(index) if index else torch.cuda.current_device())


def backend_for(device: torch.device) -> CudaStreams | None:
    """The stream backend of pools on ``device``: real CUDA streams on a GPU, none (everything at once) on cpu."""
    return None if device is _CPU else CudaStreams(device) if device.type == "cuda" else None


class CudaStreams:
    """torch.cuda streams and events on one GPU (the pools' device, not whichever GPU is current)."""

    def __init__(self, device: torch.device) -> None:
        self.device = device

    @property
    def default(self) -> torch.cuda.Stream:
        return torch.cuda.current_stream(self.device)

    def new_stream(self) -> torch.cuda.Stream:
        return torch.cuda.Stream(device=self.device)

    def launch(self, stream, fn: Callable, *args, host_out: torch.Tensor | None = None) -> None:
        """Issue ``fn(*args)`` on ``stream``; ``host_out`` (pinned) is undefined until an event after it is synced."""
        with torch.cuda.stream(stream):
            fn(*args)

    def record(self, stream) -> torch.cuda.Event:
        event = torch.cuda.Event()
        event.record(stream)
        return event

    def wait(self, stream, event) -> None:
        stream.wait_event(event)

    def synchronize(self, event) -> None:
        event.synchronize()

    def to_host(self, stream, fn: Callable, *args) -> torch.Tensor:
        """A blocking read: ``fn(*args)`` on ``stream``, copied to the host once ``stream`` got there."""
        with torch.cuda.stream(stream):
            return fn(*args).cpu()

    def upload(self, values: list[int] | torch.Tensor, stream) -> torch.Tensor:
        """An int64 tensor of ``values`` on the device, copied without blocking from pinned memory and allocated on
        ``stream``: the caching allocator reuses its block only for later work of that same stream."""
        if isinstance(values, torch.Tensor):
            host = values if values.is_pinned() else values.pin_memory()
        else:
            host = torch.tensor(values, dtype=torch.int64, pin_memory=True)
        with torch.cuda.stream(stream):
            return host.to(self.device, non_blocking=True)


class _Stream:
    __slots__ = ("name", "queue", "ran")

    def __init__(self, name: str) -> None:
        self.name, self.queue, self.ran = name, deque(), 0  # ran: items run so far; queued ones come after

    def __repr__(self) -> str:
        return f"<emulated stream {self.name}: {self.ran} ran, {len(self.queue)} pending>"


class _Event:
    __slots__ = ("stream", "position")

    def __init__(self, stream: _Stream, position: int) -> None:
        self.stream, self.position = stream, position

    def query(self) -> bool:
        return self.stream.ran >= self.position


class EmulatedStreams:
    """CUDA stream semantics on the CPU, deterministic, with every pending piece of work delayed until forced."""

    def __init__(self, policy: str = "lazy") -> None:
        if policy not in POLICIES:
            raise ValueError(f"policy must be one of {', '.join(POLICIES)}, not {policy!r}")
        self.policy = policy
        self.default = _Stream("default")
        self._num_streams = 0
        self._free_blocks: dict[_Stream, list[torch.Tensor]] = {}

    def new_stream(self) -> _Stream:
        self._num_streams += 1
        return _Stream(f"side{self._num_streams}")

    def launch(self, stream: _Stream, fn: Callable, *args, host_out: torch.Tensor | None = None) -> None:
        if host_out is not None:
            host_out.fill_(POISON)  # what a host reader sees before the copy ran
        # the queued work holds the *memory* of its tensors (fresh views), not the caller's tensor objects: as on a
        # GPU, a tensor the caller drops goes back to the allocator even though queued work still reads it
        held = tuple(a.view_as(a) if isinstance(a, torch.Tensor) else a for a in args)
        stream.queue.append((fn, held))
        if self._eager(stream):
            self._drain(stream)

    def record(self, stream: _Stream) -> _Event:
        return _Event(stream, stream.ran + len(stream.queue))

    def wait(self, stream: _Stream, event: _Event) -> None:
        if event.stream is stream:
            return
        stream.queue.append((None, event))
        if self._eager(stream):
            self._drain(stream)

    def synchronize(self, event: _Event) -> None:
        if not event.query():
            self._drain(event.stream)

    def to_host(self, stream: _Stream, fn: Callable, *args) -> torch.Tensor:
        self._drain(stream)
        return fn(*args).clone()

    def upload(self, values: list[int] | torch.Tensor, stream: _Stream) -> torch.Tensor:
        free = self._free_blocks.setdefault(stream, [])
        i = next((i for i, b in enumerate(free) if b.numel() >= len(values)), None)
        block = torch.empty(max(1, len(values)), dtype=torch.int64) if i is None else free.pop(i)
        self.launch(stream, _fill, block, torch.as_tensor(values, dtype=torch.int64))
        out = block[: len(values)]
        weakref.finalize(out, free.append, block)  # dropped: the block may serve the stream's next upload
        return out

    def _eager(self, stream: _Stream) -> bool:
        return self.policy == "eager_default" and stream is self.default

    def _drain(self, stream: _Stream) -> None:
        while stream.queue:
            fn, args = stream.queue.popleft()
            if fn is None:
                self.synchronize(args)  # a wait: the other stream runs up to (and, forced, past) the event
            else:
                fn(*args)
            stream.ran += 1


def _fill(block: torch.Tensor, values: torch.Tensor) -> None:
    block[: values.numel()].copy_(values)
