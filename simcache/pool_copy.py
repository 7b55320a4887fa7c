"""Copies between tiers (``copy_slots``), with streams where the pools have them.

Copies with streams (``streams.py``; none on cpu, where every copy happens at once). A copy runs on the
controller's side stream and gives a ``PendingCopy``: one block of consecutive slots each way is copied straight
between the pinned host pool and the device; other slots go through the host pool's pinned staging buffer (a
gather on the device, then a scatter on the host). The orderings that make it equal to the plain copy:
- the side stream waits for the default stream before each copy (the model wrote the source there);
- index tensors are made on the side stream that reads them (their memory is reused only after that work);
- a staged backup reaches the host pool only in ``PendingCopy.complete`` (at the ack), after its event, and every
  host read or write first completes the pool's pending copies (``flush``);
- a host pool's copies complete in order, one staging user at a time (``_wait_for_staging`` before the next);
- the default stream waits for a load before its next work (the model reads what was loaded), and for a backup
  before it next writes the pool the backup reads (a freed slot is not overwritten while a copy reads it).
A slot named twice as a destination (possible only after a double free hands it out twice) keeps the value of its
last writer, on every device: numpy's assignment on the CPU does that, but CUDA's index writes (``index_put_``,
``index_copy_``) leave which of the repeated writes lands undefined, so the stream path writes each slot once
(``_last_writes``).
"""
from __future__ import annotations

from collections.abc import Sequence

import torch

from .slot_arrays import _idx, _last_writes


def _put(data: torch.Tensor, idx: torch.Tensor, values: torch.Tensor) -> None:
    data[idx] = values


def _take(data: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
    return data[idx]


def _gather(data: torch.Tensor, idx: torch.Tensor, out: torch.Tensor) -> None:
    out.copy_(data.index_select(0, idx), non_blocking=True)


def _scatter(data: torch.Tensor, idx: torch.Tensor, staged: torch.Tensor) -> None:
    data.index_copy_(0, idx, staged.to(data.device, non_blocking=True))


class PendingCopy:
    """A copy issued on a side stream. ``complete()`` waits for its event; for a backup it then moves the staged
    data into the host pool. Until then the host pool's staging buffer belongs to it."""
    __slots__ = ("streams", "event", "host", "host_idx", "staged", "done")

    def __init__(self, streams, event, host, host_idx: torch.Tensor | None,
                 staged: torch.Tensor | None) -> None:
        self.streams, self.event, self.host, self.host_idx, self.staged = streams, event, host, host_idx, staged
        self.done = False

    def complete(self) -> None:
        if self.done:
            return
        _host_waits_for(self.streams, self.event)
        if self.host_idx is not None:  # a staged backup: its data is on the host only now
            self.host.data[self.host_idx] = self.staged
        self.done = True
        self.host.inflight.remove(self)


# The synchronisations, one function each (tests/test_streams.py removes each in turn and watches a test fail).
def _host_waits_for(st, event) -> None:
    st.synchronize(event)  # a non-blocking device->host result is undefined until its event


def _side_waits_for_default(st, stream) -> None:
    st.wait(stream, st.record(st.default))  # the model wrote the source (and reused the destination) there


def _index_stream(st, stream):
    return stream  # index tensors are made on the stream that reads them


def _default_waits_for_load(st, event) -> None:
    st.wait(st.default, event)  # the model's next work reads (or overwrites) what the load writes


def _span(slots) -> tuple[int, int] | None:
    """``(start, stop)`` when ``slots`` are consecutive (``range(4, 7)``, ``[4, 5, 6]``), else None."""
    if isinstance(slots, range):
        return (slots.start, slots.stop) if slots.step == 1 else None
    if isinstance(slots, torch.Tensor) or slots[-1] - slots[0] != len(slots) - 1:
        return None
    first = slots[0]
    return (first, first + len(slots)) if all(s == first + i for i, s in enumerate(slots)) else None


def _index(slots) -> torch.Tensor | list[int]:
    return slots if isinstance(slots, torch.Tensor) else list(slots)


def _cpu_index(slots) -> torch.Tensor:
    return slots if isinstance(slots, torch.Tensor) else torch.tensor(list(slots), dtype=torch.int64)


def _on(slots, device: torch.device) -> torch.Tensor:
    if isinstance(slots, torch.Tensor):
        return slots.to(device)
    return torch.tensor(list(slots), dtype=torch.int64, device=device)


def _copy_into(out: torch.Tensor, src: torch.Tensor) -> None:
    out.copy_(src, non_blocking=True)


def copy_slots(src, src_slots: Sequence[int], dst, dst_slots: Sequence[int],
               stream=None) -> PendingCopy | None:
    """Copy slot data between pools (``pools.SlotPool``, tiers); with streams the copy runs on ``stream`` and returns
    its ``PendingCopy``, without them it is done on return. Slots are a list, a range or a CPU int64 tensor; two
    consecutive runs copy straight between the pools, others go through the host pool's staging buffer."""
    if len(src_slots) == 0:
        return None
    st = src.streams or dst.streams
    if st is None or stream is None:
        if src._np is not None and dst._np is not None:  # plain CPU pools: numpy views, no torch call
            idx = _idx(dst_slots, dst)
            dst._np[idx] = src._np[_idx(src_slots, src)]
            if dst.on_write is not None:
                dst.on_write(dst, idx)
            return None
        dst_slots, src_slots = _last_writes(dst_slots, src_slots)
        s_idx, d_idx = _on(src_slots, src.device), _on(dst_slots, dst.device)
        dst.data[d_idx] = src.data[s_idx].to(dst.device)
        return None
    s_span, d_span = _span(src_slots), _span(dst_slots)
    if not (s_span and d_span):  # scattered: a slot repeated in dst_slots (after a double free) is written once
        dst_slots, src_slots = _last_writes(dst_slots, src_slots)
    n = len(src_slots)
    host = dst if dst.host else src
    if s_span and d_span:  # one block each way: one copy between the pinned host pool and the device
        host._wait_for_staging()  # earlier copies of this host pool complete first (their scatters, in order)
        _side_waits_for_default(st, stream)
        into = dst.data[d_span[0] : d_span[1]]
        st.launch(stream, _copy_into, into, src.data[s_span[0] : s_span[1]], host_out=into if dst.host else None)
        event = st.record(stream)
        copy = PendingCopy(st, event, host, None, None)
    elif dst.host:  # backup: device -> pinned staging -> (at completion) host pool
        staged = dst._staging_for(n)
        _side_waits_for_default(st, stream)
        st.launch(stream, _gather, src.data, st.upload(_index(src_slots), _index_stream(st, stream)), staged,
                  host_out=staged)
        event = st.record(stream)
        copy = PendingCopy(st, event, dst, _cpu_index(dst_slots), staged)
    else:  # load: host pool -> pinned staging (gathered on the CPU now) -> device
        staged = src._staging_for(n)
        torch.index_select(src.data, 0, _cpu_index(src_slots), out=staged)
        _side_waits_for_default(st, stream)
        st.launch(stream, _scatter, dst.data, st.upload(_index(dst_slots), _index_stream(st, stream)), staged)
        event = st.record(stream)
        copy = PendingCopy(st, event, src, None, staged)
    if dst.host:
        src.readers = [e for e in src.readers if not e.query()] + [event]  # finished reads need no wait
    else:
        _default_waits_for_load(st, event)
    host.inflight.append(copy)
    return copy
