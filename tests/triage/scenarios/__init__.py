"""The triage scenario library: simulated failing (and one healthy) distributed jobs built from real
message strings, each with the verdict triage must reach. See :mod:`.library`."""

from .library import SCENARIOS, Expected, Scenario

__all__ = ["SCENARIOS", "Expected", "Scenario"]
