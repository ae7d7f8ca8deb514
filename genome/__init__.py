"""Genomes: the data model, validation, canonical hashing, diffs and files of candidate systems."""

from masforge.genome.hashing import genome_hash, structure_hash
from masforge.genome.io import dump_genome, load_genome, parse_genome_text, save_genome
from masforge.genome.schema import Agent, Genome, Topology
from masforge.genome.validate import problems, validate

__all__ = [
    "Agent", "Genome", "Topology", "dump_genome", "genome_hash", "load_genome", "parse_genome_text",
    "problems", "save_genome", "structure_hash", "validate",
]
