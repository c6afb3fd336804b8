"""Building what the notebooks need: the artifact pipeline, the chat model's builds, the lessons' module."""
