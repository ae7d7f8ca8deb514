"""masforge.search."""
