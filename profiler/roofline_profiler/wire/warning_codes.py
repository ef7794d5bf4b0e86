"""The warning codes a device result carries, and what a reader of them needs to act on them.

A code names why a number is less trustworthy than its 95% interval (``sanity.py`` says when each
is raised), or that a model could not be measured. The codes travel in the JSON document and in
the compact result (``compact.py``); the operator reads them from there to hold a suspect profile
back, so they and the groups it acts on have this one home.

Pure module: no torch, no Kubernetes.
"""

from __future__ import annotations

from roofline_profiler.core.stats import INTERFERENCE

INTERFERENCE_UNRESOLVED = "InterferenceUnresolved"
CPU_CONTENTION = "CpuContention"
SLOPE_FROM_DECODE = "SlopeFromDecode"
PEAK_FROM_DECODE = "PeakFromDecode"
IMPLAUSIBLE_BANDWIDTH = "ImplausibleBandwidth"
IMPLAUSIBLE_PEAK = "ImplausiblePeak"
BANDWIDTH_MISMATCH = "BandwidthMismatch"
MIN_BATCH_FROM_MODEL = "MinBatchFromModel"
#: The warning that says the host itself changed state during the profile: a re-run may find it in
#: either state, so the operator holds the profile back until a state persists.
HOST_STATE_CODE = "HostStateChanged"
#: The warning a device's result carries for each model that could not be measured on it (out
#: of memory: a layer that does not fit; a driver error): that model fails alone, the roofline
#: and the other models are kept.
MODEL_FAILED = "ModelFailed"
#: The warning for each weight format whose roofline could not be measured on the device (out of
#: memory, a kernel's error): the format fails alone, like a model.
FORMAT_FAILED = "FormatFailed"

#: The warnings that say outside load held this run's numbers down: a re-run on a quiet device
#: measures otherwise. The others (a cache, a missed shape, an implausible number, a minimum batch
#: from the model) repeat in every run of the same device, and say nothing about this one.
INTERFERENCE_CODES = frozenset({INTERFERENCE_UNRESOLVED, CPU_CONTENTION})

#: Two levels of a host state lie at least this far apart (the nearest round levels of the two
#: groups; ``host_state.py``), so the operator takes two profiles within this of each other as
#: having seen the same state. A level is the median over the resource's
#: workloads, steadier than any one of them, whose rounds scatter by 3-5% in one state on a shared
#: VM; 10% is the slowdown beyond which a round counts as hit by interference
#: (``stats.INTERFERENCE``). The state changes seen so far lie wider apart: 32 against 55-60 GB/s
#: on an AMD EPYC VM, 23 against 29 GB/s (25%) on an Intel Xeon VM.
STATE_GAP = INTERFERENCE
