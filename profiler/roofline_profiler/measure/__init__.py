"""Measuring with torch: devices, timing, the workloads, the environment's metadata, and one
device's profile with its models.

May import ``wire`` and ``core``.
"""
