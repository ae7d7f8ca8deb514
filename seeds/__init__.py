"""masforge.seeds."""
