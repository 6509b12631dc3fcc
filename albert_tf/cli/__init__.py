"""Command-line programs. Each defines its flags only when run (from its
options dataclass) and calls one library function."""
