"""kproducer's version: the one place it is written.

pyproject.toml reads it (``[tool.setuptools.dynamic]``), ``kproducer.__version__`` re-exports it,
and the network layer sends it to brokers (ApiVersions v3+ ``client_software_version``, KIP-511)
importing it from here, not from the package root, which is still initialising at that point.
"""

__version__ = "0.1.0"
