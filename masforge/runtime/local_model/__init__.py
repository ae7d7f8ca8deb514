"""``masforge.local_model`` under the path it had before it moved, for systems exported before then: such a file
imports ``masforge.runtime.local_model`` to start the embedded model where masforge is installed, and must keep
finding it. Importing this path warns (DeprecationWarning); it and each of its submodules are then the very
modules of :mod:`masforge.local_model` (not copies), so a server started or a value patched under one name is the
same under the other. Nothing else lives here."""

from __future__ import annotations

import importlib
import pkgutil
import sys
import warnings

import masforge.local_model as _moved

warnings.warn("masforge.runtime.local_model is deprecated: it is masforge.local_model now (export the system again "
              "to drop this warning)", DeprecationWarning, stacklevel=2)

for _sub in pkgutil.iter_modules(_moved.__path__):
    sys.modules[f"{__name__}.{_sub.name}"] = importlib.import_module(f"{_moved.__name__}.{_sub.name}")
sys.modules[__name__] = _moved
