"""The store, the engine that runs SQL on it, its cache, and the files it writes."""
