"""The plan: the one analysis of (schedule, config) that legality, lowering, footprints and the cost
model share. `placement` decides kernels, loops and places; `analysis.Analysis` adds the isl facts
read off that same plan (time maps, masks, resources); `check` is the legality check every primitive
and every build runs."""

from tilec.plan.analysis import Analysis, analyze
from tilec.plan.check import check_schedule, legal_places
from tilec.plan.placement import Layout, Placed, Plan

__all__ = ["Analysis", "Layout", "Placed", "Plan", "analyze", "check_schedule", "legal_places"]
