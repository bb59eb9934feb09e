"""Benchmark harness for MLX speculative decoding: suite -> plan -> runs -> record -> analyses -> renderers."""
