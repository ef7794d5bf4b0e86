"""Deciding, as pure functions of what the operator observed: a round's plan, what a pod's state
means, which pods count, hysteresis, the status, records, labels and the profiler pod's builder.

May import ``core`` and the profiler's ``core`` and ``wire``; no Kopf, no HTTP, no Kubernetes
client.
"""
