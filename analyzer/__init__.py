"""llm-forensics: find the money LLM agents burn in runaway loops."""

__version__ = "0.1.0"
