"""Engine step records (one row per forward pass): the canonical schema and its importers."""
