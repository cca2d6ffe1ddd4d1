"""Source formats mapped to KernelIndex manifests (pure: bytes in, records out)."""
