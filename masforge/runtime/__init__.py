"""The old home of the embedded local model, kept only so that exported files already written keep working: see
:mod:`masforge.runtime.local_model`. New code imports :mod:`masforge.local_model`."""
