"""Operators that make new genomes: cheap structural edits and LLM-driven meta-agent operators."""
