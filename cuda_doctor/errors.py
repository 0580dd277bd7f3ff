"""The one base class for errors a user can fix (a bad file, option or rule), caught at the one
boundary (``cli.main``), which prints ``cuda-doctor: error: <message>`` and exits 2."""

from __future__ import annotations


class UserError(Exception):
    """A problem with what the user gave us; the message is one sentence naming the thing."""
