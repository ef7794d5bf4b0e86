"""``roofline export``: a profile's plans as the configuration other tools read.

``from_result`` and ``from_status`` turn a saved result or a RooflineProfile's status (its text
parsed by ``source_text``, bounded) into the numbers every target reads (``plans``);
``thresholds`` derives the targets' thresholds from them; one module per target builds its
objects (pure functions to data with comments, ``commented``); ``names`` holds the contract of
every string written and checks the final documents as a whole; ``command`` is the command line,
and ``cluster`` the one place that reaches a cluster (through ``kubectl``).

It may import the profiler's pure layers and its result reader, and the operator's pure values;
never the measuring code, Kopf, HTTP or a Kubernetes client (import-linter contracts).
"""
