"""verl-doctor: diagnose, fix and pin verl + vLLM 0.6.3.post1 + Ray + transformers environments."""

__version__ = "0.1.0"
