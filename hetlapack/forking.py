"""What a forked child must not inherit from its parent: locks that another thread of the parent held at the
fork (the child has no such thread, so nothing would ever release them), the imports that thread had under way,
and the state of pools and caches it was filling. Every module-level lock of the package is a
:func:`fork_safe_lock`, and every pool or cached measurement registers its reset with :func:`reset_after_fork`: one
``os.register_at_fork`` hook runs them all.
"""

from __future__ import annotations

import importlib._bootstrap
import os
import sys
import threading
from collections.abc import Callable

_locks: list = []
_resets: list[Callable[[], None]] = []


def fork_safe_lock(reentrant: bool = False) -> threading.Lock:
    """A module-level ``threading.Lock`` (``RLock`` with ``reentrant``) that a forked child gets back unlocked. It
    stays the C lock itself, whose ``with`` an interrupt cannot split between acquiring and entering."""
    lock = threading.RLock() if reentrant else threading.Lock()
    _locks.append(lock)
    return lock


def reset_after_fork(reset: Callable[[], None]) -> Callable[[], None]:
    """Run ``reset`` in every child forked from now on, after the locks are renewed (usable as a decorator)."""
    _resets.append(reset)
    return reset


def _abandon_imports_of_lost_threads() -> None:
    """Take back the imports another thread of the parent had under way at the fork: their module locks would never
    be released (the next import of the module would wait forever) and their modules are half initialized, so the
    child imports them afresh."""
    me = threading.get_ident()
    module_locks = getattr(importlib._bootstrap, "_module_locks", {})
    for name, reference in list(module_locks.items()):
        lock = reference()
        if lock is None or getattr(lock, "owner", None) in (None, me):
            continue
        module_locks.pop(name, None)
        module = sys.modules.get(name)
        if module is not None and getattr(getattr(module, "__spec__", None), "_initializing", False):
            del sys.modules[name]


def _in_child() -> None:
    _abandon_imports_of_lost_threads()
    for lock in _locks:
        lock._at_fork_reinit()  # what threading does for its own locks after fork
    for reset in _resets:
        reset()


os.register_at_fork(after_in_child=_in_child)
