"""masforge.genome."""
