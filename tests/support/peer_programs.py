"""Run a program written for aiokafka or kafka-python twice: on that client, and with only its imports
switched to kproducer's adapter (``kproducer.compat.<client>``).

The programs live in ``tests/integration/tansu/peer_programs/`` as ordinary modules importing the
peer client. :func:`load` reads one's source and, for the adapter run, rewrites only its
``from aiokafka...`` / ``from kafka...`` import lines, asserting that nothing else changed, so a
passing comparison shows that the import is the one change a program needs.
"""

from __future__ import annotations

import re
import types
from pathlib import Path

PROGRAMS = Path(__file__).resolve().parent.parent / "integration" / "tansu" / "peer_programs"

_PEERS = {"aiokafka": "kproducer.compat.aiokafka", "kafka": "kproducer.compat.kafka"}


def switch_imports(source: str, peer: str) -> str:
    """``source`` with its ``from <peer>[.x] import ...`` lines pointed at kproducer's adapter."""
    target = _PEERS[peer]
    pattern = re.compile(rf"^from {re.escape(peer)}(\.[\w.]+)? import ", re.MULTILINE)
    switched, count = pattern.subn(lambda m: f"from {target}{m.group(1) or ''} import ", source)
    assert count, f"the program imports nothing from {peer}"
    before = [line for line in source.splitlines() if not pattern.match(line)]
    after = [line for line in switched.splitlines() if not line.startswith(f"from {target}")]
    assert before == after, "only import lines may differ between the two runs"
    assert not re.search(rf"^import {re.escape(peer)}\b", switched, re.MULTILINE), "use `from {peer} import ...`"
    return switched


def load(name: str, peer: str, *, switched: bool) -> types.ModuleType:
    """The program ``peer_programs/<name>.py`` as a module, on the peer or (``switched``) on kproducer."""
    source = (PROGRAMS / f"{name}.py").read_text()
    if switched:
        source = switch_imports(source, peer)
    module = types.ModuleType(f"peer_program_{name}_{'kproducer' if switched else peer}")
    module.__file__ = str(PROGRAMS / f"{name}.py")
    exec(compile(source, module.__file__, "exec"), module.__dict__)
    return module
