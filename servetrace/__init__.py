"""servetrace: analyze LLM inference-serving traces from their event logs."""

__version__ = "0.1.0"
SCHEMA_VERSION = 1

__all__ = ["SCHEMA_VERSION", "__version__"]
