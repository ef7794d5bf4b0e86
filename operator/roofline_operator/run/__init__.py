"""The running operator: its command line and configuration, the Kopf handlers, the loop of one
profile, the API calls and their permissions, the metrics and their server.

May import ``decide``, ``core`` and the profiler's ``core`` and ``wire``.
"""
