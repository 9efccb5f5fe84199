"""Renderers: pure functions from results to text (table, JSON, Markdown, CSV, JUnit)."""
