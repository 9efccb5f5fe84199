"""The package version and the event-schema version every report carries."""

__version__ = "0.1.0"
SCHEMA_VERSION = 1
