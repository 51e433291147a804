"""ragkit: build, run and measure RAG over a per-page markdown tree of your documents."""

__version__ = "0.1.0"
