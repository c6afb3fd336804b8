"""What the notebooks need, made once: the artifact pipeline, the chat model's builds, the lessons' module."""
