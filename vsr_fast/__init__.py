"""vsr-fast: a semantic router for LLM traffic."""
__version__ = "0.1.0"
