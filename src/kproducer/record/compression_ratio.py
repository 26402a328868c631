"""How full a compressed batch may get before it is compressed: the per-topic ratio estimate.

kproducer stages a compressed batch's records uncompressed and compresses them
when the batch closes, so while it fills, its size is an estimate: the records'
size times the estimated compression ratio (times 1.05, see
:mod:`kproducer.record.default_record`). :class:`CompressionRatioEstimator`
keeps that ratio per topic and codec (Java's ``CompressionRatioEstimator``);
:data:`STAGING_RATIO_FLOOR` bounds how many uncompressed bytes a new batch may stage.
"""

from __future__ import annotations

import threading

from kproducer.record.codecs import CompressionType
from kproducer.record.default_record import COMPRESSION_RATE_ESTIMATION_FACTOR

__all__ = ["MAX_GROWN_STAGING_BYTES", "MAX_STAGING_BYTES", "STAGING_RATIO_FLOOR", "CompressionRatioEstimator"]

#: Uncompressed bytes a hot compressed batch typically stages once it has grown: the unit of the
#: accumulator's backlog of batches waiting to be compressed.
MAX_STAGING_BYTES = 256 * 1024

#: The lowest compression-ratio estimate a new batch is built with. Records are staged
#: uncompressed and compressed when the batch closes, so an estimate below 1 would let a batch
#: hold ``write_limit / ratio`` bytes of records that ``buffer.memory`` never charged (Java
#: compresses as it appends and so holds compressed bytes only). At this floor a new batch stages
#: at most its ``write_limit``, the bytes it was charged; it stages more only as it grows, each
#: step charged to ``buffer.memory`` first (``RecordAccumulator._grow_staging``).
STAGING_RATIO_FLOOR = 1.0 / COMPRESSION_RATE_ESTIMATION_FACTOR

#: Most uncompressed bytes a hot compressed batch may stage when the bytes past MAX_STAGING_BYTES
#: are charged to ``buffer.memory`` (``RecordAccumulator._grow_staging``): librdkafka's default
#: ``batch.size``, 1,000,000 bytes of records, rounded to 1 MiB.
MAX_GROWN_STAGING_BYTES = 1024 * 1024


class CompressionRatioEstimator:
    """Per-topic, per-codec estimate of compressed/uncompressed size (after Java's CompressionRatioEstimator).

    Starts at 1.0 and, as in Java, moves quickly towards a worse observed ratio
    (at least +0.05), so that batches rarely overflow ``batch.size`` after
    compression. Two differences, because kproducer compresses a whole batch at
    once and knows its exact ratio (Java streams into a compressor and guesses):

    * towards a better ratio it moves half the gap (at least Java's 0.005): Java's
      fixed 0.005 takes ~190 batches to go from 1.0 to 0.05, and in the meantime
      batches hold a fraction of ``batch.size``;
    * only a batch that filled at least half its limit can make the estimate
      worse. A batch drained early (linger, or the sticky partition's open batch
      drained with the others) compresses worse because it is small, not because
      the data changed: with 1 KB records and lz4, such batches of a few records
      kept pushing the estimate back towards 1.0, and batches then held a small
      fraction of ``batch.size``.
    """

    IMPROVING_STEP = 0.005
    DETERIORATE_STEP = 0.05

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._ratios: dict[tuple[str, int], float] = {}

    def estimation(self, topic: str, compression: CompressionType | int) -> float:
        return self._ratios.get((topic, int(compression)), 1.0)

    def update_estimation(
        self, topic: str, compression: CompressionType | int, observed_ratio: float, full: bool = True
    ) -> float:
        """Fold in one closed batch's ratio; ``full``: it filled at least half its limit."""
        key = (topic, int(compression))
        with self._lock:
            current = self._ratios.get(key, 1.0)
            if observed_ratio > current:
                if full:
                    current = max(current + self.DETERIORATE_STEP, observed_ratio)
            elif observed_ratio < current:
                step = max(self.IMPROVING_STEP, (current - observed_ratio) / 2)
                current = max(current - step, observed_ratio)
            self._ratios[key] = current
            return current

    def reset_estimation(self, topic: str) -> None:
        with self._lock:
            for key in [k for k in self._ratios if k[0] == topic]:
                del self._ratios[key]


# Read once: an enum member read through its class costs many times a module global's read
# (benchmarks/RESULTS.md, "Fewer objects for the collector, ..."), and this runs for every new batch.
_NONE = CompressionType.NONE


def _initial_ratio(estimator: CompressionRatioEstimator, topic: str, compression: CompressionType | int) -> float:
    """The estimate a new batch is built with: the topic's, never below the staging floor.

    1.0 for an uncompressed batch, without a look-up: its size is exact and never reads the
    estimate.
    """
    if compression == _NONE:
        return 1.0
    return max(float(estimator.estimation(topic, compression)), STAGING_RATIO_FLOOR)
