"""The watch report's formats."""
