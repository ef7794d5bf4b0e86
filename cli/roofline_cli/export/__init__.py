"""``roofline export``: a profile's plans as the configuration other tools read.

``sources`` turns a saved result or a RooflineProfile's status into the numbers every target
reads (``plans``); ``thresholds`` derives the targets' thresholds from them; one module per
target builds its objects (pure functions to data with comments, ``commented``); ``command`` is
the command line, and ``cluster`` the one place that reaches a cluster (through ``kubectl``).

It may import the profiler's pure layers and its result reader, and the operator's pure values;
never the measuring code, Kopf, HTTP or a Kubernetes client (import-linter contracts).
"""
