"""The reporters' former home: they live in :mod:`kproducer.metrics.reporters`.

Kept so that ``from kproducer.metrics_reporter import PrometheusReporter`` (the path
of earlier releases) keeps working.
"""

from kproducer.metrics.reporters import *  # noqa: F403
from kproducer.metrics.reporters import __all__ as __all__
