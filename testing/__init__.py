"""Servers that speak the real protocols on 127.0.0.1 (Discord's gateway and REST API, Ollama's
API, a real Chroma server), for the tests and the benchmarks alike."""
