"""Performance benchmarks (docs/design.md §13); see README.md. Not collected by pytest."""
