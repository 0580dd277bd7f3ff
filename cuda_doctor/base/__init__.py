"""Infrastructure every layer uses; imports nothing else of cuda-doctor."""
