"""Only the embedded local model lives here (:mod:`.local_model`: catalog, weights, server), at this dotted path
because every exported system that runs on the embedded model imports ``masforge.runtime.local_model`` where
masforge is installed: files already written must keep finding it. Everything else that ran below a genome has a
room of its own (:mod:`masforge.lm`, :mod:`masforge.sandbox`, :mod:`masforge.execution.standalone`)."""
