"""Infrastructure every layer uses: processes and children, deadlines, bounded reading, atomic
writes, streams, paths and the TOML cache.  Imports nothing else of cuda-doctor."""
