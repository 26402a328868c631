"""``python -m kproducer.config --markdown`` prints the configuration reference."""

from kproducer.config.reference import main

raise SystemExit(main())
