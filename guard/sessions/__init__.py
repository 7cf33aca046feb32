"""Rebuilding and sharing a live guard's state: the per-agent link, resume
from a session log, snapshots, fleet catch-up and group commit."""
