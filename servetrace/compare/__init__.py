"""Is B different from A on the same workload: metric catalog, matching, measuring, attribution."""
