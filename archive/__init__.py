"""masforge.archive."""
