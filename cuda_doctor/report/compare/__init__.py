"""The compare report's formats."""
