"""What-if: calibrate an engine model on one trace, validate it by replay, predict."""
