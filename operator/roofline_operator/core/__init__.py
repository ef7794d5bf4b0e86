"""The operator's pure values: a profile's spec, nodes, one node's result and model plans, the
names that cross to the cluster, the caches.

May import the profiler's ``core`` and ``wire``; no Kopf, no HTTP, no Kubernetes client.
"""
