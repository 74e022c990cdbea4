"""The packages behind the API's functions `tc.tune` and `tc.lower`.

`tc.tune` and `tc.lower` are plain functions, so `help(tc.tune)`, `inspect.signature` and IDEs show
their parameters and docstrings. tilec/tune/ and tilec/lower/ are packages of the same names:
`tilec/__init__.py` keeps the import system from rebinding `tilec.tune` to the package, and
`reach_through(package, fn)` copies the package's public names and each submodule, as it is imported,
onto the function, so that the spellings that go through the attribute keep working:
`tilec.tune.study.study_key`, `import tilec.tune.study as m`, `tilec.lower.builder`.
"""

from __future__ import annotations

import sys
import types


def reach_through(module_name: str, fn) -> None:
    """Make the package `module_name`'s public names and submodules attributes of `fn` too."""
    module = sys.modules[module_name]

    class Package(types.ModuleType):
        def __setattr__(self, name: str, value) -> None:
            super().__setattr__(name, value)
            if isinstance(value, types.ModuleType) and value.__name__ == f"{module_name}.{name}":
                setattr(fn, name, value)  # a submodule, bound on its package as it is imported

    module.__class__ = Package
    for name, value in list(vars(module).items()):
        is_submodule = isinstance(value, types.ModuleType) and value.__name__ == f"{module_name}.{name}"
        if is_submodule or name in getattr(module, "__all__", ()):
            if value is not fn:
                setattr(fn, name, value)
