"""Polyhedral facts about a schedule: legality of placements (isl-based analysis builds on this)."""

from tilec.poly.legality import check_attach, check_schedule, legal_epilogue_axes

__all__ = ["check_attach", "check_schedule", "legal_epilogue_axes"]
