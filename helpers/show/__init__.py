"""Pictures and widgets the notebooks show."""
