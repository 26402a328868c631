"""A compression worker the test holds: its jobs finish only when the test releases them.

It satisfies :class:`kproducer.record.compression_worker.CompressionWorker` (the native
worker's interface) and computes each result with the codecs module, the reference the native
worker is compared against, so a released batch holds the same bytes either way. What it adds is
control: a batch stays "on the worker" until :meth:`HeldWorker.release`, so a test can check that
the Sender passes over such a batch, asks to be woken instead of waiting, and drains it once it
is done. A call that would block on an unfinished job (``wait``) is counted, and finishes the job
so that a wrong wait cannot hang the test.
"""

from __future__ import annotations

from collections.abc import Callable

from kproducer.record.codecs import CompressionType, compress

__all__ = ["HeldJob", "HeldWorker"]


class HeldJob:
    """One batch's compression, finished when the test says."""

    def __init__(self, worker: HeldWorker, codec: int, buffer: bytearray, start: int, end: int) -> None:
        self._worker = worker
        self._codec = CompressionType(codec)
        self._records = bytes(buffer[start:end])
        self.finished = False
        self.wake_requested = False

    def done(self) -> bool:
        return self.finished

    def wake_when_done(self) -> bool:
        if self.finished:
            return True
        self.wake_requested = True
        return False

    def wait(self) -> None:
        if not self.finished:
            self._worker.blocking_waits += 1
            self.finish()

    def result(self) -> int | bytes:
        assert self.finished, "result() of a job still on the worker"
        return compress(self._codec, self._records)

    def finish(self) -> None:
        """The worker is done with this job: wake the Sender if it asked."""
        self.finished = True
        if self.wake_requested and self._worker.on_wake is not None:
            self._worker.on_wake()


class HeldWorker:
    """Jobs in submission order; :meth:`release` finishes the oldest ones (waking the Sender if asked)."""

    def __init__(self, on_wake: Callable[[], None] | None = None) -> None:
        self.jobs: list[HeldJob] = []
        self.blocking_waits = 0
        self.on_wake = on_wake
        self.closed = False

    def submit(self, codec: int, level: int, lz4_header: bytes, buffer: bytearray, start: int, end: int) -> HeldJob:
        job = HeldJob(self, codec, buffer, start, end)
        self.jobs.append(job)
        return job

    def supports(self, codec: int) -> bool:
        return codec in (int(CompressionType.LZ4), int(CompressionType.ZSTD))

    def set_wakeup_fd(self, fd: int) -> None:
        pass

    def close(self) -> None:
        self.closed = True
        self.release()

    def pending(self) -> list[HeldJob]:
        return [j for j in self.jobs if not j.finished]

    def release(self, count: int | None = None) -> int:
        """Finish the ``count`` oldest unfinished jobs (all by default); how many were finished."""
        todo = self.pending()
        todo = todo if count is None else todo[:count]
        for job in todo:
            job.finish()
        return len(todo)
