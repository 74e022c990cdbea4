"""Packages that are also the API's functions: `tc.lower(s)` and `tc.tune(...)` call `lower` and
`tune`, while `tilec.lower` and `tilec.tune` stay the packages (`import tilec.tune.study` works)."""

from __future__ import annotations

import inspect
import sys
import types


def make_callable(module_name: str, fn) -> None:
    """Make the module `module_name` callable as `fn` (same arguments, same result)."""

    class CallablePackage(types.ModuleType):
        def __call__(self, *args, **kwargs):
            return fn(*args, **kwargs)

    CallablePackage.__call__.__doc__ = fn.__doc__
    CallablePackage.__name__ = f"{module_name.rsplit('.', 1)[-1]}_package"
    module = sys.modules[module_name]
    module.__class__ = CallablePackage
    module.__signature__ = inspect.signature(fn)  # inspect.signature(tc.tune) is tune's
