"""Where events come from: file detection, the canonical reader, one importer per tool."""
