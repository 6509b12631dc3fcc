"""Weight conversion between this project and other ALBERT implementations."""
