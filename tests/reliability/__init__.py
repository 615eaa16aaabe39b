"""Faults injected for real: bad data, full disks. See docs/reliability.md."""
