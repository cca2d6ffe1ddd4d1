"""Performance benchmarks (DESIGN.md §13); see README.md. Not collected by pytest."""
