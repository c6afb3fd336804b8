"""Data and caches: paths, atomic files, verified downloads, MNIST, the chat model's files, Ray's shards."""
