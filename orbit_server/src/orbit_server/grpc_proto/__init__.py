"""Python code protoc generates from protocol/orbit/worker/v1/worker.proto
(protocol/generate.py writes it; do not edit)."""
