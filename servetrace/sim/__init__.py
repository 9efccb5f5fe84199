"""A seeded continuous-batching engine model and real workloads to replay."""
