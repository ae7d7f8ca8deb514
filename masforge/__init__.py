"""masforge."""
