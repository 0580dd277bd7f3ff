"""The check report's formats."""
