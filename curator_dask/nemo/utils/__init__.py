"""``nemo_curator.utils``."""
