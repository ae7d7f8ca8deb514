"""masforge.evaluators."""
