"""The HTTP write benchmark's parts (``benchmarks/bench_http.py`` is the script)."""
