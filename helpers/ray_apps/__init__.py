"""Programs handed to a Ray cluster: a job script (shipped in a runtime_env working_dir) and a Serve app."""
