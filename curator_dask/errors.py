"""Errors a run raises on purpose (each names what to check)."""

from __future__ import annotations


class AccountingError(RuntimeError):
    """Raised when ``read != kept + removed + quarantined`` after a run."""
