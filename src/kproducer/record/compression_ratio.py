"""How full a compressed batch may get before it is compressed: the per-topic ratio estimate.

kproducer stages a compressed batch's records uncompressed and compresses them
when the batch closes, so while it fills, its size is an estimate: the records'
size times the estimated compression ratio (times 1.05, see
:mod:`kproducer.record.default_record`). :class:`CompressionRatioEstimator`
keeps that ratio per topic and codec (Java's ``CompressionRatioEstimator``);
:func:`staging_ratio_floor` bounds how many uncompressed bytes a batch may stage.
"""

from __future__ import annotations

import threading

from kproducer.record.codecs import CompressionType

__all__ = ["MAX_GROWN_STAGING_BYTES", "MAX_STAGING_BYTES", "CompressionRatioEstimator", "staging_ratio_floor"]

#: Most uncompressed bytes a compressed batch stages beyond ``batch.size`` (see ``staging_ratio_floor``).
MAX_STAGING_BYTES = 256 * 1024

#: Most uncompressed bytes a hot compressed batch may stage when the bytes past MAX_STAGING_BYTES
#: are charged to ``buffer.memory`` (accumulator.growth._grow_staging): librdkafka's default
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
      the data changed: measured on 1 KB records with lz4, such 1–3 record batches
      pushed the estimate back to 0.35–1.0 every few hundred batches, and batches
      averaged 2.2 KB against a ``batch.size`` of 16 KB.
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


def staging_ratio_floor(write_limit: int) -> float:
    """The lowest compression-ratio estimate a batch of ``write_limit`` bytes is built with.

    Records are staged uncompressed and compressed when the batch closes, so a
    low estimate lets a batch hold ``write_limit / ratio`` bytes of records, which
    ``buffer.memory`` does not count (Java compresses as it appends and holds
    compressed bytes only). The floor keeps an open batch's records within
    ``max(write_limit, MAX_STAGING_BYTES)``: 16 KB batches may stage up to 256 KiB
    (like a compressor's own block buffers), batches of 256 KiB or more hold at
    most their size of records, as librdkafka's and kafka-python's batches do.
    """
    return min(1.0, write_limit / MAX_STAGING_BYTES) if write_limit > 0 else 1.0


def _initial_ratio(
    estimator: CompressionRatioEstimator, topic: str, compression: CompressionType | int, write_limit: int
) -> float:
    """The estimate a new batch is built with: the topic's, never below the staging floor."""
    return max(float(estimator.estimation(topic, compression)), staging_ratio_floor(write_limit))
